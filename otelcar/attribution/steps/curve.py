"""The commitment curve and the step effects (DESIGN.md §6).

For decisions 0..n-1 of a failing run, plan ``P_k`` holds decisions 0..k at their recorded
actions and re-decides every later one; ``P_{-1}`` re-decides everything, ``P_{n-1}`` is the
factual replay. ``q_k = P(fail | P_k)``; the step effect of decision k is
``Δ_k = q_k − q_{k−1}``: how much committing its recorded action raised the failure
probability. The Δ's telescope to ``q_{n−1} − q_{−1}``.

Rollout r of every plan uses the same seeds, so ``P_{k−1}`` and ``P_k`` are compared pair by
pair (a paired design: McNemar's exact test, Newcombe's paired interval). When decision k's
resample repeats its recorded action, the two plans' rollouts are identical from there on (the
request cache serves the same request with the same seed), so such a step costs one policy
call per rollout. A step whose re-decisions have so far repeated its recorded action in every
rollout has no discordant pair *yet*: that is absence of evidence, not Δ = 0. Its effect is
bounded by how often a re-decision can differ: after m repeats, P(differs) ≤ u (the exact
Clopper-Pearson bound, :func:`~otelcar.attribution.stats.repeat_bound`) and |Δ| ≤ u, so its
interval is [−u, +u]; it stays in play (gets more rollouts) until u is too small for it to
matter (:func:`bound_closes`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from otelcar.attribution.experiment.contrast import Pairs, paired
from otelcar.attribution.experiment.rollouts import PlanOutcomes
from otelcar.attribution.stats import (
    Interval,
    contrast_interval,
    holm,
    pairs_to_reject,
    repeat_bound,
    separation_chance,
    stage_of,
    step_p_value,
    wilson,
)
from otelcar.attribution.steps.documents import BaselineDocument, StepDocument
from otelcar.replay.plan import Plan
from otelcar.replay.recorded import RecordedRun, same_message


def curve_plans(run: RecordedRun) -> dict[int, Plan]:
    """``P_k`` for k = -1..n-1 (keys are decision indexes; -1 re-decides everything)."""
    steps = [d.step for d in run.decisions]
    plans = {-1: Plan.resample_from(steps[0], steps)} if steps else {}
    for k in range(len(steps)):
        plans[k] = Plan.resample_from(steps[k + 1], steps) if k + 1 < len(steps) else Plan()
    return plans


@dataclass(frozen=True)
class StepEffect:
    """One decision's row: q_k and the step effect Δ_k with its test."""

    index: int
    step: int
    agent: str | None
    name: str
    n: int
    fails: int
    q: float
    q_ci: Interval
    pairs: int
    only_now: int  # pairs failing with the step held, not when it was re-decided
    only_before: int
    delta: float
    delta_ci: Interval
    p_value: float
    p_adjusted: float = 1.0
    significant: bool = False
    repeats_recorded: bool = False  # every re-decision so far repeated the recorded action
    test_alpha: float = 0.0  # the alpha spent at the look whose pairs the test used
    futile: bool = False  # sampling stopped: too little chance left to become significant
    redecisions: int = 0  # re-decisions of this step seen (the first re-decided of P_{k-1})
    differs_bound: float | None = None  # with repeats_recorded: u, the bound on P(differs)
    test: str = "exact"  # how p_value was computed (stats.step_p_value): exact McNemar or e

    def to_dict(self) -> StepDocument:
        return {
            "index": self.index,
            "step": self.step,
            "agent": self.agent,
            "name": self.name,
            "rollouts": self.n,
            "failures": self.fails,
            "q": self.q,
            "q_ci": [self.q_ci.low, self.q_ci.high],
            "pairs": self.pairs,
            "discordant": {
                "fail_only_when_held": self.only_now,
                "fail_only_when_redecided": self.only_before,
            },
            "delta": self.delta,
            "delta_ci": [self.delta_ci.low, self.delta_ci.high],
            "p_value": self.p_value,
            "p_adjusted": self.p_adjusted,
            "significant": self.significant,
            "repeats_recorded_action": self.repeats_recorded,
            "test_alpha": self.test_alpha,
            "futile": self.futile,
            "redecisions": self.redecisions,
            "differs_bound": self.differs_bound,
        }


