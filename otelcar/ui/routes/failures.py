"""The console's view of triage (``otelcar collect --triage``): ``/failures`` (each triaged
trace with its state, culprit step and cause sentence) with its live-updates stream, and
``/failures/{trace_id}`` (the HTML report of one trace's attribution)."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from otelcar.report import render_html
from otelcar.triage.queue import STATES
from otelcar.triage.summaries import FINISHED
from otelcar.ui.console import Console, count_events


class FailurePages:
    """The routes of triage's results over ``console`` (404 without a local store)."""

    def __init__(self, console: Console) -> None:
        self.c = console

    def routes(self) -> list[Route]:
        return [
            Route("/failures", self.failures_html),
            Route("/failures/{trace_id}", self.failure_report),
            Route("/api/failures/events", self.failure_events),
        ]

    def result_count(self) -> int:
        return 0 if self.c.triaged is None else self.c.triaged.finished()

    def failures_html(self, request: Request) -> Response:
        """What triage found (``otelcar collect --triage``): each triaged trace with its
        state, culprit step and cause sentence, most recent first; ``?state=`` one state."""
        triaged = self.c.triaged
        if triaged is None:
            raise HTTPException(404, "this console shows no triage (no local store)")
        wanted = request.query_params.get("state") or None
        every = triaged.all()
        if wanted is not None and wanted not in STATES:
            raise HTTPException(400, f"state: one of {', '.join(STATES)}")
        shown = [f for f in every if (f.state == wanted if wanted else f.state != "passed")]
        return self.c.page(
            "failures.html",
            title="failures",
            failures=shown,
            counts=triaged.counts(every),
            state=wanted,
            finished=sum(1 for f in every if f.state in FINISHED),
        )

    def failure_report(self, request: Request) -> Response:
        """The HTML report of one triaged trace's attribution (and why)."""
        triaged = self.c.triaged
        state = triaged.state(request.path_params["trace_id"]) if triaged is not None else None
        if state is None or not state.get("attribution"):
            raise HTTPException(404, "no triage result for this trace")
        report = render_html(
            attribution=state["attribution"],
            why=state.get("why") or None,
            back=("← the failures in the console", "/failures"),
        )
        return HTMLResponse(report)  # the report carries its own Content-Security-Policy

    async def failure_events(self, request: Request) -> Response:
        return count_events(request, "results", self.result_count)
