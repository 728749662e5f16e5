"""Rollouts lost to errors: whether the pairs they cost could change ``attribute``'s verdict.

A rollout that fails (a missing tool policy, a tool or policy error, an outcome that raises)
leaves its pair out of a step's test. Such losses are not missing at random: a branch whose
tool fails loses exactly the rollouts that took it, and the survivors then look alike. When
the lost rollouts are the re-decisions that took the good branch at the true culprit, its
effect on the survivors is biased down and a smaller step can be named instead (issue 37).

So a verdict stands only if it stays the verdict under **every** assignment of **every**
step's lost pairs (each lost pair could have been any of the four pair outcomes). Exact
McNemar p-values and Holm's adjustment are monotone in the discordant counts, and the
culprit is the significant step with the largest Δ, so two assignments decide it:

- *everything against* (every lost pair "fails only when re-decided"): the culprit must
  still be significant — the other steps' p-values are then as large as they can be, which
  makes the culprit's Holm factor as large as it can be;
- *the culprit against, every other step for* (their lost pairs "fail only when held"):
  every other step is then as significant and its Δ as large, and the culprit's Δ as small,
  as any assignment can make them; no other step may be the significant step with the
  largest Δ.

Without a culprit, *everything for* must leave every step not significant and, when looks
were left, without a ``futility`` chance of becoming significant there (the adaptive design
would have kept sampling it); a locked-in verdict's equivalence must hold with them too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from otelcar.attribution.experiment.rollouts import PlanOutcomes
from otelcar.attribution.stats import holm, rejection_chance, stage_of, step_p_value
from otelcar.attribution.steps.curve import StepEffect, pick_culprit
from otelcar.attribution.steps.equivalence import upper_bound


def lost_pairs(
    effects: list[StepEffect], outcomes: dict[int, PlanOutcomes], looks: list[int]
) -> dict[int, int]:
    """By decision index: the rollouts below the step's look (the ones its pairs come from,
    :func:`~otelcar.attribution.steps.curve.estimate`) that could not be paired because either
    of its two plans' rollouts failed."""
    out: dict[int, int] = {}
    for e in effects:
        now, before = outcomes[e.index].failures, outcomes[e.index - 1].failures
        stage = stage_of(min(len(now), len(before)), looks) if looks else None
        upto = looks[stage] if stage is not None else min(len(now), len(before))
        attempted = sum(1 for r in now.keys() & before.keys() if r < upto)
        out[e.index] = max(0, attempted - e.pairs)
    return out


def with_lost(effect: StepEffect, lost: int, *, favourable: bool) -> StepEffect:
    """``effect`` as if its ``lost`` pairs had been judged, every one discordant: for an
    effect (``favourable``: failing only with the step held) or against it. Its p-value and
    Δ are recomputed; a step whose re-decisions all repeated the recorded action no longer
    does (a lost pair may have differed)."""
    if not lost:
        return effect
    only_now = effect.only_now + (lost if favourable else 0)
    only_before = effect.only_before + (0 if favourable else lost)
    pairs = effect.pairs + lost
    return replace(
        effect,
        pairs=pairs,
        only_now=only_now,
        only_before=only_before,
        delta=(only_now - only_before) / pairs,
        p_value=step_p_value(only_now, only_before, effect.test),  # the step's own test
        repeats_recorded=False,
    )


def retested(effects: Sequence[StepEffect], alpha: float) -> list[StepEffect]:
    """Holm's adjustment across ``effects`` again, each p-value scaled to the alpha spent at
    its look as :func:`~otelcar.attribution.steps.curve.estimate` does."""
    scaled = [
        min(1.0, e.p_value * alpha / e.test_alpha) if e.test_alpha > 0 else 1.0 for e in effects
    ]
    return [
        replace(e, p_adjusted=p, significant=p <= alpha and e.test_alpha > 0)
        for e, p in zip(effects, holm(scaled), strict=True)
    ]


def _assigned(
    effects: Sequence[StepEffect], lost: dict[int, int], favoured: set[int]
) -> list[StepEffect]:
    """Every step's lost pairs assigned: for the steps in ``favoured``, against the others."""
    return [with_lost(e, lost.get(e.index, 0), favourable=e.index in favoured) for e in effects]


