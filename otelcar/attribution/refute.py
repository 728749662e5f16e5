"""Refutation of a culprit: two checks that a real effect passes and an artifact fails.

Kept apart from the estimate (DoWhy's estimand → estimate → refutation), each on draws of its
own (:class:`~otelcar.attribution.seeds.SeedSpace` stages ``refute.placebo`` and
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

from otelcar.attribution.curve import StepEffect, curve_plans
from otelcar.attribution.seeds import SeedSpace
from otelcar.attribution.stats import Interval, mcnemar_exact_greater, newcombe_paired
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
        pairs, delta, ci, (only_a, only_b) = _contrast(a, b, confidence)
        either = min(mcnemar_exact_greater(only_a, only_b), mcnemar_exact_greater(only_b, only_a))
        out.append(
            Refutation(
                "placebo",
                f"step {decision.step} done at its recorded action vs held at it (same actions)",
                pairs,
                delta,
                ci,
                min(1.0, 2 * either),  # two-sided: an effect either way refutes
                ci.low <= 0.0 <= ci.high,
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
    pairs, delta, ci, (only_now, only_before) = _contrast(now, before, confidence)
    p = mcnemar_exact_greater(only_now, only_before)
    out.append(
        Refutation(
            "fresh seeds",
            f"step {decision.step}'s effect measured again on new rollouts",
            pairs,
            delta,
            ci,
            p,
            p <= alpha and delta > 0,
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


def _contrast(
    now: dict[int, bool], before: dict[int, bool], confidence: float
) -> tuple[int, float, Interval, tuple[int, int]]:
    """Pairs, Δ = P(fail | now) − P(fail | before), its paired interval, and the discordant
    counts (fails only under ``now``, only under ``before``)."""
    both = only_now = only_before = neither = 0
    for r in now.keys() & before.keys():
        a, b = now[r], before[r]
        both += a and b
        only_now += a and not b
        only_before += b and not a
        neither += not a and not b
    pairs = both + only_now + only_before + neither
    delta = (only_now - only_before) / pairs if pairs else 0.0
    ci = newcombe_paired(both, only_now, only_before, neither, confidence)
    return pairs, delta, ci, (only_now, only_before)
