"""What the MCP server reads from the store: trace lists, text search, one trace, one step.

Pure reads returning the JSON views the CLI's ``--json`` prints (:mod:`otelcar.views`), so
a coding agent sees the shapes of ``schemas/traces-list.schema.json`` and
``schemas/show.schema.json``. Trace text is returned as data; nothing here interprets it.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from otelcar.errors import OtelcarError, TraceNotFound
from otelcar.sources import TraceFilter, TraceSource, parse_time
from otelcar.views import step_view, trace_view, traces_view

#: Most traces one call returns (an agent pages with ``until``).
MAX_LIMIT = 1000


class QueryError(OtelcarError):
    """A list or search argument is not valid (a time, a limit, an empty query)."""


def _time(value: str | None, name: str) -> int | None:
    if value is None:
        return None
    try:
        return parse_time(value)
    except ValueError as exc:
        raise QueryError(f"{name}: {exc}") from None


def _limit(limit: int) -> int:
    if not 1 <= limit <= MAX_LIMIT:
        raise QueryError(f"limit must be between 1 and {MAX_LIMIT}, not {limit}")
    return limit


def list_traces(
    source: TraceSource,
    *,
    service: str | None = None,
    since: str | None = None,
    until: str | None = None,
    errors_only: bool = False,
    dialect: str | None = None,
    limit: int = 50,
) -> list[dict[str, Any]]:
    """The newest ``limit`` traces (oldest first, as ``otelcar traces``) that match:
    ``service``; a start in ``[since, until)`` (ISO 8601 or an age such as ``6h``);
    ``errors_only``: at least one step with an error; ``dialect``: recorded in that
    convention (``genai``, ``openinference``, …)."""
    wanted = TraceFilter(
        service=service,
        since_ns=_time(since, "since"),
        until_ns=_time(until, "until"),
        limit=None if (errors_only or dialect) else _limit(limit),
    )
    traces = source.traces(wanted)
    if errors_only:
        traces = traces.filter(pl.col("n_errors") > 0)
    if dialect:
        traces = traces.filter(pl.col("dialects").list.contains(dialect))
    return traces_view(traces.tail(_limit(limit)))


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


def search_traces(source: Any, query: str, *, limit: int = 20) -> list[dict[str, Any]]:
    """Traces whose steps mention ``query`` (case-insensitive, literal text): in a step or
    tool name, tool arguments or result, error, or any message's content, reasoning or tool
    calls. Each trace (newest first) with ``matched_steps``, the step numbers that match.

    Needs the local store (a lazy scan of every step); a remote source raises."""
    needle = query.strip().lower()
    if not needle:
        raise QueryError("query must not be empty")
    if not hasattr(source, "scan_steps"):
        raise QueryError(f"search needs the local store, not {source.where}")
    hit = (
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
    matches = (
        source.scan_steps()
        .filter(hit)
        .group_by("trace_id")
        .agg(pl.col("step").sort().alias("matched_steps"))
        .collect()
    )
    if matches.is_empty():
        return []
    steps_of = dict(zip(matches["trace_id"], matches["matched_steps"].to_list(), strict=True))
    traces = source.traces(TraceFilter(trace_ids=tuple(steps_of))).sort(
        "start_ns", descending=True, nulls_last=True
    )
    return [
        {**trace_view(row), "matched_steps": steps_of[row["trace_id"]]}
        for row in traces.head(_limit(limit)).iter_rows(named=True)
    ]


def show_trace(
    source: TraceSource, trace_id: str, *, kinds: list[str] | None = None
) -> dict[str, Any]:
    """``{"trace": summary, "steps": [...]}`` of one trace (a full id or a unique prefix),
    as ``otelcar show --json``; ``kinds`` keeps only steps of those kinds."""
    loaded = source.load(trace_id)
    steps = loaded.steps
    if kinds:
        steps = steps.filter(pl.col("kind").is_in(kinds))
    return {
        "trace": trace_view(loaded.summary),
        "steps": [step_view(r) for r in steps.iter_rows(named=True)],
    }


def show_step(source: TraceSource, trace_id: str, step: int) -> dict[str, Any]:
    """One step of one trace, with every message, tool call and result; :class:`TraceNotFound`
    names the steps there are when ``step`` is not one of them."""
    loaded = source.load(trace_id)
    rows = loaded.steps.filter(pl.col("step") == step)
    if rows.is_empty():
        known = loaded.steps["step"].to_list()
        shown = ", ".join(map(str, known[:40])) + (" …" if len(known) > 40 else "")
        raise TraceNotFound(f"trace {loaded.trace_id} has no step {step} (steps: {shown})")
    return {"trace_id": loaded.trace_id, "step": step_view(rows.row(0, named=True))}
