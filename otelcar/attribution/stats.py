"""The statistics of attribution: intervals, exact tests, multiplicity, alpha spending.

Every function is pure and documents its method and assumptions.

- :func:`wilson` — Wilson score interval for a binomial proportion (Wilson 1927).
- :func:`newcombe_paired` — interval for the difference of two *paired* proportions,
  Newcombe (1998) method 10 (Wilson intervals of the margins with a correlation correction).
- :func:`newcombe_unpaired` — Newcombe (1998) method 10 for independent samples
  ("square-and-add" of Wilson limits).
- :func:`mcnemar_exact_greater` — one-sided exact McNemar test on the discordant pairs
  (H0: P(fail under plan B) ≤ P(fail under plan A)); exact binomial, no normal approximation.
- :func:`holm` — Holm (1979) step-down adjustment: strong family-wise error control.
- :func:`look_alpha` — alpha spending over a fixed schedule of looks (Bonferroni split), which
  keeps the error rate valid under optional stopping at any of the scheduled looks.
- :func:`spending_schedule` — the same union-bound spending, with no alpha on looks that
  cannot reject (too few pairs for any exact p-value to pass Holm's first threshold).
- :func:`rejection_chance` — conditional power of a step's test at the remaining looks under
  an optimistic current trend (the futility rule: only ever used to stop without a culprit).
- :func:`contrast_interval` — interval for the mean of paired per-rollout contrasts (is the
  culprit's Δ above another step's?).
- :func:`discordant_e_value` — an anytime-valid e-value on the discordant pairs (a mixture
  likelihood ratio, a test supermartingale under ``P(favourable | discordant) ≤ 1/2``):
  one hypothesis checked after every pair, stopped whenever the evidence suffices (Ville).
  :func:`two_sided_e_value`, :func:`pairs_to_reject`, :func:`sequential_power` and
  :func:`detectable_by` go with it.
- :func:`rate_below_e_value` — an anytime-valid e-value that a Bernoulli rate is below a
  bound (a mixture likelihood ratio against every rate at or above it).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats
from scipy.special import betainc, betaln, gammaln


@dataclass(frozen=True, slots=True)
class Interval:
    low: float
    high: float

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


@functools.lru_cache(maxsize=1024)
def _z(confidence: float) -> float:
    """The two-sided normal quantile of ``confidence`` (remembered: a run asks the same few
    levels hundreds of times, and each scipy call costs tens of microseconds)."""
    return float(stats.norm.ppf(1 - (1 - confidence) / 2))


def wilson(successes: int, n: int, confidence: float = 0.95) -> Interval:
    """Wilson score interval for ``successes / n`` (``[0, 1]`` when ``n == 0``)."""
    if n == 0:
        return Interval(0.0, 1.0)
    z = _z(confidence)
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return Interval(max(0.0, centre - half), min(1.0, centre + half))


def newcombe_unpaired(x1: int, n1: int, x2: int, n2: int, confidence: float = 0.95) -> Interval:
    """Interval for ``x2/n2 - x1/n1`` from independent samples (Newcombe method 10)."""
    p1, p2 = (x1 / n1 if n1 else 0.0), (x2 / n2 if n2 else 0.0)
    w1, w2 = wilson(x1, n1, confidence), wilson(x2, n2, confidence)
    d = p2 - p1
    low = d - math.sqrt((p2 - w2.low) ** 2 + (w1.high - p1) ** 2)
    high = d + math.sqrt((w2.high - p2) ** 2 + (p1 - w1.low) ** 2)
    return Interval(max(-1.0, low), min(1.0, high))


def newcombe_paired(
    both: int, only_b: int, only_a: int, neither: int, confidence: float = 0.95
) -> Interval:
    """Interval for ``P(B) - P(A)`` from paired binary outcomes (Newcombe 1998, method 10).

    Counts: ``both`` (A=1,B=1), ``only_b`` (A=0,B=1), ``only_a`` (A=1,B=0), ``neither``.
    """
    n = both + only_b + only_a + neither
    if n == 0:
        return Interval(-1.0, 1.0)
    pa, pb = (both + only_a) / n, (both + only_b) / n
    wa, wb = wilson(both + only_a, n, confidence), wilson(both + only_b, n, confidence)
    d = pb - pa
    # Correlation of the margins with Newcombe's continuity correction of the numerator:
    # (ad - bc) - n/2 when ad - bc > n/2, itself when negative, else 0.
    margins = (both + only_a) * (only_b + neither) * (both + only_b) * (only_a + neither)
    phi = 0.0
    if margins > 0:
        cross = both * neither - only_a * only_b
        corrected = cross - n / 2 if cross > n / 2 else (cross if cross < 0 else 0.0)
        phi = corrected / math.sqrt(margins)
    dl2 = (pb - wb.low) ** 2 - 2 * phi * (pb - wb.low) * (wa.high - pa) + (wa.high - pa) ** 2
    du2 = (wb.high - pb) ** 2 - 2 * phi * (wb.high - pb) * (pa - wa.low) + (pa - wa.low) ** 2
    return Interval(max(-1.0, d - math.sqrt(max(dl2, 0.0))), min(1.0, d + math.sqrt(max(du2, 0.0))))


@functools.lru_cache(maxsize=8192)
def mcnemar_exact_greater(only_b: int, only_a: int) -> float:
    """One-sided exact McNemar p-value for H1: P(B) > P(A).

    Under H0 the ``only_b`` discordant pairs are Binomial(only_a + only_b, 1/2) or fewer;
    p = P(X ≥ only_b). With no discordant pair the p-value is 1. Remembered, as :func:`_z`:
    the curve asks it of every step at every look, mostly with the same few small counts.
    """
    discordant = only_a + only_b
    if discordant == 0:
        return 1.0
    return float(stats.binom.sf(only_b - 1, discordant, 0.5))


def fisher_exact_greater(x1: int, n1: int, x2: int, n2: int) -> float:
    """One-sided Fisher exact p-value for H1: ``x1/n1 > x2/n2`` (independent samples)."""
    table = [[x1, n1 - x1], [x2, n2 - x2]]
    return float(stats.fisher_exact(table, alternative="greater").pvalue)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values (same order as given)."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [1.0] * len(p_values)
    running = 0.0
    m = len(p_values)
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def look_schedule(first: int, maximum: int) -> list[int]:
    """Rollout counts at which an adaptive run may look: doubling from ``first`` to
    ``maximum`` (both included)."""
    looks = []
    r = max(1, first)
    while r < maximum:
        looks.append(r)
        r *= 2
    looks.append(maximum)
    return looks


def step_schedule(first: int, maximum: int, every: int) -> list[int]:
    """Rollout counts at which a design whose test spends no alpha per look (e-values) may
    look: ``first``, then every ``every`` rollouts, and ``maximum`` (both included)."""
    looks = list(range(max(1, first), maximum, max(1, every)))
    return [*looks, maximum]


def look_alpha(alpha: float, looks: int) -> float:
    """Per-look significance level that keeps the overall level ``alpha`` whatever look the
    run stops at (Bonferroni alpha spending over a fixed, pre-declared number of looks)."""
    return alpha / max(1, looks)


def spending_schedule(alpha: float, looks: Sequence[int], hypotheses: int) -> list[float]:
    """Alpha spent at each look: an equal split over the looks that can reject, none on the
    looks that cannot.

    A look at ``u`` rollouts per plan gives a step at most ``u`` pairs, so its exact one-sided
    McNemar p-value is at least ``2**-u``; Holm's first rejection needs ``p ≤ α_look / m``
    (``m = hypotheses``). A look with ``2**-u > α_look / m`` can therefore never reject, and
    alpha put on it is wasted. The schedule depends only on the looks, ``alpha`` and ``m`` (all
    fixed before any rollout), and its shares sum to ``alpha``, so the union bound over looks
    holds whatever look the run stops at. When even the last look cannot reject, it gets all
    the alpha (nothing can be rejected anyway).
    """
    count = len(looks)
    for start in range(count):
        share = alpha / (count - start)
        if 0.5 ** looks[start] <= share / max(1, hypotheses):
            return [0.0] * start + [share] * (count - start)
    return [0.0] * (count - 1) + [alpha] if count else []


def stage_of(pairs_upto: int, looks: Sequence[int]) -> int | None:
    """The last look whose rollout count is at most ``pairs_upto`` (``None``: before the first):
    the stage at which a step's pairs (rollout indexes ``< pairs_upto``) were complete."""
    stage = None
    for index, upto in enumerate(looks):
        if upto <= pairs_upto:
            stage = index
    return stage


