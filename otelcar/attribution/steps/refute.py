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

The checks are sequential tests that stay valid however often they look
(:func:`~otelcar.attribution.stats.discordant_e_value`): after each batch of rollouts the
recheck's e-value on its discordant pairs is read, and sampling stops as soon as it reaches
``1/alpha`` (passed) or when even all-favourable pairs could no longer bring it there within
``rollouts`` rollouts per plan (not confirmed). A batch is as large as the fewest pairs that
could complete the evidence (:func:`~otelcar.attribution.stats.pairs_to_reject`), at most
``concurrency``: a strong effect is rechecked with 5 rollouts per plan at α = 0.05 (the fewest
any exact test needs). By Ville's inequality each check's error is at most ``alpha`` whatever
the stopping rule; its p-value is the anytime-valid ``min(1, 1/max E)``, so a check's flag and
its p-value never disagree. The placebo's e-value is two-sided
(:func:`~otelcar.attribution.stats.two_sided_e_value`), read after every batch. The recheck
reports its power: the smallest effect it finds with 80 % power within ``rollouts`` pairs
(:func:`~otelcar.attribution.stats.detectable_by`); a recheck that was not confirmed on a
culprit whose estimated Δ is below that is underpowered, not a refutation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from otelcar.attribution.experiment.contrast import Pairs, paired
from otelcar.attribution.experiment.rollouts import RolloutArm
from otelcar.attribution.experiment.seeds import SeedSpace
from otelcar.attribution.stats import (
    Interval,
    detectable_by,
    discordant_e_value,
    pairs_to_reject,
    two_sided_e_value,
)
from otelcar.attribution.steps.curve import StepEffect, curve_plans
from otelcar.attribution.steps.documents import RefutationDocument
from otelcar.outcome import Outcome
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
    e_value: float = 1.0  # the largest e-value read (p_value = min(1, 1 / e_value))
    detectable: float | None = None  # recheck: Δ found with 80 % power within max_pairs
    max_pairs: int = 0  # the most pairs the check could take
    underpowered: bool = False  # recheck not confirmed, the culprit's Δ below `detectable`

    def to_dict(self) -> RefutationDocument:
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
            "e_value": self.e_value,
            "detectable_effect": self.detectable,
            "max_pairs": self.max_pairs,
            "underpowered": self.underpowered,
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
    """The fresh-seed recheck and the placebo of ``culprit`` (see the module docstring), with
    at most ``rollouts`` rollouts per plan. ``first_look`` is kept for callers; the batches
    follow the evidence (at most ``concurrency`` rollouts each)."""
    del first_look  # the sequential test needs no pre-declared looks
    seed = SeedSpace(seed).stage("refute")
    plans = curve_plans(run)
    k = culprit.index
    decision = run.decisions[k]
    later = tuple(Resample(d.step) for d in run.decisions if d.index > k)
    arms = {"held": (plans[k], RolloutArm()), "before": (plans[k - 1], RolloutArm())}
    if decision.action is not None:
        arms["done"] = (Plan((Do(decision.step, decision.action), *later)), RolloutArm())
    draw = {"seed": seed, "outcome": outcome, "concurrency": concurrency}
    recheck_e, placebo_e = await _sample(run, env, arms, draw, rollouts=rollouts, alpha=alpha)
    held, before = arms["held"][1], arms["before"][1]
    recheck = paired(Pairs.of(held.failures, before.failures), confidence)
    recheck_p = min(1.0, 1 / recheck_e)
    detectable = detectable_by(rollouts, alpha)

    out: list[Refutation] = []
    if "done" in arms:
        done = arms["done"][1]
        placebo = paired(Pairs.of(done.failures, held.failures), confidence)
        placebo_p = min(1.0, 1 / placebo_e)
        out.append(
            Refutation(
                "placebo",
                f"step {decision.step} done at its recorded action vs held at it (same actions)",
                placebo.n,
                placebo.difference,
                placebo.interval,
                placebo_p,  # an effect either way refutes
                placebo_p > alpha,
                done.lost + held.lost,
                len(done.failures),
                e_value=placebo_e,
                max_pairs=rollouts,
            )
        )
    passed = recheck_p <= alpha
    out.append(
        Refutation(
            "fresh seeds",
            f"step {decision.step}'s effect measured again on new rollouts",
            recheck.n,
            recheck.difference,
            recheck.interval,
            recheck_p,
            passed,
            held.lost + before.lost,
            len(held.failures) + len(before.failures),
            e_value=recheck_e,
            detectable=detectable,
            max_pairs=rollouts,
            underpowered=not passed and culprit.delta < detectable,
        )
    )
    return out


async def _sample(
    run: RecordedRun,
    env: Environment,
    arms: dict[str, tuple[Plan, RolloutArm]],
    draw: dict[str, Any],
    *,
    rollouts: int,
    alpha: float,
) -> tuple[float, float]:
    """Extend every arm in batches, each as large as the fewest pairs that could confirm the
    recheck (at most ``draw["concurrency"]``), until its e-value reaches ``1/alpha`` or can
    no longer within ``rollouts``; the recheck's and the placebo's e-values (each the
    largest read after a batch: a test supermartingale's running maximum, valid by Ville)."""
    held, before = arms["held"][1], arms["before"][1]
    recheck_e = placebo_e = 1.0
    have = 0
    while have < rollouts:
        pairs = Pairs.of(held.failures, before.failures)
        need = pairs_to_reject(pairs.only_b, pairs.only_a, alpha, most=rollouts)
        if need > rollouts - have:
            break  # even all-favourable pairs could not confirm it now
        upto = have + min(max(1, need), max(1, draw["concurrency"]), rollouts - have)
        for plan, arm in arms.values():
            await arm.extend(run, plan, env, upto=upto, **draw)
        have = upto
        pairs = Pairs.of(held.failures, before.failures)
        recheck_e = max(recheck_e, discordant_e_value(pairs.only_b, pairs.only_a))
        if "done" in arms:
            shown = Pairs.of(arms["done"][1].failures, held.failures)
            placebo_e = max(placebo_e, two_sided_e_value(shown.only_b, shown.only_a))
        if recheck_e >= 1 / alpha:
            break
    return recheck_e, placebo_e