@dataclass(frozen=True)
class Baseline:
    """q_{-1}: the failure rate when every decision is re-decided."""

    n: int
    fails: int
    q: float
    q_ci: Interval

    def to_dict(self) -> BaselineDocument:
        return {
            "rollouts": self.n,
            "failures": self.fails,
            "q": self.q,
            "q_ci": [self.q_ci.low, self.q_ci.high],
        }


def estimate(
    run: RecordedRun,
    outcomes: dict[int, PlanOutcomes],
    *,
    alpha: float,
    looks: Sequence[int],
    spend: Sequence[float],
    confidence: float,
    only: set[int] | None = None,
    test: str = "exact",
) -> tuple[Baseline, list[StepEffect]]:
    """q and Δ for every decision (or those in ``only``, whose plan and predecessor plan were
    run) from the plans' outcomes; tests adjusted across steps (Holm) and looks (spending).

    Step k's pairs are the rollout indexes below the last look both of its plans reached
    (its *stage* s); its one-sided exact McNemar p-value on those pairs is tested at the alpha
    spent at that look, ``spend[s]``: ``p_adjusted`` is Holm's adjustment of
    ``p · alpha / spend[s]`` (1 when ``spend[s] = 0``), significant when ``≤ alpha``. A true
    null is then rejected only if its fixed-size p-value at some look s is at most
    ``spend[s] / m``, which has probability at most ``Σ_s spend[s] = alpha`` whatever looks,
    allocations and stops the run made (Holm's argument, then the union bound over looks).

    A step whose re-decision repeated its recorded action in every pair
    (``repeats_recorded``) has had no chance yet to show an effect (both plans ran the same
    actions): Δ = 0 observed, p-value 1, and the interval [−u, +u] with u the exact bound on
    how often its re-decision differs (see the module docstring).
    Intervals are at ``confidence``.

    ``test="e"``: each step's p-value is instead the anytime-valid ``1/E`` of its e-value
    (:func:`~otelcar.attribution.stats.anytime_p_value`) on all the pairs both its plans have,
    tested at the full ``alpha`` (Holm across steps): valid whatever looks, allocations and
    stops the run made, by Ville's inequality, with no alpha spent over looks.
    """
    base = outcomes[-1].judged
    baseline = Baseline(
        len(base),
        sum(base),
        sum(base) / len(base) if base else float("nan"),
        wilson(sum(base), len(base), confidence),
    )
    effects: list[StepEffect] = []
    scaled: list[float] = []
    for decision in run.decisions:
        k = decision.index
        if only is not None and k not in only:
            continue
        now, before = outcomes[k], outcomes[k - 1]
        stage = stage_of(min(len(now.failures), len(before.failures)), looks)
        upto = looks[stage] if stage is not None else 0
        level = spend[stage] if stage is not None else 0.0
        if test == "e":
            upto = min(len(now.failures), len(before.failures))
            level = alpha if upto else 0.0
        judged = [f for r, f in now.failures.items() if f is not None and r < upto]
        fails = sum(judged)
        pairs = Pairs.of(now.failures, before.failures, upto)  # B: now, A: before
        effect = paired(pairs, confidence)
        repeated = [v for r, v in before.repeated_first.items() if r < upto]
        repeats = bool(repeated) and all(repeated)
        bound = repeat_bound(len(repeated), confidence) if repeats else None
        p_value = 1.0 if repeats else step_p_value(pairs.only_b, pairs.only_a, test)
        effects.append(
            StepEffect(
                index=k,
                step=decision.step,
                agent=decision.agent,
                name=decision.name,
                n=len(judged),
                fails=fails,
                q=fails / len(judged) if judged else float("nan"),
                q_ci=wilson(fails, len(judged), confidence),
                pairs=pairs.n,
                only_now=pairs.only_b,
                only_before=pairs.only_a,
                delta=0.0 if repeats else effect.difference,
                delta_ci=Interval(-bound, bound) if bound is not None else effect.interval,
                p_value=p_value,
                repeats_recorded=repeats,
                test_alpha=level,
                redecisions=len(repeated),
                differs_bound=bound,
                test=test,
            )
        )
        scaled.append(min(1.0, p_value * alpha / level) if level > 0 else 1.0)
    adjusted = holm(scaled)
    return baseline, [
        replace(e, p_adjusted=p, significant=p <= alpha and e.test_alpha > 0)
        for e, p in zip(effects, adjusted, strict=True)
    ]


