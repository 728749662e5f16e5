"""The routes of the console (Starlette), rendered on the server with Jinja2.

Pages: ``/traces`` (the list: filters, sort, pages), ``/traces/{id}`` (one trace: its steps
timeline, every message, tool call and result, content flags and issues), ``/runs`` and
``/runs/{id}`` (start, watch, cancel and read runs), ``/results`` and ``/results/{id}`` (the
HTML report of a finished run, as ``otelcar report`` draws it); ``/api/runs/{id}`` is the
JSON a run's page polls. The pages that read traces are plain functions, which Starlette runs
on its thread pool: a long trace's page never holds up the list or another request. Long
pages are built one at a time (:data:`PAGE_BUILDS`), and the list is kept while the store is
unchanged (:mod:`otelcar.store.stamp`), so it answers in milliseconds while they are built.

Trace text is untrusted: every ``{{ value }}`` goes through the HTML report's own escaping
(:func:`otelcar.report.markup.esc`: HTML-escaped, control and invisible characters shown as
marked escapes), attribute values through :func:`otelcar.report.markup.attr`. Pages carry a
Content-Security-Policy that lets only the console's own inline script run. Forms that start
or cancel runs refuse requests from another origin (a web page the user has open cannot
start runs), and the app answers only to the host names it is given (no DNS rebinding).
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import json
import threading
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route

from otelcar import __version__
from otelcar.errors import OtelcarError, TraceNotFound
from otelcar.pricing import Cost, cost_of
from otelcar.project_config import DEFAULT_CONFIG, load_prices
from otelcar.replay import load_run
from otelcar.replay.divergence import diff_kept
from otelcar.replay.timelines import (
    TimelineError,
    TimelineNotFound,
    load_timeline,
    timelines_document,
)
from otelcar.report import render_html
from otelcar.report.html_diff import render_diff_html
from otelcar.report.markup import attr, esc
from otelcar.sources import TraceFilter, TraceSource
from otelcar.store.stamp import StampedCache, file_stamp, store_stamp
from otelcar.sync import run_sync
from otelcar.trace_search import SearchError, matching_steps
from otelcar.triage.queue import STATES
from otelcar.triage.summaries import FINISHED, FailureIndex
from otelcar.ui.forms import FormError, form_fields, form_options
from otelcar.ui.listing import QueryError, TraceQuery, apply_query
from otelcar.ui.runs import KINDS, RunError, RunManager
from otelcar.ui.totals import page_totals, session_traces
from otelcar.ui.trace_cache import TotalsCache, TraceCache
from otelcar.ui.trace_page import step_page, trace_page
from otelcar.views import own_trace_summary, trace_view, traces_view

#: Traces a page of search results shows.
SEARCH_PAGE = 50

#: Long pages (a trace's page, a step's page) built at a time. Building one is Python work
#: that holds the interpreter (the polars reads aside), so a second built at once only
#: shares it with the first and with the short requests (the list) meanwhile; the others
#: wait their turn asleep (issue 39).
PAGE_BUILDS = 1

#: How often the live-updates stream looks at the trace index, and how long it stays silent
#: before a heartbeat comment.
EVENTS_POLL_S = 1.0
HEARTBEAT_S = 15.0

SCRIPT = resources.files("otelcar.ui").joinpath("templates/console.js").read_text("utf-8")
CSP = (
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; connect-src 'self'; "
    "script-src 'sha256-"
    + base64.b64encode(hashlib.sha256(SCRIPT.encode("utf-8")).digest()).decode("ascii")
    + "'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


def _finalize(value: Any) -> Any:
    """Every ``{{ }}`` value: markup built here stays, anything else is escaped as the HTML
    report escapes (``None`` shows as nothing)."""
    if isinstance(value, Markup):
        return value
    return Markup(esc(value))


def _duration(ms: float | None) -> str:
    if ms is None:
        return ""
    return f"{ms:.0f} ms" if ms < 10_000 else f"{ms / 1000:.1f} s"


def _time(ns: int | None) -> str:
    if ns is None:
        return ""
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ns / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("otelcar.ui", "templates"), autoescape=True, finalize=_finalize
    )
    env.filters["attrval"] = lambda value: Markup(attr(value))
    env.filters["duration"] = _duration
    env.filters["time"] = _time
    env.globals["version"] = __version__
    env.globals["script"] = Markup(SCRIPT)
    env.globals["kinds"] = KINDS
    env.globals["run_fields"] = form_fields()
    return env


def create_app(
    *,
    open_source: Callable[[], TraceSource],
    runs_dir: Path,
    config_path: Path | None = None,
    allowed_hosts: Sequence[str] = ("127.0.0.1", "localhost"),
    store_root: Path | None = None,
) -> Starlette:
    """The console as an ASGI app. ``open_source()`` opens where traces are read (the store
    or a ``--source``; opened and closed per request); ``runs_dir`` is where runs are kept;
    ``config_path`` the ``otelcar.toml`` runs load (``None``: ./otelcar.toml when present);
    ``allowed_hosts`` the ``Host`` names the app answers to; ``store_root`` the local store
    whose kept timelines (``otelcar rollout --save``) the trace pages list and diff, and
    whose kept live requests the runs use (``None``: none are shown or used)."""
    env = _environment()

    def load(trace_id: str) -> tuple[str, Any]:
        with open_source() as source:
            loaded = source.load(source.resolve(trace_id))
        return loaded.trace_id, loaded.steps

    cache = TraceCache()
    kept_totals = TotalsCache()
    manager = RunManager(runs_dir, load_trace=load, config_path=config_path, store_root=store_root)

    def page(name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        return respond(env.get_template(name).render(**context), status_code)

    def respond(html: str, status_code: int = 200) -> HTMLResponse:
        response = HTMLResponse(html, status_code=status_code)
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "same-origin"  # no-referrer makes Origin "null"
        return response

    def same_origin(request: Request) -> None:
        origin = request.headers.get("origin")
        host = request.headers.get("host", "")
        if request.headers.get("sec-fetch-site") == "cross-site" or (
            origin is not None and origin not in (f"http://{host}", f"https://{host}")
        ):
            raise HTTPException(403, "refused: the request came from another site")

    async def home(request: Request) -> Response:
        return RedirectResponse("/traces", status_code=303)

    listed = StampedCache()
    config_file = config_path if config_path is not None else Path(DEFAULT_CONFIG)

    def traces_html(request: Request) -> Response:
        """The list, drawn again only when the store or ``otelcar.toml`` changed
        (:mod:`otelcar.store.stamp`; a relative ``since``/``until`` is never the same)."""
        try:
            query = TraceQuery.from_params(request.query_params)
            wanted = query.source_filter()
            with open_source() as source:
                stamp = store_stamp(source)
                key = None if stamp is None else (stamp, file_stamp(config_file), query, wanted)
                return respond(listed.get(key, lambda: list_html(source, query)))
        except QueryError as exc:
            return page("error.html", 400, title="bad query", message=str(exc))

    def list_html(source: TraceSource, query: TraceQuery) -> str:
        every = source.traces().height  # what the live-updates stream counts
        listing = apply_query(source.traces(query.source_filter()), query)
        outcomes = page_outcomes(source, listing.rows, config_path)
        totals = kept_totals.totals(source, listing.rows, load_prices(config_path))
        return env.get_template("traces.html").render(
            title="traces",
            index_count=every,
            query=query,
            listing=listing,
            where=source.where,
            outcomes=outcomes,
            totals=totals,
        )

    def trace_count() -> int:
        with open_source() as source:
            stamp = store_stamp(source)
            key = None if stamp is None else (stamp, "count")
            return int(listed.get(key, lambda: source.traces().height))

    triaged = FailureIndex(store_root) if store_root is not None else None

    def result_count() -> int:
        return 0 if triaged is None else triaged.finished()

    def failures_html(request: Request) -> Response:
        """What triage found (``otelcar collect --triage``): each triaged trace with its
        state, culprit step and cause sentence, most recent first; ``?state=`` one state."""
        if triaged is None:
            raise HTTPException(404, "this console shows no triage (no local store)")
        wanted = request.query_params.get("state") or None
        every = triaged.all()
        if wanted is not None and wanted not in STATES:
            raise HTTPException(400, f"state: one of {', '.join(STATES)}")
        shown = [f for f in every if (f.state == wanted if wanted else f.state != "passed")]
        return page(
            "failures.html",
            title="failures",
            failures=shown,
            counts=triaged.counts(every),
            state=wanted,
            finished=sum(1 for f in every if f.state in FINISHED),
        )

    def failure_report(request: Request) -> Response:
        """The HTML report of one triaged trace's attribution (and why)."""
        state = triaged.state(request.path_params["trace_id"]) if triaged is not None else None
        if state is None or not state.get("attribution"):
            raise HTTPException(404, "no triage result for this trace")
        report = render_html(
            attribution=state["attribution"],
            why=state.get("why") or None,
            back=("← the failures in the console", "/failures"),
        )
        return HTMLResponse(report)  # the report carries its own Content-Security-Policy

    async def trace_events(request: Request) -> Response:
        return count_events(request, "traces", trace_count)

    async def failure_events(request: Request) -> Response:
        return count_events(request, "results", result_count)

    building = threading.BoundedSemaphore(PAGE_BUILDS)

    def one_at_a_time(build: Callable[[Request], Response]) -> Callable[[Request], Response]:
        """``build`` (a long page's route, run on the thread pool) while at most
        :data:`PAGE_BUILDS` long pages are built."""

        @functools.wraps(build)
        def endpoint(request: Request) -> Response:
            with building:
                return build(request)

        return endpoint

    def page_number(request: Request) -> int:
        value = request.query_params.get("page", "1")
        if not value.isdigit() or int(value) < 1:
            raise HTTPException(400, f"page: a number from 1, not {value!r}")
        return int(value)

    def trace_html(request: Request) -> Response:
        """One page of a trace (:mod:`otelcar.ui.trace_page`)."""
        number = page_number(request)
        with open_source() as source:
            loaded = cache.load(source, request.path_params["trace_id"])
        full = loaded.trace_id
        runs = [r for r in manager.runs() if r.trace_id == full]
        kept = {} if store_root is None else timelines_document(store_root, full)
        sessions = loaded.steps["conversation_id"].drop_nulls()
        return page(
            "trace.html",
            title=f"trace {full}",
            trace=trace_view(loaded.summary),
            view=trace_page(loaded.steps, number),
            cost=cost_of(loaded.steps, load_prices(config_path)),
            session=sessions[0] if sessions.len() else None,
            runs=runs,
            timelines=kept.get("timelines", []),
            timeline_problems=kept.get("problems", []),
        )

    def search_html(request: Request) -> Response:
        """Traces whose steps mention ``?q=`` (:mod:`otelcar.trace_search`), newest first,
        :data:`SEARCH_PAGE` a page (``?page=``), each with the steps that match."""
        query = request.query_params.get("q", "")
        number = page_number(request)
        if not query.strip():
            return page("search.html", title="search", query="", rows=[], total=0, pages=0)
        with open_source() as source:
            try:
                steps_of = matching_steps(source, query)
            except SearchError as exc:
                return page("error.html", 400, title="bad search", message=str(exc))
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
        return page(
            "search.html",
            title=f"search {query}",
            query=query,
            rows=rows,
            total=total,
            page_number=number,
            pages=pages,
        )

    def session_html(request: Request) -> Response:
        """The traces of one session (conversation id), oldest first, with their totals."""
        session = request.path_params["session"]
        with open_source() as source:
            ids = session_traces(source, session)
            if ids is None:
                raise HTTPException(404, f"sessions need the local store, not {source.where}")
            if not ids:
                raise HTTPException(404, f"no trace records the session {session!r}")
            index = source.traces(TraceFilter(trace_ids=tuple(ids)))
            rows = traces_view(index.sort("start_ns", nulls_last=True))
            prices = load_prices(config_path)
            totals = page_totals(source, ids, prices) or {}
            outcomes = page_outcomes(source, rows, config_path)
        total = Cost()
        for t in totals.values():
            total.add(t.cost)
        return page(
            "session.html",
            title=f"session {session}",
            session=session,
            rows=rows,
            totals=totals,
            total=total,
            outcomes=outcomes,
        )

    def own_trace(request: Request) -> tuple[str, str, int, Any]:
        """``(trace id, timeline, rollout, its own steps)`` of a kept live rollout."""
        if store_root is None:
            raise HTTPException(404, "this console shows no timelines (no local store)")
        with open_source() as source:
            full = source.resolve(request.path_params["trace_id"])
        name, index = request.path_params["name"], request.path_params["rollout"]
        try:
            own = load_timeline(store_root, full, name).rollout_trace(index)
        except TimelineNotFound as exc:
            raise HTTPException(404, str(exc)) from None
        except TimelineError as exc:
            raise HTTPException(400, str(exc)) from None
        if own is None:
            raise HTTPException(404, f"rollout {index} of timeline {name!r} made no trace")
        return full, name, index, own

    def rollout_html(request: Request) -> Response:
        """A kept live rollout's own trace (its agent's spans), shown as a trace is."""
        number = page_number(request)
        full, name, index, own = own_trace(request)
        return page(
            "trace.html",
            title=f"rollout {name}#{index} of {full}",
            trace=trace_view(own_trace_summary(own, f"{name}#{index}")),
            view=trace_page(own, number),
            runs=[],
            timelines=[],
            timeline_problems=[],
            rollout_of={"trace_id": full, "name": name, "rollout": index},
        )

    def step_html(request: Request) -> Response:
        """One step in full: its whole context and all of each text."""
        step = request.path_params["step"]
        if "name" in request.path_params:
            full, name, index, steps = own_trace(request)
            base = f"/traces/{full}/timelines/{name}/rollouts/{index}"
            label = f"rollout {name}#{index} of trace {full}"
        else:
            with open_source() as source:
                loaded = cache.load(source, request.path_params["trace_id"])
            full, steps = loaded.trace_id, loaded.steps
            base, label = f"/traces/{full}", f"trace {full}"
        view = step_page(steps, step)
        if view is None:
            raise HTTPException(404, f"{label} has no step {step}")
        return page("step.html", title=f"step {step} of {label}", view=view, base=base, label=label)

    def timeline_diff_html(request: Request) -> Response:
        if store_root is None:
            raise HTTPException(404, "this console shows no timelines (no local store)")
        full, steps = load(request.path_params["trace_id"])
        other = request.query_params.get("b") or None
        document = diff_kept(store_root, load_run(full, steps), request.path_params["name"], other)
        back = ("← the trace in the console", f"/traces/{full}")
        return HTMLResponse(render_diff_html(document, back=back))  # it carries its own CSP

    async def start(request: Request) -> Response:
        same_origin(request)
        form = await request.form()
        kind = str(form.get("kind", ""))
        try:
            options = form_options(kind, form) if kind in KINDS else {}
        except FormError as exc:
            return page("error.html", 400, title="bad run", message=str(exc))
        with open_source() as source:  # an unknown trace is a 404, never a kept run
            full = source.resolve(request.path_params["trace_id"])
        try:
            run = manager.start(kind, full, options)
        except RunError as exc:
            return page("error.html", 400, title="bad run", message=str(exc))
        return RedirectResponse(f"/runs/{run.id}", status_code=303)

    async def runs(request: Request) -> Response:
        return page("runs.html", title="runs", runs=manager.runs())

    async def run_page(request: Request) -> Response:
        run = manager.get(request.path_params["run_id"])
        return page("run.html", title=f"run {run.id}", run=run)

    async def run_api(request: Request) -> Response:
        data = manager.get(request.path_params["run_id"]).to_dict()
        data.pop("result")
        return JSONResponse(data)

    async def cancel(request: Request) -> Response:
        same_origin(request)
        run = manager.cancel(request.path_params["run_id"])
        return RedirectResponse(f"/runs/{run.id}", status_code=303)

    async def results(request: Request) -> Response:
        finished = [r for r in manager.runs() if r.status == "done" and r.result]
        return page("results.html", title="results", runs=finished)

    async def result(request: Request) -> Response:
        run = manager.get(request.path_params["run_id"])
        if run.status != "done" or not run.result:
            raise HTTPException(404, f"run {run.id} has no result ({run.status})")
        section = "attribution" if run.kind == "attribute" else run.kind
        report = render_html(
            **{section: run.result}, back=("← this run in the console", f"/runs/{run.id}")
        )
        return HTMLResponse(report)  # the report carries its own Content-Security-Policy

    async def not_found(request: Request, exc: Exception) -> Response:
        return page("error.html", 404, title="not found", message=str(exc))

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return page("error.html", exc.status_code, title="error", message=str(exc.detail))

    async def bad_timeline(request: Request, exc: Exception) -> Response:
        return page("error.html", 400, title="bad timeline", message=str(exc))

    async def library_error(request: Request, exc: Exception) -> Response:
        return page("error.html", 500, title="error", message=str(exc))

    app = Starlette(
        routes=[
            Route("/", home),
            Route("/traces", traces_html),
            Route("/api/traces/events", trace_events),
            Route("/failures", failures_html),
            Route("/failures/{trace_id}", failure_report),
            Route("/api/failures/events", failure_events),
            Route("/traces/{trace_id}", one_at_a_time(trace_html)),
            Route("/traces/{trace_id}/steps/{step:int}", one_at_a_time(step_html)),
            Route("/sessions/{session}", session_html),
            Route("/search", search_html),
            Route("/traces/{trace_id}/runs", start, methods=["POST"]),
            Route("/traces/{trace_id}/timelines/{name}", timeline_diff_html),
            Route(
                "/traces/{trace_id}/timelines/{name}/rollouts/{rollout:int}",
                one_at_a_time(rollout_html),
            ),
            Route(
                "/traces/{trace_id}/timelines/{name}/rollouts/{rollout:int}/steps/{step:int}",
                one_at_a_time(step_html),
            ),
            Route("/runs", runs),
            Route("/runs/{run_id}", run_page),
            Route("/runs/{run_id}/cancel", cancel, methods=["POST"]),
            Route("/api/runs/{run_id}", run_api),
            Route("/results", results),
            Route("/results/{run_id}", result),
        ],
        middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))],
        exception_handlers={
            TraceNotFound: not_found,
            RunError: not_found,
            TimelineNotFound: not_found,
            TimelineError: bad_timeline,
            HTTPException: http_error,
            OtelcarError: library_error,
        },
    )
    app.state.runs = manager
    return app


def count_events(request: Request, event: str, count: Callable[[], int]) -> Response:
    """Server-sent events while ``count()`` grows (traces arriving as ``otelcar collect``
    writes them; triage results as they are made): an ``event: <event>`` with
    ``{"count", "new"}`` each time the count differs from the last one told (at first from
    ``?count=``, what the page was drawn with), a comment every :data:`HEARTBEAT_S` so
    proxies keep the stream; it ends when the client goes."""
    value = request.query_params.get("count", "")
    if not value.isdigit():
        raise HTTPException(400, f"count: the number of {event} the page shows")
    told = shown = int(value)

    async def stream() -> Any:
        nonlocal told
        quiet = 0.0
        while not await request.is_disconnected():
            now = await run_in_threadpool(count)
            if now != told:
                told = now
                data = json.dumps({"count": now, "new": now - shown})
                yield f"event: {event}\ndata: {data}\n\n"
                quiet = 0.0
            elif quiet >= HEARTBEAT_S:
                yield ": still here\n\n"
                quiet = 0.0
            await asyncio.sleep(EVENTS_POLL_S)
            quiet += EVENTS_POLL_S

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)


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
