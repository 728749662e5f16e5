"""Full-text search over the steps of a store's traces: the one search the console's search
page and the MCP server's ``search_traces`` run.

A step matches when ``query`` (literal text, case-insensitive) is in its name, tool name,
tool arguments or result, error, or any message it holds — its output or a message of its
context (content, reasoning, tool call names and arguments). It is a columnar scan of the
store's steps (Polars, every core), with no index to keep: the console measures it at 20,000
traces (``benchmarks/console_sizes.py``). A source that cannot scan steps (a remote one)
cannot be searched.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from otelcar.errors import OtelcarError


class SearchError(OtelcarError):
    """A search that cannot be run: an empty query, or a source that cannot scan steps."""


def _contains(expr: pl.Expr, needle: str) -> pl.Expr:
    return expr.str.to_lowercase().str.contains(needle, literal=True).fill_null(False)


def _message_hit(message: pl.Expr, needle: str) -> pl.Expr:
    calls = message.struct.field("tool_calls")
    return (
        _contains(message.struct.field("content"), needle)
        | _contains(message.struct.field("reasoning"), needle)
        | calls.list.eval(
            _contains(pl.element().struct.field("name"), needle)
            | _contains(pl.element().struct.field("arguments"), needle)
        )
        .list.any()
        .fill_null(False)
    )


def step_hits(needle: str) -> pl.Expr:
    """Whether a step row mentions ``needle`` (already lowercased): module docstring."""
    return (
        _contains(pl.col("name"), needle)
        | _contains(pl.col("tool_name"), needle)
        | _contains(pl.col("tool_args"), needle)
        | _contains(pl.col("tool_result"), needle)
        | _contains(pl.col("error"), needle)
        | _message_hit(pl.col("output"), needle)
        | pl.col("input_messages")
        .list.eval(_message_hit(pl.element(), needle))
        .list.any()
        .fill_null(False)
    )


def matching_steps(source: Any, query: str) -> dict[str, list[int]]:
    """``trace id → the step numbers that mention query`` over every trace of ``source``
    (module docstring); raises :class:`SearchError` for an empty query or a source that
    cannot scan steps."""
    needle = query.strip().lower()
    if not needle:
        raise SearchError("the query must not be empty")
    if not hasattr(source, "scan_steps"):
        raise SearchError(f"search needs the local store, not {source.where}")
    matches = (
        source.scan_steps()
        .select("trace_id", "step", hit=step_hits(needle))
        .filter(pl.col("hit"))
        .group_by("trace_id")
        .agg(pl.col("step").sort().alias("matched_steps"))
        .collect()
    )
    return dict(zip(matches["trace_id"], matches["matched_steps"].to_list(), strict=True))
