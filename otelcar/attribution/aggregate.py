"""``aggregate``: the systematic weak step across many failing traces of one agent.

Each failing trace is attributed on its own (:func:`otelcar.attribution.attribute`). Its
decision steps are then named by a **stable identity** that survives across runs: the agent,
the step name and what the recorded action did (its tool names, or ``answer`` for a final
answer) — ``"support · gpt-4o → issue_refund"``. Step numbers do not survive (runs differ in
length); identities do.

Statistics, per identity ``s`` (``docs/reports.md``):

- **Culprit count** ``k_s``: in how many attributed traces the culprit's identity is ``s``;
  the **culprit share** ``k_s / N`` over the ``N`` attributed failing traces, with a Wilson
  interval.
- **Chance level.** If blame fell on a trace's decision steps at random, trace ``t`` (with a
  culprit) would blame ``s`` with probability ``p_t = m_t(s) / n_t`` (``m_t(s)`` decisions of
  identity ``s`` among its ``n_t``). ``k_s`` is then Poisson-binomial; the one-sided exact
  p-value ``P(K ≥ k_s)`` is computed by dynamic programming, and Holm-adjusted across all
  identities seen.
- **Mean effect**: the mean over traces containing ``s`` of its step effect Δ in that trace
  (the largest Δ when ``s`` occurs several times), with a Student-t interval over traces
  (``mean ± t_{m−1} · sd / √m``; none for a single trace). Traces attributed by bisection only
  estimate the culprit's row and add nothing for the other identities.
- **Bad luck versus a design flaw.** ``design flaw``: culprit in at least 2 traces, blamed
  significantly more often than chance (Holm-adjusted p < 1 − confidence), and a mean effect
  whose interval lies above 0 — the step fails the agent systematically. ``suspect``: culprit
  in 2 or more traces without meeting that bar (more traces would tell). ``bad luck``: the
  culprit of a single trace — a one-off draw of a bad action, not a pattern. ``not blamed``:
  never the culprit.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl
from scipy import stats

from otelcar.attribution.aggregate_documents import (
    AGGREGATE_VERSION,
    CLASSES,
    TRACE_STATUSES,
    AggregateDocument,
    StepStatsDocument,
    TraceVerdictDocument,
)
from otelcar.attribution.frozen import freeze_sequences
from otelcar.attribution.stats import holm, wilson
from otelcar.attribution.steps.attribute import attribute_async
from otelcar.attribution.steps.result import AttributionResult
from otelcar.errors import OtelcarError
from otelcar.executors import Executor, WorkerLost, current_executor, use_executor
from otelcar.notes import Note, note
from otelcar.outcome import Outcome, judges_process
from otelcar.policies.registry import PolicyRegistry
from otelcar.replay.requests import AgentDeclaration
from otelcar.sync import synchronous

if TYPE_CHECKING:
    from otelcar.replay.recorded import RecordedRun

#: A per-trace preparation of the recorded run before it is attributed (``prepare`` of
#: :func:`attribute_traces_async`): it returns the run to attribute, or raises an
#: :class:`~otelcar.errors.OtelcarError` that skips the trace with its message as the reason.
Prepare = Callable[["RecordedRun"], Awaitable["RecordedRun"]]


# -- identities -------------------------------------------------------------------------------
def action_tools(message: Mapping[str, Any] | None) -> str:
    """The stable part of an action: its tool names joined with ``+``, else ``answer``."""
    if message is None:
        return "no action"
    names = sorted({str(c.get("name")) for c in message.get("tool_calls") or []})
    return "+".join(names) if names else "answer"


def step_identity(agent: str | None, name: str | None, action: Mapping[str, Any] | None) -> str:
    """``agent · step name → tools`` of a decision step (see the module docstring)."""
    return f"{agent or '?'} · {name or '?'} → {action_tools(action)}"


def decision_identities(steps: pl.DataFrame) -> dict[int, str]:
    """Step number → identity, for every LLM (decision) step of a steps table."""
    return {
        row["step"]: step_identity(row["agent_name"], row["name"], row["output"])
        for row in steps.filter(pl.col("kind") == "llm").iter_rows(named=True)
    }


# -- one trace --------------------------------------------------------------------------------
@dataclass(frozen=True)
class TraceVerdict:
    """What attribution said about one trace, by step identity."""

    trace_id: str
    status: str  # attributed | passed | skipped
    verdict: str | None = None
    culprit_step: int | None = None
    culprit_identity: str | None = None
    delta: float | None = None
    delta_ci: tuple[float, float] | None = None
    p_adjusted: float | None = None
    #: The attribution's headline as a stored document said it (a triaged trace's); one
    #: attributed here carries its result instead (``attribution``), which ``report`` words.
    headline: str | None = None
    reason: str | None = None
    effects: dict[str, float] = field(default_factory=dict)  # identity → largest Δ
    decisions: dict[str, int] = field(default_factory=dict)  # identity → decision steps
    cost: dict[str, Any] = field(default_factory=dict)
    attribution: AttributionResult | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> TraceVerdictDocument:
        return {
            "trace_id": self.trace_id,
            "status": self.status,
            "verdict": self.verdict,
            "culprit_step": self.culprit_step,
            "culprit_identity": self.culprit_identity,
            "delta": self.delta,
            "delta_ci": list(self.delta_ci) if self.delta_ci else None,
            "p_adjusted": self.p_adjusted,
            "headline": self.headline,
            "reason": self.reason,
            "effects": self.effects,
            "decisions": self.decisions,
            "cost": self.cost,
        }


def trace_verdict(
    result: Mapping[str, Any], steps: pl.DataFrame, attribution: AttributionResult | None = None
) -> TraceVerdict:
    """A :class:`TraceVerdict` from an attribution result's document and its steps (and the
    result itself, when there is one)."""
    identities = decision_identities(steps)
    decisions: dict[str, int] = {}
    for identity in identities.values():
        decisions[identity] = decisions.get(identity, 0) + 1
    effects: dict[str, float] = {}
    for row in result["steps"]:
        identity = identities.get(row["step"])
        if identity is None or not math.isfinite(row["delta"]):
            continue
        effects[identity] = max(effects.get(identity, -math.inf), row["delta"])
    culprit = next((r for r in result["steps"] if r["step"] == result.get("culprit")), None)
    return TraceVerdict(
        trace_id=result["trace_id"],
        status="attributed",
        verdict=result["verdict"],
        culprit_step=culprit["step"] if culprit else None,
        culprit_identity=identities.get(culprit["step"]) if culprit else None,
        delta=culprit["delta"] if culprit else None,
        delta_ci=tuple(culprit["delta_ci"]) if culprit else None,  # type: ignore[arg-type]
        p_adjusted=culprit["p_adjusted"] if culprit else None,
        headline=result.get("headline"),
        effects=effects,
        decisions=decisions,
        cost=dict(result.get("cost") or {}),
        attribution=attribution,
    )


#: :func:`attribute_async`'s keywords that :func:`attribute_traces_async` sets per trace.
_PER_TRACE = frozenset({"run", "registry", "outcome", "budget", "env"})


def attribution_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` for :func:`attribute_async` on every trace, checked before any trace is
    read: a :class:`TypeError` names each keyword it does not take (or one set per trace,
    such as ``budget``: ``max_calls``/``max_tokens`` give each trace its own) and lists the
    ones it does."""
    accepted = [
        name
        for name, parameter in inspect.signature(attribute_async).parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY and name not in _PER_TRACE
    ]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise TypeError(
            f"attribute_traces got option(s) it cannot pass on: {', '.join(unknown)}; "
            f"it takes {', '.join(accepted)} (budgets per trace: max_calls, max_tokens)"
        )
    return dict(options)


