"""Attribution on planted-culprit agents (known answers), its statistics, and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from otelcar.attribution import AttributionError, attribute
from otelcar.attribution.stats import (
    holm,
    look_alpha,
    look_schedule,
    mcnemar_exact_greater,
    newcombe_paired,
    newcombe_unpaired,
    rejection_chance,
    repeat_bound,
    spending_schedule,
    wilson,
)
from otelcar.cli import cli
from otelcar.replay import Budget, load_run
from otelcar.report.findings import refutation_summary
from otelcar.report.notes import worded
from otelcar.report.prose import document, headline
from otelcar.testing import scenarios as synthetic
from tests.conftest import NEW_CONTENT
from tests.helpers.design import fake_run as _fake_run
from tests.helpers.design import outcomes_of as _outcomes
from tests.helpers.scripted_refund import imported_trace_with_policy

ROOT = Path(__file__).resolve().parents[1]


def test_intervals_and_tests_against_known_values():
    w = wilson(5, 10)
    assert (round(w.low, 4), round(w.high, 4)) == (0.2366, 0.7634)  # Wilson 1927 / Newcombe
    assert wilson(0, 0).low == 0 and wilson(0, 0).high == 1
    # Newcombe (1998) example for unpaired: 56/70 vs 48/80 → [0.0524, 0.3339].
    d = newcombe_unpaired(48, 80, 56, 70)
    assert (round(d.low, 4), round(d.high, 4)) == (0.0524, 0.3339)
    # Paired: contains the estimate, mirrors when the discordant counts swap, and is narrower
    # than the unpaired interval when the outcomes are positively correlated.
    p = newcombe_paired(both=30, only_b=12, only_a=2, neither=16)
    assert p.low < (12 - 2) / 60 < p.high
    q = newcombe_paired(both=30, only_b=2, only_a=12, neither=16)
    assert (round(q.low, 9), round(q.high, 9)) == (round(-p.high, 9), round(-p.low, 9))
    u = newcombe_unpaired(32, 60, 42, 60)
    assert p.high - p.low < u.high - u.low
    assert mcnemar_exact_greater(0, 0) == 1.0
    assert mcnemar_exact_greater(10, 0) == pytest.approx(0.5**10)
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert look_schedule(8, 64) == [8, 16, 32, 64] and look_alpha(0.05, 4) == 0.0125


def _attribute(scenario, **options):
    steps, registry, outcome = synthetic.build(scenario)
    run = load_run(synthetic.TRACE_ID, steps)
    return attribute(run, registry=registry, outcome=outcome, **options)


@pytest.mark.parametrize(
    "scenario",
    [
        synthetic.single_culprit(6, 0),
        synthetic.single_culprit(8, 4),
        synthetic.single_culprit(8, 7),
        synthetic.intermittent(6, 3),
        synthetic.self_correction_trap(8, 2, 6),
        synthetic.or_case(6, 1, 4),
        synthetic.and_case(6, 1, 4),
    ],
    ids=lambda s: s.name,
)
def test_planted_culprit_is_found(scenario):
    result = _attribute(scenario, seed=11)
    assert result.verdict == "culprit"
    assert result.culprit.index == scenario.answer
    assert result.culprit.delta_ci.low > 0 and result.culprit.p_adjusted < 0.05
    others = [e for e in result.steps if e is not result.culprit]
    assert not any(e.significant for e in others)
    assert result.cost["llm_calls"] > 0 and result.looks[0] == 8


def test_a_step_whose_first_redecisions_all_repeat_stays_in_play():
    """The harmful action is re-chosen with p = 0.7, so all 8 first-look re-decisions repeat
    it in 0.7^8 ≈ 6 % of runs. That is absence of evidence: the step's interval is ±u, it gets
    more rollouts, and the culprit is found (before: Δ = 0 "by construction", a futility stop
    and a false "locked-in" at seeds 5, 11, 20 and 33)."""
    scenario = synthetic.single_culprit(5, 2, p_bad=0.7)
    for seed in (5, 11, 20, 33):
        result = _attribute(scenario, seed=seed)
        assert result.verdict == "culprit" and result.culprit.index == 2, headline(result)
    bound = repeat_bound(8, 0.95)
    assert bound == pytest.approx(1 - 0.025 ** (1 / 8)) and 0.36 < bound < 0.37
    assert repeat_bound(0) == 1.0


def test_null_case_blames_no_step_and_says_locked_in():
    result = _attribute(synthetic.null_case(5), seed=3)
    assert result.verdict == "locked-in" and result.culprit is None
    assert not any(e.significant for e in result.steps)
    # The run fails before any decision is made: no step is sent to `why` (it was step 1).
    assert result.harmful_step is None and "--step" not in headline(result)
    assert "Locked in" in headline(result)


def test_fixed_r_mode_budget_and_reproducibility():
    scenario = synthetic.single_culprit(5, 2)
    fixed = _attribute(scenario, seed=5, rollouts=24)
    assert fixed.mode == "fixed" and fixed.looks == (24,)
    assert fixed.confidence == pytest.approx(0.95)  # one look: the full alpha
    again = _attribute(scenario, seed=5, rollouts=24)
    strip = lambda d: {k: v for k, v in d.items() if k != "cost"}  # noqa: E731
    assert strip(fixed.to_dict()) == strip(again.to_dict())
    # Above the first look (about 105 calls here) but short of what the adaptive design
    # wants: the look the budget cut is left out, the estimates are the first look's.
    capped = _attribute(scenario, seed=5, budget=Budget(max_calls=110))
    assert capped.cost["llm_calls"] <= 110 and capped.looks == (8,)
    assert capped.stop_reason == "budget"
    assert any("budget" in note for note in worded(capped.notes))
    # Above the floor (8 rollouts × 6 decisions: below it the run is refused, see
    # tests/test_budget_floor.py) but cutting the first look: it is measured, not tested
    # (as the exact design's probe), so the pairs the budget cut cannot change a verdict.
    cut = _attribute(scenario, seed=5, budget=Budget(max_calls=60))
    assert cut.cost["llm_calls"] <= 60 and cut.culprit is None
    assert any("budget" in note for note in worded(cut.notes))


def test_adaptive_spends_less_than_fixed_r_60():
    scenario = synthetic.single_culprit(8, 3)
    adaptive = _attribute(scenario, seed=2)
    fixed = _attribute(scenario, seed=2, rollouts=60)
    assert adaptive.culprit.index == fixed.culprit.index == 3
    assert adaptive.cost["llm_calls"] < fixed.cost["llm_calls"] / 2


def test_a_passing_run_is_refused_unless_credit_is_asked():
    scenario = synthetic.single_culprit(5, 2)
    steps, registry, _ = synthetic.build(scenario)
    from otelcar.outcome import FunctionOutcome

    never = FunctionOutcome(lambda steps: False, "never fails")
    run = load_run(synthetic.TRACE_ID, steps)
    with pytest.raises(AttributionError, match=r"did not fail.*--credit"):
        attribute(run, registry=registry, outcome=never)
    # 16 rollouts: with 8, the upper bounds (Δ ≤ 0.37) do not reach below the margin 0.3
    credit = attribute(run, registry=registry, outcome=never, credit=True, rollouts=16)
    assert credit.question == "success" and credit.verdict == "locked-in"


def test_cli_attribute_on_an_imported_trace(tmp_path: Path):
    runner, store, config = imported_trace_with_policy(tmp_path)
    result = runner.invoke(
        cli,
        [
            *store,
            "attribute",
            NEW_CONTENT[:8],
            "-c",
            str(config),
            "--fail-if",
            "tool_called:issue_refund",
            "--json",
            str(tmp_path / "result.json"),
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    assert "Step 4 caused the failure" in result.output
    data = json.loads((tmp_path / "result.json").read_text())
    schema = json.loads((ROOT / "schemas" / "attribution.schema.json").read_text())
    jsonschema.validate(data, schema)
    assert data["culprit"] == 4 and data["verdict"] == "culprit"
    step_1 = next(s for s in data["steps"] if s["step"] == 1)
    assert step_1["delta"] == 0 and step_1["repeats_recorded_action"]
    missing = runner.invoke(cli, [*store, "attribute", NEW_CONTENT, "-c", str(config)])
    assert missing.exit_code == 2 and "no outcome" in missing.output
    both = runner.invoke(
        cli, [*store, "attribute", NEW_CONTENT, "-c", str(config), "--adaptive", "-n", "8"]
    )
    assert both.exit_code == 2 and "exclude each other" in both.output


def test_cli_attribute_modes_and_shapley(tmp_path: Path):
    runner, store, config = imported_trace_with_policy(tmp_path)
    base = [*store, "attribute", NEW_CONTENT[:8], "-c", str(config)]
    base += ["--fail-if", "tool_called:issue_refund", "--json", "-"]
    shapley = runner.invoke(
        cli, [*base, "--adaptive", "--shapley", "--shapley-pairs", "2"], catch_exceptions=False
    )
    assert shapley.exit_code == 0, shapley.output
    data = json.loads(shapley.output)
    assert data["mode"] == "adaptive" and data["culprit"] == 4
    assert data["shapley"]["values"] and data["shapley"]["permutations"] == 4
    bisect = runner.invoke(cli, [*base, "--mode", "bisect", "-n", "16"], catch_exceptions=False)
    assert bisect.exit_code == 0, bisect.output
    assert json.loads(bisect.output)["mode"] == "bisect"


def test_bisection_on_a_long_trace_uses_log_n_plans():
    scenario = synthetic.single_culprit(48, 29)
    result = _attribute(scenario, seed=1, rollouts=12)
    assert result.mode == "bisect" and result.culprit.index == 29
    assert len(result.steps) == 1 and any("bisection" in note for note in worded(result.notes))
    full = _attribute(synthetic.single_culprit(12, 7), seed=1, rollouts=12, mode="curve")
    assert full.mode == "fixed" and len(full.steps) == 13  # 12 tool decisions + the answer


def test_bisection_lists_a_tie_between_two_equal_culprits():
    """Issue 37 point 3: two equal culprits on a 48-decision trace. The search finds one; the
    other interval with as large a rise is narrowed and confirmed on the same fresh arm, and
    the result names one and lists the other as a tie, in the headline and the JSON."""
    scenario = synthetic.tie_case(48, 12, 36)
    result = _attribute(scenario, seed=1, refutation=False)
    assert result.mode == "bisect" and result.stop_reason == "bisection"
    steps = {e.index: e.step for e in result.steps}
    assert set(steps) == {12, 36}  # both candidates tested, only they have rows
    assert result.culprit.index in steps
    other = steps[({12, 36} - {result.culprit.index}).pop()]
    assert result.ties == (other,)
    assert f"cannot be told apart from steps [{other}]" in headline(result)
    data = document(result)
    assert data["ties"] == [other] and len(data["steps"]) == 2
    assert any("the jumps at steps" in note for note in worded(result.notes))
    from rich.console import Console

    from otelcar.render import attribution_report
    from otelcar.report.html import render_html

    console = Console(record=True, width=200)
    attribution_report(console, data)
    assert "(tie)" in console.export_text()
    assert f"cannot be told apart from steps [{other}]" in render_html(attribution=data)


def test_the_curve_stops_at_a_tie_it_cannot_part_and_lists_it():
    """Two equal culprits on a short trace (the curve, not bisection): once the paired
    contrast of the two cannot come to exclude 0 by the last look (conditional power below
    ``futility``), the run stops "tied" with one named and the other listed — before, it ran
    every look to ``max_rollouts``, more calls than the peers' R = 60."""
    scenario = synthetic.tie_case(5, 1, 3)
    result = _attribute(scenario, seed=2, refutation=False, policy_check=0)
    assert result.mode == "adaptive" and result.stop_reason == "tied"
    assert result.culprit is not None and result.culprit.index in (1, 3)
    other = next(e for e in result.steps if e.index == 4 - result.culprit.index)
    assert result.ties == (other.step,) and other.delta > 0
    assert result.looks[-1] < 64
    untied = _attribute(scenario, seed=2, refutation=False, policy_check=0, futility=0)
    assert untied.stop_reason == "last-look" and untied.looks[-1] == 64
    named = {result.culprit.step, *result.ties}
    assert untied.culprit is not None and {untied.culprit.step, *untied.ties} == named


