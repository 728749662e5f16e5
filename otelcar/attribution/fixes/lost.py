"""``fix``'s validation re-decisions lost to errors: whether they could change a verdict.

Each candidate's decision-level check is a one-sided Fisher test of the fixed arm against the
unfixed base arm, Holm-adjusted across candidates, with PASS also needing the fixed rate's
upper Wilson bound at most ``max_rate``. With its errored samples assigned against the fix
(:class:`~otelcar.attribution.experiment.lost_samples.LostCounts`: the base arm's as not
repeating the bad decision, the fixed arm's as repeating it) and Bonferroni's factor (an upper
bound on Holm's), and assigned for it with Holm's most lenient factor (1), the verdict must
be the same: the verdict is monotone in both, so no assignment can then change it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from otelcar.attribution.experiment.lost_samples import LostCounts
from otelcar.attribution.fixes.result import DecisionCheck, FixCandidate

#: ``verdict(p_adjusted, upper bound of the fixed rate)`` → PASS | PART | FAIL.
Verdict = Callable[[float, float], str]


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
