"""What the MCP server lists from the store: traces and text search, in pages with cursors.

Pure reads returning the JSON views the CLI's ``--json`` prints (:mod:`otelcar.views`), so
a coding agent sees the items of ``schemas/traces-list.schema.json`` (a trace's steps are
read in pages by :mod:`.pages`). Trace text is returned as data; nothing here interprets it.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from otelcar.errors import OtelcarError
from otelcar.mcp.bounded import decode_cursor, encode_cursor, fit_items, size
from otelcar.sources import TraceFilter, TraceSource, parse_time
from otelcar.trace_search import SearchError, matching_steps
from otelcar.views import pending_bytes, pending_text, trace_view, traces_view

#: Most traces one call returns (an agent pages on with ``next_cursor``).
MAX_LIMIT = 1000
#: Room kept beside a page's items for its other fields and its cursor.
PAGE_BYTES = 2048


class QueryError(OtelcarError):
    """A list or search argument is not valid (a time, a limit, an empty query)."""


def resolved_time(value: str | None, name: str) -> int | None:
    """``value`` (ISO 8601 or an age, :func:`otelcar.sources.parse_time`) as Unix
    nanoseconds, ``None`` for ``None``; a :class:`QueryError` naming the argument ``name``
    when it is neither."""
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
    return traces_page(
        source,
        service=service,
        since=since,
        until=until,
        errors_only=errors_only,
        dialect=dialect,
        limit=limit,
    )["traces"]


def traces_page(
    source: TraceSource,
    *,
    service: str | None = None,
    since: str | None = None,
    until: str | None = None,
    errors_only: bool = False,
    dialect: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
    budget: int | None = None,
) -> dict[str, Any]:
    """``{"traces", "next_cursor", "pending"}``: a page of :func:`list_traces` within
    ``budget`` bytes (``None``: no cap; a page over it keeps its newest traces).
    ``next_cursor`` (``None`` when no older trace matches) lists the next older page with the
    same filters; a cursor replaces every other argument. Pages do not overlap: the cursor
    holds the oldest start shown and the ids shown at that start. ``pending`` says what the
    store has received but not derived yet (:func:`otelcar.views.pending_text`; ``None`` when
    nothing is)."""
    backlog = pending_bytes(source)
    pending = pending_text(backlog) if backlog else None
    seen: list[str] = []
    before: int | None = None
    if cursor is not None:
        state = decode_cursor(cursor, "list_traces")
        service, errors_only, dialect = state["service"], state["errors"], state["dialect"]
        since_ns, until_ns, limit = state["since"], state["until"], state["limit"]
        before, seen = state["before"], state["seen"]
    else:
        since_ns, until_ns = resolved_time(since, "since"), resolved_time(until, "until")
    _limit(limit)
    bound = until_ns
    if before is not None:
        bound = before + 1 if until_ns is None else min(until_ns, before + 1)
    filtered = errors_only or bool(dialect)
    wanted = TraceFilter(
        service=service,
        since_ns=since_ns,
        until_ns=bound,
        limit=None if filtered else limit + len(seen) + 1,
    )
    traces = source.traces(wanted)
    if seen:
        traces = traces.filter(~pl.col("trace_id").is_in(seen))
    if errors_only:
        traces = traces.filter(pl.col("n_errors") > 0)
    if dialect:
        traces = traces.filter(pl.col("dialects").list.contains(dialect))
    more = traces.height > limit
    views = traces_view(traces.tail(limit))
    if budget is not None:
        kept = fit_items(views[::-1], budget - PAGE_BYTES - size(pending))
        more = more or kept < len(views)
        views = views[len(views) - kept :]
    next_cursor = None
    oldest = views[0]["start_ns"] if views else None
    if more and oldest is not None:
        ties = [v["trace_id"] for v in views if v["start_ns"] == oldest]
        state = {
            "service": service,
            "since": since_ns,
            "until": until_ns,
            "errors": errors_only,
            "dialect": dialect,
            "limit": limit,
            "before": oldest,
            "seen": ties + (seen if oldest == before else []),
        }
        next_cursor = encode_cursor("list_traces", state)
    return {"traces": views, "next_cursor": next_cursor, "pending": pending}


def search_traces(source: Any, query: str, *, limit: int = 20) -> list[dict[str, Any]]:
    """Traces whose steps mention ``query`` (case-insensitive, literal text): in a step or
    tool name, tool arguments or result, error, or any message's content, reasoning or tool
    calls. Each trace (newest first) with ``matched_steps``, the step numbers that match.

    Needs the local store (a lazy scan of every step); a remote source raises."""
    return search_page(source, query, limit=limit)["traces"]


def search_page(
    source: Any,
    query: str,
    *,
    limit: int = 20,
    cursor: str | None = None,
    budget: int | None = None,
) -> dict[str, Any]:
    """``{"query", "traces", "next_cursor"}``: a page of :func:`search_traces` within
    ``budget`` bytes (``None``: no cap); ``next_cursor`` continues with the next older
    matches of the same query (a cursor replaces ``query`` and ``limit``)."""
    offset = 0
    if cursor is not None:
        state = decode_cursor(cursor, "search_traces")
        query, limit, offset = state["query"], state["limit"], state["offset"]
    _limit(limit)
    try:
        steps_of = matching_steps(source, query)
    except SearchError as exc:
        raise QueryError(str(exc)) from None
    if not steps_of:
        return {"query": query, "traces": [], "next_cursor": None}
    traces = source.traces(TraceFilter(trace_ids=tuple(steps_of))).sort(
        ["start_ns", "trace_id"], descending=True, nulls_last=True
    )
    page = [
        {**trace_view(row), "matched_steps": steps_of[row["trace_id"]]}
        for row in traces.slice(offset, limit).iter_rows(named=True)
    ]
    if budget is not None:
        page = page[: fit_items(page, budget - PAGE_BYTES - size(query))]
    end = offset + len(page)
    next_cursor = None
    if end < traces.height:
        state = {"query": query, "limit": limit, "offset": end}
        next_cursor = encode_cursor("search_traces", state)
    return {"query": query, "traces": page, "next_cursor": next_cursor}
