"""Bisection of the commitment curve: find its largest jump with O(log n) plans, then confirm
that jump, and any other jump as large, on rollouts that did not choose them.

The search evaluates ``q_k`` at one look's rollouts per plan (the *search arm*): the two ends
``P_{-1}`` and ``P_{n-1}``, then midpoints, keeping the half whose end crosses the mid-level
``(q_{-1} + q_{n-1}) / 2``, down to one step ``hi`` (and ``hi − 1``). *Ties*: with two steps
of equal effect, q sits near the mid-level between them and the crossing is a coin flip, so
the search finds one of them, or a flat step in between, as the case may be. The search
therefore looks at the intervals between adjacent evaluated points: every one whose rise on
the search arm is at least :data:`COMPARABLE` of the largest (at most :data:`CANDIDATES` of
them, the largest first) is a *candidate*, and one wider than a step is narrowed the same way
to the step where q crosses its own mid-level. A single culprit gives one candidate, the
jump found (nothing more is sampled); a flat step the search landed on is no candidate when a
larger interval exists.

Choosing the candidates looks at the data, so testing their Δ on the same rollouts would test
hypotheses picked for being large: under a null their p-values are far from uniform. They are
therefore confirmed on a **confirmation arm**: fresh rollouts of ``P_{k−1}`` and ``P_k`` for
each candidate ``k``, drawn with a seed of their own (``SeedSpace.stage("bisect.confirm")`` in
:func:`~otelcar.attribution.steps.attribute.attribute_async`), independent of the search given
the selection. Each candidate's e-value on its discordant pairs
(:func:`~otelcar.attribution.stats.discordant_e_value`) is read after every batch, each batch
as large as the fewest pairs that could bring it to ``1/E ≤ alpha / K`` (``K`` candidates),
and a candidate stops once there or once that is out of reach within the last look's
rollouts. The result is Holm's adjustment of the candidates' anytime-valid p-values across
the ``K`` (:func:`~otelcar.attribution.steps.curve.estimate` with ``test="e"``). *Alpha*:
``K`` is fixed by the search arm before the confirmation arm is drawn; given the search, each
``1/E`` read at any stop is at least the running minimum of a valid anytime p-value (Ville's
inequality), and Holm on valid p-values controls the family-wise error at ``alpha`` under any
dependence, so a true null among the candidates is rejected with probability at most
``alpha`` whatever the search chose and whenever each confirmation stopped (stopping a
candidate at ``alpha / K`` only ends sampling where Holm's first threshold is already met).
The calibration test simulates 400 nulls and the naive same-rollout confirmation next to it.
The caller names the significant candidate with the largest Δ and lists as ties the
candidates that cannot be told apart from it (:func:`~otelcar.attribution.steps.curve.
pick_culprit`), as the full curve does.

The search can also give up, and the caller then runs the full curve: no rise between the
ends, evaluated points that are clearly not monotone, no candidate confirmed (an unconfirmed
jump is not an answer), or a largest confirmed jump smaller than the rise left outside the
candidates (``q_{n−1} − q_{−1} − Σ Δ⁺`` over the candidates; then an untested step could be
larger — with one candidate, a jump under half of the total rise). *The alpha split*: the
confirmation tests at its share ``alpha`` and the full curve at its own (the caller gives each
half of the run's): a run that confirms nothing and falls back makes both tests, and the chance
that either rejects a true null is at most the sum of the two shares (union bound), whichever
tests the data led to.
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
#: A q function: plan ``k``'s failure rate on the search arm (sampled on demand).
Rate = Callable[[int], Awaitable[float]]

#: An interval between adjacent evaluated points is a candidate when its rise on the search
#: arm is at least this share of the largest such rise.
COMPARABLE = 0.5
#: At most this many candidates are narrowed and confirmed (the largest rises first).
CANDIDATES = 3


@dataclass(frozen=True)
class Bisection:
    """Confirmed (or unconfirmed) jumps.

    ``effects`` holds the candidates tested (the jump found first when it is one), estimated
    on the confirmation arm and Holm-adjusted across them; ``baseline`` is ``q_{-1}`` on the
    search arm (an estimate, not a test); ``searched`` the plans the search evaluated;
    ``looks`` the confirmation looks taken (the most rollouts per plan after each batch);
    ``confidence`` the level of the confirmation's intervals; ``outcomes`` the plans' outcomes
    the effects were read from (the search arm with every candidate's two plans replaced by
    the confirmation arm).
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


async def _narrow(lo: int, hi: int, evaluated: dict[int, float], q: Rate) -> int:
    """Bisect ``(lo, hi]`` (both evaluated) to the step where q crosses the mid-level of its
    ends; evaluates the midpoints and the step before the one returned."""
    target = (evaluated[lo] + evaluated[hi]) / 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        evaluated[mid] = await q(mid)
        if evaluated[mid] >= target:
            hi = mid
        else:
            lo = mid
    if hi - 1 not in evaluated:
        evaluated[hi - 1] = await q(hi - 1)
    return hi


