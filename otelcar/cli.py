"""The ``otelcar`` command line: parses arguments, calls the library, prints.

The root group only: every command lives in a module of its own kind (:mod:`otelcar.cli_ingest`,
:mod:`otelcar.cli_replay`, :mod:`otelcar.cli_repair`, :mod:`otelcar.cli_report`,
:mod:`otelcar.cli_plugins`, :mod:`otelcar.model.cli`) imported when it runs, so ``otelcar
--version`` loads neither polars, scipy, grpc nor the reports. Plugins add commands through the
``register_commands`` hook, loaded only for a name that is not built in, or by ``--help``.
Errors become one ``error:`` line and exit status 2, in one place
(:class:`otelcar.cli_common.OtelcarGroup`); ``--debug`` or ``OTELCAR_DEBUG=1`` shows the
traceback instead.
"""

from __future__ import annotations

from pathlib import Path

import click

from otelcar import __version__
from otelcar.cli_common import LazyGroup
from otelcar.config import ENV_HOME

#: Command name → where it is defined (imported on first use).
COMMANDS = {
    "import": "otelcar.cli_ingest:import_command",
    "traces": "otelcar.cli_ingest:traces_command",
    "show": "otelcar.cli_ingest:show_command",
    "records": "otelcar.cli_ingest:records_command",
    "reindex": "otelcar.cli_ingest:reindex_command",
    "collect": "otelcar.cli_ingest:collect_command",
    "schema": "otelcar.cli_ingest:schema_command",
    "replay": "otelcar.cli_replay:replay_command",
    "rollout": "otelcar.cli_replay:rollout_command",
    "attribute": "otelcar.cli_replay:attribute_command",
    "why": "otelcar.cli_repair:why_command",
    "fix": "otelcar.cli_repair:fix_command",
    "test": "otelcar.cli_repair:test_command",
    "report": "otelcar.cli_report:report_command",
    "aggregate": "otelcar.cli_report:aggregate_command",
    "model": "otelcar.model.cli:model_group",
    "plugins": "otelcar.cli_plugins:plugins_command",
}


@click.group(
    cls=LazyGroup,
    lazy=COMMANDS,
    plugin_commands=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(__version__, prog_name="otelcar")
@click.option(
    "--store",
    "store_path",
    type=click.Path(file_okay=False, path_type=Path),
    envvar=ENV_HOME,
    default=".otelcar",
    show_default=True,
    help=f"Store directory (env {ENV_HOME}).",
)
@click.option("--debug", is_flag=True, help="Show tracebacks on errors.")
@click.pass_context
def cli(ctx: click.Context, store_path: Path, debug: bool) -> None:
    """otelcar: which step of a failed agent run caused the failure, from its trace."""
    ctx.ensure_object(dict)
    ctx.obj["store"] = store_path
    ctx.obj["debug"] = debug
    if debug:  # tracebacks below plugin errors too
        from otelcar.plugins.manager import set_debug

        set_debug(True)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``otelcar`` script."""
    cli.main(args=argv, prog_name="otelcar")


if __name__ == "__main__":
    main()