def repeat_bound(repeats: int, confidence: float = 0.95) -> float:
    """The exact upper bound (Clopper-Pearson, two-sided ``confidence``) on the probability
    of an event never seen in ``repeats`` independent tries: ``1 − ((1 − c) / 2)^(1/m)``;
    1 when nothing was tried. After 8 re-decisions that all repeated the recorded action,
    P(differs) ≤ 0.37 at 95 %."""
    if repeats <= 0:
        return 1.0
    return 1.0 - ((1.0 - confidence) / 2) ** (1.0 / repeats)


def rejection_chance(
    only_now: int,
    only_before: int,
    pairs: int,
    future: Sequence[tuple[int, float]],
    test: str = "exact",
) -> float:
    """Conditional power of one step's exact McNemar test under an optimistic current trend.

    The step has ``pairs`` pairs so far, ``only_now`` of them discordant in favour of an effect
    and ``only_before`` against. Each new pair is taken to be favourable with probability
    ``(only_now + 1) / (pairs + 2)`` (the trend, with one extra favourable pseudo-pair, so a
    step with no discordant pair yet is not written off as certainly flat) and unfavourable
    with probability ``only_before / (pairs + 2)``. ``future`` lists the remaining looks as
    ``(rollouts, p-value threshold)``; the result is the largest, over those looks, of the
    probability that the step's p-value reaches the threshold there. Used only to stop
    sampling (futility), never to reject. ``test``: ``"exact"`` (the exact McNemar p-value)
    or ``"e"`` (the anytime-valid ``1/E`` of :func:`discordant_e_value`).

    A pure function of its counts and looks, so it is memoised: the futility check asks it of
    every open step at every look, mostly with the same few small counts.
    """
    return _rejection_chance(only_now, only_before, pairs, tuple(future), test)