def contrast(
    outcomes: dict[int, PlanOutcomes], top: StepEffect, other: StepEffect, confidence: float
) -> Interval:
    """Interval for ``Δ_top − Δ_other``.

    When both steps have the same rollouts, paired: rollout r gives
    ``(f_top − f_top−1) − (f_other − f_other−1)`` (f: failed under the plan), in [−2, 2], and
    common random numbers make this far tighter than comparing two intervals. When one step
    has fewer rollouts (its plans were sampled less), each Δ gets its own interval from its
    own pairs and the half-widths add (valid whatever the correlation of the two estimates).
    A step whose re-decisions all repeated its recorded action contributes Δ = 0 observed
    (its bound is compared in :func:`told_apart`).
    """
    top_values = _pair_values(outcomes, top.index)
    if other.repeats_recorded:
        return contrast_interval(list(top_values.values()), confidence, 1.0)
    other_values = _pair_values(outcomes, other.index)
    if set(top_values) == set(other_values):
        return contrast_interval(
            [top_values[r] - other_values[r] for r in top_values], confidence, 2.0
        )
    a = contrast_interval(list(top_values.values()), confidence, 1.0)
    b = contrast_interval(list(other_values.values()), confidence, 1.0)
    mean_a = sum(top_values.values()) / len(top_values) if top_values else 0.0
    mean_b = sum(other_values.values()) / len(other_values) if other_values else 0.0
    low = (mean_a - mean_b) - ((mean_a - a.low) + (b.high - mean_b))
    high = (mean_a - mean_b) + ((a.high - mean_a) + (mean_b - b.low))
    return Interval(max(-2.0, low), min(2.0, high))


def _pair_values(outcomes: dict[int, PlanOutcomes], k: int) -> dict[int, float]:
    """``f_k − f_{k−1}`` by rollout index, over the rollouts both plans judged."""
    now, before = outcomes[k].failures, outcomes[k - 1].failures
    return {
        r: float(int(f) - int(before[r]))
        for r, f in now.items()
        if f is not None and before.get(r) is not None
    }


def pick_culprit(
    effects: list[StepEffect],
    outcomes: dict[int, PlanOutcomes] | None = None,
    confidence: float = 0.95,
) -> tuple[StepEffect | None, list[int]]:
    """The significant step with the largest Δ, and every step with a positive Δ that cannot
    be told apart from it: the paired interval of ``Δ_culprit − Δ_step`` reaches 0 (with
    ``outcomes``), else the step's Δ interval reaches the culprit's."""
    significant = [e for e in effects if e.significant]
    if not significant:
        return None, []
    culprit = max(significant, key=lambda e: (e.delta, -e.p_adjusted))
    return culprit, [
        e.step
        for e in effects
        if e is not culprit and e.delta > 0 and not told_apart(culprit, e, outcomes, confidence)
    ]