def test_shapley_splits_an_and_failure_between_its_two_steps():
    scenario = synthetic.and_case(4, 1, 3)
    result = _attribute(scenario, seed=1, shapley=True, shapley_pairs=3, shapley_rollouts=12)
    phi = {v.step: v.phi for v in result.shapley.values}
    steps = {d: s for d, s in zip(range(4), [1, 3, 5, 7], strict=True)}
    a, b = phi[steps[1]], phi[steps[3]]
    assert 0.3 < a < 0.7 and 0.3 < b < 0.7
    assert abs(phi[steps[0]]) < 0.15 and abs(phi[steps[2]]) < 0.15
    assert abs(result.shapley.efficiency_gap) < 0.15
    # Its rollouts are in the cost (they were not counted).
    players = len(result.shapley.values)
    coalitions = 2 * 3 * (players + 1) + 2  # each permutation's prefixes, v(all), v(none)
    assert result.shapley.rollouts == coalitions * 12
    curve = sum(s.n for s in result.steps)  # at least the curve's judged rollouts
    assert result.cost["shapley_rollouts"] == result.shapley.rollouts
    assert result.cost["rollouts"] >= curve + result.shapley.rollouts


def test_a_flaky_grader_does_not_make_the_final_step_a_culprit():
    """Failure is an independent coin per judgement, whatever the agent does: no step matters.
    The factual replay must be judged afresh for every rollout slot, not copied."""
    import random as _random

    from otelcar.outcome import FunctionOutcome

    scenario = synthetic.single_culprit(4, 1)
    steps, registry, _ = synthetic.build(scenario)
    coin = _random.Random(5)
    flaky = FunctionOutcome(lambda s: coin.random() < 0.5, "flaky grader")
    run = load_run(synthetic.TRACE_ID, steps)
    for _ in range(20):  # the recorded run must fail under the outcome for attribution to run
        try:
            result = attribute(run, registry=registry, outcome=flaky, seed=2, rollouts=40)
            break
        except AttributionError:
            continue
    final = result.steps[-1]
    assert 0.2 < final.q < 0.8  # the factual slots were judged afresh
    assert not final.significant


