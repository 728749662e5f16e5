"""Replay-harness overhead benchmark: framework cost per rollout, by trace length and payload.

For each case (``n`` decision steps, tool results of ``payload`` characters) the script
generates one synthetic agent trace the way the OTel GenAI instrumentation records it, builds
its steps table (:func:`otelcar.trajectory.build_trace`), and measures in the same run:

1. ``load_run``: the steps table to a :class:`~otelcar.replay.RecordedRun` (once per trace);
2. the baseline: one copy of the trace, ``steps_df.to_dicts()`` (every row and every string
   of the steps table materialized as new Python objects; ``DataFrame.clone()`` alone is an
   O(1) reference-count bump of the Arrow buffers and would measure nothing);
3. per rollout, with a zero-latency scripted policy and ``--rollouts`` rollouts per plan:

   * **factual**: ``Plan()``, every decision held, no policy call;
   * **resample-last**: ``Plan((Resample(last step),))``, one policy call;
   * **resample-half**: ``Plan.resample_from(middle step, …)``, the last ``n - n // 2``
     decisions re-decided by the policy.

   The policy returns the recorded action with a fresh tool-call id (providers mint new ids),
   so every rollout stays on the recorded timeline and replays all ``n`` decisions; its own
   cost is one dict look-up. The tool calls are served by the cassette.

The rollouts run through :func:`otelcar.replay.run_plan_async` inside a coroutine that keeps
the :class:`~otelcar.replay.RolloutSet` out of ``asyncio.run``'s task result ("engine"
columns). On interpreters with python/cpython#112559 (3.11.7 here; ``signal.getsignal``
formats the SIGINT handler, a ``partial`` holding the main task) ``asyncio.run`` builds
``repr()`` of a task result twice: for a set of rollouts, every context of every rollout, as
text. The public synchronous :func:`otelcar.replay.run_plan` keeps its result out of the task
too (:func:`otelcar.sync.run_sync`), and the factual plan is also timed through it ("run_plan"
column, best of ``--repeat`` like the engine). The script says whether this interpreter has the
issue and whether ``run_plan`` still meets it; where it does, the column runs only as many
rollouts as fit ``--repr-cap-mb`` of estimated ``repr`` text.

Every rollout is checked (status ``final``, ``n`` decisions, the expected policy calls and
cassette hits); a mismatch fails the run. Timings are printed, never asserted.

Run ``python benchmarks/replay_overhead.py`` (the full grid, about 6 minutes on 2 cores) or
``--quick`` (seconds). See ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import importlib.metadata
import io
import itertools
import json
import math
import os
import platform
import pstats
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import polars as pl

from otelcar import STEPS_SCHEMA
from otelcar.ingest.frames import SpanFrame
from otelcar.messages import Message, ToolCall
from otelcar.policies import CallableLLMPolicy, DecisionRequest, PolicyRegistry
from otelcar.replay import (
    Environment,
    Plan,
    RecordedRun,
    Resample,
    RolloutSet,
    load_run,
    run_plan,
    run_plan_async,
)
from otelcar.sync import run_sync
from otelcar.trajectory import build_trace

T = TypeVar("T")

DEFAULT_SIZES = "10:1k,100:1k,1000:1k,10:100k,100:100k"
QUICK_SIZES = "10:1k,100:1k,10:100k"
KIB = 1024
TRACE_ID = "5b8aa5a2d2c872e8321cf37308d69df2"
MS = 1_000_000  # nanoseconds per millisecond
PROFILE_LOAD_LIMIT_S = 60.0  # load_run is profiled on the largest case at most this slow
BUSY_RATIO = 1.15  # wall/CPU above this: other load on the machine
REPR_OVERHEAD = 1.4  # repr text per character of context content (1.07 to 1.36 measured)
MODEL = "gpt-4o-mini"
SYSTEM_PROMPT = (
    "You are a research agent. Answer the user's question using the search tool. Call one "
    "tool at a time, read each result carefully, and stop when you can answer with sources."
)
USER_PROMPT = "Which of the retrieved documents mention a late delivery refund?"
_WORDS_TEXT = (
    "order refund policy customer account invoice shipment delivery warehouse tracking "
    "status pending approved rejected escalate ticket priority billing address payment "
    "card balance credit debit transaction receipt product category electronics apparel "
    "furniture damaged missing late replacement exchange return label carrier window days "
    "within after before eligible not the a of to and for with on in is was has been will"
)
WORDS = tuple(_WORDS_TEXT.split())
TOOL_DEFINITIONS_NOTE = (
    "chat spans carry no gen_ai.tool.definitions (as the OpenAI v2 instrumentation records "
    "them), so each re-decision asks RecordedRun.tool_definitions() for inferred ones"
)


# -- cases and synthetic traces -------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """One trace shape: ``steps`` decisions, tool results of ``payload`` characters."""

    steps: int
    payload: int

    @property
    def payload_label(self) -> str:
        if self.payload % KIB == 0:
            return f"{self.payload // KIB} KB"
        return f"{self.payload} B"


def parse_sizes(text: str) -> list[Case]:
    """``"10:1k,100:100k"`` → cases; payloads in characters, ``k`` = 1024."""
    cases = []
    for item in text.split(","):
        steps, sep, payload = item.strip().partition(":")
        if not sep:
            raise ValueError(f"{item!r} is not STEPS:PAYLOAD (e.g. 100:1k)")
        factor = KIB if payload.lower().endswith("k") else 1
        size = int(payload.lower().removesuffix("k")) * factor
        if int(steps) < 2 or size < 64:
            raise ValueError(f"{item!r}: at least 2 steps and a 64-character payload")
        cases.append(Case(int(steps), size))
    return cases


def payload_text(rng: random.Random, step: int, size: int) -> str:
    """A tool result of exactly ``size`` characters: a JSON object of search-result text."""
    head = f'{{"step": {step}, "source": "kb://docs/{rng.randrange(10**6):06d}", "text": "'
    tail = '"}'
    room = size - len(head) - len(tail)
    words: list[str] = []
    length = 0
    while length < room:
        word = rng.choice(WORDS)
        words.append(word)
        length += len(word) + 1
    return head + " ".join(words)[:room] + tail


def _text(role: str, content: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": content}]}


def _call(call_id: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "parts": [{"type": "tool_call", "id": call_id, "name": "search", "arguments": arguments}],
    }


def _response(call_id: str, result: str) -> dict[str, Any]:
    return {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": call_id, "response": result}],
    }


def _span(span_id: int, name: str, kind: str, start: int, end: int, **attrs: Any) -> SpanFrame:
    return SpanFrame(
        trace_id=TRACE_ID,
        span_id=f"{span_id:016x}",
        parent_span_id=None if span_id == 1 else f"{1:016x}",
        name=name,
        kind=kind,
        start_ns=start,
        end_ns=end,
        attributes=attrs,
        resource={"service.name": "research-agent"},
        seq=span_id,
    )


def synth_spans(case: Case, seed: int) -> list[SpanFrame]:
    """One agent run: an ``invoke_agent`` root; ``n`` chat spans, each carrying the whole
    conversation so far in ``gen_ai.input.messages`` (the GenAI conventions); the first
    ``n - 1`` call the ``search`` tool once (an ``execute_tool`` span whose result has
    ``payload`` characters), the last answers."""
    rng = random.Random(f"{seed}:{case.steps}:{case.payload}")
    context: list[dict[str, Any]] = [_text("system", SYSTEM_PROMPT), _text("user", USER_PROMPT)]
    spans: list[SpanFrame] = []
    clock = 0
    for i in range(case.steps):
        final = i == case.steps - 1
        if final:
            output = _text("assistant", f"Documents 3 and {i} mention a late delivery refund.")
        else:
            call_id = f"call_{i:05d}_{rng.randrange(16**8):08x}"
            arguments = {"query": " ".join(rng.choices(WORDS, k=4)), "page": i}
            output = _call(call_id, arguments)
        input_text = json.dumps(context, ensure_ascii=False)
        output_text = json.dumps([output], ensure_ascii=False)
        spans.append(
            _span(
                2 * i + 2,
                f"chat {MODEL}",
                "CLIENT",
                clock,
                clock + 700 * MS,
                **{
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": "openai",
                    "gen_ai.request.model": MODEL,
                    "gen_ai.request.temperature": 0.2,
                    "gen_ai.request.max_tokens": 1024,
                    "gen_ai.response.model": f"{MODEL}-2024-07-18",
                    "gen_ai.response.id": f"chatcmpl-{i:06d}",
                    "gen_ai.response.finish_reasons": ["stop" if final else "tool_calls"],
                    "gen_ai.usage.input_tokens": len(input_text) // 4,
                    "gen_ai.usage.output_tokens": len(output_text) // 4,
                    "gen_ai.input.messages": input_text,
                    "gen_ai.output.messages": output_text,
                },
            )
        )
        clock += 701 * MS
        if final:
            break
        result = payload_text(rng, i, case.payload)
        spans.append(
            _span(
                2 * i + 3,
                "execute_tool search",
                "INTERNAL",
                clock,
                clock + 50 * MS,
                **{
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "search",
                    "gen_ai.tool.type": "function",
                    "gen_ai.tool.call.id": call_id,
                    "gen_ai.tool.call.arguments": json.dumps(arguments),
                    "gen_ai.tool.call.result": result,
                },
            )
        )
        clock += 51 * MS
        context = [*context, output, _response(call_id, result)]
    root = _span(
        1,
        "invoke_agent research",
        "INTERNAL",
        0,
        clock,
        **{
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "research",
            "gen_ai.provider.name": "openai",
        },
    )
    return [root, *spans]


def steps_table(case: Case, seed: int) -> pl.DataFrame:
    """The trace's steps table, as the store would hold it."""
    build = build_trace(TRACE_ID, synth_spans(case, seed))
    return pl.DataFrame(build.steps, schema=STEPS_SCHEMA)