async def attribute_trace(
    trace_id: str,
    steps: pl.DataFrame,
    registry: PolicyRegistry,
    outcome: Outcome,
    budget: tuple[int | None, int | None],
    options: dict[str, Any],
    agent: AgentDeclaration | None = None,
    prepare: Prepare | None = None,
) -> TraceVerdict:
    """The verdict on one trace: ``passed`` when its recording does not fail under
    ``outcome`` (no policy call spent), ``skipped`` with the reason when it cannot be
    attributed, else attributed with a fresh ``Budget(*budget)``; ``agent``: the user's
    declaration of the agent's requests (a declaration that does not fit the trace skips it,
    with the reason); ``prepare``: what the run goes through before it is attributed, only
    when the recording fails (an error it raises skips the trace, with the reason). A
    module-level coroutine function, so that an executor can run it on a worker."""
    from otelcar.replay.harness import Budget
    from otelcar.replay.recorded import load_run
    from otelcar.replay.rollout_table import recorded_failed

    # An outcome on the agent's process is known only once `prepare` (the live check) ran
    # the agent: the trace records no process.
    on_process = judges_process(outcome) and prepare is not None
    if not on_process:
        try:
            failed = await outcome.failed(steps)
        except Exception as exc:
            return TraceVerdict(trace_id, "skipped", reason=f"outcome: {exc}")
        if not failed:
            return TraceVerdict(trace_id, "passed", reason="the recorded run did not fail")
    try:
        run = load_run(trace_id, steps, agent)
        if prepare is not None:
            run = await prepare(run)
        if on_process and not await recorded_failed(outcome, run):
            return TraceVerdict(trace_id, "passed", reason="the recorded run did not fail")
        options = {"policy_check": 0, **options}  # the verdicts only: no policy check
        result = await attribute_async(
            run, registry=registry, outcome=outcome, budget=Budget(*budget), **options
        )
    except OtelcarError as exc:
        return TraceVerdict(trace_id, "skipped", reason=str(exc))
    return trace_verdict(result.to_dict(), steps, result)


