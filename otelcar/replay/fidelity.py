"""The fidelity check: does replaying with everything held reproduce the recorded run?

For every decision step the factual replay (``Plan()``) must rebuild the recorded context
message for message and take the recorded action; the recorded outcome must come out again.
Each step gets a verdict:

- ``ok`` — reproduced, and changes upstream of it propagate into its context;
- ``held-only`` — reproduced when held, but its context is not the previous context plus what
  happened since (rewritten by a summarizer or truncated by the framework), or one of its tool
  results was not recorded: a counterfactual that changes things before it is approximate;
- ``unreproducible`` — it cannot be rebuilt (content not captured, truncated attributes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from otelcar.notes import Note, note
from otelcar.outcome import Outcome, judges_process
from otelcar.policies.registry import PolicyRegistry
from otelcar.replay.harness import Environment, Rollout, replay
from otelcar.replay.plan import Plan
from otelcar.replay.recorded import ActionRef, ObsRef, RecordedDecision, RecordedRun
from otelcar.replay.rollout_table import recorded_failed, rollout_failed


@dataclass(frozen=True, slots=True)
class StepVerdict:
    step: int
    agent: str | None
    verdict: str
    reasons: tuple[str, ...] = ()


@dataclass
class FidelityReport:
    trace_id: str
    steps: list[StepVerdict]
    replay_status: str
    replay_error: str | None
    outcome: str | None = None
    recorded_failed: bool | None = None
    replayed_failed: bool | None = None
    notes: list[Note] = field(default_factory=list)
    #: what each re-decision sends and where it comes from (RunRequests.to_dict)
    requests: dict[str, Any] = field(default_factory=dict)
    #: the factual replay itself (rollout 0 of ``Plan()``, base seed 0): an analysis that
    #: needs that rollout again adopts it instead of replaying it twice
    replay: Rollout | None = field(default=None, repr=False, compare=False)

    @property
    def reproducible(self) -> bool:
        """Every decision rebuilt (possibly held-only) and the outcome reproduced."""
        return (
            self.replay_status in ("final", "horizon")
            and all(s.verdict != "unreproducible" for s in self.steps)
            and self.recorded_failed == self.replayed_failed
        )

    @property
    def propagates(self) -> bool:
        """Every decision is ``ok``: counterfactual changes carry forward faithfully."""
        return self.reproducible and all(s.verdict == "ok" for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        return {
            "trace_id": self.trace_id,
            "reproducible": self.reproducible,
            "propagates": self.propagates,
            "replay_status": self.replay_status,
            "replay_error": self.replay_error,
            "outcome": self.outcome,
            "recorded_failed": self.recorded_failed,
            "replayed_failed": self.replayed_failed,
            "steps": [
                {"step": s.step, "agent": s.agent, "verdict": s.verdict, "reasons": list(s.reasons)}
                for s in self.steps
            ],
            "notes": [n.to_dict() for n in self.notes],
            "requests": self.requests,
        }


def _transition_reasons(decision: RecordedDecision, run: RecordedRun) -> list[str]:
    """Why a counterfactual upstream of ``decision`` would not propagate into its context."""
    reasons = []
    earlier = [
        d
        for d in run.decisions[: decision.index]
        if d.agent == decision.agent and d.context is not None
    ]
    if earlier and decision.context is not None:
        previous = earlier[-1]
        if decision.context[: len(previous.context)] != previous.context:
            reasons.append(
                f"context rewritten since step {previous.step} (summarized or "
                "truncated by the framework)"
            )
        referenced = {i.decision for i in decision.template if isinstance(i, ActionRef | ObsRef)}
        if (
            previous.action is not None
            and previous.index not in referenced
            and previous.action.tool_calls
        ):
            reasons.append(f"the action of step {previous.step} is not in this context")
    for d in run.decisions[: decision.index]:
        for obs in d.observations:
            if obs.result is None and obs.error is None:
                reasons.append(f"tool result of {obs.call.name} (step {d.step}) not recorded")
    return reasons


async def check_fidelity_async(
    run: RecordedRun,
    *,
    outcome: Outcome | None = None,
    recorded_steps: pl.DataFrame | None = None,
    env: Environment | None = None,
) -> FidelityReport:
    """Replay ``run`` with everything held and compare with the recording; the outcome's own
    LLM calls (a judge) go through ``env`` when given (counted in its cost). The replay
    (rollout 0 of ``Plan()``, base seed 0) is kept in the report's ``replay``."""
    if outcome is not None and env is not None:
        outcome = env.bind(outcome)
    env = Environment(PolicyRegistry())  # a factual replay needs no policy
    rollout = await replay(run, Plan(), env)
    replayed = {d.recorded_step: d for d in rollout.decisions}
    verdicts = []
    for decision in run.decisions:
        reasons: list[str] = list(decision.problems)
        got = replayed.get(decision.step)
        if decision.context is None or decision.action is None:
            verdicts.append(
                StepVerdict(decision.step, decision.agent, "unreproducible", tuple(reasons))
            )
            continue
        if got is None:
            reasons.append("the factual replay ended before this step")
            verdicts.append(
                StepVerdict(decision.step, decision.agent, "unreproducible", tuple(reasons))
            )
            continue
        if got.context != decision.context:
            reasons.append("rebuilt context differs from the recorded one")
            verdicts.append(
                StepVerdict(decision.step, decision.agent, "unreproducible", tuple(reasons))
            )
            continue
        if got.origin != "recorded":
            reasons.append(f"the factual replay did not hold this step ({got.origin})")
        reasons.extend(_transition_reasons(decision, run))
        verdicts.append(
            StepVerdict(
                decision.step, decision.agent, "held-only" if reasons else "ok", tuple(reasons)
            )
        )
    report = FidelityReport(run.trace_id, verdicts, rollout.status, rollout.error, replay=rollout)
    if not run.decisions:
        report.notes.append(note("no_llm_step"))
    report.requests = run.requests.to_dict()
    inferred = run.requests.note()
    if inferred is not None:  # a held replay cannot show it: it sends no request
        report.notes.append(inferred)
    if outcome is not None:
        report.outcome = outcome.describe()
        report.recorded_failed = await recorded_failed(outcome, run, recorded_steps)
        if rollout.ok and judges_process(outcome) and rollout.process is None:
            # the rebuilt held replay runs no process: a live check's held run of the agent
            # (run.process) is this run's held replay, and made every recorded request again
            report.replayed_failed = report.recorded_failed
            report.notes.append(note("process_judged_live"))
        elif rollout.ok:
            report.replayed_failed = await rollout_failed(outcome, rollout)
    return report


def check_fidelity(run: RecordedRun, **options: Any) -> FidelityReport:
    """Synchronous :func:`check_fidelity_async`."""
    from otelcar.sync import run_sync

    return run_sync(check_fidelity_async(run, **options))