def told_apart(
    culprit: StepEffect,
    other: StepEffect,
    outcomes: dict[int, PlanOutcomes] | None,
    confidence: float,
) -> bool:
    """Whether ``culprit``'s effect is shown larger than ``other``'s: by the paired contrast
    of their rollouts when there are outcomes to pair, else (or while ``other``'s
    re-decisions all repeated the recorded action) by the upper bound of ``other``'s Δ
    lying under the lower bound of ``culprit``'s."""
    if other.repeats_recorded:  # no pair told them apart yet: compare the bound
        return other.delta_ci.high < culprit.delta_ci.low
    if outcomes is None:
        return other.delta_ci.high < culprit.delta_ci.low
    return contrast(outcomes, culprit, other, confidence).low > 0


def separation_futile(
    culprit: StepEffect,
    other: StepEffect,
    outcomes: dict[int, PlanOutcomes],
    *,
    most: int,
    confidence: float,
    futility: float,
) -> bool:
    """Whether more rollouts are unlikely to tell ``other`` apart from ``culprit`` within the
    design: on the rollouts both were measured on, the chance that their paired contrast
    excludes 0 by ``most`` pairs (:func:`~otelcar.attribution.stats.separation_chance`, at
    the current trend) is below ``futility``. Such a step is left beside the culprit as a
    tie (:func:`pick_culprit` lists it), as a step that can no longer become significant is
    left alone. A step whose re-decisions all repeated its recorded action is compared by
    its bound instead (never futile here)."""
    if futility <= 0 or other.repeats_recorded:
        return False
    top, rest = _pair_values(outcomes, culprit.index), _pair_values(outcomes, other.index)
    if set(top) != set(rest):
        return False
    values = [top[r] - rest[r] for r in top]
    return separation_chance(values, most, confidence) < futility


def separated(
    culprit: StepEffect,
    effects: list[StepEffect],
    outcomes: dict[int, PlanOutcomes] | None = None,
    confidence: float = 0.95,
) -> bool:
    """Whether the culprit's Δ is above every other step's (paired contrasts with
    ``outcomes``; else its Δ interval lies above every other step's)."""
    return all(told_apart(culprit, e, outcomes, confidence) for e in effects if e is not culprit)


def detectable_effect(looks: Sequence[int], threshold: float, test: str = "exact") -> float:
    """The smallest Δ an exact McNemar test at ``threshold`` can detect with ``looks[-1]``
    pairs: every discordant pair favourable needs ``b`` pairs with ``0.5^b ≤ threshold``
    (``test="e"``: ``b`` with ``1/E(b, 0) ≤ threshold``)."""
    if not looks or looks[-1] <= 0 or threshold <= 0:
        return 0.0
    needed = max(1, math.ceil(math.log2(1 / threshold)))
    if test == "e":
        needed = max(1, pairs_to_reject(0, 0, threshold))
    return min(1.0, needed / looks[-1])


def bound_closes(effect: StepEffect, floor: float) -> bool:
    """Whether a step whose re-decisions all repeated its recorded action is out of play:
    its bound u on P(differs) — and so on |Δ| — is below ``floor`` (the culprit's lower
    bound, or the smallest effect the design can detect)."""
    return effect.differs_bound is not None and effect.differs_bound < floor


def point_of_no_return(effects: list[StepEffect], factual_failed: bool) -> int | None:
    """The first step after which q stays at the failure level: every later q interval
    contains the factual outcome (1 for a failing run). A step with no judged rollout was not
    measured (its interval, [0, 1], contains anything): no point at or before it is one."""
    level = 1.0 if factual_failed else 0.0
    for index, effect in enumerate(effects):
        if all(e.n > 0 and e.q_ci.contains(level) for e in effects[index:]):
            return effect.step
    return None


def repeated_recorded(run: RecordedRun, decision_index: int, action: Any) -> bool:
    """Whether ``action`` equals the recorded action of decision ``decision_index``."""
    recorded = run.decisions[decision_index].action
    return recorded is not None and action is not None and same_message(action, recorded)
