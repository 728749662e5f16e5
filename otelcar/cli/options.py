"""Options and setup shared by the CLI commands that replay traces (attribute, aggregate, why,
fix, test): one definition each, so their flags and their meaning cannot drift apart."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from otelcar.executors import Executor

CONFIG_HELP = "otelcar.toml with the policies and the outcome."
FAIL_IF_HELP = (
    "Outcome rule (any of them fails): tool_called:NAME, tool_not_called:NAME, "
    "final_answer:REGEX; with --agent also exit_status[:CODE,...] and output_line:REGEX (the "
    "agent's process). Overrides [outcome]."
)


class RegistryChoice(click.Choice):
    """A choice among the names of a registry that plugins extend (executors, formats): the
    names are read when the value is checked or the help is shown, not when the command is
    defined, so defining a command loads no plugin. ``fixed`` names come first."""

    def __init__(self, names: Callable[[], Iterable[str]], *, fixed: Sequence[str] = ()) -> None:
        self._names = names
        self._fixed = tuple(fixed)
        self.case_sensitive = True

    @property  # type: ignore[override]
    def choices(self) -> tuple[str, ...]:
        return (*self._fixed, *(n for n in self._names() if n not in self._fixed))


def config_option(help: str = CONFIG_HELP) -> Callable[..., Any]:
    return click.option(
        "-c", "--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), help=help
    )


def fail_if_option(help: str = FAIL_IF_HELP) -> Callable[..., Any]:
    return click.option("--fail-if", "fail_if", multiple=True, help=help)


def json_option(schema: str) -> Callable[..., Any]:
    return click.option(
        "--json",
        "json_path",
        type=click.Path(dir_okay=False, path_type=Path),
        help=f"Write the result as JSON here (schemas/{schema}); - for stdout.",
    )


def html_option() -> Callable[..., Any]:
    return click.option(
        "--html",
        "html_path",
        type=click.Path(dir_okay=False, path_type=Path),
        help="Write the self-contained HTML report here.",
    )


def executor_options() -> Callable[..., Any]:
    """``--executor`` and ``--ray-address`` (where the rollouts run; docs/ray.md)."""

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        function = agent_option()(function)
        function = click.option(
            "--ray-address",
            help="With --executor ray: ray://HOST:PORT, auto (the cluster this machine is "
            "part of), or omitted to start a local cluster. Default: [replay] ray_address.",
        )(function)
        return click.option(
            "--executor",
            type=RegistryChoice(_executor_names),
            help="Where the rollouts run: local (this process), ray (a Ray cluster) or an "
            "executor a plugin adds. Default: [replay] executor, else local.",
        )(function)

    return decorate


def agent_option() -> Callable[..., Any]:
    """``--agent CMD``: live replay, the user's agent run once per rollout (docs/live.md)."""
    return click.option(
        "--agent",
        "agent",
        metavar="CMD",
        help="Live replay: run this command (split like a shell line) once per rollout, its "
        "model calls answered by otelcar (OPENAI_BASE_URL, ANTHROPIC_BASE_URL) from the trace "
        "or the policy. Default: [agent] command. docs/live.md.",
    )


def _executor_names() -> list[str]:
    """The executors' names, loaded when a command's ``--executor`` is checked: commands
    without rollouts (``import``, ``traces``) never load the replay machinery."""
    from otelcar.executors import executor_names

    return executor_names()


@contextmanager
def executor_for(
    settings: Any, executor: str | None, ray_address: str | None
) -> Iterator[Executor]:
    """The executor of ``--executor``/``--ray-address`` (else of ``[replay]`` in
    ``settings``) in force for the block; a Ray cluster started for it is shut down after."""
    if ray_address and (executor or settings.executor) != "ray":
        raise click.UsageError("--ray-address needs --executor ray")
    with settings.executor_scope(executor, ray_address) as chosen:
        yield chosen


def fail_if_rule(spec: str) -> dict[str, Any]:
    """``tool_called:NAME``, ``tool_not_called:NAME``, ``final_answer:REGEX``,
    ``exit_status[:CODE,…]``, ``output_line:REGEX`` as outcome config."""
    kind, _, value = spec.partition(":")
    if kind in ("tool_called", "tool_not_called") and value:
        return {"type": kind, "tool": value}
    if kind in ("final_answer", "output_line") and value:
        return {"type": kind, "pattern": value}
    if kind == "exit_status" and not value:
        return {"type": "exit_status"}
    if kind == "exit_status":
        try:
            return {"type": "exit_status", "codes": [int(c) for c in value.split(",")]}
        except ValueError:
            pass
    raise click.BadParameter(
        f"{spec!r}: use tool_called:NAME, tool_not_called:NAME, final_answer:REGEX, "
        "exit_status[:CODE,...] or output_line:REGEX",
        param_hint="--fail-if",
    )


def apply_fail_if(config: Any, fail_if: tuple[str, ...], *, required: bool) -> None:
    """Replace the config's outcome by the ``--fail-if`` rules (any of them fails); with
    ``required``, refuse to go on without an outcome."""
    from otelcar.outcome import outcome_from_config

    if fail_if:
        config.outcome = outcome_from_config(
            {"any": [fail_if_rule(f) for f in fail_if]}, config.registry
        )
    if required and config.outcome is None:
        raise click.UsageError("no outcome: add [outcome] to otelcar.toml or pass --fail-if")


SOURCE_HELP = (
    "Read traces from ClickHouse instead of the local store: clickhouse://USER:PASS@HOST:PORT/DB, "
    "clickhouses://… (TLS) or chdb://PATH, or from a source a plugin adds (env OTELCAR_SOURCE; "
    "default: [source] url of otelcar.toml). See docs/clickhouse.md, docs/plugins.md."
)


def source_option() -> Callable[..., Any]:
    """``--source URL``. Its value is kept in ``ctx.obj["source"]`` (not passed as a
    parameter), so every command that loads traces through the shared loader honours it."""

    def remember(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
        if value:
            ctx.ensure_object(dict)["source"] = value

    return click.option(
        "--source",
        metavar="URL",
        envvar="OTELCAR_SOURCE",
        expose_value=False,
        callback=remember,
        help=SOURCE_HELP,
    )


def chosen_source(ctx: click.Context, configured: Any) -> Any:
    """The :class:`~otelcar.sources.SourceSettings` in force: ``--source`` (with the table
    names of ``[source]``, when the config has one), else ``configured`` (``[source]``), else
    ``None`` (the local store)."""
    from dataclasses import replace

    from otelcar.sources import SourceSettings

    url = (ctx.obj or {}).get("source")
    if not url:
        return configured
    return replace(configured, url=url) if configured is not None else SourceSettings(url)


class TimeParam(click.ParamType):
    """A point in time as Unix nanoseconds (:func:`otelcar.sources.parse_time`): ISO 8601
    (``2026-11-29``, ``2026-11-29T10:00Z``; UTC when no offset is given) or an age (``90s``,
    ``30m``, ``1.5h``, ``7d``, ``2w``: that long ago)."""

    name = "TIME"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        from otelcar.sources import parse_time

        if isinstance(value, int):
            return value
        try:
            return parse_time(str(value))
        except ValueError as exc:
            self.fail(str(exc))
