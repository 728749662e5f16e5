"""The cross-dialect contract: the same agent run gives the same steps whoever recorded it.

``comparable(steps)`` projects a trace's steps onto what every dialect must agree on: the
order of LLM and tool steps, each LLM step's context (roles, contents, tool calls with
arguments) and output, each tool step's name, arguments and result. Ids, timings, models and
dialect-specific extras are left out (not every producer records them).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from otelcar.messages import decode_arguments


def _calls(message: dict[str, Any] | None) -> list[tuple[Any, Any]]:
    return [
        (c["name"], decode_arguments(c["arguments"]))
        for c in (message or {}).get("tool_calls") or ()
    ]


def _message(message: dict[str, Any]) -> tuple[Any, ...]:
    return (message["role"], message["content"] or None, _calls(message))


def comparable(steps: pl.DataFrame) -> list[tuple[Any, ...]]:
    """LLM and tool steps of one trace, in order, reduced to the dialect-independent facts."""
    out: list[tuple[Any, ...]] = []
    for row in steps.sort("step").iter_rows(named=True):
        if row["kind"] == "llm":
            output = row["output"] or {}
            out.append(
                (
                    "llm",
                    [_message(m) for m in row["input_messages"] or ()],
                    (output.get("content") or None, _calls(output)),
                )
            )
        elif row["kind"] == "tool":
            out.append(
                ("tool", row["tool_name"], decode_arguments(row["tool_args"]), row["tool_result"])
            )
    return out
