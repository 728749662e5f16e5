"""Preference pairs (``otelcar export pairs``): from validated fixes and from attribution
culprits tested on fresh rollouts; every line loads with schemas/pairs.schema.json and carries
its evidence; no pair without significant evidence."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from otelcar.attribution import attribute
from otelcar.attribution.faithfulness import check_policy
from otelcar.attribution.fixes.fix import fix
from otelcar.attribution.pairs import (
    FORMATS,
    PairsError,
    attribution_pairs_async,
    export_pairs,
    fix_pairs,
    result_of,
)
from otelcar.outcome import FunctionOutcome, ToolCalled
from otelcar.replay import Budget, load_run
from otelcar.report.notes import worded
from otelcar.sync import run_sync
from otelcar.testing import scenarios as synthetic
from tests.conftest import NEW_CONTENT, OTLP
from tests.helpers.refund_scenario import null_agent, registry, run_of
from tests.helpers.scripted_refund import imported_trace_with_policy

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
    # An agent whose decision ignores its context: no rule can pass (tests/test_why_fix.py).
    run = run_of()
    result = fix(run, registry=registry(null_agent(0.8)), step=4, seed=0).to_dict()
    assert not any(c["verdict"] == "PASS" for c in result["candidates"])
    made = fix_pairs(run, result)
    assert made.pairs == () and worded(made.notes) == [
        "no fix of step 4 passed: nothing to learn from"
    ]


def test_a_passing_fix_without_its_good_action_gives_a_note_and_a_forced_one_its_action():
    run = run_of()
    result = fix(
        run,
        registry=registry(untrusted=0.0, guard=0.3),
        step=4,
        samples=20,
        seed=2,
        outcome=ToolCalled("issue_refund"),
        forward=True,
        rollouts=16,  # a forward PASS needs 13 rollouts without failure to show a rate < 0.3
    ).to_dict()
    verdicts = {c["name"]: c["verdict"] for c in result["candidates"]}
    assert verdicts["forced"] == "PASS" and verdicts["untrusted"] == "PASS"
    made = fix_pairs(run, result)
    (pair,) = made.pairs  # every passing fix escalates: one pair, the best fix's evidence
    assert pair.evidence["fix"] == result["best"] and pair.chosen.tool_calls[0].name == (
        "escalate_to_manager"
    )
    assert any("one pair for both" in note for note in worded(made.notes))
    for candidate in result["candidates"]:  # as an earlier otelcar wrote them
        if candidate["decision"] is not None:
            del candidate["decision"]["alternative_action"]
    older = fix_pairs(run, result)
    (forced,) = older.pairs  # the forced fix's own action, from its plan
    assert forced.evidence["fix"] == "forced" and forced.evidence["forward"]["verdict"] == "PASS"
    assert forced.chosen.tool_calls[0].name == "escalate_to_manager"
    assert any("'untrusted' passed but gives no good action" in n for n in worded(older.notes))
    assert all("run `otelcar fix` again" in n for n in worded(older.notes) if "no good action" in n)


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
        assert skipped.pairs == () and why in worded(skipped.notes)[0] and skipped.cost == {}


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
    check = check_policy(run, registry=registry, samples=8, steps=[result["culprit"]])
    result["policy_check"] = run_sync(check).to_dict()  # as the CLI's attribution does
    seen = []
    made = run_sync(
        attribution_pairs_async(
            run,
            result,
            registry=registry,
            outcome=outcome,
            seed=3,
            on_rollout=lambda judged: seen.append(judged.rollout),
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
    assert pair.evidence["policy_unfaithful"] is False  # it repeats BAD 70% of the time
    del result["policy_check"]
    again = run_sync(attribution_pairs_async(run, result, registry=registry, outcome=outcome))
    assert again.pairs[0].evidence["policy_unfaithful"] is None  # not checked


def test_a_budget_bounds_the_fresh_rollouts_and_cuts_both_arms():
    run, registry, outcome, result = _attributed(synthetic.single_culprit(6, 3))
    made = run_sync(
        attribution_pairs_async(
            run, result, registry=registry, outcome=outcome, seed=3, budget=Budget(max_calls=40)
        )
    )
    assert made.cost["llm_calls"] == 40
    redecided, held = (n for n in worded(made.notes) if "budget ran out" in n)
    assert "re-deciding" in redecided and "holding" in held
    assert "16 of 16" not in held  # the held arm was not starved by the other one
    for pair in made.pairs:
        fresh = pair.evidence["fresh"]
        assert fresh["rejected"]["n"] + fresh["chosen"]["n"] < 32


def _coin_flip(n: int = 6, k: int = 2) -> synthetic.Scenario:
    """Step ``k`` took ``a`` of three actions, each as likely when re-decided; the last step
    flipped a coin (tails, the recorded draw, fails the run). Only the last step matters."""
    recorded = ["ok"] * n
    recorded[k], recorded[-1] = "a", "tails"
    choices = [synthetic.NOISE] * n
    choices[k] = [("a", 1 / 3), ("b", 1 / 3), ("c", 1 / 3)]
    choices[-1] = [("heads", 0.5), ("tails", 0.5)]
    return synthetic.Scenario("coin", recorded, choices, lambda c: c[-1] == "tails", n - 1)


def test_an_action_that_does_not_help_on_fresh_rollouts_gives_no_pair():
    run, registry, outcome, result = _attributed(_coin_flip())
    assert result["culprit"] == run.decisions[5].step  # the coin (the last act; then an answer)
    # The attribution's claim holds on fresh rollouts: heads is the pair's chosen action.
    made = run_sync(attribution_pairs_async(run, result, registry=registry, outcome=outcome))
    (pair,) = made.pairs
    assert pair.chosen.tool_calls[0].arguments["v"] == "heads"
    assert pair.evidence["fresh"]["chosen"]["failed"] == 0
    # A claim on step 2 (a wrong culprit): its other actions fail as often as the recorded one.
    wrong = {**result, "culprit": run.decisions[2].step}
    for seed in range(4):
        refuted = run_sync(
            attribution_pairs_async(run, wrong, registry=registry, outcome=outcome, seed=seed)
        )
        assert refuted.pairs == (), refuted.pairs[0].evidence
        (note,) = worded(refuted.notes)
        assert "failed significantly less often" in note and '"v": "b"' in note
        assert refuted.cost["rollouts_run"] == 32


def test_an_attribution_without_a_culprit_gives_no_pair_and_spends_nothing():
    run, registry, outcome, result = _attributed(synthetic.null_case(5), seed=3)
    assert result["verdict"] == "locked-in"
    made = export_pairs(run, result=result, registry=registry, outcome=outcome)
    assert made.pairs == () and made.cost == {} and "no culprit" in worded(made.notes)[0]
    assert export_pairs(run, result=result).notes == made.notes  # no policy needed for that


def test_anything_but_an_attribution_or_fix_result_is_a_clear_error():
    with pytest.raises(PairsError, match="not an attribution or fix result"):
        result_of({"kind": "why", "trace_id": "x"})
    with pytest.raises(PairsError, match="not an attribution or fix result"):
        result_of([1, 2])
    kept = {"id": "fix-1", "kind": "fix", "result": {"kind": "fix", "trace_id": "abc"}}
    assert result_of(kept)["trace_id"] == "abc"  # a kept run's record
    unfinished = {"id": "fix-1", "kind": "fix", "status": "failed", "result": None}
    with pytest.raises(PairsError, match=r"did not finish \(status 'failed'\)"):
        result_of(unfinished)


def test_export_pairs_checks_the_trace_the_policies_and_the_outcome():
    run, registry, outcome, result = _attributed(synthetic.single_culprit(5, 2))
    with pytest.raises(PairsError, match="of trace abc, the run of"):
        export_pairs(run, result={**result, "trace_id": "abc"})
    with pytest.raises(PairsError, match="need the policies"):
        export_pairs(run, result=result, outcome=outcome)
    other = FunctionOutcome(lambda steps: True, name="always fails")
    with pytest.raises(PairsError, match="judged its rollouts by"):
        export_pairs(run, result=result, registry=registry, outcome=other)
    kept = {"id": "attribute-1", "kind": "attribute", "status": "done", "result": result}
    made = export_pairs(run, result=kept, registry=registry, outcome=outcome)
    assert made.pairs and made.cost["llm_calls"] > 0


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


def test_cli_attribute_with_fail_if_then_export_pairs_with_the_same_rule(tmp_path):
    runner, store, config = imported_trace_with_policy(tmp_path)  # no [outcome]
    sys.path.insert(0, str(tmp_path))
    attribution = tmp_path / "attribution.json"
    rule = ["--fail-if", "tool_called:issue_refund"]
    args = [NEW_CONTENT[:8], "-c", str(config), *rule, "--json", str(attribution)]
    assert runner.invoke(cli(), [*store, "attribute", *args]).exit_code == 0
    export = [*store, "export", "pairs", str(attribution), "-c", str(config)]
    missing = runner.invoke(cli(), export)
    assert missing.exit_code == 2 and "--fail-if" in missing.output
    other = runner.invoke(cli(), [*export, "--fail-if", "tool_called:lookup_order"])
    assert other.exit_code == 2 and "error: the attribution judged its rollouts by" in other.output
    same = runner.invoke(cli(), [*export, *rule])
    assert same.exit_code == 0, same.output
    (line,) = [json.loads(text) for text in same.stdout.splitlines()]
    _valid(line)
    assert line["format"] == "otelcar" and line["step"] == 4
    # The CLI's attribution checked the policy: it never repeats the recorded refund there.
    assert line["evidence"]["policy_unfaithful"] is True
    assert "rarely reproduces the recorded action at step 4" in same.stderr
    assert "1 pair (otelcar) written to stdout; cost:" in same.stderr


def test_cli_fix_then_export_pairs_from_the_file_and_the_kept_run(tmp_path):
    from tests.helpers.refund_scenario import FIXTURE_POLICY

    (tmp_path / "fixture_agent.py").write_text(FIXTURE_POLICY)
    sys.path.insert(0, str(tmp_path))
    config = tmp_path / "otelcar.toml"
    config.write_text(
        '[policies.llm]\ntype = "python"\nfunction = "fixture_agent:decide"\n[replay]\nseed = 4\n'
    )
    runner, store = CliRunner(), ["--store", str(tmp_path / "store")]
    runner.invoke(cli(), [*store, "import", str(OTLP / "new_content.traces.jsonl")])
    fixed = tmp_path / "fix.json"
    args = [NEW_CONTENT[:8], "-c", str(config), "--step", "4", "--json", str(fixed)]
    assert runner.invoke(cli(), [*store, "fix", *args]).exit_code == 0
    result = json.loads(fixed.read_text())
    kept = tmp_path / "fix-20260101T000000Z-0123abcd.json"
    record = {"id": kept.stem, "kind": "fix", "status": "done", "result": result}
    kept.write_text(json.dumps(record))
    for path in (fixed, kept):
        out = tmp_path / f"{path.stem}.jsonl"
        done = runner.invoke(
            cli(), [*store, "export", "pairs", str(path), "--format", "dpo", "-o", str(out)]
        )  # no -c: fix pairs need no policy
        assert done.exit_code == 0, done.output
        lines = [_valid(json.loads(text)) for text in out.read_text().splitlines()]
        assert lines and all(line["evidence"]["source"] == "fix" for line in lines)
        assert lines[0]["evidence"]["fix"] == result["best"]
        assert lines[0]["rejected"][0]["tool_calls"][0]["function"]["name"] == "issue_refund"
        assert "approval" in lines[0]["chosen"][0]["content"]
        assert "cost: 0 policy calls" in done.stderr
    why = tmp_path / "why.json"
    why.write_text(json.dumps({**record, "kind": "why", "result": {"kind": "why"}}))
    refused = runner.invoke(cli(), [*store, "export", "pairs", str(why)])
    assert refused.exit_code == 2 and refused.output.count("error:") == 1
    assert "not an attribution or fix result (kind 'why')" in refused.output
    assert "Traceback" not in refused.output


def cli():
    from otelcar.cli import cli as root

    return root