def losses_could_change(
    culprit: StepEffect | None,
    effects: list[StepEffect],
    lost: dict[int, int],
    alpha: float,
    *,
    looks: Sequence[int] = (),
    thresholds: Sequence[float] = (),
    futility: float = 0.0,
    margin: float | None = None,
) -> str | None:
    """Why the verdict could change had the lost pairs been judged, else ``None`` (see the
    module docstring for the assignments that decide it).

    ``looks`` and ``thresholds``: the adaptive design's looks and the p-value each must reach
    (Holm's first step, ``spend / m``). A step whose last look came before the end (a futility
    stop, or the run ended there) would have been sampled on had its lost pairs gone for it
    while its chance of becoming significant at a later look stayed at least ``futility``
    (:func:`~otelcar.attribution.stats.rejection_chance`): with a culprit, such a step whose
    Δ could then reach the culprit's could have become the culprit; without, any such step
    could have become one. ``margin``: a locked-in verdict's equivalence margin; every step's
    upper bound on Δ, raised by the share of its pairs that were lost (``k / (pairs + k)``:
    what k more favourable pairs add to Δ at most), must stay below it."""
    if not any(lost.get(e.index, 0) for e in effects):
        return None
    everyone = {e.index for e in effects}

    def in_play(e: StepEffect) -> float | None:
        """The chance of becoming significant later of ``e`` (with its lost pairs assigned),
        when it has one of at least ``futility``; else ``None``."""
        future = [(u, t) for u, t in zip(looks, thresholds, strict=False) if u > e.pairs]
        if not future or futility <= 0:
            return None
        chance = rejection_chance(e.only_now, e.only_before, e.pairs, future, e.test)
        return chance if chance >= futility else None

    if culprit is not None:
        against = retested(_assigned(effects, lost, set()), alpha)
        held = next(e for e in against if e.index == culprit.index)
        k = lost.get(culprit.index, 0)
        if not held.significant:
            return (
                f"the culprit's {k} lost pairs, had they gone against it, would leave it "
                f"not significant (p_adj {held.p_adjusted:.2g} > {alpha:g})"
            )
        others_for = retested(_assigned(effects, lost, everyone - {culprit.index}), alpha)
        named, _ = pick_culprit(others_for)
        worst = next(e for e in others_for if e.index == culprit.index)
        if named is not None and named.index != culprit.index:
            return (
                f"step {named.step}'s {lost.get(named.index, 0)} lost pairs (and the "
                f"culprit's {k}), had they gone for it (against the culprit), could name step "
                f"{named.step} instead (Δ {named.delta:+.2f} vs the culprit's {worst.delta:+.2f})"
            )
        for e in others_for:
            if e.index == culprit.index or not lost.get(e.index, 0) or e.delta < worst.delta:
                continue
            chance = in_play(e)
            if chance is not None:
                return (
                    f"step {e.step}'s {lost[e.index]} lost pairs, had they gone for it, would "
                    f"have kept it in play with Δ {e.delta:+.2f} against the culprit's "
                    f"{worst.delta:+.2f} ({chance:.0%} chance of becoming significant at a "
                    "later look)"
                )
        return None
    favoured = retested(_assigned(effects, lost, everyone), alpha)
    for e in favoured:
        k = lost.get(e.index, 0)
        if not k:
            continue
        if e.significant:
            return (
                f"step {e.step}'s {k} lost pairs, had they gone for an effect, could make it "
                f"significant (p_adj {e.p_adjusted:.2g} ≤ {alpha:g})"
            )
        chance = in_play(e)
        if chance is not None:
            return (
                f"step {e.step}'s {k} lost pairs, had they gone for an effect, would have kept "
                f"it in play ({chance:.0%} chance of becoming significant at a later look)"
            )
    for e in effects if margin is not None else ():
        k = lost.get(e.index, 0)
        raised = upper_bound(e) + k / (e.pairs + k) if k else 0.0
        if raised >= margin:  # type: ignore[operator]
            return (
                f"step {e.step}'s {k} lost pairs, had they gone for an effect, could raise its "
                f"upper bound to Δ ≤ {min(1.0, raised):+.2f}, not below the margin {margin:g} "
                "a locked-in verdict needs"
            )
    return None
