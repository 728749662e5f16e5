"""Preference pairs (``otelcar export pairs``): from validated fixes and from attribution
culprits tested on fresh rollouts; every line loads with schemas/pairs.schema.json and carries
its evidence; no pair without significant evidence."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jsonschema
import pytest

from otelcar.attribution import attribute
from otelcar.attribution.fixes.fix import fix
from otelcar.attribution.pairs import (
    FORMATS,
    PairsError,
    attribution_pairs_async,
    fix_pairs,
    result_of,
)
from otelcar.outcome import FunctionOutcome, ToolCalled
from otelcar.replay import Budget, load_run
from otelcar.sync import run_sync
from otelcar.testing import scenarios as synthetic
from tests.conftest import NEW_CONTENT
from tests.test_attribution import imported_trace_with_policy
from tests.test_why_fix import registry, run_of

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "schemas" / "pairs.schema.json").read_text())
OUTCOME = '[outcome]\ntype = "tool_called"\ntool = "issue_refund"\n'


def _valid(line: dict) -> dict:
    jsonschema.validate(json.loads(json.dumps(line)), SCHEMA)
    return line


def test_a_passing_fix_gives_a_pair_with_the_recorded_action_rejected():
    run = run_of()
    result = fix(
        run, registry=registry(untrusted=0.0, guard=0.3), step=4, samples=20, seed=2
    ).to_dict()
    passed = [c for c in result["candidates"] if c["verdict"] == "PASS"]
    assert passed and all(c["decision"]["alternative_action"] for c in passed)
    made = fix_pairs(run, result)
    assert made.pairs and made.cost == {}  # no new policy call
    recorded = run.decision_at_step(4)
    for pair in made.pairs:
        assert pair.rejected == recorded.action and pair.messages == tuple(recorded.context)
        assert pair.chosen.tool_calls[0].name != "issue_refund"
        assert pair.evidence["source"] == "fix"
        assert pair.evidence["decision"]["verdict"] == "PASS"
        assert pair.evidence["decision"]["p_adjusted"] < result["alpha"]
    first = made.pairs[0]
    assert first.evidence["fix"] == result["best"]  # the best fix first
    lines = {fmt: _valid(first.to_line(fmt)) for fmt in FORMATS}
    assert lines["otelcar"]["rejected"]["tool_calls"][0]["function"]["name"] == "issue_refund"
    assert lines["dpo"]["prompt"] == lines["otelcar"]["messages"]
    assert lines["dpo"]["chosen"] == [lines["otelcar"]["chosen"]]
    assert lines["chat"]["messages"] == [*lines["otelcar"]["messages"], lines["otelcar"]["chosen"]]
    assert lines["otelcar"]["tools"] and all(t["type"] == "function" for t in lines["dpo"]["tools"])
    assert all(line["evidence"] == first.evidence for line in lines.values())


def test_a_fix_that_passed_nothing_gives_no_pair():
    run = run_of()
    result = fix(run, registry=registry(untrusted=None, guard=None), step=4, seed=1).to_dict()
    for candidate in result["candidates"]:
        if candidate["verdict"] == "PASS":  # keep only what did not pass
            candidate["verdict"] = "FAIL"
    made = fix_pairs(run, result)
    assert made.pairs == [] and "nothing to learn from" in made.notes[0]


def _attribution(step: int = 4, **extra) -> dict:
    return {
        "kind": "attribution",
        "trace_id": NEW_CONTENT,
        "verdict": "culprit",
        "culprit": step,
        "confidence": 0.95,
        "steps": [{"step": step, "delta": 0.8, "delta_ci": [0.5, 1.0], "p_adjusted": 0.001}],
        "refutations": [{"name": "fresh seeds", "passed": True}],
        **extra,
    }


def _refund_project(tmp_path: Path):
    from otelcar.project_config import load_config

    runner, store, config = imported_trace_with_policy(tmp_path)
    config.write_text(config.read_text() + OUTCOME)
    sys.path.insert(0, str(tmp_path))
    return runner, store, config, load_config(config)


def test_an_attribution_culprit_gives_pairs_only_on_fresh_significant_evidence(tmp_path):
    from otelcar.readers import read_otlp
    from tests.conftest import OTLP

    _, _, _, config = _refund_project(tmp_path)
    run = load_run(NEW_CONTENT, read_otlp(OTLP / "new_content.traces.jsonl"))
    made = run_sync(
        attribution_pairs_async(
            run, _attribution(), registry=config.registry, outcome=config.outcome, seed=5
        )
    )
    (pair,) = made.pairs  # the policy's one other action there: ask for approval
    assert pair.rejected == run.decision_at_step(4).action
    assert "approval" in pair.chosen.content
    fresh = pair.evidence["fresh"]
    assert fresh["seed_stage"] == "pairs" and fresh["rollouts_per_plan"] == 16
    assert fresh["rejected"]["failed"] == fresh["rejected"]["n"] >= 16  # refunding fails
    assert fresh["chosen"]["failed"] == 0 and fresh["chosen"]["n"] > 0
    assert fresh["rejected"]["n"] + fresh["chosen"]["n"] == 32  # every fresh rollout used
    assert fresh["p_adjusted"] < 0.05
    assert pair.evidence["refutation"] == {"passed": True, "names": ["fresh seeds"]}
    assert made.cost["llm_calls"] > 0  # counted
    _valid(pair.to_line("otelcar"))

    # The same claim where no action helps (every run fails): the fresh rollouts refute it.
    always = FunctionOutcome(lambda steps: True, name="always fails")
    none = run_sync(
        attribution_pairs_async(
            run, _attribution(), registry=config.registry, outcome=always, seed=5
        )
    )
    assert none.pairs == [] and "failed significantly less often" in none.notes[0]
    for claim, why in (
        (_attribution(verdict="locked-in", culprit=None), "no culprit"),
        (_attribution(refutations=[{"name": "placebo", "passed": False}]), "refutation"),
        (_attribution(question="credit"), "credit attribution"),
    ):
        skipped = run_sync(
            attribution_pairs_async(
                run, claim, registry=config.registry, outcome=ToolCalled("issue_refund")
            )
        )
        assert skipped.pairs == [] and why in skipped.notes[0] and skipped.cost == {}


def _attributed(scenario: synthetic.Scenario, seed: int = 1):
    """A scripted scenario's run, registry and outcome, and its ``attribute`` result."""
    steps, registry, outcome = synthetic.build(scenario)
    run = load_run(synthetic.TRACE_ID, steps)
    result = attribute(run, registry=registry, outcome=outcome, seed=seed).to_dict()
    return run, registry, outcome, result


