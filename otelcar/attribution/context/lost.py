"""``why``'s re-decisions lost to errors: whether they could change its answer.

Every test of a ``why`` search and its base rate are checked with their errored samples
assigned both ways (:class:`~otelcar.attribution.experiment.lost_samples.LostCounts`):

- the **base arm**: ``not-reproduced`` (no re-decision repeated the decision) or ``too-rare``
  (below ``min_rate``) must stay so with its errored samples counted as repeats;
- a **confirmed** test must stay confirmed with its errored samples against the drop (the
  reference arm's as not repeating, this arm's as repeating): Fisher's p at the level its
  last look was tested at, and the drop at its bar;
- a test **not confirmed** must stay so with them for the drop: p above the test's level (the
  whole of it, the most lenient of its looks) or the drop below its bar. A test stopped
  before its Fisher look (the screen or the candidate look) has no p: it could change when
  the drop reaches its bar.

The first test that could change is the reason ``why`` refuses
(:func:`~otelcar.attribution.experiment.lost_samples.refusal`).
"""

from __future__ import annotations

from collections.abc import Sequence

from otelcar.attribution.context.result import TestRecord
from otelcar.attribution.experiment.lost_samples import LostCounts
from otelcar.attribution.experiment.redecisions import Arm


def base_could_change(base: Arm, verdict: str | None, min_rate: float) -> str | None:
    """Why the base arm's verdict (``not-reproduced``, ``too-rare``, else ``None``: go on)
    could change with its errored samples counted as repeats of the decision, else ``None``."""
    lost = len(base.errors)
    if not lost or verdict not in ("not-reproduced", "too-rare"):
        return None
    rate = (base.bad + lost) / (base.n + lost)
    if verdict == "not-reproduced" or rate >= min_rate:
        return (
            f"the base arm's {lost} errored re-decisions, had they repeated the decision, "
            f"would give a base rate of {rate:.2f}, not {verdict}"
        )
    return None


def record_could_change(record: TestRecord) -> str | None:
    """Why ``record``'s verdict could change had its errored samples been judged, else
    ``None`` (see the module docstring)."""
    counts = LostCounts(
        record.base_bad, record.base_n, record.base_lost, record.bad, record.n, record.lost
    )
    if not counts.any:
        return None
    what = f"test {record.t} (removing {', '.join(p.label for p in record.removed)})"
    errored = f"{record.lost + record.base_lost} errored re-decisions"
    if record.confirmed:
        worst = counts.assigned(for_drop=False)
        threshold = record.threshold if record.threshold is not None else record.level
        if worst.p > threshold or worst.drop < record.bar:
            return (
                f"{what} was confirmed, and its {errored}, had they gone against the drop, "
                f"would leave it unconfirmed (p {worst.p:.2g}, drop {worst.drop:+.2f})"
            )
        return None
    best = counts.assigned(for_drop=True)
    if best.drop >= record.bar and (record.p is None or best.p <= record.level):
        return (
            f"{what} was not confirmed, and its {errored}, had they gone for the drop, could "
            f"confirm it (drop {best.drop:+.2f}"
            + (f", p {best.p:.2g} ≤ {record.level:.2g})" if record.p is not None else ")")
        )
    return None


def losses_could_change(
    tests: Sequence[TestRecord], base: Arm, verdict: str | None, min_rate: float
) -> str | None:
    """The first reason the errored samples could change ``why``'s answer (its base
    verdict, else any test), or ``None``."""
    reason = base_could_change(base, verdict, min_rate)
    if reason is not None:
        return reason
    for record in tests:
        reason = record_could_change(record)
        if reason is not None:
            return reason
    return None
