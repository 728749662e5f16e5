"""Refutation of a culprit: two checks that a real effect passes and an artifact fails.

Kept apart from the estimate (DoWhy's estimand → estimate → refutation), each on draws of its
own (:class:`~otelcar.attribution.experiment.seeds.SeedSpace` stages ``refute.placebo`` and
``refute.recheck``), so neither reuses the rollouts that chose the culprit:

- **placebo** — the culprit's decision is *done* at its recorded action
  (:class:`~otelcar.replay.plan.Do`), every later decision re-decided, against ``P_k``, which
  holds that same action. The two plans take the same actions, so their difference must vanish:
  its paired interval must contain 0 (a failure points at the harness — a ``Do`` that changes
  what later steps see — not at the agent).
- **fresh seeds** — ``P_{k−1}`` against ``P_k`` again, with new seeds: the culprit's effect must
  be significant again (one-sided exact McNemar at ``alpha``, no multiplicity left to pay:
  the culprit is one hypothesis, chosen on other data).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from otelcar.attribution.experiment.contrast import Pairs, paired
from otelcar.attribution.experiment.seeds import SeedSpace
from otelcar.attribution.stats import Interval
from otelcar.attribution.steps.curve import StepEffect, curve_plans
from otelcar.outcome import Outcome
from otelcar.replay.engine import run_plan_async
from otelcar.replay.harness import Environment
from otelcar.replay.plan import Do, Plan, Resample
from otelcar.replay.recorded import RecordedRun


@dataclass(frozen=True)
class Refutation:
    """One refutation check and its result (``passed``: the culprit survived it)."""

    name: str
    description: str
    pairs: int
    delta: float
    delta_ci: Interval
    p_value: float
    passed: bool
    lost: int = 0  # rollouts of either plan that failed (left out of the pairs)

    def summary(self) -> str:
        verdict = "passed" if self.passed else "FAILED"
        return (
            f"{self.name} {verdict}: Δ {self.delta:+.2f} [{self.delta_ci.low:+.2f}, "
            f"{self.delta_ci.high:+.2f}], p={self.p_value:.2g}, {self.pairs} pairs"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "pairs": self.pairs,
            "delta": self.delta,
            "delta_ci": [self.delta_ci.low, self.delta_ci.high],
            "p_value": self.p_value,
            "passed": self.passed,
            "lost": self.lost,
        }


async def refute(
    run: RecordedRun,
    env: Environment,
    outcome: Outcome,
    culprit: StepEffect,
    *,
    seed: int,
    rollouts: int,
    alpha: float,
    confidence: float,
    concurrency: int = 8,
) -> list[Refutation]:
    """The placebo and the fresh-seed recheck of ``culprit`` (see the module docstring)."""
    seeds = SeedSpace(seed)
    plans = curve_plans(run)
    k = culprit.index
    decision = run.decisions[k]
    later = tuple(Resample(d.step) for d in run.decisions if d.index > k)
    out: list[Refutation] = []
    if decision.action is not None:
        placebo = Plan((Do(decision.step, decision.action), *later))
        a, b, lost = await _pairs(
            run,
            env,
            outcome,
            placebo,
            plans[k],
            seeds.stage("refute.placebo"),
            rollouts,
            concurrency,
        )
        placebo_effect = paired(Pairs.of(a, b), confidence)
        out.append(
            Refutation(
                "placebo",
                f"step {decision.step} done at its recorded action vs held at it (same actions)",
                placebo_effect.n,
                placebo_effect.difference,
                placebo_effect.interval,
                placebo_effect.p_two_sided,  # an effect either way refutes
                placebo_effect.interval.low <= 0.0 <= placebo_effect.interval.high,
                lost,
            )
        )
    now, before, lost = await _pairs(
        run,
        env,
        outcome,
        plans[k],
        plans[k - 1],
        seeds.stage("refute.recheck"),
        rollouts,
        concurrency,
    )
    recheck = paired(Pairs.of(now, before), confidence)
    out.append(
        Refutation(
            "fresh seeds",
            f"step {decision.step}'s effect measured again on new rollouts",
            recheck.n,
            recheck.difference,
            recheck.interval,
            recheck.p_greater,
            recheck.p_greater <= alpha and recheck.difference > 0,
            lost,
        )
    )
    return out


async def _pairs(
    run: RecordedRun,
    env: Environment,
    outcome: Outcome,
    first: Plan,
    second: Plan,
    seed: int,
    rollouts: int,
    concurrency: int,
) -> tuple[dict[int, bool], dict[int, bool], int]:
    results = []
    for plan in (first, second):
        results.append(
            await run_plan_async(
                run,
                plan,
                env,
                rollouts=rollouts,
                seed=seed,
                outcome=outcome,
                concurrency=concurrency,
            )
        )
    judged = [
        {r.index: f for r, f in zip(res.rollouts, res.failures, strict=True) if f is not None}
        for res in results
    ]
    lost = sum(1 for res in results for f in res.failures if f is None)
    return judged[0], judged[1], lost