# -- the scripted policy ------------------------------------------------------------------------
class RecordedLikePolicy:
    """Zero-latency scripted policy: the recorded action of the step, with fresh call ids."""

    def __init__(self, run: RecordedRun) -> None:
        self.actions = {d.step: d.action for d in run.decisions if d.action is not None}

    def __call__(self, request: DecisionRequest) -> Message:
        action = self.actions[request.step]  # type: ignore[index]
        calls = tuple(
            ToolCall(c.name, c.arguments, f"call_r{request.seed:x}_{k}")
            for k, c in enumerate(action.tool_calls)
        )
        return Message(action.role, action.content, calls)


# -- timing helpers -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Timing:
    """Wall and CPU seconds of one timed call."""

    wall_s: float
    cpu_s: float

    def seconds(self, clock: str) -> float:
        """Wall or CPU seconds (``clock``: ``wall`` | ``cpu``)."""
        return self.cpu_s if clock == "cpu" else self.wall_s

    def per(self, count: int) -> Timing:
        return Timing(self.wall_s / count, self.cpu_s / count)


def timed(function: Callable[[], T]) -> tuple[Timing, T]:
    """Run ``function`` once; its wall and CPU time and its result."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = function()
    return Timing(time.perf_counter() - wall, time.process_time() - cpu), result


def best_of(
    function: Callable[[], T], repeat: int, clock: str, *, enough_s: float = 2.0
) -> tuple[Timing, T]:
    """The fastest (by ``clock``) of up to ``repeat`` calls; one call when it takes over
    ``enough_s`` seconds of wall time."""
    best, result = timed(function)
    for _ in range(repeat - 1):
        if best.wall_s > enough_s:
            break
        again, result = timed(function)
        if again.seconds(clock) < best.seconds(clock):
            best = again
    return best, result


def _environment(run: RecordedRun) -> Environment:
    """A fresh environment (empty request cache) with the scripted policy as ``llm``."""
    policy = CallableLLMPolicy(RecordedLikePolicy(run), name="scripted")
    return Environment(PolicyRegistry().register("llm", policy))


def engine_rollouts(run: RecordedRun, plan: Plan, rollouts: int, seed: int) -> RolloutSet:
    """``rollouts`` rollouts through ``run_plan_async``; the set is kept out of the
    ``asyncio.run`` task result (see the module docstring)."""
    box: list[RolloutSet] = []

    async def main() -> None:
        box.append(await run_plan_async(run, plan, _environment(run), rollouts=rollouts, seed=seed))

    asyncio.run(main())
    return box[0]


def public_rollouts(run: RecordedRun, plan: Plan, rollouts: int, seed: int) -> RolloutSet:
    """``rollouts`` rollouts through the public synchronous ``run_plan``."""
    return run_plan(run, plan, _environment(run), rollouts=rollouts, seed=seed)


def asyncio_run_reprs_result(runner: Callable[[Any], Any] = asyncio.run) -> bool:
    """Whether ``runner`` (``asyncio.run``; or :func:`otelcar.sync.run_sync`, which
    ``run_plan`` uses) calls ``repr()`` on the coroutine's result (cpython#112559)."""
    called: list[bool] = []

    class Probe:
        def __repr__(self) -> str:
            called.append(True)
            return "<probe>"

    async def main() -> Probe:
        return Probe()

    runner(main())
    return bool(called)