def test_the_fresh_arms_are_independent_rollouts_and_the_counts_are_theirs():
    # The culprit's re-decisions repeat its recorded (BAD) action 70% of the time: were the
    # held arm's rollouts seeded as the re-decided ones, each repeat would be a held rollout
    # replayed from the cache and counted twice in the rejected arm.
    run, registry, outcome, result = _attributed(synthetic.single_culprit(6, 3, p_bad=0.7))
    assert result["verdict"] == "culprit" and result["culprit"] == run.decisions[3].step
    seen = []
    made = run_sync(
        attribution_pairs_async(
            run, result, registry=registry, outcome=outcome, seed=3, on_rollout=seen.append
        )
    )
    assert made.cost["cache_hits"] == 0  # no rollout of one arm is another's again
    assert sorted(r.index for r in seen) == list(range(32))
    redecided = [r for r in seen if r.index < 16]
    values = [r.decisions[3].action.tool_calls[0].arguments["v"] for r in redecided]
    (pair,) = made.pairs  # the scenario's one other action there: "ok"
    assert pair.chosen.tool_calls[0].arguments == {"i": 3, "v": "ok"}
    fresh = pair.evidence["fresh"]
    assert fresh["rejected"] == {"failed": 16 + values.count("BAD"), "n": 16 + values.count("BAD")}
    assert fresh["chosen"] == {"failed": 0, "n": values.count("ok")}
    assert 0 < values.count("ok") < 16 and fresh["p_adjusted"] < 0.05
    assert made.cost["rollouts_run"] == 32


def test_a_budget_bounds_the_fresh_rollouts_and_cuts_both_arms():
    run, registry, outcome, result = _attributed(synthetic.single_culprit(6, 3))
    made = run_sync(
        attribution_pairs_async(
            run, result, registry=registry, outcome=outcome, seed=3, budget=Budget(max_calls=40)
        )
    )
    assert made.cost["llm_calls"] == 40
    redecided, held = (n for n in made.notes if "budget ran out" in n)
    assert "re-deciding" in redecided and "holding" in held
    assert "16 of 16" not in held  # the held arm was not starved by the other one
    for pair in made.pairs:
        fresh = pair.evidence["fresh"]
        assert fresh["rejected"]["n"] + fresh["chosen"]["n"] < 32


def test_anything_but_an_attribution_or_fix_result_is_a_clear_error():
    with pytest.raises(PairsError, match="not an attribution or fix result"):
        result_of({"kind": "why", "trace_id": "x"})
    with pytest.raises(PairsError, match="not an attribution or fix result"):
        result_of([1, 2])
    kept = {"id": "fix-1", "kind": "fix", "result": {"kind": "fix", "trace_id": "abc"}}
    assert result_of(kept)["trace_id"] == "abc"  # a kept run's record


def test_cli_attribute_then_export_pairs_in_every_format(tmp_path):
    runner, store, config, _ = _refund_project(tmp_path)
    attribution = tmp_path / "attribution.json"
    done = runner.invoke(
        cli(), [*store, "attribute", NEW_CONTENT[:8], "-c", str(config), "--json", str(attribution)]
    )
    assert done.exit_code == 0, done.output
    assert json.loads(attribution.read_text())["culprit"] == 4
    for fmt in FORMATS:
        out = tmp_path / f"pairs.{fmt}.jsonl"
        exported = runner.invoke(
            cli(),
            [*store, "export", "pairs", str(attribution), "-c", str(config), "--format", fmt,
             "-o", str(out)],
        )  # fmt: skip
        assert exported.exit_code == 0, exported.output
        lines = [json.loads(line) for line in out.read_text().splitlines()]
        assert len(lines) == 1 and all(_valid(line) for line in lines)
        assert lines[0]["evidence"]["source"] == "attribution"
        assert "1 pair (" in exported.output and "policy calls" in exported.output
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    bad = runner.invoke(cli(), [*store, "export", "pairs", str(garbage)])
    assert bad.exit_code == 2 and "not JSON" in bad.output and "Traceback" not in bad.output


def cli():
    from otelcar.cli import cli as root

    return root
