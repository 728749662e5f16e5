"""How often the agent fails from a recorded start: the estimate a reliability gate asserts on.

The estimand: P(failure) of the agent re-run from the recorded trace's first decision, every
decision re-decided by the registered policy (the recorded tool results served where the
same call recurs, the tool policies otherwise), judged by the outcome. ``rollouts`` seeded
rollouts estimate it; the interval is Wilson's at ``confidence``. A rollout that could not be
judged (a policy error, cut at the horizon) is counted as a failure in the bound a gate
checks (:attr:`Reliability.worst_high`), so lost rollouts can never make an agent look more
reliable than it is; how many were lost is reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from otelcar.attribution.stats import wilson
from otelcar.cost import policy_calls_text
from otelcar.outcome import Outcome
from otelcar.policies.registry import PolicyRegistry
from otelcar.replay.engine import run_plan_async
from otelcar.replay.harness import Budget, Environment
from otelcar.replay.plan import Plan, Resample
from otelcar.replay.recorded import RecordedRun


@dataclass(frozen=True)
class Reliability:
    """``failed`` of ``judged`` rollouts failed, ``lost`` more could not be judged; the
    Wilson interval of the failure rate with lost rollouts left out (``low``, ``high``) and
    counted as failures (``worst_high``); what it cost (the environment's accounting)."""

    trace_id: str
    failed: int
    judged: int
    lost: int
    confidence: float
    low: float
    high: float
    worst_high: float
    cost: dict[str, int]
    seed: int
    errors: list[str] = field(default_factory=list)

    @property
    def rollouts(self) -> int:
        return self.judged + self.lost

    @property
    def calls(self) -> int:
        """Policy calls made (cache hits are free)."""
        return int(self.cost.get("llm_calls", 0))

    @property
    def rate(self) -> float:
        return self.failed / self.judged if self.judged else 1.0

    def describe(self) -> str:
        """One sentence: the estimate, its interval and count, losses, cost."""
        lost = (
            f"; {self.lost} rollout(s) could not be judged and count as failures in the bound "
            f"(first: {self.errors[0]})"
            if self.lost
            else ""
        )
        return (
            f"trace {self.trace_id}: the agent failed in {self.failed}/{self.judged} rollouts "
            f"({self.rate:.1%}, {self.confidence:.0%} Wilson interval "
            f"[{self.low:.1%}, {self.high:.1%}]){lost}; seed {self.seed}; "
            f"cost: {policy_calls_text(self.cost)}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "trace_id": self.trace_id,
            "failed": self.failed,
            "judged": self.judged,
            "lost": self.lost,
            "rate": self.rate,
            "confidence": self.confidence,
            "interval": [self.low, self.high],
            "worst_high": self.worst_high,
            "cost": self.cost,
            "seed": self.seed,
            "errors": self.errors,
        }


async def failure_rate(
    run: RecordedRun,
    *,
    registry: PolicyRegistry,
    outcome: Outcome,
    rollouts: int = 40,
    confidence: float = 0.95,
    seed: int = 0,
    budget: Budget | None = None,
    concurrency: int = 8,
) -> Reliability:
    """Estimate P(failure) of the agent re-run from ``run``'s start (module docstring):
    ``rollouts`` rollouts resampling every decision, seeded by ``seed``."""
    if rollouts < 1:
        raise ValueError("a failure rate needs at least one rollout")
    env = Environment(registry, budget or Budget())
    plan = Plan(tuple(Resample(d.step) for d in run.decisions if d.step is not None))
    done = await run_plan_async(
        run,
        plan,
        env,
        rollouts=rollouts,
        seed=seed,
        outcome=outcome,
        concurrency=concurrency,
        stop_when_most_fail=False,
    )
    judged = done.judged
    failed = sum(judged)
    lost = len(done.rollouts) - len(judged)
    interval = wilson(failed, len(judged), confidence)
    worst = wilson(failed + lost, len(done.rollouts), confidence)
    errors = [
        r.error or f"rollout {r.index}: {r.status}"
        for r, f in zip(done.rollouts, done.failures, strict=True)
        if f is None
    ]
    return Reliability(
        run.trace_id,
        failed,
        len(judged),
        lost,
        confidence,
        interval.low,
        interval.high,
        worst.high,
        env.accounting.to_dict(),
        seed,
        errors,
    )