# -- the adaptive design: alpha spending, futility, Δ = 0 by construction, separation ----------
def test_spending_puts_no_alpha_on_looks_that_cannot_reject():
    looks = [8, 16, 32, 64]
    # With 8 pairs the smallest exact p-value is 2^-8 = 0.0039: above Holm's first threshold
    # 0.0125 / 6 for six steps, so the look at 8 gets nothing and the others share alpha.
    assert look_alpha(0.05, 4) / 6 < 0.5**8
    spend = spending_schedule(0.05, looks, hypotheses=6)
    assert spend[0] == 0 and spend[1:] == pytest.approx([0.05 / 3] * 3)
    assert sum(spend) == pytest.approx(0.05)
    assert spending_schedule(0.05, looks, hypotheses=1) == pytest.approx([0.0125] * 4)
    assert spending_schedule(0.05, [60], hypotheses=101) == [0.05]
    assert spending_schedule(0.05, [2, 4], hypotheses=10) == [0.0, 0.05]  # nothing can reject

    # A step is tested at the alpha of the look its pairs belong to: 8 perfect pairs (stage 0)
    # are not significant, 16 are, and p_adjusted carries Holm and the spending.
    from otelcar.attribution.steps.curve import estimate

    run = _fake_run(2)
    base = [False] * 16
    eight = _outcomes({-1: base[:8], 0: [True] * 8, 1: [True] * 8})
    _, effects = estimate(run, eight, alpha=0.05, looks=looks, spend=spend, confidence=0.98)
    assert effects[0].p_value == pytest.approx(0.5**8) and effects[0].test_alpha == 0
    assert not effects[0].significant and effects[0].p_adjusted == 1
    sixteen = _outcomes({-1: base, 0: [True] * 16, 1: [True] * 16})
    _, effects = estimate(run, sixteen, alpha=0.05, looks=looks, spend=spend, confidence=0.98)
    assert effects[0].test_alpha == pytest.approx(0.05 / 3) and effects[0].significant
    assert effects[0].p_adjusted == pytest.approx(2 * 0.5**16 * 3)  # Holm × 2, spending × 3

    # An adaptive attribution reports its intervals at the level of the looks that can reject.
    result = _attribute(synthetic.single_culprit(6, 2), seed=4)
    assert result.confidence == pytest.approx(1 - 0.05 / 3)
    assert all(not e.significant for e in result.steps if e.test_alpha == 0)


