"""Attribution on planted-culprit agents (known answers), its statistics, and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from otelcar import synthetic
from otelcar.attribution import AttributionError, attribute
from otelcar.attribution.stats import (
    holm,
    look_alpha,
    look_schedule,
    mcnemar_exact_greater,
    newcombe_paired,
    newcombe_unpaired,
    wilson,
)
from otelcar.cli import cli
from otelcar.replay import Budget, load_run
from tests.conftest import NEW_CONTENT, OTLP

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


def test_null_case_blames_no_step_and_says_locked_in():
    result = _attribute(synthetic.null_case(5), seed=3)
    assert result.verdict == "locked-in" and result.culprit is None
    assert not any(e.significant for e in result.steps)
    assert result.harmful_step is not None
    assert "Locked in" in result.headline()


def test_fixed_r_mode_budget_and_reproducibility():
    scenario = synthetic.single_culprit(5, 2)
    fixed = _attribute(scenario, seed=5, rollouts=24)
    assert fixed.mode == "fixed" and fixed.looks == [24]
    assert fixed.confidence == pytest.approx(0.95)  # one look: the full alpha
    again = _attribute(scenario, seed=5, rollouts=24)
    strip = lambda d: {k: v for k, v in d.items() if k != "cost"}  # noqa: E731
    assert strip(fixed.to_dict()) == strip(again.to_dict())
    capped = _attribute(scenario, seed=5, budget=Budget(max_calls=40))
    assert capped.cost["llm_calls"] <= 40
    assert any("budget" in note for note in capped.notes)


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
    credit = attribute(run, registry=registry, outcome=never, credit=True, rollouts=8)
    assert credit.question == "success" and credit.verdict == "locked-in"


POLICY = """
import random
from otelcar.messages import Message, ToolCall

def decide(request):
    tools = [m for m in request.messages if m.role == "tool"]
    if not tools:
        return Message("assistant", None, (
            ToolCall("lookup_order", {"order_id": "A-1001"}, "c1"),
            ToolCall("get_refund_policy", {"category": "electronics"}, "c2")))
    if len(tools) == 2:
        if random.Random(request.seed).random() < 0.1:
            return Message("assistant", None, (
                ToolCall("issue_refund", {"order_id": "A-1001", "amount": 129.99}, "c3"),))
        return Message("assistant", "This needs a manager's approval.")
    return Message("assistant", "Done.")
"""


def test_cli_attribute_on_an_imported_trace(tmp_path: Path):
    (tmp_path / "agent_policy.py").write_text(POLICY)
    config = tmp_path / "otelcar.toml"
    config.write_text(
        '[policies.llm]\ntype = "python"\nfunction = "agent_policy:decide"\n[replay]\nseed = 4\n'
    )
    runner = CliRunner()
    store = ["--store", str(tmp_path / "store")]
    runner.invoke(
        cli, [*store, "import", str(OTLP / "new_content.traces.jsonl")], catch_exceptions=False
    )
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


def test_bisection_on_a_long_trace_uses_log_n_plans():
    scenario = synthetic.single_culprit(48, 29)
    result = _attribute(scenario, seed=1, rollouts=12)
    assert result.mode == "bisect" and result.culprit.index == 29
    assert len(result.steps) == 1 and "bisection" in result.notes[0]
    full = _attribute(synthetic.single_culprit(12, 7), seed=1, rollouts=12, mode="curve")
    assert full.mode == "fixed" and len(full.steps) == 13  # 12 tool decisions + the answer


def test_shapley_splits_an_and_failure_between_its_two_steps():
    scenario = synthetic.and_case(4, 1, 3)
    result = _attribute(scenario, seed=1, shapley=True, shapley_pairs=3, shapley_rollouts=12)
    phi = {v.step: v.phi for v in result.shapley.values}
    steps = {d: s for d, s in zip(range(4), [1, 3, 5, 7], strict=True)}
    a, b = phi[steps[1]], phi[steps[3]]
    assert 0.3 < a < 0.7 and 0.3 < b < 0.7
    assert abs(phi[steps[0]]) < 0.15 and abs(phi[steps[2]]) < 0.15
    assert abs(result.shapley.efficiency_gap) < 0.15


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