@functools.lru_cache(maxsize=8192)
def _rejection_chance(
    only_now: int,
    only_before: int,
    pairs: int,
    future: tuple[tuple[int, float], ...],
    test: str,
) -> float:
    """:func:`rejection_chance`, its looks as a tuple (hashable: a cache key)."""
    favour = (only_now + 1) / (pairs + 2)
    against = only_before / (pairs + 2)
    rest = max(0.0, 1.0 - favour - against)
    best = 0.0
    for upto, threshold in future:
        new = upto - pairs
        if new <= 0 or threshold <= 0:
            continue
        i, j = np.meshgrid(np.arange(new + 1), np.arange(new + 1), indexing="ij")
        keep = i + j <= new
        i, j = i[keep], j[keep]
        log_pmf = (
            gammaln(new + 1)
            - gammaln(i + 1)
            - gammaln(j + 1)
            - gammaln(new - i - j + 1)
            + _xlogy(i, favour)
            + _xlogy(j, against)
            + _xlogy(new - i - j, rest)
        )
        b, n = only_now + i, only_now + only_before + i + j
        if test == "e":
            p = 1.0 / _e_values(b, n - b)
        else:
            p = np.where(n > 0, stats.binom.sf(b - 1, np.maximum(n, 1), 0.5), 1.0)
        best = max(best, float(np.exp(log_pmf)[p <= threshold].sum()))
    return min(1.0, best)


def separation_chance(values: Sequence[float], most: int, confidence: float) -> float:
    """Conditional power of telling two steps apart: the chance that the interval of a
    paired contrast (``values``, one per pair, as :func:`contrast_interval` reads them) comes
    to exclude 0 on the positive side by ``most`` pairs, were the current mean the truth.

    Normal approximation: the ``most − n`` pairs still to come have mean ``d`` (the current
    one) and the current spread ``σ``; the final interval ``mean ± z σ/√most`` excludes 0
    when the final mean exceeds ``z σ/√most``. Used only to stop sampling (futility), never
    to reject or to name a step; 1 when nothing is left to decide it on (fewer than two
    pairs, or ``most`` already reached with a separation still possible)."""
    n = len(values)
    if n < 2:
        return 1.0
    left = most - n
    mean = sum(values) / n
    spread = math.sqrt(sum((x - mean) ** 2 for x in values) / (n - 1))
    if left <= 0 or spread == 0:
        return 1.0 if mean > 0 else 0.0
    z = _z(confidence)
    score = (mean * left - z * spread * math.sqrt(most)) / (spread * math.sqrt(left))
    return float(stats.norm.cdf(score))


def _xlogy(k: Any, p: float) -> Any:
    """``k · log p`` with ``0 · log 0 = 0`` (and ``-inf`` for ``k > 0, p = 0``)."""
    if p > 0:
        return k * math.log(p)
    return np.where(k > 0, -np.inf, 0.0)


