"""Policy faithfulness: does the registered policy re-decide the recorded decisions as the
agent did? A faithful and an unfaithful policy on the refund trace, the rules, the CLI."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from otelcar.attribution import attribute
from otelcar.attribution.faithfulness import check_policy, same_action
from otelcar.cli import cli
from otelcar.messages import Message, ToolCall
from otelcar.project_config import load_config
from otelcar.readers import read_otlp
from otelcar.replay.recorded import load_run
from otelcar.report.notes import policy_reason
from otelcar.report.prose import document, headline
from otelcar.sync import run_sync
from tests.conftest import NEW_CONTENT, OTLP
from tests.helpers.scripted_refund import POLICY

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "schemas" / "attribution.schema.json"

# Re-decides exactly as the recorded agent did (by how far the conversation got).
FAITHFUL = """
from otelcar.messages import Message, ToolCall

def decide(request):
    tools = [m for m in request.messages if m.role == "tool"]
    if not tools:
        return Message("assistant", None, (
            ToolCall("lookup_order", {"order_id": "A-1001"}, "x1"),
            ToolCall("get_refund_policy", {"category": "electronics"}, "x2")))
    if len(tools) == 2:
        return Message("assistant", None, (
            ToolCall("issue_refund", {"order_id": "A-1001", "amount": 129.99}, "x3"),))
    return Message("assistant", "I have issued  refund R-77 of $129.99 for order A-1001. ")
