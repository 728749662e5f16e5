"""The console's runs: ``attribute``, ``why`` or ``fix`` on one trace, started from a page,
run in a background thread, watched while they run, cancelled, and kept.

Each run gets a thread with an event loop of its own, running the analysis of
:mod:`otelcar.analyses` with a freshly loaded ``otelcar.toml`` (its policies and outcome),
under the executor ``[replay]`` names. Progress is read from live counters: rollouts (or
re-decisions) finished, from the callback the analysis calls, and policy calls and tokens,
from its :class:`~otelcar.replay.Budget`. Cancelling is cooperative: the budget refuses every
later policy call (:meth:`~otelcar.replay.Budget.cancel`), that callback raises
:class:`asyncio.CancelledError` once asked, and the run's task is cancelled (a policy call
already in flight finishes first).

Every run that ended — done, failed or cancelled — is written to ``<directory>/<id>.json``
(:meth:`Run.to_dict`; an attribution's result carries the report sections, so the HTML
report can be drawn from it) and listed from there, also after a restart.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from otelcar.analyses.project import Prepared, Project
from otelcar.analyses.requests import SAMES  # the same-decision rules the run form offers
from otelcar.errors import OtelcarError
from otelcar.kept_runs import (
    KINDS,
    RunNotFound,
    headline_of,
    kept_runs,
    new_run_id,
    read_run,
    save_run,
)

if TYPE_CHECKING:
    from otelcar.sources import TraceSource

ENDED = ("done", "failed", "cancelled")
__all__ = ["ENDED", "KINDS", "SAMES", "Run", "RunError", "RunManager"]


class RunError(OtelcarError):
    """A run that cannot be started, or one that is not there."""


@dataclass
class Run:
    """One run: what was asked (``kind``, ``trace_id``, ``options``), its state (``running``,
    then ``done``, ``failed`` or ``cancelled``), live progress, and at the end the result
    (the analysis' ``to_dict()``) or the error."""

    id: str
    kind: str
    trace_id: str
    options: dict[str, Any]
    status: str = "running"
    started: float = field(default_factory=time.time)
    finished: float | None = None
    done_units: int = 0  # rollouts (attribute) or re-decisions (why, fix) finished
    calls: int = 0
    tokens: int = 0
    error: str | None = None
    result: dict[str, Any] | None = None
    cancel_requested: bool = False

    @property
    def unit(self) -> str:
        return "rollouts" if self.kind == "attribute" else "re-decisions"

    @property
    def headline(self) -> str:
        """One line on how the run ended (or that it runs)."""
        return headline_of(self.kind, self.status, self.result, self.error)

    def to_dict(self) -> dict[str, Any]:
        """The run as JSON (what is written to ``<id>.json`` and what the page polls)."""
        return {
            "id": self.id,
            "kind": self.kind,
            "trace_id": self.trace_id,
            "options": self.options,
            "status": self.status,
            "started": self.started,
            "finished": self.finished,
            "progress": {"done": self.done_units, "unit": self.unit, "calls": self.calls},
            "cost": {"llm_calls": self.calls, "tokens": self.tokens},
            "headline": self.headline,
            "error": self.error,
            "result": self.result,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Run:
        return cls(
            id=data["id"],
            kind=data["kind"],
            trace_id=data["trace_id"],
            options=data.get("options") or {},
            status=data["status"],
            started=data["started"],
            finished=data.get("finished"),
            done_units=(data.get("progress") or {}).get("done", 0),
            calls=(data.get("cost") or {}).get("llm_calls", 0),
            tokens=(data.get("cost") or {}).get("tokens", 0),
            error=data.get("error"),
            result=data.get("result"),
        )


class RunManager:
    """Starts, watches, cancels and keeps runs. ``directory``: where ended runs are written
    (created on the first); ``open_source()``: where a run reads its trace, as the console's
    pages do (opened and closed per run); ``config_path``: the ``otelcar.toml`` each run
    loads when it starts (``None``: ./otelcar.toml when present); ``store_root``: the local
    store, whose kept live requests a run uses and a run's live check keeps
    (:mod:`otelcar.store.live_requests`; ``None``: none). A run is readied by
    :func:`otelcar.analyses.prepare`, as the CLI and the MCP server ready theirs."""

    def __init__(
        self,
        directory: Path,
        *,
        open_source: Callable[[], TraceSource],
        config_path: Path | None = None,
        store_root: Path | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.open_source = open_source
        self.project = Project(store_root, config_path)
        self._lock = threading.Lock()
        self._live: dict[str, Run] = {}
        self._tasks: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]]] = {}
        self._threads: dict[str, threading.Thread] = {}
        self._budgets: dict[str, Any] = {}  # the live runs' budgets (Budget.cancel stops them)

    # -- starting --------------------------------------------------------------------------
    def start(self, kind: str, trace_id: str, options: dict[str, Any] | None = None) -> Run:
        """Start ``kind`` on ``trace_id`` in the background and return the run at once.
        ``options``: the run's options as the run form names them
        (:func:`otelcar.ui.forms.form_options`: ``budget``, ``seed``, ``rollouts``, ``mode``,
        ``shapley``, ``no_refute`` of attribute; ``step``, ``samples``, ``same`` of why and
        fix, ``forward`` of fix). Raises :class:`RunError` for an unknown kind, or an option
        the analysis does not have or a value out of its bounds (:func:`~otelcar.ui.forms.
        request_of`); errors of the run itself (a missing trace, a config without an
        outcome) end it as ``failed`` with the message."""
        from otelcar.ui.forms import FormError, request_of

        if kind not in KINDS:
            raise RunError(f"unknown run kind {kind!r}; known: {', '.join(KINDS)}")
        given = {k: v for k, v in (options or {}).items() if v not in (None, "")}
        try:
            request_of(kind, given)
        except FormError as exc:
            raise RunError(str(exc)) from None
        run = Run(new_run_id(kind), kind, trace_id, given)
        with self._lock:
            self._live[run.id] = run
        thread = threading.Thread(target=self._work, args=(run,), name=f"otelcar-run-{run.id}")
        thread.daemon = True
        self._threads[run.id] = thread
        thread.start()
        return run

    def _work(self, run: Run) -> None:
        loop = asyncio.new_event_loop()
        try:
            asyncio.set_event_loop(loop)
            task = loop.create_task(self._analyse(run))
            with self._lock:
                self._tasks[run.id] = (loop, task)
                if run.cancel_requested:
                    task.cancel()
            run.result = loop.run_until_complete(task)
            run.status = "done"
        except asyncio.CancelledError:
            run.status = "cancelled"
        except Exception as exc:  # the run ends failed with its message; the server goes on
            run.status = "failed"
            run.error = (
                str(exc) if isinstance(exc, OtelcarError) else f"{type(exc).__name__}: {exc}"
            )
        finally:
            run.finished = time.time()
            with self._lock:
                self._tasks.pop(run.id, None)
                self._budgets.pop(run.id, None)
            loop.close()
            self._save(run)
            with self._lock:
                self._live.pop(run.id, None)

    def _prepare(self, trace_id: str, request: Any) -> Prepared:
        """:func:`otelcar.analyses.prepare` of ``trace_id``, read where the pages read."""
        from otelcar.analyses.project import prepare

        with self.open_source() as source:
            return prepare(self.project, trace_id, request, source=source)

    async def _analyse(self, run: Run) -> dict[str, Any]:
        from otelcar.analyses import run as analyse
        from otelcar.report.prose import document as result_document
        from otelcar.ui.forms import request_of

        request = request_of(run.kind, run.options)
        ready = await asyncio.to_thread(self._prepare, run.trace_id, request)
        run.trace_id = ready.run.trace_id
        recorded, config, steps, budget = ready.run, ready.config, ready.steps, ready.env.budget
        settings = config.replay
        with self._lock:
            self._budgets[run.id] = budget
            if run.cancel_requested:
                budget.cancel()

        def tick(_: Any) -> None:
            run.done_units += 1
            run.calls, run.tokens = budget.calls, budget.tokens
            if run.cancel_requested:  # before the task's own cancel is reached (see cancel)
                raise asyncio.CancelledError("cancelled from the console")

        with settings.executor_scope():
            if run.kind != "attribute":
                result = await analyse(
                    request, recorded, config, budget=budget, on_progress=tick, env=ready.env
                )
                document = result_document(result)
            else:
                from otelcar.report import RolloutSampler, with_report_sections

                sampler = RolloutSampler(then=tick)
                result = await analyse(
                    request, recorded, config, budget=budget, on_progress=sampler, env=ready.env
                )
                document = await asyncio.to_thread(  # the timeline of a long trace takes a while
                    with_report_sections, result_document(result), steps=steps, sampler=sampler
                )
        run.calls, run.tokens = budget.calls, budget.tokens
        return document

    # -- watching, cancelling ----------------------------------------------------------------
    def get(self, run_id: str) -> Run:
        """The run ``run_id``, live or kept; raises :class:`RunError` when there is none."""
        with self._lock:
            live = self._live.get(run_id)
        if live is not None:
            return live
        try:
            return Run.from_dict(read_run(self.directory, run_id))
        except RunNotFound:
            raise RunError(f"no run {run_id!r}") from None

    def cancel(self, run_id: str) -> Run:
        """Ask the run to stop, cooperatively: the next finished rollout (or re-decision)
        ends it, its budget refuses every later policy call (:meth:`Budget.cancel`: rollouts
        queued behind a synchronous policy end at their first call instead of each running),
        and its task is cancelled at its next await; a policy call in flight finishes.
        Cancelling a run that ended changes nothing."""
        run = self.get(run_id)
        with self._lock:
            if run.id in self._live:
                run.cancel_requested = True
                budget = self._budgets.get(run.id)
                if budget is not None:  # later policy calls are refused: queued rollouts end
                    budget.cancel()
                entry = self._tasks.get(run.id)
                if entry is not None:
                    loop, task = entry
                    loop.call_soon_threadsafe(task.cancel)
        return run

    def wait(self, run_id: str, timeout_s: float | None = None) -> Run:
        """Block until the run ended (or ``timeout_s`` passed) and return it."""
        thread = self._threads.get(run_id)
        if thread is not None:
            thread.join(timeout_s)
        return self.get(run_id)

    def runs(self) -> list[Run]:
        """Every run, the live ones first, then the kept ones, newest first."""
        with self._lock:
            live = list(self._live.values())
        ids = {r.id for r in live}
        kept = []
        for record in kept_runs(self.directory):
            if record.get("id") in ids:
                continue
            try:
                kept.append(Run.from_dict(record))
            except KeyError:
                continue  # a record that is not a whole run is not listed
        return sorted(live, key=lambda r: -r.started) + sorted(kept, key=lambda r: -r.started)

    def _save(self, run: Run) -> None:
        save_run(self.directory, run.to_dict())
