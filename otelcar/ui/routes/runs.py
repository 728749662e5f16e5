"""The console's runs: ``POST /traces/{trace_id}/runs`` starts one from the run form
(:mod:`otelcar.ui.forms`), ``/runs`` and ``/runs/{id}`` watch (``/api/runs/{id}`` is what a
run's page polls) and cancel them, ``/results`` and ``/results/{id}`` draw a finished run's
HTML report, as ``otelcar report`` does."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from otelcar.report import render_html
from otelcar.ui.console import Console
from otelcar.ui.forms import FormError, form_options
from otelcar.ui.runs import KINDS, RunError


class RunPages:
    """The routes of the runs over ``console``; the forms that start or cancel a run refuse
    a request from another site."""

    def __init__(self, console: Console) -> None:
        self.c = console
        self.manager = console.manager

    def routes(self) -> list[Route]:
        return [
            Route("/traces/{trace_id}/runs", self.start, methods=["POST"]),
            Route("/runs", self.runs),
            Route("/runs/{run_id}", self.run_page),
            Route("/runs/{run_id}/cancel", self.cancel, methods=["POST"]),
            Route("/api/runs/{run_id}", self.run_api),
            Route("/results", self.results),
            Route("/results/{run_id}", self.result),
        ]

    async def start(self, request: Request) -> Response:
        self.c.same_origin(request)
        form = await request.form()
        kind = str(form.get("kind", ""))
        try:
            options = form_options(kind, form) if kind in KINDS else {}
        except FormError as exc:
            return self.c.page("error.html", 400, title="bad run", message=str(exc))
        with self.c.open_source() as source:  # an unknown trace is a 404, never a kept run
            full = source.resolve(request.path_params["trace_id"])
        try:
            run = self.manager.start(kind, full, options)
        except RunError as exc:
            return self.c.page("error.html", 400, title="bad run", message=str(exc))
        return RedirectResponse(f"/runs/{run.id}", status_code=303)

    async def runs(self, request: Request) -> Response:
        return self.c.page("runs.html", title="runs", runs=self.manager.runs())

    async def run_page(self, request: Request) -> Response:
        run = self.manager.get(request.path_params["run_id"])
        return self.c.page("run.html", title=f"run {run.id}", run=run)

    async def run_api(self, request: Request) -> Response:
        data = self.manager.get(request.path_params["run_id"]).to_dict()
        data.pop("result")
        return JSONResponse(data)

    async def cancel(self, request: Request) -> Response:
        self.c.same_origin(request)
        run = self.manager.cancel(request.path_params["run_id"])
        return RedirectResponse(f"/runs/{run.id}", status_code=303)

    async def results(self, request: Request) -> Response:
        finished = [r for r in self.manager.runs() if r.status == "done" and r.result]
        return self.c.page("results.html", title="results", runs=finished)

    async def result(self, request: Request) -> Response:
        run = self.manager.get(request.path_params["run_id"])
        if run.status != "done" or not run.result:
            raise HTTPException(404, f"run {run.id} has no result ({run.status})")
        section = "attribution" if run.kind == "attribute" else run.kind
        report = render_html(
            **{section: run.result}, back=("← this run in the console", f"/runs/{run.id}")
        )
        return HTMLResponse(report)  # the report carries its own Content-Security-Policy
