"""Refutation of a culprit: two checks that a real effect passes and an artifact fails.

Kept apart from the estimate (DoWhy's estimand → estimate → refutation), on draws of its own
(the :class:`~otelcar.attribution.experiment.seeds.SeedSpace` stage ``refute``), so neither
check reuses the rollouts that chose the culprit:

- **fresh seeds** — ``P_{k−1}`` against ``P_k`` again, with new seeds: the culprit's effect must
  be significant again (one-sided exact McNemar, no multiplicity left to pay: the culprit is
  one hypothesis, chosen on other data).
- **placebo** — the culprit's decision is *done* at its recorded action
  (:class:`~otelcar.replay.plan.Do`), every later decision re-decided, against ``P_k``, which
  holds that same action. The two plans take the same actions, so their difference must vanish
  (a significant difference either way points at the harness — a ``Do`` that changes what
  later steps see — not at the agent). Both checks share the ``P_k`` arm (a declared choice:
  the same stage), and a faithful ``Do`` asks exactly ``P_k``'s requests, served from the
  request cache, so the placebo costs almost nothing.

The checks are sequential: looks at 8, 16, … up to ``rollouts`` rollouts per plan, alpha spent
over the looks (:func:`~otelcar.attribution.stats.spending_schedule`, none on a look too small
to reject); sampling stops at the first look where the recheck is significant. A strong effect
is rechecked with 8 rollouts per plan; a weak one gets up to ``rollouts``. A check fails only
on a rejection at some look's level, so a run stopped at any look keeps both checks' error at
``alpha``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from otelcar.attribution.experiment.contrast import Pairs, paired
from otelcar.attribution.experiment.seeds import SeedSpace
from otelcar.attribution.stats import Interval, look_schedule, spending_schedule
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
    rollouts: int = 0  # rollouts this check ran (the shared held arm counted by the recheck)

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
            "rollouts": self.rollouts,
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
    first_look: int = 8,
) -> list[Refutation]:
    """The fresh-seed recheck and the placebo of ``culprit`` (see the module docstring)."""
    seed = SeedSpace(seed).stage("refute")
    plans = curve_plans(run)
    k = culprit.index
    decision = run.decisions[k]
    later = tuple(Resample(d.step) for d in run.decisions if d.index > k)
    arms: dict[str, tuple[Plan, dict[int, bool | None]]] = {
        "held": (plans[k], {}),
        "before": (plans[k - 1], {}),
    }
    if decision.action is not None:
        arms["done"] = (Plan((Do(decision.step, decision.action), *later)), {})
    looks = look_schedule(min(first_look, rollouts), rollouts)
    spend = spending_schedule(alpha, looks, 1)
    recheck_passed = placebo_refuted = False
    for upto, level in zip(looks, spend, strict=True):
        for plan, results in arms.values():
            have = len(results)
            if have >= upto:
                continue
            result = await run_plan_async(
                run,
                plan,
                env,
                rollouts=upto - have,
                seed=seed,
                outcome=outcome,
                concurrency=concurrency,
                first_rollout=have,
            )
            for rollout, failed in zip(result.rollouts, result.failures, strict=True):
                results[rollout.index] = failed
        recheck = paired(Pairs.of(arms["held"][1], arms["before"][1]), confidence)
        recheck_passed = recheck.p_greater <= level and recheck.difference > 0
        if "done" in arms:
            placebo = paired(Pairs.of(arms["done"][1], arms["held"][1]), confidence)
            placebo_refuted = placebo_refuted or placebo.p_two_sided <= level
        if recheck_passed:
            break

    def lost(*names: str) -> int:
        return sum(1 for name in names for f in arms[name][1].values() if f is None)

    out: list[Refutation] = []
    if "done" in arms:
        out.append(
            Refutation(
                "placebo",
                f"step {decision.step} done at its recorded action vs held at it (same actions)",
                placebo.n,
                placebo.difference,
                placebo.interval,
                placebo.p_two_sided,  # an effect either way refutes
                not placebo_refuted,
                lost("done", "held"),
                len(arms["done"][1]),
            )
        )
    out.append(
        Refutation(
            "fresh seeds",
            f"step {decision.step}'s effect measured again on new rollouts",
            recheck.n,
            recheck.difference,
            recheck.interval,
            recheck.p_greater,
            recheck_passed,
            lost("held", "before"),
            len(arms["held"][1]) + len(arms["before"][1]),
        )
    )
    return out