async def attribute_traces_async(
    traces: Iterable[tuple[str, pl.DataFrame]],
    *,
    registry: PolicyRegistry,
    outcome: Outcome,
    on_trace: Callable[[TraceVerdict], None] | None = None,
    max_calls: int | None = None,
    max_tokens: int | None = None,
    executor: Executor | None = None,
    trace_tasks: bool | None = None,
    agent: AgentDeclaration | None = None,
    prepare: Prepare | None = None,
    **options: Any,
) -> list[TraceVerdict]:
    """Attribute every failing trace of ``traces`` (``(trace_id, steps)`` pairs) with
    :func:`attribute_trace`; the verdicts come back in the order of ``traces``, ``on_trace``
    is called as each is done. ``max_calls``/``max_tokens``: a budget per trace.
    ``agent``: the user's declaration of the agent (``[agent]``; address decisions by key or
    agent, which hold across traces, rather than by step).
    ``prepare``: each failing trace's run goes through it before it is attributed (an
    :class:`~otelcar.errors.OtelcarError` it raises skips that trace with the reason;
    :func:`otelcar.analyses.attribute_traces_run` checks each trace's live replay there).
    ``options`` go to :func:`attribute_async` on every trace; one it does not take is a
    :class:`TypeError` before any trace is read (:func:`attribution_options`).

    ``executor`` (default: :func:`otelcar.executors.current_executor`) runs the rollouts, and
    its ``trace_concurrency`` traces are attributed at once (one at a time locally; enough to
    keep a Ray cluster busy); the traces are read from ``traces`` only as they are started.
    ``trace_tasks`` (default: the executor's ``trace_tasks``): send each whole attribution to
    the executor as one task (its rollouts then run where it runs, and ``options`` and
    ``prepare`` must be picklable) instead of sending the rollouts one by one (``docs/ray.md``)."""
    options = attribution_options(options)
    executor = executor or current_executor()
    if trace_tasks is None:
        trace_tasks = executor.trace_tasks
    budget = (max_calls, max_tokens)
    slots = asyncio.Semaphore(max(1, executor.trace_concurrency))

    async def one(trace_id: str, steps: pl.DataFrame) -> TraceVerdict:
        try:
            if trace_tasks:
                verdict = await executor.call(
                    attribute_trace,
                    trace_id,
                    steps,
                    registry,
                    outcome,
                    budget,
                    options,
                    agent,
                    prepare,
                )
            else:
                verdict = await attribute_trace(
                    trace_id, steps, registry, outcome, budget, options, agent, prepare
                )
        except WorkerLost as exc:  # reported, not dropped
            verdict = TraceVerdict(trace_id, "skipped", reason=str(exc))
        finally:
            slots.release()
        if on_trace is not None:
            on_trace(verdict)
        return verdict

    tasks: list[asyncio.Task[TraceVerdict]] = []
    with use_executor(executor):
        for trace_id, steps in traces:
            await slots.acquire()
            tasks.append(asyncio.create_task(one(trace_id, steps)))
        return list(await asyncio.gather(*tasks))