async def candidates(found: int, evaluated: dict[int, float], q: Rate) -> list[int]:
    """The steps to confirm: for every interval between adjacent evaluated points whose rise
    is at least :data:`COMPARABLE` of the largest (at most :data:`CANDIDATES`, the largest
    first; ``found``, the jump the search ended on, first among equals), the step where q
    crosses the interval's mid-level (narrowed on the search arm when wider than a step)."""
    points = sorted(evaluated)
    rises = {v: evaluated[v] - evaluated[u] for u, v in itertools.pairwise(points)}
    largest = max(rises.values())
    kept = sorted(
        (v for v, r in rises.items() if r > 0 and r >= COMPARABLE * largest),
        key=lambda v: (-rises[v], v != found),
    )[:CANDIDATES]
    steps: list[int] = []
    for v in kept:
        u = points[points.index(v) - 1]
        k = v if v - u == 1 else await _narrow(u, v, evaluated, q)
        if k not in steps:
            steps.append(k)
    return steps


async def _search(
    run: RecordedRun,
    search: dict[int, PlanOutcomes],
    sample_search: Sample,
    *,
    at: int,
    alpha: float,
) -> tuple[dict[int, float], list[int]] | str:
    """The search stage of :func:`bisect`: q at the ends, narrowed to the jump, the
    candidate steps around it (every point evaluated on ``at`` rollouts of ``search``); the
    reason instead when there is no rise or the evaluated points are not monotone."""

    async def q(k: int) -> float:
        await sample_search(k, at)
        return _rate(search[k])

    lo, hi = -1, run.horizon - 1
    q_lo, q_hi = await q(lo), await q(hi)
    if not q_hi > q_lo:
        return f"no rise between the ends (q_start {q_lo:.2f}, q_factual {q_hi:.2f})"
    evaluated = {lo: q_lo, hi: q_hi}
    found = await _narrow(lo, hi, evaluated, q)
    steps = await candidates(found, evaluated, q)
    points = sorted(evaluated)
    level = 1 - alpha / max(1, len(points) - 1)
    for a, b in itertools.pairwise(points):
        fa, fb = search[a].judged, search[b].judged
        if wilson(sum(fb), len(fb), level).high < wilson(sum(fa), len(fa), level).low:
            return "the evaluated points are not monotone"
    return evaluated, steps


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
    fixed-R mode) and confirm the candidates on ``confirm`` at the looks from there on,
    testing at ``alpha`` across them. Returns the reason instead when the search gives up
    (see the module docstring). The confirmation takes batches of at most ``batch`` rollouts
    per plan, up to the last look's. Passing the search arm as ``confirm`` reproduces the
    invalid same-rollout design (the calibration test does, to show the difference).
    """
    at = looks[min(1, len(looks) - 1)]
    confirm_looks = [upto for upto in looks if upto >= at]

    searched = await _search(run, search, sample_search, at=at, alpha=alpha)
    if isinstance(searched, str):
        return searched
    evaluated, steps = searched
    rise = evaluated[run.horizon - 1] - evaluated[-1]
    spend = spending_schedule(alpha, confirm_looks, 1)
    confidence = 1 - max(spend)  # the intervals' level, as with looks (the test spends none)
    view = dict(search)
    for k in steps:
        view[k - 1], view[k] = confirm[k - 1], confirm[k]
    last, each = confirm_looks[-1], alpha / len(steps)
    done: list[int] = []
    upto = dict.fromkeys(steps, 0)
    counts = dict.fromkeys(steps, (0, 0))
    settled: set[int] = set()
    effects: list[StepEffect] = []
    baseline: Baseline | None = None
    while True:
        for k in steps:
            need = pairs_to_reject(*counts[k], each, most=last)
            if k not in settled and need > last - upto[k]:
                settled.add(k)  # out of reach within the last look's rollouts
            if k not in settled:
                upto[k] += min(max(1, need), max(1, batch), last - upto[k])
        if len(settled) == len(steps):
            break
        for k in steps:
            if k not in settled:
                await sample_confirm(k - 1, upto[k])
                await sample_confirm(k, upto[k])
        done.append(max(upto.values()))
        baseline, effects = estimate(
            run,
            view,
            alpha=alpha,
            looks=confirm_looks,
            spend=spend,
            confidence=confidence,
            only=set(steps),
            test="e",
        )
        for e in effects:
            counts[e.index] = (e.only_now, e.only_before)
            if e.p_value <= each:
                settled.add(e.index)  # significant under Holm whatever the others show
        top = max(e.delta for e in effects)
        outside = rise - sum(max(0.0, e.delta) for e in effects)
        if all(k in settled or upto[k] >= at for k in steps) and top < outside:
            return (
                f"the largest jump found ({top:.2f}) is less than the rise outside the steps "
                f"tested ({outside:.2f} of {rise:.2f})"
            )
    confirmed = [e for e in effects if e.significant]
    if not confirmed or baseline is None:
        tested = ", ".join(str(run.decisions[k].step) for k in steps)
        which = f"jumps at steps {tested} were" if len(steps) > 1 else f"jump at step {tested} was"
        counts_text = "; ".join(
            f"step {e.step}: {e.only_now} vs {e.only_before} discordant pairs in {e.pairs}"
            for e in effects
        )
        return f"the {which} not confirmed on fresh rollouts" + (
            f" ({counts_text})" if counts_text else ""
        )
    order = {k: i for i, k in enumerate(steps)}
    effects.sort(key=lambda e: order[e.index])
    return Bisection(baseline, effects, len(evaluated), done, confidence, view)
