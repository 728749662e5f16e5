"""Options and setup shared by the CLI commands that replay traces (attribute, aggregate, why,
fix, test): one definition each, so their flags and their meaning cannot drift apart."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

CONFIG_HELP = "otelcar.toml with the policies and the outcome."
FAIL_IF_HELP = (
    "Outcome rule (any of them fails): tool_called:NAME, tool_not_called:NAME, "
    "final_answer:REGEX. Overrides [outcome]."
)


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


def fail_if_rule(spec: str) -> dict[str, Any]:
    """``tool_called:NAME``, ``tool_not_called:NAME``, ``final_answer:REGEX`` as outcome config."""
    kind, _, value = spec.partition(":")
    if kind in ("tool_called", "tool_not_called") and value:
        return {"type": kind, "tool": value}
    if kind == "final_answer" and value:
        return {"type": "final_answer", "pattern": value}
    raise click.BadParameter(
        f"{spec!r}: use tool_called:NAME, tool_not_called:NAME or final_answer:REGEX",
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
