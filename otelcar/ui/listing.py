"""The traces list of the console: a query (filters, sort, page) read from the URL and applied
to the trace index in Polars, so a store of 100k traces lists in milliseconds and only one
page of rows is ever turned into Python values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlencode

import polars as pl

from otelcar.sources import TraceFilter, filter_index, parse_time

#: Sortable columns: URL name → the expression sorted by.
SORTS: dict[str, pl.Expr] = {
    "start": pl.col("start_ns"),
    "duration": pl.col("end_ns") - pl.col("start_ns"),
    "service": pl.col("service"),
    "root": pl.col("root_name"),
    "steps": pl.col("n_steps"),
    "llm": pl.col("n_llm"),
    "tool": pl.col("n_tool"),
    "errors": pl.col("n_errors"),
    "issues": pl.col("n_issues"),
    "trace": pl.col("trace_id"),
}
PAGE_SIZES = (25, 50, 100, 200)


class QueryError(ValueError):
    """A list query that cannot be applied (a bad time, sort or number); the page shows it."""


@dataclass(frozen=True)
class TraceQuery:
    """What the traces page shows: filters (``service``; ``since``/``until`` as typed, ISO
    8601 or an age; ``errors``: ``"yes"`` only traces with an error span, ``"no"`` only
    those without, ``""`` all; ``dialect``: traces mapped by this dialect), the sort column
    (a key of :data:`SORTS`) and direction, and the page (1-based) of ``per_page`` rows."""

    service: str = ""
    since: str = ""
    until: str = ""
    errors: str = ""
    dialect: str = ""
    sort: str = "start"
    desc: bool = True
    page: int = 1
    per_page: int = 50

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> TraceQuery:
        """The query of a URL's parameters; unknown parameters are ignored. Raises
        :class:`QueryError` for a sort, errors value or number that is not valid."""
        sort = params.get("sort", "start") or "start"
        if sort not in SORTS:
            raise QueryError(f"cannot sort by {sort!r}; sortable: {', '.join(SORTS)}")
        errors = params.get("errors", "")
        if errors not in ("", "yes", "no"):
            raise QueryError(f"errors={errors!r}: use yes, no or nothing")
        try:
            page = int(params.get("page", "1") or 1)
            per_page = int(params.get("per_page", "50") or 50)
        except ValueError:
            raise QueryError("page and per_page must be numbers") from None
        if per_page not in PAGE_SIZES:
            raise QueryError(f"per_page must be one of {', '.join(map(str, PAGE_SIZES))}")
        return cls(
            service=params.get("service", "").strip(),
            since=params.get("since", "").strip(),
            until=params.get("until", "").strip(),
            errors=errors,
            dialect=params.get("dialect", "").strip(),
            sort=sort,
            desc=params.get("order", "desc") != "asc",
            page=max(page, 1),
            per_page=per_page,
        )

    def source_filter(self) -> TraceFilter:
        """The part a source applies where the traces are (pushed down): service and time."""
        try:
            since = parse_time(self.since) if self.since else None
            until = parse_time(self.until) if self.until else None
        except ValueError as exc:
            raise QueryError(str(exc)) from None
        return TraceFilter(service=self.service or None, since_ns=since, until_ns=until)

    def params(self, **changes: Any) -> str:
        """This query as URL parameters (``?…``), with ``changes``; defaults are left out."""
        query = replace(self, **changes)
        values = {
            "service": query.service,
            "since": query.since,
            "until": query.until,
            "errors": query.errors,
            "dialect": query.dialect,
            "sort": "" if query.sort == "start" else query.sort,
            "order": "" if query.desc else "asc",
            "page": "" if query.page == 1 else str(query.page),
            "per_page": "" if query.per_page == 50 else str(query.per_page),
        }
        return "?" + urlencode({k: v for k, v in values.items() if v})

    def sort_params(self, column: str) -> str:
        """The URL that sorts by ``column``: descending first, flipped when already sorted
        by it; back to the first page."""
        desc = not self.desc if column == self.sort else True
        return self.params(sort=column, desc=desc, page=1)


@dataclass(frozen=True)
class TracePage:
    """One page of the list: its ``rows`` (dicts of :data:`otelcar.schema.TRACES_SCHEMA`
    columns and ``duration_ms``), how many traces match, the page shown (clamped to the
    last) and how many pages there are, and the services and dialects to filter by."""

    rows: list[dict[str, Any]]
    total: int
    page: int
    pages: int
    services: list[str]
    dialects: list[str]


def apply_query(traces: pl.DataFrame, query: TraceQuery) -> TracePage:
    """Filter (service, time, errors, dialect), sort and cut ``traces`` (a trace index, as
    ``TraceSource.traces`` returns it) to the page ``query`` asks for. Filters the source
    already applied are applied again (a no-op), so any frame of the schema can be passed."""
    services = sorted(s for s in traces["service"].unique().to_list() if s is not None)
    dialects = sorted(d for d in traces["dialects"].explode().unique().to_list() if d is not None)
    frame = filter_index(traces.lazy(), query.source_filter())
    if query.errors == "yes":
        frame = frame.filter(pl.col("n_errors") > 0)
    elif query.errors == "no":
        frame = frame.filter(pl.col("n_errors") == 0)
    if query.dialect:
        frame = frame.filter(pl.col("dialects").list.contains(query.dialect))
    matched = frame.sort(
        SORTS[query.sort], pl.col("trace_id"), descending=query.desc, nulls_last=True
    )
    total = matched.select(pl.len()).collect().item()
    pages = max((total + query.per_page - 1) // query.per_page, 1)
    page = min(query.page, pages)
    cut = matched.slice((page - 1) * query.per_page, query.per_page).collect()
    rows = []
    for row in cut.iter_rows(named=True):
        start, end = row["start_ns"], row["end_ns"]
        row["duration_ms"] = (end - start) / 1e6 if start is not None and end is not None else None
        rows.append(row)
    return TracePage(rows, total, page, pages, services, dialects)