attribute_traces = synchronous(attribute_traces_async, name="attribute_traces")


# -- across traces ----------------------------------------------------------------------------
def poisson_binomial_sf(k: int, probabilities: Sequence[float]) -> float:
    """``P(K ≥ k)`` for a sum of independent Bernoulli(p_i) (exact, by dynamic programming)."""
    if k <= 0:
        return 1.0
    dist = [1.0]
    for p in probabilities:
        nxt = [0.0] * (len(dist) + 1)
        for j, mass in enumerate(dist):
            nxt[j] += mass * (1 - p)
            nxt[j + 1] += mass * p
        dist = nxt
    return float(min(1.0, max(0.0, sum(dist[k:]))))


def t_interval(values: Sequence[float], confidence: float) -> tuple[float, float] | None:
    """Student-t interval of the mean of ``values`` (``None`` for fewer than two)."""
    m = len(values)
    if m < 2:
        return None
    mean = sum(values) / m
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (m - 1))
    half = float(stats.t.ppf(1 - (1 - confidence) / 2, m - 1)) * sd / math.sqrt(m)
    return (mean - half, mean + half)


@dataclass(frozen=True)
class StepStats:
    """One step identity across the batch (see the module docstring for every number)."""

    identity: str
    traces: int  # attributed traces in which the identity occurs
    decisions: int  # decision steps of that identity, over all attributed traces
    culprit: int
    share: float
    share_ci: tuple[float, float]
    expected: float  # culprit count expected if blame fell on random decision steps
    p_value: float
    p_adjusted: float
    mean_delta: float | None
    mean_delta_ci: tuple[float, float] | None
    delta_sd: float | None
    effect_traces: int  # traces with an effect estimate for this identity
    classification: str

    def to_dict(self) -> StepStatsDocument:
        return {
            "identity": self.identity,
            "traces": self.traces,
            "decisions": self.decisions,
            "culprit": self.culprit,
            "share": self.share,
            "share_ci": list(self.share_ci),
            "expected": self.expected,
            "p_value": self.p_value,
            "p_adjusted": self.p_adjusted,
            "mean_delta": self.mean_delta,
            "mean_delta_ci": list(self.mean_delta_ci) if self.mean_delta_ci else None,
            "delta_sd": self.delta_sd,
            "effect_traces": self.effect_traces,
            "classification": self.classification,
        }


@dataclass(frozen=True)
class AggregateResult:
    """Step identities ranked by how systematically they cause the failures."""

    confidence: float
    traces: tuple[TraceVerdict, ...]
    steps: tuple[StepStats, ...]
    service: str | None = None
    since: str | None = None
    notes: tuple[Note, ...] = ()

    def __post_init__(self) -> None:
        freeze_sequences(self)

    @property
    def attributed(self) -> list[TraceVerdict]:
        return [t for t in self.traces if t.status == "attributed"]

    def cost(self) -> dict[str, Any]:
        """Policy calls, tokens, rollouts and seconds, summed over the traces."""
        total: dict[str, Any] = {}
        for trace in self.traces:
            for key, value in trace.cost.items():
                if isinstance(value, int | float):
                    total[key] = total.get(key, 0) + value
        if "wall_s" in total:
            total["wall_s"] = round(total["wall_s"], 3)
        return total

    def counts(self) -> dict[str, int]:
        """How many traces ended in each status (:data:`TRACE_STATUSES`)."""
        return {s: sum(t.status == s for t in self.traces) for s in TRACE_STATUSES}

    def to_dict(self) -> AggregateDocument:
        return {
            "version": AGGREGATE_VERSION,
            "kind": "aggregate",
            "service": self.service,
            "since": self.since,
            "confidence": self.confidence,
            "counts": self.counts(),
            "method": {
                "identity": "agent · step name → tool names of the recorded action",
                "culprit_share_interval": "Wilson",
                "chance_test": "one-sided exact Poisson-binomial test against blame falling on "
                "a random decision step of each trace; Holm across identities",
                "mean_effect_interval": "Student t over traces (largest Δ of the identity in "
                "each trace)",
                "classification": {
                    "design flaw": "culprit in ≥ 2 traces, p_adj < 1 − confidence and the mean "
                    "effect's interval above 0",
                    "suspect": "culprit in ≥ 2 traces without meeting that bar",
                    "bad luck": "culprit in exactly one trace",
                    "not blamed": "never the culprit",
                },
            },
            "steps": [s.to_dict() for s in self.steps],
            "traces": [t.to_dict() for t in self.traces],
            "cost": self.cost(),
            "notes": [n.to_dict() for n in self.notes],
        }