def contrast_interval(values: Sequence[float], confidence: float, bound: float) -> Interval:
    """Normal interval for the mean of paired per-rollout contrasts bounded by ``±bound``,
    with one pseudo-observation at each bound (so a sample with no spread yet does not give a
    zero-width interval); ``[-bound, bound]`` when empty."""
    if not values:
        return Interval(-bound, bound)
    data = [*values, -bound, bound]
    n = len(data)
    mean = sum(data) / n
    variance = sum((x - mean) ** 2 for x in data) / (n - 1)
    half = _z(confidence) * math.sqrt(variance / n)
    mean_observed = sum(values) / len(values)
    return Interval(max(-bound, mean_observed - half), min(bound, mean_observed + half))


#: The mixing weight of :func:`discordant_e_value` on ``p = 1`` (every discordant pair
#: favourable); the rest is spread uniformly over ``(1/2, 1]``.
E_POINT_MASS = 0.5


def discordant_e_value(favourable: int, unfavourable: int) -> float:
    """The e-value of ``favourable`` against ``unfavourable`` discordant pairs for
    H0: ``p ≤ 1/2``, ``p`` the chance that a discordant pair is favourable (one-sided McNemar's
    null), H1: ``p > 1/2``.

    A mixture likelihood ratio: ``E = ∫ (2p)^b (2(1−p))^c dπ(p)`` with ``π`` half a point mass
    at ``p = 1`` (:data:`E_POINT_MASS`) and half uniform on ``[1/2, 1]``
    (``b = favourable``, ``c = unfavourable``; concordant pairs leave it unchanged). For any
    ``p' ≥ 1/2`` and any null ``p ≤ 1/2`` a discordant pair multiplies the ratio at ``p'`` by
    a factor of expectation ``2p'p + 2(1−p')(1−p) ≤ 1``, so every component, and the
    mixture, is a nonnegative supermartingale in the pairs starting at 1 (a test
    supermartingale). By Ville's inequality ``P(sup_n E_n ≥ 1/α) ≤ α`` under H0: rejecting
    whenever ``E ≥ 1/α``, after any pair, with any rule for stopping or going on, keeps the
    error at ``α``; ``min(1, 1/max E)`` over the values seen is an anytime-valid p-value. The
    point mass lets a clean effect reject after as few favourable pairs as the exact
    fixed-size test needs (5 at α = 0.05: E = 21.25), where the uniform part alone needs 7;
    its price: after one unfavourable pair only the uniform half is left (11 favourable
    pairs then).
    """
    return float(_e_values(np.asarray(favourable), np.asarray(unfavourable)))


def _e_values(b: Any, c: Any) -> Any:
    """:func:`discordant_e_value` on arrays of counts."""
    point = E_POINT_MASS * np.where(c == 0, np.exp2(b.astype(float)), 0.0)
    # (2)^(b+c) · 2 · ∫_{1/2}^1 p^b (1−p)^c dp = 2^(b+c+1) · B(b+1, c+1) · I_{1/2}(c+1, b+1)
    log_uniform = (b + c + 1) * math.log(2.0) + betaln(b + 1, c + 1)
    uniform = np.exp(log_uniform) * betainc(c + 1, b + 1, 0.5)
    return point + (1.0 - E_POINT_MASS) * uniform


def anytime_p_value(favourable: int, unfavourable: int) -> float:
    """``min(1, 1/E)`` of :func:`discordant_e_value`: a p-value valid at any data-dependent
    number of pairs (``P(p ≤ t) ≤ P(sup E ≥ 1/t) ≤ t`` under H0, by Ville's inequality), so
    Holm's adjustment of such p-values, one per step, read whenever the design stops,
    controls the family-wise error (Holm needs only each p-value's validity)."""
    return min(1.0, 1.0 / discordant_e_value(favourable, unfavourable))


def two_sided_e_value(first: int, second: int) -> float:
    """The e-value against ``p = 1/2`` in either direction: the mean of the one-sided
    e-values for ``first`` and for ``second`` (:func:`discordant_e_value`); a mean of test
    supermartingales under ``p = 1/2`` is one, so Ville's inequality holds for it too."""
    return (discordant_e_value(first, second) + discordant_e_value(second, first)) / 2


def step_p_value(favourable: int, unfavourable: int, test: str = "exact") -> float:
    """A step's one-sided p-value on its discordant pairs: the exact McNemar test
    (``test="exact"``, valid at a pre-declared number of pairs) or the anytime-valid
    :func:`anytime_p_value` (``test="e"``, valid at any number). Whatever recomputes a step's
    p-value on other counts (lost pairs assigned) uses the step's own ``test``."""
    if test == "e":
        return anytime_p_value(favourable, unfavourable)
    return mcnemar_exact_greater(favourable, unfavourable)


