"""What every route group of the console shares (:class:`Console`): where traces are read,
the run manager, the templates, and how a page is answered — with the console's
Content-Security-Policy (only its own inline script runs), refusing forms from another
origin, long pages built one at a time (:data:`PAGE_BUILDS`) — and the live-updates stream
(:func:`count_events`)."""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import json
import threading
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader
from markupsafe import Markup
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse

from otelcar import __version__
from otelcar.project_config import DEFAULT_CONFIG
from otelcar.report.markup import attr, esc
from otelcar.sources import TraceSource
from otelcar.triage.summaries import FailureIndex
from otelcar.ui.forms import form_fields
from otelcar.ui.runs import KINDS, RunManager
from otelcar.ui.trace_cache import TraceCache

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


class Console:
    """The console's state, for its route groups: ``open_source()`` opens where traces are
    read (per request), ``config_path`` the ``otelcar.toml`` runs and the outcome column
    read (``config_file``: the file whose changes redraw the list), ``store_root`` the local
    store (kept timelines, triage; ``None``: none), ``manager`` the runs kept in
    ``runs_dir``, ``cache`` the trace pages' loaded traces."""

    def __init__(
        self,
        *,
        open_source: Callable[[], TraceSource],
        runs_dir: Path,
        config_path: Path | None,
        store_root: Path | None,
    ) -> None:
        self.env = _environment()
        self.open_source = open_source
        self.config_path = config_path
        self.config_file = config_path if config_path is not None else Path(DEFAULT_CONFIG)
        self.store_root = store_root
        self.cache = TraceCache()
        self.triaged = FailureIndex(store_root) if store_root is not None else None
        self.manager = RunManager(
            runs_dir, open_source=open_source, config_path=config_path, store_root=store_root
        )
        self._building = threading.BoundedSemaphore(PAGE_BUILDS)

    def load(self, trace_id: str) -> tuple[str, Any]:
        """``(full trace id, steps)`` of ``trace_id`` (an id or a unique prefix)."""
        from otelcar.analyses.project import load_trace

        with self.open_source() as source:
            loaded = load_trace(source, trace_id)
        return loaded.trace_id, loaded.steps

    def page(self, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        """The template ``name`` rendered with ``context`` (:meth:`respond`)."""
        return self.respond(self.env.get_template(name).render(**context), status_code)

    @staticmethod
    def respond(html: str, status_code: int = 200) -> HTMLResponse:
        """``html`` with the console's security headers."""
        response = HTMLResponse(html, status_code=status_code)
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "same-origin"  # no-referrer makes Origin "null"
        return response

    @staticmethod
    def same_origin(request: Request) -> None:
        """Refuse (403) a request sent from another site (a form that starts or cancels)."""
        origin = request.headers.get("origin")
        host = request.headers.get("host", "")
        if request.headers.get("sec-fetch-site") == "cross-site" or (
            origin is not None and origin not in (f"http://{host}", f"https://{host}")
        ):
            raise HTTPException(403, "refused: the request came from another site")

    def one_at_a_time(self, build: Callable[[Request], Response]) -> Callable[[Request], Response]:
        """``build`` (a long page's route, run on the thread pool) while at most
        :data:`PAGE_BUILDS` long pages are built."""

        @functools.wraps(build)
        def endpoint(request: Request) -> Response:
            with self._building:
                return build(request)

        return endpoint

    @staticmethod
    def page_number(request: Request) -> int:
        """``?page=`` (from 1; 400 for anything else)."""
        value = request.query_params.get("page", "1")
        if not value.isdigit() or int(value) < 1:
            raise HTTPException(400, f"page: a number from 1, not {value!r}")
        return int(value)


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
