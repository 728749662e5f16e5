"""The triage loop: watch the store for traces that complete, judge each with ``[outcome]``,
queue the failing ones and analyse them within ``[triage]``'s limits.

It reads only the derived store (:meth:`Store.traces`, :meth:`Store.rooted`,
:meth:`Store.steps`) and writes only ``<store>/triage/``: it never takes the store's locks,
so intake and derivation never wait for it. One engine runs per store (``triage/engine.lock``,
an ``flock``; ``triage/engine.json`` names its pid). At start, ``running`` states left by a
stopped or killed engine are queued again.

Limits: nothing is spent until both call limits are set (queued traces wait with the reason
"no limits set"); an analysis starts only when the day's ledger has a whole per-trace limit
left (:mod:`otelcar.triage.ledger`) and fewer than ``concurrency`` analyses run; its budget is
the per-trace limit, shared by ``attribute`` and ``why``. A trace interrupted
:data:`MAX_ATTEMPTS` times is skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import time
import traceback
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import polars as pl

from otelcar.analyses import budget_for
from otelcar.config_checks import check_config_fits
from otelcar.errors import OtelcarError
from otelcar.outcome import recorded_verdict
from otelcar.replay import load_run
from otelcar.triage.analysis import analyse
from otelcar.triage.completion import CompletionWatcher
from otelcar.triage.export import ResultExporter
from otelcar.triage.files import write_json
from otelcar.triage.ledger import Ledger, today
from otelcar.triage.queue import TriageQueue, new_state, now_iso
from otelcar.triage.safety import refusal

if TYPE_CHECKING:
    from otelcar.project_config import ProjectConfig
    from otelcar.store import Store

#: Analyses of one trace started at most (each interrupted one counts).
MAX_ATTEMPTS = 3
NO_LIMITS = (
    "no limits set: triage spends nothing until [triage] max_calls_per_trace and "
    "max_calls_per_day are both set"
)
VERDICT_REASONS = {
    "pass": "the recorded run passes [outcome]",
    "judge": "[outcome] asks an LLM judge: triage judges recorded runs without policy calls",
    "agent": "[outcome] judges the agent's process, which a trace does not hold",
}


class TriageBusy(OtelcarError):
    """Another triage engine runs on this store."""


class TriageEngine:
    """Triage of the store ``store`` with ``config`` (its ``[outcome]`` is required; its
    ``[triage]`` gives the limits). ``log`` gets one line per event (no tracebacks unless
    ``debug``); ``poll_s``: seconds between looks at the store."""

    def __init__(
        self,
        store: Store,
        config: ProjectConfig,
        *,
        log: Callable[[str], None] = print,
        poll_s: float = 1.0,
        debug: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if config.outcome is None:
            raise OtelcarError("triage needs an [outcome] in otelcar.toml: what counts as failure")
        self.store = store
        self.config = config
        self.settings = config.triage
        self.queue = TriageQueue(store.root)
        self.ledger = Ledger(store.root)
        self.watcher = CompletionWatcher(self.settings.quiet_s, clock)
        self.log = log
        self.poll_s = poll_s
        self.debug = debug
        self.refusal = refusal(config)
        self.known: set[str] = set()
        self.waiting: list[str] = []  # queued trace ids, oldest first
        self._said: dict[str, str] = {}  # queued trace id -> the reason its state says
        self.running: dict[str, asyncio.Task[None]] = {}
        self._stop = asyncio.Event()
        self.exporter = ResultExporter(self.settings.export) if self.settings.export else None

    # -- the loop ----------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop after the current look: analyses in progress are cancelled and queued again."""
        self._stop.set()

    async def run(self, *, once: bool = False) -> None:
        """Triage until :meth:`stop` (or, with ``once``, until nothing is left to do: no trace
        waiting to complete, no analysis running, nothing queued that the limits let start).
        Raises :class:`TriageBusy` when another engine holds the store's triage lock."""
        self._stop = asyncio.Event()
        with self._locked():
            for trace_id in self.queue.resume():
                self.log(f"triage: {trace_id} was interrupted; queued again")
            states = self.queue.all()
            self.known = {s["trace_id"] for s in states}
            self.waiting = [s["trace_id"] for s in states if s["state"] == "queued"]
            if self.refusal:
                self.log(f"triage: failing traces will be skipped: {self.refusal}")
            elif not self.settings.limited:
                self.log(f"triage: {NO_LIMITS}")
            try:
                while not self._stop.is_set():
                    await self.look()
                    idle = not self.running and self.watcher.waiting == 0
                    if once and idle and not self._startable():
                        break
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stop.wait(), self.poll_s)
            finally:
                await self._cancel_running()
                if self.exporter is not None:
                    self.exporter.close()

    async def look(self) -> None:
        """One look: judge the traces complete now, then start what the limits allow."""
        try:
            await self.discover()
        except (OSError, pl.exceptions.PolarsError) as exc:  # a store being rewritten
            self.log(f"triage: could not read the store this time: {exc}")
        self.schedule()

    # -- completion and verdict ------------------------------------------------------------
    async def discover(self) -> None:
        """Judge every trace that completed since the last look (module docstring)."""
        index = self.store.traces()
        if self.settings.services is not None:
            index = index.filter(pl.col("service").is_in(list(self.settings.services)))
        fresh = index.filter(~pl.col("trace_id").is_in(list(self.known)))
        if fresh.is_empty():
            return
        spans = dict(zip(fresh["trace_id"], fresh["n_spans"], strict=True))
        services = dict(zip(fresh["trace_id"], fresh["service"], strict=True))
        for trace_id, how in self.watcher.complete(spans, self.store.rooted(spans)):
            try:
                await self.judge(trace_id, services.get(trace_id), how)
            except Exception as exc:  # one trace never stops triage
                if self.debug:
                    self.log(traceback.format_exc())
                reason = f"could not be judged: {exc}"
                state = new_state(trace_id, services.get(trace_id), state="skipped", reason=reason)
                self.queue.put(state)
                self.known.add(trace_id)
                self.log(f"triage: {trace_id} skipped: {reason}")

    async def judge(self, trace_id: str, service: str | None, how: str) -> None:
        """Judge the complete trace ``trace_id`` with ``[outcome]`` on its recorded run and
        write its first state: queued (fail), passed, or skipped (with the reason)."""
        assert self.config.outcome is not None
        steps = self.store.steps(trace_id)
        verdict, problem = await recorded_verdict(self.config.outcome, steps)
        state = new_state(trace_id, service, verdict=verdict, complete=how)
        if verdict == "fail":
            state.update(state="queued", queued_at=now_iso())
            self.waiting.append(trace_id)
        elif verdict == "pass":
            state.update(state="passed", reason=VERDICT_REASONS["pass"])
        else:
            reason = VERDICT_REASONS.get(verdict) or f"[outcome] could not judge it: {problem}"
            state.update(state="skipped", reason=reason)
        self.queue.put(state)
        self.known.add(trace_id)
        self.log(f"triage: {trace_id} complete ({how}), {verdict}: {state['state']}")

    # -- limits and scheduling -------------------------------------------------------------
    def _startable(self) -> bool:
        """Whether a queued trace could start now (the loop of ``once`` ends otherwise)."""
        if not self.waiting:
            return False
        if self.refusal is not None:
            return True  # it will be skipped, which is progress
        return self.settings.limited and self._left_today() >= self._per_trace()

    def _per_trace(self) -> int:
        return self.settings.max_calls_per_trace or 0

    def _left_today(self) -> int:
        return (self.settings.max_calls_per_day or 0) - self.ledger.spent()

    def schedule(self) -> None:
        """Start queued analyses, oldest first, while the limits allow (module docstring)."""
        while self.waiting and len(self.running) < self.settings.concurrency:
            trace_id = self.waiting[0]
            state = self.queue.get(trace_id)
            if state is None or state["state"] != "queued":
                self.waiting.pop(0)  # its file was removed or changed by hand
                continue
            if self.refusal is not None:
                self.waiting.pop(0)
                self._finish(state, "skipped", self.refusal)
                continue
            if not self.settings.limited:
                self._wait(NO_LIMITS)
                return
            left = self._left_today()
            if left < self._per_trace():
                self._wait(
                    f"daily limit: {max(left, 0)} of {self.settings.max_calls_per_day} calls left "
                    f"today (UTC), an analysis may need {self._per_trace()}; waits for tomorrow",
                )
                return
            self.waiting.pop(0)
            if state["attempts"] >= MAX_ATTEMPTS:
                self._finish(state, "skipped", f"interrupted {state['attempts']} times")
                continue
            try:
                steps = self.store.steps(trace_id)
                run = load_run(trace_id, steps, self.config.agent)
                check_config_fits(run, self.config)
            except Exception as exc:  # a config mismatch, a trace the store cannot read
                self._finish(state, "skipped", f"cannot be replayed with this config: {exc}")
                continue
            day = today()
            self.ledger.add(self._per_trace(), day)  # reserved; settled when it ends
            state.update(
                state="running", reason=None, started_at=now_iso(), attempts=state["attempts"] + 1
            )
            self.queue.put(state)
            self.log(f"triage: {trace_id} attributing (at most {self._per_trace()} calls)")
            task = asyncio.get_running_loop().create_task(self._analyse(state, run, day))
            self.running[trace_id] = task

    def _wait(self, reason: str) -> None:
        """Keep every queued trace queued, each state saying why (written when its reason
        changes; one log line per new reason)."""
        changed = 0
        for trace_id in self.waiting:
            if self._said.get(trace_id) == reason:
                continue
            state = self.queue.get(trace_id)
            if state is not None and state["state"] == "queued" and state["reason"] != reason:
                state["reason"] = reason
                self.queue.put(state)
                changed += 1
            self._said[trace_id] = reason
        if changed:
            self.log(f"triage: {changed} queued trace(s) wait: {reason}")

    def _finish(self, state: dict[str, Any], to: str, reason: str | None, **fields: Any) -> None:
        state.update(fields)
        state.update(state=to, reason=reason, finished_at=now_iso())
        self.queue.put(state)
        said = f": {reason}" if reason else ""
        if to == "done" and not reason:
            culprit = state.get("culprit")
            said = f": culprit step {culprit['step']} ({culprit['name']})" if culprit else ""
            said = said or f": {state.get('headline') or 'no culprit'}"
        self.log(f"triage: {state['trace_id']} {to}{said} ({state['calls']} calls)")
        if self.exporter is not None:
            self._export(state)

    def _export(self, state: dict[str, Any]) -> None:
        """The result as a span to ``[triage] export`` (:mod:`otelcar.triage.export`), linked
        to the trace's root span; a failure costs a log line, never the result."""
        assert self.exporter is not None
        try:
            roots = self.store.spans(state["trace_id"]).filter(
                pl.col("parent_span_id").is_null() | (pl.col("parent_span_id") == "")
            )
            root = roots["span_id"][0] if roots.height else None
            self.exporter.emit(state, root)
        except Exception as exc:  # the backend's trouble is not the result's
            self.log(f"triage: could not export {state['trace_id']}'s result: {exc}")

    async def _analyse(self, state: dict[str, Any], run: Any, day: str) -> None:
        """Run one trace's analyses and write its outcome; settle the ledger's reservation."""
        trace_id = state["trace_id"]
        budget = budget_for(self.config.replay, self._per_trace())
        try:
            fields = await analyse(run, self.config, budget, why=self.settings.why)
        except asyncio.CancelledError:
            self._spent(state, budget, day)
            state.update(state="queued", reason="stopped mid-analysis; queued again")
            state["started_at"] = None
            self.queue.put(state)
            self.waiting.insert(0, trace_id)
            raise
        except OtelcarError as exc:
            self._spent(state, budget, day)
            self._finish(state, "skipped", f"attribution failed: {exc}")
        except Exception as exc:  # one trace's analysis never stops triage
            self._spent(state, budget, day)
            if self.debug:
                self.log(traceback.format_exc())
            self._finish(state, "skipped", f"attribution failed ({type(exc).__name__}: {exc})")
        else:
            self._spent(state, budget, day)
            reason = fields.pop("reason")
            self._finish(state, "done", reason, **fields)
        finally:
            self.running.pop(trace_id, None)

    def _spent(self, state: dict[str, Any], budget: Any, day: str) -> None:
        """Count what ``budget`` spent into ``state`` and settle the day's reservation."""
        state["calls"] += budget.calls
        state["tokens"] += budget.tokens
        self.ledger.add(budget.calls - self._per_trace(), day)

    async def _cancel_running(self) -> None:
        tasks = list(self.running.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # -- one engine per store --------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.queue.root.mkdir(parents=True, exist_ok=True)
        handle = open(self.queue.root / "engine.lock", "a+")  # noqa: SIM115 (held throughout)
        try:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise TriageBusy(
                    f"another triage engine runs on {self.store.root} "
                    "(otelcar triage status names it)"
                ) from None
            write_json(self.queue.root / "engine.json", {"pid": os.getpid(), "since": now_iso()})
            yield
        finally:
            handle.close()
