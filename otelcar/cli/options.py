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


def fail_if_outcome(fail_if: Sequence[str]) -> dict[str, Any] | None:
    """The ``--fail-if`` rules as an ``[outcome]`` table (any of them fails) that replaces
    the config's (:func:`otelcar.analyses.project.configured`); ``None`` without rules."""
    return {"any": [fail_if_rule(f) for f in fail_if]} if fail_if else None


SOURCE_HELP = (
    "Read traces from ClickHouse instead of the local store: clickhouse://USER:PASS@HOST:PORT/DB, "
    "clickhouses://… (TLS) or chdb://PATH, or from a source a plugin adds (env OTELCAR_SOURCE; "
    "default: [source] url of otelcar.toml). See docs/clickhouse.md, docs/plugins.md."
)


def source_option() -> Callable[..., Any]:
    """``--source URL``. Its value is kept in ``ctx.obj["source"]`` (not passed as a
    parameter), so every command that reads traces through its project
    (:func:`otelcar.cli.common.project`) honours it."""

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


# -- options made from a request type (otelcar.analyses.requests) -------------------------------
def request_options(
    request_type: type, *, only: Sequence[str] = (), exclude: Sequence[str] = ()
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The click options of ``request_type``'s fields (:func:`click_option` each, in their
    order): ``only`` those named, or all but those in ``exclude``. The command receives each
    under its field name, so ``request_type(**those)`` is the request."""
    from otelcar.analyses.options import specs

    chosen = [
        s for s in specs(request_type) if (not only or s.name in only) and s.name not in exclude
    ]

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        for spec in reversed(chosen):
            function = click_option(spec)(function)
        return function

    return decorate


def click_option(spec: Any) -> Callable[..., Any]:
    """The click option of one request option (:class:`~otelcar.analyses.options.Spec`): its
    flags (default ``--field-name``), type with bounds or choices, default and help; one
    that holds several values is given once per value."""
    flags = spec.option.flags or ("--" + spec.name.replace("_", "-"),)
    settings: dict[str, Any] = {"default": spec.default, "help": spec.help}
    if spec.kind is bool:
        if "/" not in flags[0]:  # a --x/--no-x pair is a flag by its declaration
            settings["is_flag"] = True
        settings["show_default"] = spec.default is True
    else:
        settings["type"] = _click_type(spec)
        settings["show_default"] = spec.default not in (None, ())
        settings["multiple"] = spec.multiple
    if spec.option.metavar:
        settings["metavar"] = spec.option.metavar
    return click.option(*flags, spec.name, **settings)


def _click_type(spec: Any) -> Any:
    """A number with its bounds (``IntRange``/``FloatRange``), a closed choice, a number or
    one of some names (:class:`NumberOrName`), or text."""
    if spec.kind is str:
        return click.Choice(spec.choices) if spec.choices else click.STRING
    if spec.choices:
        return NumberOrName(spec.choices)
    bounds = spec.bounds()
    if not bounds:
        return click.INT if spec.kind is int else click.FLOAT
    ranged = click.IntRange if spec.kind is int else click.FloatRange
    return ranged(
        min=bounds.get("ge", bounds.get("gt")),
        max=bounds.get("le", bounds.get("lt")),
        min_open="gt" in bounds,
        max_open="lt" in bounds,
    )


class NumberOrName(click.ParamType):
    """A whole number, or one of ``names`` (``--step 4``, ``--step culprit``)."""

    name = "number"

    def __init__(self, names: Sequence[str]) -> None:
        self.names = tuple(names)

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "[INTEGER|" + "|".join(self.names) + "]"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> int | str:
        if isinstance(value, int) or value in self.names:
            return value
        text = str(value)
        if text.lstrip("-").isdigit():
            return int(text)
        self.fail(f"{value!r}: a whole number, {' or '.join(self.names)}")