def default_sigint() -> bool:
    """Give SIGINT Python's default handler when it is ignored; ``True`` when it was.

    A shell starts background jobs with SIGINT ignored, and ``asyncio.run`` installs its own
    SIGINT handler (the cause of cpython#112559) only over the default one; restoring it makes
    a background run measure what a run from a terminal measures."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        return True
    return False


def check(result: RolloutSet, run: RecordedRun, redecided: int, label: str) -> None:
    """Every rollout ends ``final`` after all decisions, with the expected policy calls."""
    n = run.horizon
    tool_calls = sum(len(d.observations) for d in run.decisions)
    for rollout in result.rollouts:
        if rollout.status != "final" or len(rollout.decisions) != n:
            raise BenchmarkError(
                f"{label}: rollout {rollout.index} ended {rollout.status} after "
                f"{len(rollout.decisions)} of {n} decisions ({rollout.error})"
            )
    rollouts = len(result.rollouts)
    want = {
        "llm_calls": redecided * rollouts,
        "cache_hits": 0,
        "tool_calls": 0,
        "cassette_hits": tool_calls * rollouts,
    }
    got = {key: result.cost[key] for key in want}
    if got != want:
        raise BenchmarkError(f"{label}: expected {want}, got {got}")


class BenchmarkError(Exception):
    """A generated trace or a rollout is not what the benchmark expects."""


# -- one case -----------------------------------------------------------------------------------
PLANS = ("factual", "resample-last", "resample-half")


@dataclass
class CaseResult:
    """Everything measured for one case."""

    case: Case
    rows: int
    table_mb: float
    context_mb: float
    build_s: float
    load: Timing
    copy: Timing
    engine: dict[str, Timing]  # per rollout
    rollouts: int
    public: Timing  # factual through run_plan, per rollout
    public_rollouts: int

    def per_step_us(self, plan: str, clock: str) -> float:
        return self.engine[plan].seconds(clock) / self.case.steps * 1e6

    def vs_copy(self, plan: str, clock: str) -> float:
        return self.engine[plan].seconds(clock) / self.copy.seconds(clock)

    def timings(self) -> list[tuple[str, Timing]]:
        return [
            ("load_run", self.load),
            ("copy", self.copy),
            *((plan, self.engine[plan]) for plan in PLANS),
            ("run_plan", self.public),
        ]


def plans_for(run: RecordedRun) -> dict[str, tuple[Plan, int]]:
    """The three plans and how many decisions each re-decides."""
    steps = [d.step for d in run.decisions]
    middle = len(steps) // 2
    return {
        "factual": (Plan(), 0),
        "resample-last": (Plan((Resample(steps[-1]),)), 1),
        "resample-half": (Plan.resample_from(steps[middle], steps), len(steps) - middle),
    }


def context_chars(run: RecordedRun) -> int:
    """Characters of message content in all recorded contexts (what a factual rollout's
    contexts hold, by reference)."""
    return sum(len(m.content or "") for d in run.decisions for m in d.context or ())


def measure(case: Case, args: argparse.Namespace) -> tuple[CaseResult, RecordedRun]:
    """Generate the case's trace and take every measurement of it."""
    label = f"n={case.steps}, {case.payload_label}"
    build, steps_df = timed(lambda: steps_table(case, args.seed))
    _progress(f"{label}: steps table {steps_df.height} rows in {build.wall_s:.1f} s; load_run …")
    load, run = timed(lambda: load_run(TRACE_ID, steps_df))
    if run.horizon != case.steps:
        raise BenchmarkError(f"{label}: load_run found {run.horizon} decisions")
    copy, _ = best_of(steps_df.to_dicts, args.repeat, args.clock)
    _progress(f"{label}: load_run {load.wall_s:.2f} s; rollouts …")
    engine: dict[str, Timing] = {}
    for name, (plan, redecided) in plans_for(run).items():
        timing, result = best_of(
            lambda plan=plan: engine_rollouts(run, plan, args.rollouts, args.seed),
            args.repeat,
            args.clock,
        )
        check(result, run, redecided, f"{label}, {name}")
        engine[name] = timing.per(args.rollouts)
        del result
        gc.collect()
    chars = context_chars(run)
    k = args.rollouts
    if args.run_plan_reprs:
        k = max(1, min(k, int(args.repr_cap_mb * 1e6 / (REPR_OVERHEAD * max(chars, 1)))))
    _progress(f"{label}: run_plan (factual, {k} rollouts) …")
    timing, result = best_of(
        lambda: public_rollouts(run, Plan(), k, args.seed), args.repeat, args.clock
    )
    check(result, run, 0, f"{label}, run_plan factual")
    del result
    gc.collect()
    outcome = CaseResult(
        case=case,
        rows=steps_df.height,
        table_mb=steps_df.estimated_size() / 1e6,
        context_mb=chars / 1e6,
        build_s=build.wall_s,
        load=load,
        copy=copy,
        engine=engine,
        rollouts=args.rollouts,
        public=timing.per(k),
        public_rollouts=k,
    )
    return outcome, run