def pairs_to_reject(favourable: int, unfavourable: int, alpha: float, most: int = 10_000) -> int:
    """The fewest further discordant pairs after which :func:`discordant_e_value` could reach
    ``1/alpha`` (when every one of them is favourable); 0 when it already has; ``most + 1``
    when not within ``most``. The size of the next batch a sequential check needs: fewer
    pairs cannot reject, so it is never worth checking sooner."""
    for extra in range(most + 1):
        if discordant_e_value(favourable + extra, unfavourable) >= 1 / alpha:
            return extra
    return most + 1


def sequential_power(favourable: float, unfavourable: float, pairs: int, alpha: float) -> float:
    """The chance that :func:`discordant_e_value`, checked after every pair, reaches
    ``1/alpha`` within ``pairs`` pairs when each pair is independently favourable-discordant
    with probability ``favourable``, unfavourable-discordant with ``unfavourable`` and
    concordant otherwise (exact: a walk over the counts, absorbed at the threshold). Checking
    less often can only lower it."""
    rest = max(0.0, 1.0 - favourable - unfavourable)
    threshold = 1 / alpha
    alive = {(0, 0): 1.0}
    crossed = 0.0
    for _ in range(pairs):
        nxt: dict[tuple[int, int], float] = {}
        for (b, c), mass in alive.items():
            for (nb, nc), step in (
                ((b + 1, c), favourable),
                ((b, c + 1), unfavourable),
                ((b, c), rest),
            ):
                if step <= 0:
                    continue
                if (nb, nc) != (b, c) and discordant_e_value(nb, nc) >= threshold:
                    crossed += mass * step
                else:
                    nxt[nb, nc] = nxt.get((nb, nc), 0.0) + mass * step
        alive = nxt
    return min(1.0, crossed)


def detectable_by(pairs: int, alpha: float, power: float = 0.8) -> float:
    """The smallest effect Δ (to 0.01) that a sequential check of :func:`discordant_e_value`
    with at most ``pairs`` pairs finds with probability ``power``, when each pair is
    favourable-discordant with probability Δ and never unfavourable (a monotone effect:
    the best case, so a check that misses a larger effect is underpowered, not refuting);
    1.0 when even Δ = 1 is not found that often."""
    low, high = 0, 100  # in hundredths
    if sequential_power(1.0, 0.0, pairs, alpha) < power:
        return 1.0
    while low < high:
        mid = (low + high) // 2
        if sequential_power(mid / 100, 0.0, pairs, alpha) >= power:
            high = mid
        else:
            low = mid + 1
    return high / 100


def rate_below_e_value(failures: int, n: int, bound: float) -> float:
    """The e-value of ``failures`` in ``n`` Bernoulli trials for H0: ``rate ≥ bound``
    against H1: ``rate < bound`` (``0 < bound < 1``).

    A mixture likelihood ratio, uniform over the alternatives:
    ``E = (1/bound) ∫_0^bound (p/bound)^x ((1−p)/(1−bound))^(n−x) dp`` (``x = failures``).
    For any ``p ≤ bound`` and any null rate ``r ≥ bound`` a trial multiplies the ratio at
    ``p`` by a factor of expectation ``r·p/bound + (1−r)(1−p)/(1−bound)``, linear in ``r``,
    equal to 1 at ``r = bound`` and not increasing in ``r``, so at most 1: every component,
    and the mixture, is a test supermartingale under every null rate, and by Ville's
    inequality ``P(sup_n E_n ≥ 1/α) ≤ α`` — "the rate is below ``bound``" claimed whenever
    ``E ≥ 1/α``, after any trial, with any stopping rule, is wrong with probability at most
    ``α``. With no failure it reaches 20 after 13 trials at ``bound = 0.3`` (a Wilson bound
    at a fixed 10 would say ≤ 0.28, but only at a size fixed in advance)."""
    x, rest = failures, n - failures
    # ∫_0^b p^x (1−p)^rest dp = B(x+1, rest+1) · I_b(x+1, rest+1)
    log_scale = -(x + 1) * math.log(bound) - rest * math.log1p(-bound)
    log_beta = betaln(x + 1, rest + 1)
    return float(np.exp(log_scale + log_beta) * betainc(x + 1, rest + 1, bound))


def trials_to_show_below(failures: int, n: int, bound: float, alpha: float, most: int) -> int:
    """The fewest further trials, all without failure, after which
    :func:`rate_below_e_value` could reach ``1/alpha``; 0 when it already has; ``most + 1``
    when not within ``most``."""
    for extra in range(most + 1):
        if rate_below_e_value(failures, n + extra, bound) >= 1 / alpha:
            return extra
    return most + 1