def test_futility_stops_a_null_early_and_still_finds_culprits():
    null = synthetic.null_case(8)
    stopped = _attribute(null, seed=3)
    full = _attribute(null, seed=3, futility=0)
    assert stopped.stop_reason == "futility" and stopped.looks[-1] < 64
    assert full.stop_reason == "last-look" and full.looks[-1] == 64
    assert stopped.verdict == full.verdict == "locked-in"
    assert stopped.cost["llm_calls"] < full.cost["llm_calls"] / 2
    assert any("futility" in note for note in worded(stopped.notes))
    assert all(e.futile for e in stopped.steps if not e.repeats_recorded)
    # The same rule leaves planted culprits to be found.
    for scenario in (synthetic.single_culprit(8, 4), synthetic.intermittent(8, 5)):
        found = _attribute(scenario, seed=3)
        assert found.culprit.index == scenario.answer and found.stop_reason == "separated"
    # Conditional power: no discordant pair at all is hopeless after 16 pairs; a clear trend
    # is not; a symmetric (null-looking) one is.
    future = [(32, 0.0167 / 9), (64, 0.0167 / 9)]
    assert rejection_chance(0, 0, 16, future) < 0.01
    assert rejection_chance(5, 0, 16, future) > 0.9
    assert rejection_chance(4, 4, 16, future) < 0.05


def test_steps_that_repeat_their_recorded_action_are_bounded_and_cost_little_more():
    """Every decision but the culprit is deterministic (p 1): the probe (first look) shows
    their re-decisions repeating the recorded action. That bounds their effect (|Δ| ≤ u, the
    exact bound on P(differs)) without showing it is 0; they get rollouts until u is below
    the culprit's lower bound (then they are told apart from it)."""
    n, culprit = 7, 3
    choices = [[("ok", 1.0)] for _ in range(n)]
    choices[culprit] = [("BAD", 0.05), ("ok", 0.95)]
    recorded = ["ok"] * n
    recorded[culprit] = "BAD"
    scenario = synthetic.Scenario("deterministic", recorded, choices, lambda c: "BAD" in c, culprit)
    result = _attribute(scenario, seed=6)
    # e-values spend no alpha per look: the curve looks every 4 rollouts after the probe
    assert result.culprit.index == culprit and result.looks == (8, 12)
    for e in result.steps:
        if e.index == culprit:
            assert not e.repeats_recorded and e.n == 12
            continue
        assert e.repeats_recorded and e.delta == 0 and e.p_value == 1 and not e.significant
        u = repeat_bound(e.redecisions, result.confidence)
        assert e.differs_bound == pytest.approx(u) and 0 < u < result.culprit.delta_ci.low
        assert (e.delta_ci.low, e.delta_ci.high) == (pytest.approx(-u), pytest.approx(u))
        assert e.n <= 12  # no further look once the culprit is told apart from them
    row = next(r for r in result.to_dict()["steps"] if r["index"] == 0)
    assert row["repeats_recorded_action"] and row["delta"] == 0 and "test_alpha" in row


def test_paired_contrasts_separate_a_culprit_that_marginal_intervals_cannot():
    """The culprit's Δ is large, another step's is small; with 16 pairs their marginal
    (Newcombe) intervals overlap, the paired contrast of the two Δs does not."""
    from otelcar.attribution.steps.curve import contrast, estimate, separated

    run = _fake_run(4)
    r = 16
    q_start = [False] * r
    q_0 = [i < 10 for i in range(r)]  # the culprit: 0 → 10 failures of 16
    q_1 = [3 <= i < 10 for i in range(r)]  # a step undoes 3 of them (Δ −3/16) ...
    q_2 = list(q_0)  # ... and the next redoes them (Δ +3/16), in the same rollouts
    outcomes = _outcomes({-1: q_start, 0: q_0, 1: q_1, 2: q_2, 3: q_2})
    spend = [0.0, 0.05]
    _, effects = estimate(run, outcomes, alpha=0.05, looks=[8, 16], spend=spend, confidence=0.95)
    top, small = effects[0], effects[2]
    assert top.significant and small.delta == pytest.approx(3 / 16)
    assert small.delta_ci.high >= top.delta_ci.low  # marginal intervals overlap
    assert contrast(outcomes, top, small, 0.95).low > 0
    assert separated(top, effects, outcomes, 0.95)
    assert not separated(top, effects)  # the old rule would wait


def test_factual_slots_are_judged_as_their_own_rollouts():
    """The factual replay runs once; slot r is judged on its table relabelled as rollout r,
    identical to what replaying rollout r of the factual plan gives."""
    from otelcar.attribution.experiment.rollouts import as_rollout
    from otelcar.replay import Environment, Plan, rollout_steps, run_plan

    steps, registry, _ = synthetic.build(synthetic.single_culprit(4, 1))
    run = load_run(synthetic.TRACE_ID, steps)
    rollouts = run_plan(run, Plan(), Environment(registry), rollouts=4, seed=7).rollouts
    first, fourth = rollout_steps(rollouts[0]), rollout_steps(rollouts[3])
    assert not first.equals(fourth)
    assert as_rollout(first, 3, 7).equals(fourth)


def _flaky_null(n: int):
    """A run where no step matters and the grader is a reproducible coin per judged rollout
    (keyed by the rollout's index, decision seeds and which decisions were held)."""
    import hashlib

    import polars as pl

    from otelcar.outcome import FunctionOutcome
    from otelcar.replay import derive_seed

    def coin(salt: int, rollout: int, seeds: list, held: str) -> bool:
        key = f"{salt}:{rollout}:{seeds}:{held}".encode()
        return int.from_bytes(hashlib.sha256(key).digest()[:8], "big") < 2**63

    horizon = n + 1
    fidelity = [derive_seed(0, 0, k) for k in range(horizon)]
    salt = next(s for s in range(1000) if coin(s, 0, fidelity, "h" * horizon))

    def fails(table: pl.DataFrame) -> bool:
        if "origin" not in table.columns:
            return True  # the recorded run failed
        decisions = table.filter(pl.col("kind") == "llm")
        held = "".join("h" if o == "recorded" else "r" for o in decisions["origin"].to_list())
        return coin(salt, int(table["rollout"][0]), decisions["seed"].to_list(), held)

    scenario = synthetic.single_culprit(n, 1)
    steps, registry, _ = synthetic.build(scenario)
    return load_run(synthetic.TRACE_ID, steps), registry, FunctionOutcome(fails, "flaky")