"""


def _registry(tmp_path: Path, module: str, source: str):
    (tmp_path / f"{module}.py").write_text(source)
    config = tmp_path / "otelcar.toml"
    config.write_text(f'[policies.llm]\ntype = "python"\nfunction = "{module}:decide"\n')
    sys.path.insert(0, str(tmp_path))
    return config, load_config(config).registry


@pytest.fixture
def run():
    return load_run(NEW_CONTENT, read_otlp(OTLP / "new_content.traces.jsonl"))


def test_a_faithful_policy_reproduces_every_decision(tmp_path, run):
    _, registry = _registry(tmp_path, "faithful_policy", FAITHFUL)
    check = run_sync(check_policy(run, registry=registry, samples=8, seed=2))
    assert [d.step for d in check.decisions] == [d.step for d in run.decisions]
    assert all(d.reproduced == d.n == 8 for d in check.decisions)
    assert check.unfaithful() == [] and "no decision is shown" in headline(check)
    assert all(d["residual_nondeterminism"] is None for d in check.to_dict()["decisions"])
    assert check.cost["llm_calls"] == 8 * len(run.decisions)  # every call counted


def _greedy(run):
    """The run as if recorded at temperature 0."""
    decisions = [
        dataclasses.replace(d, params={**(d.params or {}), "temperature": 0}) for d in run.decisions
    ]
    return dataclasses.replace(run, decisions=decisions)


def test_at_temperature_0_a_difference_is_residual_nondeterminism(tmp_path, run):
    _, faithful = _registry(tmp_path, "faithful_policy3", FAITHFUL)
    clean = run_sync(check_policy(_greedy(run), registry=faithful, samples=6, seed=2))
    assert [d["residual_nondeterminism"] for d in clean.to_dict()["decisions"]] == [0.0] * 3
    assert "residual nondeterminism" not in headline(clean)
    _, drifting = _registry(tmp_path, "agent_policy_greedy", POLICY)
    noisy = run_sync(check_policy(_greedy(run), registry=drifting, samples=20, seed=1))
    refund = noisy.to_dict()["decisions"][1]
    assert refund["residual_nondeterminism"] == pytest.approx(1 - refund["rate"])
    assert refund["residual_nondeterminism"] > 0.5
    assert "recorded at temperature 0 differed on re-decision" in headline(noisy)


def test_an_unfaithful_policy_is_caught_where_it_differs(tmp_path, run):
    _, registry = _registry(tmp_path, "agent_policy_pc", POLICY)
    check = run_sync(check_policy(run, registry=registry, samples=20, seed=1))
    by_step = {d.step: d for d in check.decisions}
    first, refund, answer = (by_step[d.step] for d in run.decisions)
    assert first.reproduced == 20 and not first.unfaithful(check.min_rate)
    assert refund.unfaithful(check.min_rate) and refund.reproduced < 6  # refunds ~10 %
    assert refund.instead[0][0].startswith('answer: "This needs a manager')
    assert answer.unfaithful(check.min_rate) and answer.reproduced == 0
    assert check.to_dict()["unfaithful_steps"] == [refund.step, answer.step]
    assert "counterfactuals there may describe another agent" in headline(check)
    # the reason is what differs: the trace (openai-v2) recorded no tool definitions
    assert "tools inferred (the trace records no tool definitions" in policy_reason(
        refund.differences
    )
    again = run_sync(check_policy(run, registry=registry, samples=20, seed=1))
    assert again.to_dict() == check.to_dict()  # seeded


def test_a_rule_that_does_not_apply_is_a_note_not_a_verdict(tmp_path, run):
    _, registry = _registry(tmp_path, "faithful_policy2", FAITHFUL)
    check = run_sync(check_policy(run, registry=registry, samples=4, same="tool", seed=0))
    answer = check.decisions[-1]
    assert answer.n == 0 and "makes no tool call" in (answer.note or "")
    assert not answer.unfaithful(check.min_rate) and check.unfaithful() == []


def test_same_action_counts_calls_and_normalizes_answers():
    call = ToolCall("f", {"a": 1, "b": [1, 2]}, "id1")
    assert same_action(Message("assistant", None, (ToolCall("f", {"b": [1, 2], "a": 1}, "z"),)),
                       Message("assistant", None, (call,)))  # fmt: skip
    assert not same_action(
        Message("assistant", None, (call, call)), Message("assistant", None, (call,))
    )
    assert same_action(Message("assistant", " Done.\n"), Message("assistant", "done."))
    assert not same_action(Message("assistant", "Done"), Message("assistant", None, (call,)))


def test_cli_replay_check_policy_prints_the_table_and_json(tmp_path):
    config, _ = _registry(tmp_path, "agent_policy_cli", POLICY)
    runner = CliRunner()
    store = ["--store", str(tmp_path / "store")]
    runner.invoke(cli, [*store, "import", str(OTLP / "new_content.traces.jsonl")])
    args = [*store, "replay", NEW_CONTENT[:8], "-c", str(config), "--check-policy", "10"]
    shown = runner.invoke(cli, args, catch_exceptions=False)
    assert shown.exit_code == 0, shown.output
    assert "policy check of" in shown.output and "unfaithful" in shown.output
    data = json.loads(runner.invoke(cli, [*args, "--json"], catch_exceptions=False).output)
    assert data["reproducible"] is True
    check = data["policy_check"]
    assert check["kind"] == "policy_check" and check["samples"] == 10
    assert check["unfaithful_steps"] and check["cost"]["llm_calls"] == 30
    bad = runner.invoke(cli, [*args, "--same", "vibes"])
    assert bad.exit_code == 2 and "unknown --same 'vibes'" in bad.output


@pytest.mark.parametrize(("p_refund", "warned"), [(0.1, True), (0.7, False)])
def test_attribute_checks_the_policy_at_its_culprit(tmp_path, p_refund: float, warned: bool):
    """attribute re-decides its culprit 8 times: with a policy that rarely refunds, the
    counterfactual describes another agent, and the verdict, JSON and HTML say so."""
    source = POLICY.replace("< 0.1:", f"< {p_refund}:")
    assert (source != POLICY) is (p_refund != 0.1)
    config, _ = _registry(tmp_path, f"refund_p{int(p_refund * 10)}", source)
    config.write_text(
        config.read_text() + '[outcome]\ntype = "tool_called"\ntool = "issue_refund"\n'
        "[replay]\nseed = 4\n"
    )
    runner = CliRunner()
    store = ["--store", str(tmp_path / "store")]
    runner.invoke(cli, [*store, "import", str(OTLP / "new_content.traces.jsonl")])
    out = tmp_path / "a.json"
    html = tmp_path / "a.html"
    args = [*store, "attribute", NEW_CONTENT[:8], "-c", str(config), "--json", str(out)]
    result = runner.invoke(cli, [*args, "--html", str(html)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    jsonschema.validate(
        data, json.loads((ROOT / "schemas" / "attribution.schema.json").read_text())
    )
    assert data["verdict"] == "culprit" and data["culprit"] == 4, data["headline"]
    check = data["policy_check"]
    assert [d["step"] for d in check["decisions"]] == [4] and check["samples"] == 8
    assert check["decisions"][0]["n"] + check["decisions"][0]["errors"] == 8
    # The check draws on the refutation's seeds: the re-decisions its P_{k-1} rollouts made
    # at the culprit are served from the cache, and only the rest are calls.
    calls = check["cost"]["llm_calls"]
    assert data["cost"]["policy_check_calls"] == calls < 8
    assert check["cost"]["cache_hits"] >= 8 - calls
    # A stage of the library's attribution: otelcar.attribute gives the CLI's result.
    project = load_config(config)
    library = document(
        attribute(
            load_run(NEW_CONTENT, read_otlp(OTLP / "new_content.traces.jsonl")),
            registry=project.registry,
            outcome=project.outcome,
            seed=4,
        )
    )
    for key in ("verdict", "culprit", "policy_check", "refutations", "headline"):
        assert library[key] == data[key], key
    assert library["cost"]["llm_calls"] == data["cost"]["llm_calls"]
    sentence = "The policy rarely reproduces the recorded action at step 4"
    assert (sentence in data["headline"]) is warned
    assert (4 in check["unfaithful_steps"]) is warned
    assert any("policy check: the policy reproduced" in n for n in data["notes"]) is warned
    assert ("policy check: the policy reproduced" in html.read_text()) is warned
    skipped = runner.invoke(cli, [*args, "--policy-check", "0"], catch_exceptions=False)
    assert skipped.exit_code == 0 and json.loads(out.read_text())["policy_check"] is None


def test_a_rare_reproduction_on_the_recorded_request_is_not_an_alarm(tmp_path, run):
    """The same policy, the request declared: nothing differs from the recording, so a rare
    reproduction reads as an intermittent decision of the agent that ran, not another agent."""
    from otelcar.replay.requests import AgentDeclaration

    _, registry = _registry(tmp_path, "agent_policy_rare", POLICY)
    declared = AgentDeclaration.from_config(
        {
            "structure": "loop",
            "tool_choice": "auto",
            "tools": {
                name: {"description": name}
                for name in ("lookup_order", "get_refund_policy", "issue_refund")
            },
        }
    )
    steps = read_otlp(OTLP / "new_content.traces.jsonl")
    declared_run = load_run(NEW_CONTENT, steps, declared)
    check = run_sync(check_policy(declared_run, registry=registry, samples=20, seed=1))
    refund = next(d for d in check.decisions if d.step == declared_run.decisions[1].step)
    assert refund.differences == [] and refund.below(check.min_rate)
    assert refund.rare(check.min_rate) and not refund.unfaithful(check.min_rate)
    assert refund.step not in check.to_dict()["unfaithful_steps"]
    assert "consistent with an intermittent decision" in headline(check)


def test_attributes_check_draws_where_attribute_already_re_decided():
    """The policy check at the culprit draws on the refutation's seeds and at the harmful
    step on the curve's: in the environment ``attribute`` ran in, every re-decision the check
    takes there is one the attribution already made (a cache hit, no call); in a fresh
    environment the same check costs a call per re-decision."""
    from otelcar.attribution.steps.policy_check import check_stage
    from otelcar.replay import Budget, Environment
    from otelcar.testing.scenarios import build, single_culprit

    steps, registry, outcome = build(single_culprit(5, 2, p_bad=0.3))
    recorded = load_run(steps["trace_id"][0], steps)
    env = Environment(registry, Budget())
    result = attribute(recorded, registry=registry, outcome=outcome, seed=3, env=env)
    assert result.culprit is not None and result.culprit.step == 5
    earlier = next(d.step for d in recorded.decisions if d.step < result.culprit.step)
    # stand-in for a harmful step that is not the culprit: the curve's first look re-decided
    # every step on its recorded context 8 times
    checked = run_sync(check_stage(recorded, env, culprit=5, harmful=earlier, samples=8, seed=3))
    assert checked.check is not None
    assert sorted(d.step for d in checked.check.decisions) == [earlier, 5]
    assert all(d.n + d.errors == 8 for d in checked.check.decisions)
    assert checked.calls == 0
    fresh = run_sync(
        check_stage(
            recorded, Environment(registry, Budget()), culprit=5, harmful=earlier, samples=8,
            seed=3,
        )
    )  # fmt: skip
    assert fresh.calls == 16
