"""``fix``'s validation re-decisions lost to errors: whether they could change a verdict.

Each candidate's decision-level check is a one-sided Fisher test of the fixed arm against the
unfixed base arm, Holm-adjusted across candidates, with PASS also needing the fixed rate's
upper Wilson bound at most ``max_rate``. With its errored samples assigned against the fix
(:class:`~otelcar.attribution.experiment.lost_samples.LostCounts`: the base arm's as not
repeating the bad decision, the fixed arm's as repeating it) and Bonferroni's factor (an upper
bound on Holm's), and assigned for it with Holm's most lenient factor (1), the verdict must
be the same: the verdict is monotone in both, so no assignment can then change it.

The forward check pairs each fixed rollout with the unfixed one of the same seeds; a pair is
lost when either rollout failed. Its lost pairs are assigned the same two ways (against the
fix: the fixed run fails and the unfixed one does not; for it: the other way round) and the
verdict must not move (:func:`forward_could_change`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from otelcar.attribution.experiment.contrast import Pairs
from otelcar.attribution.experiment.lost_samples import LostCounts
from otelcar.attribution.fixes.result import DecisionCheck, FixCandidate, ForwardCheck

#: ``verdict(p_adjusted, upper bound of the fixed rate)`` → PASS | PART | FAIL.
Verdict = Callable[[float, float], str]
#: ``verdict(p_adjusted, fixed failures, fixed rollouts judged)`` → PASS | PART | FAIL.
ForwardVerdict = Callable[[float, int, int], str]


def decision_could_change(
    checks: Sequence[tuple[FixCandidate, DecisionCheck]], verdict: Verdict
) -> str | None:
    """Why a candidate's decision-level verdict could change had its errored re-decisions
    been judged, else ``None`` (see the module docstring)."""
    factor = len(checks)
    for candidate, check in checks:
        counts = LostCounts(
            check.base_bad, check.base_n, check.base_lost, check.bad, check.n, check.lost
        )
        if not counts.any:
            continue
        worst = counts.assigned(for_drop=False)
        best = counts.assigned(for_drop=True)
        low = verdict(min(1.0, factor * worst.p), worst.upper(check.confidence))
        high = verdict(best.p, best.upper(check.confidence))
        if low == high == check.verdict:
            continue
        other = low if low != check.verdict else high
        return (
            f"candidate {candidate.name!r} ({check.verdict}) could be {other} had its "
            f"{check.lost + check.base_lost} errored re-decisions been judged"
        )
    return None


def forward_could_change(
    checks: Sequence[tuple[FixCandidate, ForwardCheck]],
    verdict: ForwardVerdict,
    p_of: Callable[[Pairs], float],
) -> str | None:
    """Why a candidate's forward verdict could change had its lost pairs (of the rollouts
    its sequential check ran, ``check.rollouts`` per arm) been judged, else ``None``.
    ``p_of``: the forward test's p-value of the fixed arm failing less than the unfixed one,
    on pairs (B: fixed, A: unfixed); ``verdict(p_adjusted, fixed failures, fixed judged)``."""
    factor = len(checks)
    for candidate, check in checks:
        both, only_fixed, only_base, neither = check.pairs
        lost = max(0, check.rollouts - (both + only_fixed + only_base + neither))
        if not lost:
            continue
        against = Pairs(both, only_fixed + lost, only_base, neither)
        for_fix = Pairs(both, only_fixed, only_base + lost, neither)
        low = verdict(min(1.0, factor * p_of(against)), check.failed + lost, check.n + lost)
        high = verdict(p_of(for_fix), check.failed, check.n + lost)
        if low == high == check.verdict:
            continue
        other = low if low != check.verdict else high
        return (
            f"candidate {candidate.name!r}'s forward check ({check.verdict}) could be {other} "
            f"had its {lost} lost pairs been judged"
        )
    return None