def test_a_flaky_null_over_many_seeds_blames_no_step():
    """Before the factual slots were judged as their own rollouts and repeated decisions were
    given Δ = 0, about half of these runs blamed the final step."""
    run, registry, outcome = _flaky_null(3)
    named = [
        attribute(run, registry=registry, outcome=outcome, seed=seed).culprit
        for seed in range(1, 31)
    ]
    assert sum(c is not None for c in named) <= 3  # expected ≤ 1.5 at alpha 0.05


def test_sequential_design_keeps_the_family_wise_error_under_alpha():
    """Simulated nulls through the real adaptive procedure (looks, spending, Holm, futility,
    narrowing): every plan's outcomes are independent fair coins, so no step has an effect and
    half of all pairs are discordant. Over 400 runs the false blames must stay under alpha
    (with a binomial margin), with and without futility stops (which end most runs early);
    testing every look at the full alpha blames more."""
    import asyncio
    import random

    from otelcar.attribution.steps.attribute import sequential

    looks, m = [8, 16, 32, 64], 4
    run = _fake_run(m)

    def blames(seed: int, spend: list[float], futility: float) -> bool:
        outcomes = _outcomes({k: [] for k in range(-1, m)})

        async def sample(upto: int, needed: set[int]) -> None:
            for k in needed:
                plan = outcomes[k]
                for r in range(len(plan.failures), upto):
                    plan.failures[r] = random.Random(f"{seed}:{k}:{r}").random() < 0.5
                    plan.repeated_first[r] = False

        async def go():
            return await sequential(
                run, outcomes, sample, alpha=0.05, looks=looks, spend=spend, futility=futility
            )

        _, effects, done, _ = asyncio.run(go())
        return any(e.significant for e in effects), done[-1]

    spend = spending_schedule(0.05, looks, m)
    runs = 400
    margin = 0.05 * runs + 2.33 * (0.05 * 0.95 * runs) ** 0.5  # 99% binomial margin
    full = [blames(seed, spend, 0.0) for seed in range(runs)]
    stopped = [blames(seed, spend, 0.2) for seed in range(runs)]
    assert sum(b for b, _ in full) <= margin and sum(b for b, _ in stopped) <= margin
    assert all(last == 64 for blamed, last in full if not blamed)
    assert sum(last for _, last in stopped) < sum(last for _, last in full) / 1.5
    naive = [blames(seed, [0.05] * 4, 0.0) for seed in range(runs)]
    assert sum(b for b, _ in naive) > sum(b for b, _ in full)


def test_rollouts_lost_to_a_forgotten_tool_policy_refuse_a_verdict_they_could_change():
    """No tool policy: every re-decision that takes the other branch ("ok" instead of the
    recorded "BAD") calls the tool with arguments the recording lacks, and that rollout fails.
    The survivors all repeated BAD and failed, so the estimates said no step matters — before,
    printed as a verdict with exit 0 and a note."""
    from otelcar.policies import CallableLLMPolicy, PolicyRegistry
    from otelcar.replay.engine import RolloutsFailed

    n, culprit = 4, 2
    choices = [[("ok", 1.0)] for _ in range(n)]
    choices[culprit] = [("BAD", 0.75), ("ok", 0.25)]
    recorded = ["ok"] * n
    recorded[culprit] = "BAD"
    scenario = synthetic.Scenario("forgotten", recorded, choices, lambda c: "BAD" in c, culprit)
    steps, full, outcome = synthetic.build(scenario)
    llm_only = PolicyRegistry().register("llm", full.llm("llm"))
    assert isinstance(llm_only.llm("llm"), CallableLLMPolicy)
    run = load_run(synthetic.TRACE_ID, steps)
    with pytest.raises(RolloutsFailed, match=r"no tool policy .*\(\d+×\).*lost pairs"):
        attribute(run, registry=llm_only, outcome=outcome, seed=2)
    # With the tool policy, the same run finds the culprit.
    found = attribute(run, registry=full, outcome=outcome, seed=2)
    assert found.verdict == "culprit" and found.culprit.index == culprit


def test_lost_rollouts_that_bias_the_culprit_down_never_name_a_smaller_step():
    """Issue 37, point 1: the culprit's re-decisions take a branch whose tool fails in 55 % of
    rollouts, and its effect on the surviving pairs (0.23) falls below a later step's (0.3):
    judged on the survivors, the later step was named with exit 0 (40 of 100 seeds when only
    the culprit's own lost pairs were checked). Now every step's lost pairs are assigned
    against the verdict: the run refuses, naming the step the lost pairs could make the
    culprit, or names the true culprit. Allowed: the issue's bound of 5 %."""
    from otelcar.replay.engine import RolloutsFailed

    scenario = synthetic.lost_branch()
    steps, registry, outcome = synthetic.build(scenario)
    run = load_run(synthetic.TRACE_ID, steps)
    true_step = run.decisions[scenario.answer].step
    smaller = named_true = 0
    for seed in range(20):
        try:
            result = attribute(run, registry=registry, outcome=outcome, seed=seed)
        except RolloutsFailed as exc:
            assert "tool act failed on 'alt'" in str(exc)  # what was missing is said
            named_true += f"could name step {true_step} instead" in str(exc)
            continue
        smaller += result.culprit is not None and result.culprit.index != scenario.answer
    assert smaller <= 1, smaller
    # The survivors alone would have named the smaller step: the check is what refuses.
    assert named_true >= 5, named_true


