"""The console's lists of traces: ``/traces`` (filters, sort, pages; kept while the store is
unchanged, :mod:`otelcar.store.stamp`) with its live-updates stream, ``/search`` and
``/sessions/{session}``."""

from __future__ import annotations

import asyncio
import html
from pathlib import Path
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from otelcar.pricing import Cost
from otelcar.project_config import load_prices
from otelcar.sources import TraceFilter, TraceSource
from otelcar.store.stamp import StampedCache, file_stamp, store_stamp
from otelcar.sync import run_sync
from otelcar.trace_search import SearchError, matching_steps
from otelcar.ui.console import Console, count_events
from otelcar.ui.listing import QueryError, TraceQuery, apply_query
from otelcar.ui.totals import page_totals, session_traces
from otelcar.ui.trace_cache import TotalsCache
from otelcar.views import pending_bytes, pending_text, traces_view

#: Where ``traces.html`` says what is received but not derived yet (:func:`with_pending`).
PENDING_MARK = "<!--otelcar:pending-->"

#: Traces a page of search results shows.
SEARCH_PAGE = 50


class ListPages:
    """The routes of the lists over ``console``."""

    def __init__(self, console: Console) -> None:
        self.c = console
        self.listed = StampedCache()
        self.kept_totals = TotalsCache()

    def routes(self) -> list[Route]:
        return [
            Route("/", self.home),
            Route("/traces", self.traces_html),
            Route("/api/traces/events", self.trace_events),
            Route("/sessions/{session}", self.session_html),
            Route("/search", self.search_html),
        ]

    async def home(self, request: Request) -> Response:
        return RedirectResponse("/traces", status_code=303)

    def traces_html(self, request: Request) -> Response:
        """The list, drawn again only when the store or ``otelcar.toml`` changed
        (:mod:`otelcar.store.stamp`; a relative ``since``/``until`` is never the same)."""
        try:
            query = TraceQuery.from_params(request.query_params)
            wanted = query.source_filter()
            with self.c.open_source() as source:
                stamp = store_stamp(source)
                key = (
                    None
                    if stamp is None
                    else (stamp, file_stamp(self.c.config_file), query, wanted)
                )
                listed = self.listed.get(key, lambda: self.list_html(source, query))
                return self.c.respond(with_pending(listed, pending_bytes(source)))
        except QueryError as exc:
            return self.c.page("error.html", 400, title="bad query", message=str(exc))

    def list_html(self, source: TraceSource, query: TraceQuery) -> str:
        every = source.traces().height  # what the live-updates stream counts
        listing = apply_query(source.traces(query.source_filter()), query)
        outcomes = page_outcomes(source, listing.rows, self.c.config_path)
        totals = self.kept_totals.totals(source, listing.rows, load_prices(self.c.config_path))
        return self.c.env.get_template("traces.html").render(
            title="traces",
            index_count=every,
            query=query,
            listing=listing,
            where=source.where,
            outcomes=outcomes,
            totals=totals,
        )

    def trace_count(self) -> int:
        with self.c.open_source() as source:
            stamp = store_stamp(source)
            key = None if stamp is None else (stamp, "count")
            return int(self.listed.get(key, lambda: source.traces().height))

    async def trace_events(self, request: Request) -> Response:
        return count_events(request, "traces", self.trace_count)

    def search_html(self, request: Request) -> Response:
        """Traces whose steps mention ``?q=`` (:mod:`otelcar.trace_search`), newest first,
        :data:`SEARCH_PAGE` a page (``?page=``), each with the steps that match."""
        query = request.query_params.get("q", "")
        number = self.c.page_number(request)
        if not query.strip():
            return self.c.page("search.html", title="search", query="", rows=[], total=0, pages=0)
        with self.c.open_source() as source:
            try:
                steps_of = matching_steps(source, query)
            except SearchError as exc:
                return self.c.page("error.html", 400, title="bad search", message=str(exc))
            index = source.traces(TraceFilter(trace_ids=tuple(steps_of))) if steps_of else None
        rows: list[dict[str, Any]] = []
        total = 0 if index is None else index.height
        pages = max(1, -(-total // SEARCH_PAGE))
        if index is not None:
            ordered = index.sort(["start_ns", "trace_id"], descending=True, nulls_last=True)
            chunk = ordered.slice((number - 1) * SEARCH_PAGE, SEARCH_PAGE)
            rows = [
                {**row, "matched_steps": steps_of[row["trace_id"]]} for row in traces_view(chunk)
            ]
        return self.c.page(
            "search.html",
            title=f"search {query}",
            query=query,
            rows=rows,
            total=total,
            page_number=number,
            pages=pages,
        )

    def session_html(self, request: Request) -> Response:
        """The traces of one session (conversation id), oldest first, with their totals."""
        session = request.path_params["session"]
        with self.c.open_source() as source:
            ids = session_traces(source, session)
            if ids is None:
                raise HTTPException(404, f"sessions need the local store, not {source.where}")
            if not ids:
                raise HTTPException(404, f"no trace records the session {session!r}")
            index = source.traces(TraceFilter(trace_ids=tuple(ids)))
            rows = traces_view(index.sort("start_ns", nulls_last=True))
            prices = load_prices(self.c.config_path)
            totals = page_totals(source, ids, prices) or {}
            outcomes = page_outcomes(source, rows, self.c.config_path)
        total = Cost()
        for t in totals.values():
            total.add(t.cost)
        return self.c.page(
            "session.html",
            title=f"session {session}",
            session=session,
            rows=rows,
            totals=totals,
            total=total,
            outcomes=outcomes,
        )


def with_pending(listed: str, pending: int) -> str:
    """The kept list page with what is still pending said where the page marks it
    (:data:`PENDING_MARK`): read at every request, since the store's stamp changes only
    when a build is committed, not when a batch is received."""
    notice = (
        f'<p class="pending" id="pending">{html.escape(pending_text(pending))}</p>'
        if pending
        else ""
    )
    return listed.replace(PENDING_MARK, notice, 1)


def page_outcomes(
    source: Any, rows: list[dict[str, Any]], config_path: Path | None
) -> dict[str, tuple[str, str | None]] | None:
    """The outcome column of one page of the list: each listed recorded run judged as it was
    recorded (:func:`otelcar.outcome.recorded_verdict`) when the console's ``otelcar.toml``
    has an ``[outcome]``; ``None`` (no column) when it has none. Called on a worker thread:
    the config is read here, and an event loop is started only to judge."""
    from otelcar.project_config import load_judging_config

    config = load_judging_config(config_path)
    if config is None or config.outcome is None:
        return None
    return run_sync(_verdicts(source, rows, config.outcome))


async def _verdicts(
    source: Any, rows: list[dict[str, Any]], outcome: Any
) -> dict[str, tuple[str, str | None]]:
    """By trace id: each of ``rows``' traces judged by ``outcome`` as it was recorded."""
    from otelcar.outcome import recorded_verdict

    verdicts: dict[str, tuple[str, str | None]] = {}
    for row in rows:
        steps = await asyncio.to_thread(lambda t=row["trace_id"]: source.load(t).steps)
        verdicts[row["trace_id"]] = await recorded_verdict(outcome, steps)
    return verdicts
