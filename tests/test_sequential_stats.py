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
    rate_below_e_value,
    sequential_power,
    step_p_value,
    step_schedule,
    trials_to_show_below,
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


def test_step_p_value_and_the_e_value_schedule() -> None:
    assert step_p_value(6, 1) == mcnemar_exact_greater(6, 1)
    assert step_p_value(6, 1, "e") == pytest.approx(1 / discordant_e_value(6, 1))
    assert step_p_value(0, 0, "e") == 1.0
    assert step_schedule(8, 24, 4) == [8, 12, 16, 20, 24]
    assert step_schedule(8, 8, 4) == [8]


def _crn_run(seed: int, m: int, culprit: int | None, test: str) -> tuple[set[int], int]:
    """The adaptive curve on a simulated agent with common random numbers (rollout r's
    re-decision of decision k is one draw shared by every plan that re-decides k; the outcome
    a fair coin per distinct action sequence, or failure when the culprit's BAD action is
    taken): the steps found significant and the re-decisions it cost."""
    import asyncio
    import hashlib
    import random

    from otelcar.attribution.stats import spending_schedule
    from otelcar.attribution.steps.attribute import sequential
    from tests.helpers.design import fake_run as _fake_run
    from tests.helpers.design import outcomes_of as _outcomes

    choices = [(("ok", 0.6), ("ok2", 0.3), ("ok3", 0.1))] * m
    recorded = ["ok"] * m
    if culprit is not None:
        recorded[culprit] = "BAD"
        choices[culprit] = (("BAD", 0.3), ("ok", 0.7))

    def draw(r: int, k: int) -> str:
        u, total = random.Random(f"{seed}:{r}:{k}").random(), 0.0
        for value, p in choices[k]:
            total += p
            if u < total:
                return value
        return choices[k][-1][0]

    outcomes = _outcomes({k: [] for k in range(-1, m)})
    spent = 0

    async def sample(upto: int, needed: set[int]) -> None:
        nonlocal spent
        for j in needed:
            plan = outcomes[j]
            for r in range(len(plan.failures), upto):
                actions = tuple(recorded[k] if k <= j else draw(r, k) for k in range(m))
                digest = hashlib.sha256(f"{seed}:{r}:{actions}".encode()).digest()
                coin = int.from_bytes(digest[:8], "big") < 2**63
                plan.failures[r] = "BAD" in actions or coin
                plan.repeated_first[r] = j + 1 < m and actions[j + 1] == recorded[j + 1]
                spent += m - 1 - j

    looks = [8, 16, 32, 64]
    spend = spending_schedule(0.05, looks, m)
    if test == "e":  # what attribute_async does for its default curve test
        looks = step_schedule(8, 64, 4)
        spend = [max(spend)] * len(looks)
    _, effects, _, _ = asyncio.run(
        sequential(
            _fake_run(m), outcomes, sample, alpha=0.05, looks=looks, spend=spend,
            futility=0.2, test=test,
        )
    )  # fmt: skip
    return {e.index for e in effects if e.significant}, spent


@pytest.mark.slow
def test_the_e_value_curve_keeps_the_error_and_power_of_the_exact_one_for_fewer_calls() -> None:
    """400 common-random-number nulls (which can blame: a fifth of the pairs discordant) and
    400 partial nulls (decision 2 has Δ = 0.35) through the real adaptive design, tested by
    e-values (looks every 4 rollouts) and by the exact test (alpha spent over doubling
    looks): false blames within the 99th percentile of Binomial(400, 0.05), the culprit
    found about as often, and fewer calls (measured: 4 vs 1 null blames, 388 vs 389 found,
    128 vs 177 re-decisions per null)."""
    from scipy.stats import binom

    bound = int(binom.ppf(0.99, 400, 0.05))
    figures = {}
    for test in ("e", "exact"):
        nulls = [_crn_run(seed, 4, None, test) for seed in range(400)]
        partial = [_crn_run(seed, 4, 2, test) for seed in range(400)]
        blamed = sum(bool(found) for found, _ in nulls)
        innocent = sum(bool(found - {2}) for found, _ in partial)
        assert blamed <= bound and innocent <= bound, (test, blamed, innocent, bound)
        figures[test] = (
            sum(2 in found for found, _ in partial),
            sum(calls for _, calls in nulls) + sum(calls for _, calls in partial),
        )
    assert figures["e"][0] >= figures["exact"][0] - 20  # power kept (400 runs)
    assert figures["e"][1] < 0.85 * figures["exact"][1]  # cheaper


@pytest.mark.parametrize(("x", "n"), [(0, 0), (0, 13), (2, 10), (5, 20), (9, 12)])
def test_rate_below_e_value_is_the_mixture_likelihood_ratio(x: int, n: int) -> None:
    bound = 0.3
    ratio, _ = integrate.quad(
        lambda p: (p / bound) ** x * ((1 - p) / (1 - bound)) ** (n - x) / bound, 0, bound
    )
    assert rate_below_e_value(x, n, bound) == pytest.approx(ratio, rel=1e-9)


@pytest.mark.parametrize("rate", [0.3, 0.4])
def test_rate_below_checked_after_every_trial_keeps_alpha(rate: float) -> None:
    """4,000 sequences of 200 trials at a null rate (the bound 0.3, and above it), the e-value
    checked after every trial: "below 0.3" is claimed within α plus a 99 % binomial margin
    (a Wilson bound checked after every trial would claim it far more often)."""
    rng = np.random.default_rng(38)
    runs, trials, alpha, bound = 4000, 200, 0.05, 0.3
    failures = np.cumsum(rng.random((runs, trials)) < rate, axis=1)
    cache: dict[tuple[int, int], bool] = {}
    claimed = 0
    for i in range(runs):
        for n, x in enumerate(failures[i], start=1):
            key = (int(x), n)
            if key not in cache:
                cache[key] = rate_below_e_value(*key, bound) >= 1 / alpha
            if cache[key]:
                claimed += 1
                break
    assert claimed / runs <= _margin(alpha, runs)
    # with no failure at all, 13 trials show a rate below 0.3 at alpha = 0.05
    assert trials_to_show_below(0, 0, bound, alpha, 100) == 13
    assert trials_to_show_below(0, 13, bound, alpha, 100) == 0
    assert trials_to_show_below(9, 10, bound, alpha, 5) == 6  # out of reach within 5


def test_separation_chance_is_conditional_power_of_the_contrast():
    """A contrast whose mean is 0 cannot come to exclude 0 (chance near 0); a large positive
    one can (near 1); more pairs still to come raise the chance of a middling one; with no
    pair left the answer is whether it is positive; fewer than two pairs decide nothing."""
    from otelcar.attribution.stats import separation_chance

    flat = [1.0, -1.0] * 8
    assert separation_chance(flat, 64, 0.95) < 0.05
    strong = [1.0] * 12 + [0.0] * 4
    assert separation_chance(strong, 64, 0.95) > 0.99
    middling = [1.0] * 4 + [0.0] * 10 + [-1.0] * 2
    assert separation_chance(middling, 32, 0.95) < separation_chance(middling, 128, 0.95)
    assert separation_chance([1.0, 0.0], 2, 0.95) == 1.0
    assert separation_chance([0.0, 0.0], 2, 0.95) == 0.0
    assert separation_chance([1.0], 64, 0.95) == 1.0