def aggregate(
    verdicts: Sequence[TraceVerdict],
    *,
    confidence: float = 0.95,
    service: str | None = None,
    since: str | None = None,
) -> AggregateResult:
    """Rank step identities over the attributed traces of ``verdicts`` (module docstring)."""
    alpha = 1 - confidence
    attributed = [t for t in verdicts if t.status == "attributed"]
    with_culprit = [t for t in attributed if t.culprit_identity is not None]
    n = len(attributed)
    identities = sorted({i for t in attributed for i in t.decisions})
    p_values: list[float] = []
    rows: list[dict[str, Any]] = []
    for identity in identities:
        k = sum(t.culprit_identity == identity for t in with_culprit)
        chance = [
            t.decisions.get(identity, 0) / max(1, sum(t.decisions.values())) for t in with_culprit
        ]
        p_values.append(poisson_binomial_sf(k, chance))
        effects = [t.effects[identity] for t in attributed if identity in t.effects]
        mean = sum(effects) / len(effects) if effects else None
        sd = (
            math.sqrt(sum((e - mean) ** 2 for e in effects) / (len(effects) - 1))
            if mean is not None and len(effects) > 1
            else None
        )
        share_ci = wilson(k, n, confidence)
        rows.append(
            {
                "identity": identity,
                "traces": sum(identity in t.decisions for t in attributed),
                "decisions": sum(t.decisions.get(identity, 0) for t in attributed),
                "culprit": k,
                "share": k / n if n else 0.0,
                "share_ci": (share_ci.low, share_ci.high),
                "expected": sum(chance),
                "mean_delta": mean,
                "mean_delta_ci": t_interval(effects, confidence),
                "delta_sd": sd,
                "effect_traces": len(effects),
            }
        )
    adjusted = holm(p_values) if p_values else []
    out: list[StepStats] = []
    for row, p, p_adj in zip(rows, p_values, adjusted, strict=True):
        k, ci = row["culprit"], row["mean_delta_ci"]
        if k >= 2 and p_adj < alpha and ci is not None and ci[0] > 0:
            label = "design flaw"
        elif k >= 2:
            label = "suspect"
        elif k == 1:
            label = "bad luck"
        else:
            label = "not blamed"
        out.append(StepStats(**row, p_value=p, p_adjusted=p_adj, classification=label))
    out.sort(
        key=lambda s: (
            CLASSES.index(s.classification),
            -s.culprit,
            s.p_value,
            -(s.mean_delta if s.mean_delta is not None else -math.inf),
        )
    )
    notes = []
    if n and len(with_culprit) < n:
        notes.append(note("aggregate_no_culprit", without=n - len(with_culprit), traces=n))
    agents = {i.split(" · ", 1)[0] for i in identities}
    if len(agents) > 1:
        notes.append(note("aggregate_agents", agents=sorted(agents)))
    return AggregateResult(
        confidence=confidence,
        traces=list(verdicts),
        steps=out,
        service=service,
        since=since,
        notes=notes,
    )
