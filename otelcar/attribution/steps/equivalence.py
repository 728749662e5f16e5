""" "Locked in" as an equivalence, and which effects a run without a culprit would have seen.

No significant step is absence of evidence, not evidence of absence. ``attribute`` says
**locked-in** only with positive evidence that no step matters much: every step's upper
bound on Δ (its interval's high end at the look level; for a step whose re-decisions all
repeated the recorded action, the bound u on how often they differ) lies below a declared
**margin** (``--margin``, :data:`DEFAULT_MARGIN`). The bounds are checked at the looks the run
made, each at the per-look level: by the union bound over the looks, a step whose true Δ
reaches the margin is declared below it with probability at most (looks) × (1 − level) / 2.

Every verdict without a culprit also says which effects the run would have seen
(:func:`detectable_delta`): the smallest Δ the step's own one-sided test (exact McNemar or
e-value) at its threshold (Holm's first step, its look's alpha over the m decisions) rejects
with :data:`POWER` on the pairs the step was tested on, for an effect in one direction (every
discordant pair in its favour: the case that needs the fewest pairs; an effect with pairs
against it needs more). The statement is the largest such Δ over the steps.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from scipy.stats import binom

from otelcar.attribution.stats import pairs_to_reject
from otelcar.attribution.steps.curve import StepEffect

#: Locked-in needs every step's upper bound on Δ below this (``attribute --margin``).
DEFAULT_MARGIN = 0.3
#: The power of the "would have been found" statement.
POWER = 0.8


def upper_bound(effect: StepEffect) -> float:
    """The upper end of the step's Δ interval (1 for a step with no judged pair)."""
    high = effect.delta_ci.high
    return 1.0 if effect.pairs == 0 or math.isnan(high) else high


def largest_upper(effects: Sequence[StepEffect]) -> float:
    """The largest upper bound on Δ over ``effects`` (1 with none)."""
    return max((upper_bound(e) for e in effects), default=1.0)


def within_margin(effects: Sequence[StepEffect], margin: float) -> bool:
    """Whether every step's upper bound on Δ lies below ``margin``."""
    return bool(effects) and all(upper_bound(e) < margin for e in effects)


def detectable_delta(
    pairs: int, threshold: float, power: float = POWER, test: str = "exact"
) -> float | None:
    """The smallest Δ that a step's one-sided test at ``threshold`` rejects with ``power`` on
    ``pairs`` pairs when every discordant pair favours the effect (each pair is then
    discordant with probability Δ, and ``b`` favourable pairs reject: ``0.5^b ≤ threshold``
    for the exact McNemar test, ``1/E(b, 0) ≤ threshold`` for the e-value, ``test="e"``).
    ``None`` when no Δ can (too few pairs, or no alpha at that look)."""
    if threshold <= 0 or pairs <= 0:
        return None
    if test == "e":
        needed = max(1, pairs_to_reject(0, 0, threshold))
    else:
        needed = max(1, math.ceil(math.log2(1 / threshold)))
    if needed > pairs:
        return None
    low, high = 0.0, 1.0
    for _ in range(40):  # bisection on a monotone power curve
        middle = (low + high) / 2
        if float(binom.sf(needed - 1, pairs, middle)) >= power:
            high = middle
        else:
            low = middle
    return high


def detectable(effects: Sequence[StepEffect], hypotheses: int) -> float | None:
    """The largest :func:`detectable_delta` over ``effects`` (each at its own look's alpha
    over ``hypotheses``): any step with an effect at least this large would have been
    significant with :data:`POWER`. ``None`` when some step could not have been significant
    at all (it was tested only at a look that spends no alpha)."""
    found = [
        detectable_delta(e.pairs, e.test_alpha / max(1, hypotheses), test=e.test) for e in effects
    ]
    if not found or any(d is None for d in found):
        return None
    return max(d for d in found if d is not None)
