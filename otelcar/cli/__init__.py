"""The ``otelcar`` command line: parses arguments, calls the library, prints.

The root group only: every command lives in a module of its own kind (:mod:`otelcar.cli.ingest`,
:mod:`otelcar.cli.replay`, :mod:`otelcar.cli.repair`, :mod:`otelcar.cli.report`,
:mod:`otelcar.cli.plugins`, :mod:`otelcar.model.cli`) imported when it runs, so ``otelcar
--version`` loads neither polars, scipy, grpc nor the reports. Plugins add commands through the
``register_commands`` hook, loaded only for a name that is not built in, or by ``--help``.
Errors become one ``error:`` line and exit status 2, in one place
(:class:`otelcar.cli.common.OtelcarGroup`); ``--debug`` or ``OTELCAR_DEBUG=1`` shows the
traceback instead.
"""

from __future__ import annotations

from pathlib import Path

import click

from otelcar import __version__
from otelcar.cli.common import LazyGroup
from otelcar.config import ENV_HOME

#: Command name → where it is defined (imported on first use).
COMMANDS = {
    "import": "otelcar.cli.ingest:import_command",
    "traces": "otelcar.cli.ingest:traces_command",
    "show": "otelcar.cli.ingest:show_command",
    "records": "otelcar.cli.ingest:records_command",
    "reindex": "otelcar.cli.ingest:reindex_command",
    "collect": "otelcar.cli.ingest:collect_command",
    "schema": "otelcar.cli.ingest:schema_command",
    "init": "otelcar.cli.init:init_command",
    "replay": "otelcar.cli.replay:replay_command",
    "rollout": "otelcar.cli.replay:rollout_command",
    "attribute": "otelcar.cli.replay:attribute_command",
    "timelines": "otelcar.cli.timelines:timelines_command",
    "diff": "otelcar.cli.timelines:diff_command",
    "export": "otelcar.cli.export:export_group",
    "why": "otelcar.cli.repair:why_command",
    "fix": "otelcar.cli.repair:fix_command",
    "test": "otelcar.cli.repair:test_command",
    "report": "otelcar.cli.report:report_command",
    "aggregate": "otelcar.cli.report:aggregate_command",
    "model": "otelcar.model.cli:model_group",
    "plugins": "otelcar.cli.plugins:plugins_command",
    "mcp": "otelcar.cli.mcp:mcp_command",
    "ui": "otelcar.cli.ui:ui_command",
    "triage": "otelcar.cli.triage:triage_group",
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