def test_locked_in_needs_every_upper_bound_below_the_margin():
    """Issue 37, point 4: "locked-in" is an equivalence. Stopped at 8 rollouts per plan, a
    null's upper bounds reach Δ ≤ 0.37: the old rule said locked-in there (margin 1.01 turns
    the equivalence off); with the default margin 0.3 the same run is undecided and says so,
    and the full design samples on until every bound is below 0.3. Every verdict without a
    culprit says which effects it would have found (80 % power), in the headline and JSON."""
    from scipy.stats import binom

    from otelcar.attribution.steps.equivalence import DEFAULT_MARGIN, detectable_delta

    short = {"seed": 3, "max_rollouts": 8}
    assert _attribute(synthetic.null_case(5), margin=1.01, **short).verdict == "locked-in"
    undecided = _attribute(synthetic.null_case(5), **short)
    assert undecided.verdict == "undecided" and undecided.culprit is None
    assert "not locked in: the largest upper bound" in headline(undecided)
    assert f"not below the margin {DEFAULT_MARGIN:g}" in headline(undecided)
    locked = _attribute(synthetic.null_case(5), seed=3)
    data = document(locked)
    assert locked.verdict == "locked-in" and data["equivalence"]["largest_upper"] < 0.3
    assert all(e.delta_ci.high < DEFAULT_MARGIN for e in locked.steps)
    seen = data["equivalence"]["detectable_delta"]
    assert f"any step with Δ ≥ {seen:.2f} would have been found with 80% power" in data["headline"]
    jsonschema.validate(
        data, json.loads((ROOT / "schemas" / "attribution.schema.json").read_text())
    )
    # The power statement: the smallest Δ whose exact test (8 favourable pairs needed at
    # 0.05/3/4) rejects with 80 % on 16 pairs; none when the pairs cannot reach it.
    delta = detectable_delta(16, 0.05 / 3 / 4)
    assert binom.sf(7, 16, delta) >= 0.8 > binom.sf(7, 16, delta - 1e-3)
    assert detectable_delta(7, 0.05 / 3 / 4) is None and detectable_delta(16, 0.0) is None


def test_tools_no_policy_covers_are_listed_before_any_rollout():
    from otelcar.attribution.steps.attribute import tools_without_policy
    from otelcar.policies import PolicyRegistry

    steps, full, _ = synthetic.build(synthetic.single_culprit(3, 1))
    run = load_run(synthetic.TRACE_ID, steps)
    assert tools_without_policy(run, full) == []
    assert tools_without_policy(run, PolicyRegistry().register("llm", full.llm("llm"))) == ["act"]


def test_an_outcome_that_raises_on_a_factual_slot_is_counted():
    # The factual plan is replayed once and judged per slot; an outcome exception on a slot
    # left it unjudged without counting it (every other plan's counted).
    from otelcar.outcome import FunctionOutcome

    scenario = synthetic.single_culprit(3, 1)
    steps, registry, _ = synthetic.build(scenario)

    def flaky(table):
        if "rollout" in table.columns and int(table["rollout"][0]) == 5:
            raise RuntimeError("grader timeout")
        return scenario.fails(synthetic._choices_made(table))

    from otelcar.replay.engine import RolloutsFailed

    run = load_run(synthetic.TRACE_ID, steps)
    plans = len(run.decisions) + 1  # P_-1 .. P_n-1, the factual plan included
    with pytest.raises(
        RolloutsFailed, match=rf"^{plans} rollouts failed .*grader timeout \({plans}×\)"
    ):
        attribute(run, registry=registry, outcome=FunctionOutcome(flaky), seed=1, rollouts=8)


def test_a_judge_outcomes_calls_go_through_the_environment():
    # Before, an LLM-judge outcome called its policy directly: not counted, not budgeted,
    # not cached.
    from otelcar.attribution.steps.attribute import call_floor
    from otelcar.outcome import Judge
    from otelcar.policies import CallableLLMPolicy

    made = {"agent": 0, "judge": 0}
    scenario = synthetic.single_culprit(3, 1)
    steps, registry, _ = synthetic.build(scenario)
    agent = registry.llm("llm")

    async def counted_agent(request):
        made["agent"] += 1
        return await agent.decide(request)

    def grade(request):
        made["judge"] += 1
        return Message("assistant", "yes" if '"BAD"' in request.messages[-1].content else "no")

    from otelcar.messages import Message
    from otelcar.policies import PolicyRegistry

    class Counted:
        name, max_concurrency = "scripted", 8

        async def decide(self, request):
            return await counted_agent(request)

    counted = PolicyRegistry().register("llm", Counted())
    counted.register("tool:act", registry.tool_for("act"))
    judge = Judge(CallableLLMPolicy(grade, name="grader"), "Did the agent choose BAD?")
    run = load_run(synthetic.TRACE_ID, steps)
    result = attribute(run, registry=counted, outcome=judge, seed=1, rollouts=8)
    assert made["judge"] > 0
    assert result.cost["llm_calls"] == made["agent"] + made["judge"]
    assert result.cost["cache_hits"] > 0  # identical transcripts are judged once
    cap = call_floor(run).calls + 5  # the judge's calls count: they leave the run short
    capped = attribute(run, registry=counted, outcome=judge, seed=1, budget=Budget(max_calls=cap))
    assert capped.cost["llm_calls"] <= cap and capped.stop_reason == "budget"


