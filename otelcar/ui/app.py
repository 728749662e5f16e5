"""The routes of the console (Starlette), rendered on the server with Jinja2.

Pages: ``/traces`` (the list: filters, sort, pages), ``/traces/{id}`` (one trace: its steps
timeline, every message, tool call and result, content flags and issues), ``/runs`` and
``/runs/{id}`` (start, watch, cancel and read runs), ``/results`` and ``/results/{id}`` (the
HTML report of a finished run, as ``otelcar report`` draws it); ``/api/runs/{id}`` is the
JSON a run's page polls. The pages that read traces are plain functions, which Starlette runs
on its thread pool: a long trace's page never holds up the list or another request. Long
pages are built one at a time (:data:`PAGE_BUILDS`), and the list is kept while the store is
unchanged (:mod:`otelcar.store.stamp`), so it answers in milliseconds while they are built.

The routes come in groups over one :class:`~otelcar.ui.console.Console`: the trace pages
here, the lists, triage and runs in :mod:`otelcar.ui.routes`.
Trace text is untrusted: every ``{{ value }}`` goes through the HTML report's own escaping
(:func:`otelcar.report.markup.esc`: HTML-escaped, control and invisible characters shown as
marked escapes), attribute values through :func:`otelcar.report.markup.attr`. Pages carry a
Content-Security-Policy that lets only the console's own inline script run. Forms that start
or cancel runs refuse requests from another origin (a web page the user has open cannot
start runs), and the app answers only to the host names it is given (no DNS rebinding).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from otelcar.errors import OtelcarError, TraceNotFound
from otelcar.pricing import cost_of
from otelcar.project_config import load_prices
from otelcar.replay import load_run
from otelcar.replay.divergence import diff_kept
from otelcar.replay.timelines import (
    TimelineError,
    TimelineNotFound,
    load_timeline,
    timelines_document,
)
from otelcar.report.html_diff import render_diff_html
from otelcar.sources import TraceSource
from otelcar.ui.console import Console
from otelcar.ui.routes.failures import FailurePages
from otelcar.ui.routes.lists import ListPages
from otelcar.ui.routes.runs import RunPages
from otelcar.ui.runs import RunError
from otelcar.ui.trace_page import step_page, trace_page
from otelcar.views import own_trace_summary, trace_view


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
    console = Console(
        open_source=open_source, runs_dir=runs_dir, config_path=config_path, store_root=store_root
    )
    lists, failures = ListPages(console), FailurePages(console)
    app = Starlette(
        routes=[
            *lists.routes(),
            *failures.routes(),
            *TracePages(console).routes(),
            *RunPages(console).routes(),
        ],
        middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))],
        exception_handlers=_error_pages(console),
    )
    app.state.runs = console.manager
    return app


def _error_pages(console: Console) -> dict[Any, Callable[..., Any]]:
    """The error page of each exception a route may raise."""

    async def not_found(request: Request, exc: Exception) -> Response:
        return console.page("error.html", 404, title="not found", message=str(exc))

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return console.page("error.html", exc.status_code, title="error", message=str(exc.detail))

    async def bad_timeline(request: Request, exc: Exception) -> Response:
        return console.page("error.html", 400, title="bad timeline", message=str(exc))

    async def library_error(request: Request, exc: Exception) -> Response:
        return console.page("error.html", 500, title="error", message=str(exc))

    return {
        TraceNotFound: not_found,
        RunError: not_found,
        TimelineNotFound: not_found,
        TimelineError: bad_timeline,
        HTTPException: http_error,
        OtelcarError: library_error,
    }


class TracePages:
    """The pages of one trace (:mod:`otelcar.ui.trace_page`), of one of its steps, of a kept
    live rollout's own trace, and where a kept timeline parts from the recorded run; the
    long ones are built one at a time (:meth:`Console.one_at_a_time`)."""

    def __init__(self, console: Console) -> None:
        self.c = console

    def routes(self) -> list[Route]:
        long = self.c.one_at_a_time
        rollout = "/traces/{trace_id}/timelines/{name}/rollouts/{rollout:int}"
        return [
            Route("/traces/{trace_id}", long(self.trace_html)),
            Route("/traces/{trace_id}/steps/{step:int}", long(self.step_html)),
            Route("/traces/{trace_id}/timelines/{name}", self.timeline_diff_html),
            Route(rollout, long(self.rollout_html)),
            Route(rollout + "/steps/{step:int}", long(self.step_html)),
        ]

    def trace_html(self, request: Request) -> Response:
        """One page of a trace (:mod:`otelcar.ui.trace_page`)."""
        c = self.c
        number = c.page_number(request)
        with c.open_source() as source:
            loaded = c.cache.load(source, request.path_params["trace_id"])
        full = loaded.trace_id
        runs = [r for r in c.manager.runs() if r.trace_id == full]
        kept = {} if c.store_root is None else timelines_document(c.store_root, full)
        sessions = loaded.steps["conversation_id"].drop_nulls()
        return c.page(
            "trace.html",
            title=f"trace {full}",
            trace=trace_view(loaded.summary),
            view=trace_page(loaded.steps, number),
            cost=cost_of(loaded.steps, load_prices(c.config_path)),
            session=sessions[0] if sessions.len() else None,
            runs=runs,
            timelines=kept.get("timelines", []),
            timeline_problems=kept.get("problems", []),
        )

    def own_trace(self, request: Request) -> tuple[str, str, int, Any]:
        """``(trace id, timeline, rollout, its own steps)`` of a kept live rollout."""
        store_root = self.c.store_root
        if store_root is None:
            raise HTTPException(404, "this console shows no timelines (no local store)")
        with self.c.open_source() as source:
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

    def rollout_html(self, request: Request) -> Response:
        """A kept live rollout's own trace (its agent's spans), shown as a trace is."""
        number = self.c.page_number(request)
        full, name, index, own = self.own_trace(request)
        return self.c.page(
            "trace.html",
            title=f"rollout {name}#{index} of {full}",
            trace=trace_view(own_trace_summary(own, f"{name}#{index}")),
            view=trace_page(own, number),
            runs=[],
            timelines=[],
            timeline_problems=[],
            rollout_of={"trace_id": full, "name": name, "rollout": index},
        )

    def step_html(self, request: Request) -> Response:
        """One step in full: its whole context and all of each text."""
        step = request.path_params["step"]
        if "name" in request.path_params:
            full, name, index, steps = self.own_trace(request)
            base = f"/traces/{full}/timelines/{name}/rollouts/{index}"
            label = f"rollout {name}#{index} of trace {full}"
        else:
            with self.c.open_source() as source:
                loaded = self.c.cache.load(source, request.path_params["trace_id"])
            full, steps = loaded.trace_id, loaded.steps
            base, label = f"/traces/{full}", f"trace {full}"
        view = step_page(steps, step)
        if view is None:
            raise HTTPException(404, f"{label} has no step {step}")
        return self.c.page(
            "step.html", title=f"step {step} of {label}", view=view, base=base, label=label
        )

    def timeline_diff_html(self, request: Request) -> Response:
        """Where a kept timeline (and ``?b=`` another, else the recorded run) part."""
        store_root = self.c.store_root
        if store_root is None:
            raise HTTPException(404, "this console shows no timelines (no local store)")
        full, steps = self.c.load(request.path_params["trace_id"])
        from otelcar.report.prose import document as result_document

        other = request.query_params.get("b") or None
        diff = diff_kept(store_root, load_run(full, steps), request.path_params["name"], other)
        document = result_document(diff)
        back = ("← the trace in the console", f"/traces/{full}")
        return HTMLResponse(render_diff_html(document, back=back))  # it carries its own CSP
