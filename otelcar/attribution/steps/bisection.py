"""Bisection of the commitment curve: find its largest jump with O(log n) plans, then confirm
that jump on rollouts that did not choose it.

The search evaluates ``q_k`` at one look's rollouts per plan (the *search arm*): the two ends
``P_{-1}`` and ``P_{n-1}``, then midpoints, keeping the half whose end crosses the mid-level
``(q_{-1} + q_{n-1}) / 2``, down to one step ``hi`` (and ``hi − 1``). Choosing ``hi`` looks at
the data, so testing ``Δ_hi`` on the same rollouts would test a hypothesis picked for being
large: under a null its p-value is far from uniform. The jump is therefore confirmed on a
**confirmation arm**: fresh rollouts of ``P_{hi−1}`` and ``P_hi`` drawn with a seed of their
own (``SeedSpace.stage("bisect.confirm")`` in
:func:`~otelcar.attribution.steps.attribute.attribute_async`), independent of the search given
the selection. One hypothesis is tested there, sequentially: its e-value on the discordant
pairs (:func:`~otelcar.attribution.stats.discordant_e_value`) is read after every batch, each
batch as large as the fewest pairs that could complete the evidence, and the confirmation
stops as soon as ``1/E ≤ alpha`` or once that is out of reach within the last look's rollouts.
By Ville's inequality a true null is rejected with probability at most ``alpha`` whatever the
search chose and whenever the confirmation stopped — the calibration test simulates 400 nulls
and the naive same-rollout confirmation next to it.

The search can also give up, and the caller then runs the full curve: no rise between the
ends, evaluated points that are clearly not monotone, a jump the confirmation did not confirm
(an unconfirmed jump is not an answer), or a confirmed jump less than half of the total rise
(then it need not be the largest). *The alpha split*: the confirmation tests at its share
``alpha`` and the full curve at its own (the caller gives each half of the run's): a run that
confirms nothing and falls back makes both tests, and the chance that either rejects a true
null is at most the sum of the two shares (union bound), whichever tests the data led to.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from otelcar.attribution.experiment.rollouts import PlanOutcomes
from otelcar.attribution.stats import pairs_to_reject, spending_schedule, wilson
from otelcar.attribution.steps.curve import Baseline, StepEffect, estimate
from otelcar.replay.recorded import RecordedRun

#: ``sample(k, upto)``: bring plan ``k`` of one arm up to ``upto`` rollouts.
Sample = Callable[[int, int], Awaitable[None]]


@dataclass(frozen=True)
class Bisection:
    """A confirmed (or unconfirmed) largest jump.

    ``effects`` holds the one step tested (``hi``), estimated on the confirmation arm;
    ``baseline`` is ``q_{-1}`` on the search arm (an estimate, not a test); ``searched`` the
    plans the search evaluated; ``looks`` the confirmation looks taken; ``confidence`` the
    level of the confirmation's intervals; ``outcomes`` the plans' outcomes the effects were
    read from (the search arm with ``hi − 1`` and ``hi`` replaced by the confirmation arm).
    """

    baseline: Baseline
    effects: list[StepEffect]
    searched: int
    looks: list[int]
    confidence: float
    outcomes: dict[int, PlanOutcomes]


def _rate(outcomes: PlanOutcomes) -> float:
    judged = outcomes.judged
    return sum(judged) / len(judged) if judged else float("nan")


async def bisect(
    run: RecordedRun,
    search: dict[int, PlanOutcomes],
    sample_search: Sample,
    confirm: dict[int, PlanOutcomes],
    sample_confirm: Sample,
    *,
    looks: Sequence[int],
    alpha: float,
    batch: int = 8,
) -> Bisection | str:
    """Search on ``search`` (plans brought to the second look's rollouts, the first in
    fixed-R mode) and confirm on ``confirm`` at the looks from there on, testing at
    ``alpha``. Returns the reason instead when the search gives up (see the module
    docstring). The confirmation takes batches of at most ``batch`` rollouts per plan, up to
    the last look's. Passing the search arm as ``confirm`` reproduces the invalid same-rollout
    design (the calibration test does, to show the difference).
    """
    at = looks[min(1, len(looks) - 1)]
    confirm_looks = [upto for upto in looks if upto >= at]

    async def q(k: int) -> float:
        await sample_search(k, at)
        return _rate(search[k])

    lo, hi = -1, run.horizon - 1
    q_lo, q_hi = await q(lo), await q(hi)
    if not q_hi > q_lo:
        return f"no rise between the ends (q_start {q_lo:.2f}, q_factual {q_hi:.2f})"
    evaluated = {lo: q_lo, hi: q_hi}
    target = (q_lo + q_hi) / 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        evaluated[mid] = await q(mid)
        if evaluated[mid] >= target:
            hi = mid
        else:
            lo = mid
    evaluated[hi - 1] = await q(hi - 1)
    points = sorted(evaluated)
    level = 1 - alpha / max(1, len(points) - 1)
    for a, b in itertools.pairwise(points):
        fa, fb = search[a].judged, search[b].judged
        if wilson(sum(fb), len(fb), level).high < wilson(sum(fa), len(fa), level).low:
            return "the evaluated points are not monotone"
    rise = evaluated[run.horizon - 1] - evaluated[-1]
    spend = spending_schedule(alpha, confirm_looks, 1)
    confidence = 1 - max(spend)  # the intervals' level, as with looks (the test spends none)
    view = {**search, hi - 1: confirm[hi - 1], hi: confirm[hi]}
    last = confirm_looks[-1]
    done: list[int] = []
    upto = 0
    only_now = only_before = 0
    while True:
        need = pairs_to_reject(only_now, only_before, alpha, most=last)
        if need > last - upto:
            return (
                f"the jump at step {run.decisions[hi].step} was not confirmed on fresh "
                f"rollouts ({only_now} vs {only_before} discordant pairs in {upto})"
            )
        upto += min(max(1, need), max(1, batch), last - upto)
        await sample_confirm(hi - 1, upto)
        await sample_confirm(hi, upto)
        done.append(upto)
        baseline, effects = estimate(
            run,
            view,
            alpha=alpha,
            looks=confirm_looks,
            spend=spend,
            confidence=confidence,
            only={hi},
            test="e",
        )
        jump = effects[0]
        only_now, only_before = jump.only_now, jump.only_before
        if (jump.significant or upto >= at) and jump.delta < rise / 2:
            return f"the jump found ({jump.delta:.2f}) is less than half the rise ({rise:.2f})"
        if jump.significant:
            return Bisection(baseline, effects, len(evaluated), done, confidence, view)