def test_a_culprit_is_refuted_on_fresh_draws_and_a_placebo():
    from otelcar.attribution.steps.refute import refute
    from otelcar.replay import Environment
    from otelcar.sync import run_sync

    scenario = synthetic.single_culprit(5, 2)
    result = _attribute(scenario, seed=3)
    assert result.verdict == "culprit" and result.culprit.index == 2
    checks = {r.name: r for r in result.refutations}
    assert set(checks) == {"placebo", "fresh seeds"} and all(r.passed for r in checks.values())
    # A strong effect is rechecked sequentially: 5 favourable pairs reach 1/alpha (e-value
    # 21.25), so 5 rollouts per plan; the placebo shares the held arm and its Do asks the
    # held arm's requests (cache hits). Flags and p-values agree (p = 1 / e-value).
    recheck = checks["fresh seeds"]
    assert checks["placebo"].delta == 0 and checks["placebo"].pairs == recheck.pairs
    assert 5 <= recheck.pairs < 8 and recheck.delta > 0.5 and recheck.p_value <= 0.05
    assert recheck.p_value == pytest.approx(1 / recheck.e_value)
    assert checks["placebo"].p_value > 0.05 and checks["placebo"].e_value < 20
    assert 0 < recheck.detectable < 0.5 and recheck.max_pairs == 32
    assert "Refutation (placebo and fresh seeds): passed." in headline(result)
    data = document(result)
    jsonschema.validate(
        data, json.loads((ROOT / "schemas" / "attribution.schema.json").read_text())
    )
    assert [r["name"] for r in data["refutations"]] == ["placebo", "fresh seeds"]
    # A step that is not the culprit does not survive the recheck: the check can fail.
    steps, registry, outcome = synthetic.build(scenario)
    run = load_run(synthetic.TRACE_ID, steps)
    innocent = result.steps[0]
    checks = run_sync(
        refute(
            run, Environment(registry), outcome, innocent,
            seed=3, rollouts=32, alpha=0.05, confidence=0.95,
        )
    )  # fmt: skip
    recheck = next(r for r in checks if r.name == "fresh seeds")
    assert not recheck.passed and recheck.p_value > 0.05
    assert recheck.p_value == pytest.approx(min(1.0, 1 / recheck.e_value))
    # it stops once even all-favourable pairs could no longer confirm it within 32
    assert 5 <= recheck.pairs <= 32
    assert "finds Δ ≥" in refutation_summary(recheck)
    assert "underpowered" in refutation_summary(recheck)
    off = _attribute(scenario, seed=3, refutation=False)
    assert off.refutations == () and off.cost["llm_calls"] < result.cost["llm_calls"]
    assert result.cost["llm_calls"] - off.cost["llm_calls"] <= 2 * 8 * 4  # two arms, 8 each


def test_bisection_is_calibrated_on_400_nulls_and_confirms_on_fresh_rollouts():
    """Simulated nulls through the real bisection (search, monotonicity check, confirmation
    looks): every plan's rollouts are independent fair coins on a 48-decision run, so no step
    has an effect. The jump the search picks is the one that looks largest; confirming it
    sequentially on fresh rollouts keeps the false blames under alpha (with a binomial
    margin), counted over the nulls that reached a confirmation."""
    import asyncio
    import random

    from otelcar.attribution.steps.bisection import Bisection, bisect

    m, looks, alpha, runs = 48, [8, 16, 32, 64], 0.05, 400
    run = _fake_run(m)

    def arm(name: str, seed: int):
        outcomes = _outcomes({k: [] for k in range(-1, m)})

        async def sample(k: int, upto: int) -> None:
            plan = outcomes[k]
            for r in range(len(plan.failures), upto):
                plan.failures[r] = random.Random(f"{name}:{seed}:{k}:{r}").random() < 0.5
                plan.repeated_first[r] = False

        return outcomes, sample

    def blames(seed: int, fresh: bool) -> tuple[bool, bool]:
        search, sample_search = arm("search", seed)
        confirm, sample_confirm = arm("confirm", seed) if fresh else (search, sample_search)
        found = asyncio.run(
            bisect(run, search, sample_search, confirm, sample_confirm, looks=looks, alpha=alpha)
        )
        # Only a confirmed jump is an answer (an unconfirmed one falls back to the curve).
        blamed = isinstance(found, Bisection)
        assert not blamed or any(e.significant for e in found.effects)
        # the search chose candidates and confirmed on them
        reached = blamed or found.startswith(("the jump", "the largest jump"))
        return blamed, reached

    valid = [blames(seed, fresh=True) for seed in range(runs)]
    naive = [blames(seed, fresh=False) for seed in range(runs)]
    margin = alpha * runs + 2.33 * (alpha * (1 - alpha) * runs) ** 0.5  # 99% binomial margin
    assert sum(b for b, _ in valid) <= margin
    # Counted where a confirmation was reached (the search chose a jump): the sequential
    # confirmation on fresh rollouts stays within alpha plus a 99 % binomial margin (8 of
    # 168 at these seeds, with every candidate as large as the largest jump tested, Holm
    # across them; 15 of 168 confirming on the search's own rollouts).
    reached = sum(r for _, r in valid)
    assert reached >= 100
    assert sum(b for b, _ in valid) <= alpha * reached + 2.33 * (alpha * reached) ** 0.5
    assert sum(r for _, r in naive) == reached  # the same searches
    # More than half of the nulls show no rise between the ends: the full curve then runs.
    assert 0.5 * runs < sum(not r for _, r in valid)


