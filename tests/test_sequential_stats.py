"""The anytime-valid sequential test on discordant pairs (``stats.discordant_e_value``):
its closed form, its error under the null boundary checked after every pair (exactly and by
simulation), and its power figures."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate

from otelcar.attribution.stats import (
    E_POINT_MASS,
    detectable_by,
    discordant_e_value,
    mcnemar_exact_greater,
    pairs_to_reject,
    sequential_power,
    two_sided_e_value,
)


def _margin(alpha: float, runs: int) -> float:
    """α plus a 99 % one-sided binomial margin: a valid test stays below it in 99 % of runs."""
    return alpha + 2.33 * math.sqrt(alpha * (1 - alpha) / runs)


@pytest.mark.parametrize(("b", "c"), [(0, 0), (3, 0), (5, 0), (4, 2), (0, 6), (12, 9)])
def test_e_value_is_the_mixture_likelihood_ratio(b: int, c: int) -> None:
    uniform, _ = integrate.quad(lambda p: (2 * p) ** b * (2 * (1 - p)) ** c * 2, 0.5, 1)
    point = 2.0**b if c == 0 else 0.0
    expected = E_POINT_MASS * point + (1 - E_POINT_MASS) * uniform
    assert discordant_e_value(b, c) == pytest.approx(expected, rel=1e-9)


def test_e_value_is_a_supermartingale_at_the_boundary() -> None:
    """Under p = 1/2 the next pair's expected e-value equals the current one (a martingale
    at the boundary; below it, a supermartingale)."""
    for b, c in [(0, 0), (2, 1), (5, 0), (7, 7)]:
        now = discordant_e_value(b, c)
        for p in (0.5, 0.3):
            after = p * discordant_e_value(b + 1, c) + (1 - p) * discordant_e_value(b, c + 1)
            assert after <= now + 1e-9
        half = 0.5 * discordant_e_value(b + 1, c) + 0.5 * discordant_e_value(b, c + 1)
        assert half == pytest.approx(now, rel=1e-9)


@pytest.mark.parametrize("alpha", [0.05, 0.01])
def test_checked_after_every_pair_the_error_is_at_most_alpha_exactly(alpha: float) -> None:
    """The exact chance of ever reaching 1/α within 200 discordant pairs at p = 1/2."""
    assert sequential_power(0.5, 0.5, 200, alpha) <= alpha


def test_the_exact_computation_would_catch_an_invalid_sequential_test() -> None:
    """The same walk finds the fixed-size exact McNemar test, checked after every pair,
    above α (so the bound above is a check that can fail)."""
    alive = {0: 1.0}
    crossed = 0.0
    for n in range(1, 101):
        nxt: dict[int, float] = {}
        for b, mass in alive.items():
            for nb in (b, b + 1):
                if mcnemar_exact_greater(nb, n - nb) <= 0.05:
                    crossed += mass / 2
                else:
                    nxt[nb] = nxt.get(nb, 0.0) + mass / 2
        alive = nxt
    assert crossed > 0.1


def test_type_one_error_by_simulation_at_the_null_boundary() -> None:
    """4,000 sequences of 300 pairs (a third concordant) at the boundary p = 1/2, the e-value
    checked after every pair: rejections stay within α plus a 99 % binomial margin."""
    rng = np.random.default_rng(37)
    runs, pairs, alpha = 4000, 300, 0.05
    kind = rng.choice(3, size=(runs, pairs), p=[1 / 3, 1 / 3, 1 / 3])  # fav, unfav, concordant
    favourable = np.cumsum(kind == 0, axis=1)
    unfavourable = np.cumsum(kind == 1, axis=1)
    cache: dict[tuple[int, int], bool] = {}
    rejected = 0
    for i in range(runs):
        for b, c in zip(favourable[i], unfavourable[i], strict=True):
            key = (int(b), int(c))
            if key not in cache:
                cache[key] = discordant_e_value(*key) >= 1 / alpha
            if cache[key]:
                rejected += 1
                break
    assert rejected / runs <= _margin(alpha, runs)


def test_two_sided_e_value_is_symmetric_and_valid() -> None:
    assert two_sided_e_value(6, 1) == pytest.approx(two_sided_e_value(1, 6))
    assert sequential_power(0.5, 0.5, 1, 0.05) == 0.0
    half = 0.5 * two_sided_e_value(4, 3) + 0.5 * two_sided_e_value(3, 4)
    assert half == pytest.approx(two_sided_e_value(3, 3), rel=1e-9)


def test_pairs_to_reject_and_power() -> None:
    assert pairs_to_reject(0, 0, 0.05) == 5  # E(5, 0) = 21.25 ≥ 20; E(4, 0) = 11.1
    assert discordant_e_value(5, 0) >= 20 > discordant_e_value(4, 0)
    assert pairs_to_reject(5, 0, 0.05) == 0
    assert pairs_to_reject(0, 1, 0.05) > 5  # the point mass is gone
    assert sequential_power(1.0, 0.0, 4, 0.05) == 0.0
    assert sequential_power(1.0, 0.0, 5, 0.05) == 1.0
    assert sequential_power(0.3, 0.0, 32, 0.05) > sequential_power(0.3, 0.0, 16, 0.05)
    small, large = detectable_by(8, 0.05), detectable_by(32, 0.05)
    assert 0 < large < small <= 1
    assert (
        sequential_power(large, 0.0, 32, 0.05) >= 0.8 > sequential_power(large - 0.01, 0, 32, 0.05)
    )