# -- report -------------------------------------------------------------------------------------
def _row(cells: Sequence[object]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _ms(timing: Timing, clock: str) -> str:
    ms = timing.seconds(clock) * 1e3
    return f"{ms:,.3f}" if ms < 1 else f"{ms:,.2f}" if ms < 100 else f"{ms:,.0f}"


def table(results: list[CaseResult], clock: str) -> str:
    """Milliseconds (``clock`` time) per rollout (engine), the baseline, and the ratios."""
    header = (
        "n",
        "payload",
        "steps rows",
        "context MB",
        "load_run ms",
        "copy ms",
        "factual ms/rollout",
        "resample-last ms/rollout",
        "resample-half ms/rollout",
        "µs/step factual",
        "µs/step last",
        "µs/step half",
        "× copy factual",
        "× copy last",
        "× copy half",
        "run_plan factual ms/rollout (rollouts)",
    )
    lines = [_row(header), _row(["---"] * len(header))]
    for r in results:
        lines.append(
            _row(
                (
                    r.case.steps,
                    r.case.payload_label,
                    r.rows,
                    f"{r.context_mb:,.1f}",
                    _ms(r.load, clock),
                    _ms(r.copy, clock),
                    *(_ms(r.engine[p], clock) for p in PLANS),
                    *(f"{r.per_step_us(p, clock):,.1f}" for p in PLANS),
                    *(f"{r.vs_copy(p, clock):.3g}" for p in PLANS),
                    f"{_ms(r.public, clock)} ({r.public_rollouts})",
                )
            )
        )
    return "\n".join(lines)


def growth(results: list[CaseResult], clock: str, *, by: str = "steps") -> str:
    """Time ratios between consecutive cases that differ only in ``by`` (``steps`` or
    ``payload``), with the exponent ``log(time ratio) / log(size ratio)``: ×10 steps → ×10
    time (exponent 1) is linear, exponent 2 quadratic."""
    lines = []
    groups: dict[int, list[CaseResult]] = {}
    for r in results:
        fixed = r.case.payload if by == "steps" else r.case.steps
        groups.setdefault(fixed, []).append(r)
    for group in groups.values():
        ordered = sorted(group, key=lambda r: getattr(r.case, by))
        for small, large in itertools.pairwise(ordered):
            factor = getattr(large.case, by) / getattr(small.case, by)
            if factor <= 1:
                continue
            parts = []
            for (name, a), (_, b) in zip(small.timings(), large.timings(), strict=True):
                ratio = b.seconds(clock) / a.seconds(clock) if a.seconds(clock) > 0 else math.inf
                exponent = math.log(ratio) / math.log(factor) if ratio > 0 else math.nan
                parts.append(f"{name} ×{ratio:,.1f} (^{exponent:.2f})")
            if by == "steps":
                head = f"{small.case.payload_label}, n {small.case.steps} → {large.case.steps}"
            else:
                head = (
                    f"n={small.case.steps}, {small.case.payload_label} → {large.case.payload_label}"
                )
            lines.append(f"{head} (×{factor:g}): " + ", ".join(parts))
    return "\n".join(lines) if lines else f"(no two cases differ only in {by})"


def busy_note(results: list[CaseResult], clock: str) -> str | None:
    """A note when wall time exceeds CPU time noticeably (a busy machine)."""
    busy = [
        f"n={r.case.steps}/{r.case.payload_label} {name}"
        for r in results
        for name, t in r.timings()
        if t.wall_s > 0.005 and t.wall_s > BUSY_RATIO * t.cpu_s
    ]
    if not busy:
        return None
    return (
        f"note: wall time exceeds CPU time by over {BUSY_RATIO - 1:.0%} for "
        f"{', '.join(busy)}: the machine was busy (load average {_load()}); the table "
        + ("shows CPU time, which load affects less." if clock == "cpu" else "shows wall time.")
    )


def profile_cases(run: RecordedRun, results: list[CaseResult], args: argparse.Namespace) -> str:
    """cProfile of a few rollouts of each plan on the largest case (engine, and the factual
    plan through ``run_plan``), and of ``load_run`` on the largest case whose ``load_run``
    took at most :data:`PROFILE_LOAD_LIMIT_S` (profiling slows it about twofold)."""
    rollouts = min(args.rollouts, 4)
    out = io.StringIO()
    jobs: list[tuple[str, Callable[[], object]]] = []
    quick = [r for r in results if r.load.wall_s <= PROFILE_LOAD_LIMIT_S]
    if quick:
        case = max(quick, key=lambda r: (r.case.steps, r.case.payload)).case
        steps_df = run.steps if case == _case_of(run) else steps_table(case, args.seed)
        label = f"load_run, n={case.steps}, {case.payload_label}"
        jobs.append((label, lambda: load_run(TRACE_ID, steps_df)))
    n = run.horizon
    for name, (plan, _) in plans_for(run).items():
        jobs.append(
            (
                f"{name}, {rollouts} rollouts (engine), n={n}",
                lambda plan=plan: engine_rollouts(run, plan, rollouts, args.seed),
            )
        )
    jobs.append(
        (
            f"factual, 1 rollout through run_plan, n={n}",
            lambda: public_rollouts(run, Plan(), 1, args.seed),
        )
    )
    for label, job in jobs:
        # The default (wall-clock) timer: a CPU-time timer is a system call per event, and
        # its overhead would swamp the many small calls of the harness.
        profiler = cProfile.Profile()
        profiler.enable()
        job()
        profiler.disable()
        stream = io.StringIO()
        stats = pstats.Stats(profiler, stream=stream)
        stats.sort_stats("tottime").print_stats(args.profile)
        out.write(f"\n### cProfile: {label} (by own time, wall clock)\n")
        out.write(_trim_stats(stream.getvalue()))
        gc.collect()
    return out.getvalue()


def _case_of(run: RecordedRun) -> Case | None:
    """The case a recorded run was generated from (``None`` when it is not one of ours)."""
    first = run.decisions[0].observations
    if not first or first[0].result is None:
        return None
    return Case(run.horizon, len(first[0].result))


def _trim_stats(text: str) -> str:
    """The pstats listing from its header line on, with the repository path shortened."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if "function calls" in line), 0)
    root = str(Path(__file__).resolve().parent.parent) + os.sep
    return "\n".join(line.replace(root, "") for line in lines[start:]).rstrip() + "\n"


def machine() -> str:
    """Platform, CPUs, Python and polars versions."""
    return (
        f"{platform.platform()}; {os.cpu_count()} CPUs; Python {platform.python_version()}; "
        f"polars {importlib.metadata.version('polars')}"
    )


def _commit() -> str:
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "otelcar"],
            cwd=root,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return f"{head}{' (otelcar/ has uncommitted changes)' if dirty else ''}" or "unknown"


def _load() -> str:
    return f"{os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "n/a"


def _progress(message: str) -> None:
    print(f"  … {message}", file=sys.stderr, flush=True)


# -- CLI ----------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Replay-harness overhead per rollout, by trace length and payload.",
    )
    parser.add_argument(
        "--sizes",
        default=None,
        help="comma-separated STEPS:PAYLOAD cases, payload in characters with k = 1024 "
        f"(default: {DEFAULT_SIZES}; --quick: {QUICK_SIZES})",
    )
    parser.add_argument(
        "--rollouts", type=int, default=None, help="rollouts per plan (default: 20; --quick: 5)"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="time each measurement up to this many times and keep the fastest; a call "
        "over 2 s is not repeated (default: %(default)s)",
    )
    parser.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="the time the table shows: this process's CPU time (steady on a shared machine) "
        "or wall time (default: %(default)s)",
    )
    parser.add_argument("--seed", type=int, default=1, help="data and rollout seed")
    parser.add_argument(
        "--repr-cap-mb",
        type=float,
        default=1000.0,
        help="where run_plan repr()s its result (cpython#112559), the run_plan column runs as "
        "many rollouts (up to --rollouts) as keep the estimated repr() text under this "
        "(default: %(default)s)",
    )
    parser.add_argument("--quick", action="store_true", help="a small run (smoke test)")
    parser.add_argument(
        "--profile",
        type=int,
        nargs="?",
        const=25,
        default=0,
        metavar="TOP",
        help="also cProfile each plan on the largest case, and load_run on the largest case "
        "whose load_run took at most 60 s, and print the TOP functions (default TOP: 25)",
    )
    args = parser.parse_args(argv)
    args.sizes = args.sizes or (QUICK_SIZES if args.quick else DEFAULT_SIZES)
    args.rollouts = args.rollouts or (5 if args.quick else 20)
    try:
        args.cases = parse_sizes(args.sizes)
    except ValueError as exc:
        parser.error(f"--sizes: {exc}")
    if args.rollouts < 1 or args.repeat < 1:
        parser.error("--rollouts and --repeat must be positive")
    return args


def run(args: argparse.Namespace) -> None:
    """Measure every case, print the table, the growth and (optionally) the profile."""
    print(f"date: {time.strftime('%Y-%m-%d %H:%M %Z')}")
    print(f"machine: {machine()}; load average {_load()}")
    print(f"otelcar: {_commit()}")
    restored = default_sigint()
    reprs = asyncio_run_reprs_result()
    args.run_plan_reprs = asyncio_run_reprs_result(run_sync)
    print(
        f"rollouts per plan: {args.rollouts}; best of {args.repeat}; clock: {args.clock}; "
        f"seed {args.seed}; "
        f"asyncio.run reprs its result (cpython#112559): {'yes' if reprs else 'no'}; "
        f"run_plan does: {'yes' if args.run_plan_reprs else 'no'}"
    )
    if restored:
        print("SIGINT was ignored (a background job): restored Python's default handler")
    print(f"trace: {TOOL_DEFINITIONS_NOTE}", flush=True)
    results: list[CaseResult] = []
    largest: tuple[Case, RecordedRun] | None = None
    for case in args.cases:
        result, recorded = measure(case, args)
        results.append(result)
        if largest is None or (case.steps, case.payload) > (
            largest[0].steps,
            largest[0].payload,
        ):
            largest = (case, recorded)
        else:
            del recorded
        gc.collect()
    print()
    print(table(results, args.clock))
    print("\ngrowth with length (time ratio, ^exponent: 1 = linear, 2 = quadratic):")
    print(growth(results, args.clock, by="steps"))
    by_payload = growth(results, args.clock, by="payload")
    if not by_payload.startswith("("):
        print("\ngrowth with payload (time ratio, ^exponent):")
        print(by_payload)
    note = busy_note(results, args.clock)
    if note:
        print(f"\n{note}")
    if args.profile and largest is not None:
        case, recorded = largest
        print(f"\nprofile of the largest case: n={case.steps}, {case.payload_label}")
        print(profile_cases(recorded, results, args))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        run(args)
    except BenchmarkError as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
