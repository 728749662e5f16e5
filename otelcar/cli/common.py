"""What every ``otelcar`` command shares: the consoles, JSON output, the store, where traces
are read and a run readied (:mod:`otelcar.analyses.project`), and the one place errors
become ``error:`` lines.

Light on purpose: it imports click only, so that ``otelcar --version`` and ``--help`` start
fast; rich, polars and the library load inside the functions, when a command runs.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from otelcar.config import debug_enabled
from otelcar.errors import OtelcarError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

    from otelcar.analyses.options import Request
    from otelcar.analyses.project import Prepared, Project
    from otelcar.store import Store


def console(*, stderr: bool = False) -> Console:
    """A rich console on stdout (or stderr) that shows trace text safely
    (:class:`otelcar.safe_console.SafeConsole`) and does not squeeze tables into 80 columns
    when piped or captured."""
    from otelcar.safe_console import SafeConsole

    out = SafeConsole(stderr=stderr, soft_wrap=False)
    if not out.is_terminal:
        out = SafeConsole(stderr=stderr, soft_wrap=False, width=max(out.width, 200))
    return out


def stderr_progress(*columns: Any) -> Progress:
    """A progress display with ``columns`` on stderr that disappears when done, and is off
    when stderr is not a terminal (logs and pipes get no control sequences)."""
    from rich.progress import Progress

    err = console(stderr=True)
    return Progress(*columns, console=err, transient=True, disable=not err.is_terminal)


def emit_json(value: Any) -> None:
    """Print ``value`` as indented JSON on stdout."""
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def write_json(value: Any, path: Path | None) -> bool:
    """Write ``value`` as indented JSON to ``path`` (``-``: stdout; ``None``: nowhere); True
    when it went to stdout (then nothing else should be printed there)."""
    if path is None:
        return False
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    if str(path) == "-":
        click.echo(text)
        return True
    Path(path).write_text(text + "\n", encoding="utf-8")
    return False


def open_store(ctx: click.Context, *, create: bool = False) -> Store:
    """The store chosen with ``--store`` (or ``$OTELCAR_HOME``)."""
    from otelcar.store import Store

    return Store(ctx.obj["store"], create=create)


def project(ctx: click.Context, config_path: Path | None = None) -> Project:
    """Where the command reads (:class:`otelcar.analyses.Project`): the store of ``--store``
    (or ``$OTELCAR_HOME``), ``config_path`` (default: ./otelcar.toml when present) and the
    URL of ``--source``, which replaces ``[source] url``."""
    from otelcar.analyses.project import Project

    return Project(ctx.obj["store"], config_path, source_url=(ctx.obj or {}).get("source"))


def prepared(
    ctx: click.Context,
    trace_id: str,
    config_path: Path | None,
    request: Request | None = None,
    *,
    fail_if: tuple[str, ...] = (),
    agent: str | None = None,
    executor: str | None = None,
) -> Prepared:
    """:func:`otelcar.analyses.prepare` of ``trace_id`` for ``request`` in the command's
    :func:`project`, with the ``--fail-if`` rules as the outcome (they replace
    ``[outcome]``) and ``--agent CMD``; ``--executor`` with an agent command is refused
    (:func:`refuse_executor`)."""
    from otelcar.analyses.project import prepare
    from otelcar.cli.options import fail_if_outcome

    ready = prepare(
        project(ctx, config_path),
        trace_id,
        request,
        agent=agent,
        outcome=fail_if_outcome(fail_if),
    )
    refuse_executor(ready.config, executor)
    return ready


def refuse_executor(config: Any, executor: str | None) -> None:
    """With an agent command (``--agent CMD`` or ``[agent] command``), rollouts run on the
    user's agent, so ``executor`` (``--executor``) is refused."""
    if config.agent_command is not None and executor is not None:
        raise click.UsageError(
            "--agent (or [agent] command) runs every rollout on your agent: leave out --executor"
        )


class LibraryError(click.ClickException):
    """A library error shown as one ``error:`` line, exit status 2."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.message}", err=True, file=file)


class OtelcarGroup(click.Group):
    """Turns every error into one ``error:`` line, in one place: an :class:`OtelcarError` as
    its message, anything else (a bug) with its type and a pointer to ``--debug``, which (as
    ``OTELCAR_DEBUG=1``) shows the traceback instead."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except Exception as exc:
            if debug_enabled() or (ctx.obj or {}).get("debug"):
                raise
            if isinstance(exc, OtelcarError):
                raise LibraryError(str(exc)) from exc
            raise LibraryError(
                f"unexpected {type(exc).__name__}: {exc} (run with --debug for the traceback)"
            ) from exc


class LazyGroup(OtelcarGroup):
    """A command group whose subcommands live in modules imported only when one is used
    (``lazy``: command name → ``"module:attribute"``), as click's documentation suggests for
    large CLIs; ``--help`` imports them all to list their help.

    With ``plugin_commands``, the plugins' ``register_commands(cli)`` hook adds its commands
    the first time a name that is not a built-in command is asked for, or the commands are
    listed; a plugin may not replace a built-in command (:mod:`otelcar.plugins`)."""

    def __init__(
        self,
        *args: Any,
        lazy: dict[str, str] | None = None,
        plugin_commands: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})
        self.plugin_commands = plugin_commands

    def _load_plugin_commands(self, ctx: click.Context) -> None:
        if not self.plugin_commands:
            return
        from otelcar.plugins.manager import default_host, set_debug

        if ctx.find_root().params.get("debug"):  # parsed; the root callback has not run yet
            set_debug(True)
        default_host().ensure_commands(self, reserved=self.lazy)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._load_plugin_commands(ctx)
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            module_name, _, attribute = self.lazy[cmd_name].partition(":")
            command = getattr(importlib.import_module(module_name), attribute)
            self.add_command(command, cmd_name)
        elif cmd_name not in self.commands:
            self._load_plugin_commands(ctx)
        return super().get_command(ctx, cmd_name)