def test_one_contrast_for_every_estimator_paired_and_unpaired():
    """The experiment layer's contrast gives the statistics each design used before it: the
    paired one McNemar and Newcombe's paired interval on the pairs two arms drew with the same
    seeds, the unpaired one Fisher and Newcombe's unpaired interval."""
    from scipy.stats import fisher_exact

    from otelcar.attribution.experiment.contrast import Pairs, paired, unpaired

    pairs = Pairs.of({0: True, 1: True, 2: False, 3: None, 4: True}, {0: True, 1: False, 2: False})
    assert (pairs.both, pairs.only_b, pairs.only_a, pairs.neither, pairs.n) == (1, 1, 0, 1, 3)
    assert Pairs.of({0: True, 1: True}, {0: False, 1: False}, upto=1).n == 1
    counts = Pairs(both=5, only_b=9, only_a=1, neither=5)
    effect = paired(counts, 0.95)
    assert effect.difference == pytest.approx(8 / 20)
    assert effect.p_greater == pytest.approx(mcnemar_exact_greater(9, 1))
    assert effect.p_less == pytest.approx(mcnemar_exact_greater(1, 9))
    assert effect.interval == newcombe_paired(5, 9, 1, 5, 0.95)
    assert effect.p_two_sided == pytest.approx(min(1.0, 2 * effect.p_greater))
    assert paired(Pairs()).p_greater == 1.0 and paired(Pairs()).interval.low == -1.0
    drop = unpaired(9, 10, 2, 10, 0.95)  # B (an edited context) repeats less than A (base)
    assert drop.difference == pytest.approx(-0.7)
    table = [[9, 1], [2, 8]]
    assert drop.p_less == pytest.approx(fisher_exact(table, alternative="greater").pvalue)
    assert drop.p_greater > 0.99 and drop.interval == newcombe_unpaired(9, 10, 2, 10, 0.95)
    assert unpaired(0, 0, 3, 5).p_less == 1.0


def test_every_seed_stage_the_code_uses_is_declared() -> None:
    """Stage names are declared once (``STAGES``); a name the code uses but does not declare
    would draw seeds nobody listed (``policy.check`` was missing from the list)."""
    import re

    import otelcar
    from otelcar.attribution.experiment.seeds import STAGES, SeedSpace

    root = Path(otelcar.__file__).parent
    used: set[str] = set()
    for path in root.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        used |= set(re.findall(r"\.stage\(\"([^\"]+)\"\)", text))
        used |= set(re.findall(r"^\w*STAGE = \"([^\"]+)\"", text, flags=re.MULTILINE))
    assert {"policy.check", "pairs", "refute", "bisect.confirm"} <= used
    assert used <= set(STAGES), used - set(STAGES)
    with pytest.raises(ValueError, match="not declared"):
        SeedSpace(1).stage("undeclared")
    assert SeedSpace(1).stage("why") == 1 and SeedSpace(1).stage("refute") != 1


def test_the_harmful_step_from_event_slices_is_the_one_from_table_prefixes():
    # harmful_step judges built-in outcomes on slices of the run's events read once; a
    # table-judging outcome (the same test written as a function) gets each prefix of the
    # table, as before. Both must name the same step on every scenario and outcome kind.
    from otelcar.attribution.steps.attribute import harmful_step
    from otelcar.outcome import AllOf, AnyOf, FinalAnswer, FunctionOutcome, ToolCalled, events_of
    from otelcar.sync import run_sync

    outcomes = [
        ToolCalled("act", {"v": "BAD"}),
        ToolCalled("act", {"v": "re:ok.*"}),
        ToolCalled("act", {"v": "BAD"}, negate=True),
        ToolCalled("nothing"),
        FinalAnswer(contains="finished"),
        AnyOf((ToolCalled("act", {"v": "FIX"}), FinalAnswer(contains="finished"))),
        AllOf((ToolCalled("act", {"v": "BAD"}), ToolCalled("act", {"v": "ok"}))),
    ]
    scenarios = [
        synthetic.single_culprit(6, 2),
        synthetic.single_culprit(4, 0),
        synthetic.self_correction_trap(7, 1, 4),
        synthetic.single_culprit(1, 0),
    ]
    named = []
    for scenario in scenarios:
        steps, _, _ = synthetic.build(scenario)
        run = load_run(steps["trace_id"][0], steps)
        for outcome in outcomes:

            async def by_table(table, outcome=outcome):
                return await outcome.failed_on(events_of(table))

            as_table = FunctionOutcome(by_table, name="same test on the table")
            expected = run_sync(harmful_step(run, as_table))
            assert run_sync(harmful_step(run, outcome)) == expected, (scenario.name, outcome)
            named.append(expected)
    assert None in named and len(set(named)) > 2  # the cases are not all alike


def test_the_factual_replay_runs_once_and_its_rollout_is_the_curves(monkeypatch):
    """The fidelity check's replay is rollout 0 of the curve's factual plan (issue 38): the
    factual plan is replayed once per ``attribute``, and the result (its rollouts and
    cassette hits counted as before) is the one the curve's own second replay gave."""
    import otelcar.attribution.steps.attribute as attribute_stage
    import otelcar.replay.execution as execution
    import otelcar.replay.fidelity as fidelity
    from otelcar.replay.plan import Plan

    factual: list[int] = []
    for module in (execution, fidelity):

        async def counting(run, plan, env, *args, _real=module.replay, **kwargs):
            if plan == Plan():
                factual.append(kwargs.get("rollout", 0))
            return await _real(run, plan, env, *args, **kwargs)

        monkeypatch.setattr(module, "replay", counting)
    scenario = synthetic.single_culprit(5, 2)
    once = _attribute(scenario, seed=3).to_dict()
    assert factual == [0]

    async def replayed_again(*args, _real=attribute_stage.preflight, **kwargs):
        notes, _ = await _real(*args, **kwargs)
        return notes, None  # the curve replays its factual plan itself

    monkeypatch.setattr(attribute_stage, "preflight", replayed_again)
    factual.clear()
    twice = _attribute(scenario, seed=3).to_dict()
    assert factual == [0, 0]
    once["cost"].pop("wall_s"), twice["cost"].pop("wall_s")
    assert once == twice
