"""``aggregate``: the systematic weak step across a batch of generated failing traces.

The agent under test makes six tool decisions and a final answer. Re-decided, its
``issue_refund`` decision goes wrong 35% of the time (the planted weak step), every other
decision 3% of the time. The batch holds recorded runs that went wrong at ``issue_refund``
(most of them), runs that went wrong once at another step (one-off culprits), and passing
runs. ``aggregate`` must rank ``issue_refund`` first, as a design flaw, and call the one-off
culprits bad luck.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from otelcar import read_otlp
from otelcar.attribution.aggregate import (
    TraceVerdict,
    aggregate,
    attribute_traces,
    poisson_binomial_sf,
    t_interval,
)
from otelcar.cli import cli
from otelcar.outcome import FunctionOutcome
from otelcar.policies.python import CallableLLMPolicy, CallableToolPolicy
from otelcar.policies.registry import PolicyRegistry
from otelcar.report.prose import document as result_document
from otelcar.report.prose import headline
from tests.helpers.generated_agent import (
    AGENT_MODULE,
    AGENT_SOURCE,
    SERVICE,
    TOOLS,
    agent_trace_otlp,
    batch,
    write_dump,
)

ROOT = Path(__file__).resolve().parents[1]
WEAK = "support · scripted-model → issue_refund"


# -- the statistics ---------------------------------------------------------------------------
def test_poisson_binomial_and_t_interval_against_known_values():
    from scipy import stats

    # Equal probabilities: the Poisson-binomial is the binomial.
    for k in (0, 1, 3, 7):
        expected = stats.binom.sf(k - 1, 10, 0.2)
        assert poisson_binomial_sf(k, [0.2] * 10) == pytest.approx(expected)
    assert poisson_binomial_sf(3, [1.0, 1.0, 0.0]) == 0.0
    assert poisson_binomial_sf(2, [1.0, 1.0, 0.0]) == 1.0
    low, high = t_interval([0.5, 0.7, 0.6, 0.8], 0.95)
    assert (round(low, 4), round(high, 4)) == (0.4446, 0.8554)  # 0.65 ± 3.182·0.1291/2
    assert t_interval([0.4], 0.95) is None


def _verdict(trace: str, culprit: str | None, effects: dict[str, float]) -> TraceVerdict:
    return TraceVerdict(
        trace_id=trace,
        status="attributed",
        verdict="culprit" if culprit else "locked-in",
        culprit_step=1 if culprit else None,
        culprit_identity=culprit,
        delta=effects.get(culprit or ""),
        effects=effects,
        decisions=dict.fromkeys(effects, 1),
    )


def test_classification_design_flaw_suspect_bad_luck_and_placebo():
    ids = [f"a · m → tool{i}" for i in range(5)]
    flat = {i: 0.0 for i in ids}
    verdicts = [_verdict(f"t{n}", ids[0], {**flat, ids[0]: 0.6 + n / 100}) for n in range(8)]
    verdicts += [_verdict("u1", ids[1], {**flat, ids[1]: 0.9}), _verdict("u2", ids[2], flat)]
    verdicts += [_verdict("u3", ids[2], {**flat, ids[2]: 0.8}), _verdict("v", None, flat)]
    verdicts.append(TraceVerdict("w", "passed", reason="the recorded run did not fail"))
    result = aggregate(verdicts)
    by_id = {s.identity: s for s in result.steps}
    assert result.steps[0].identity == ids[0]
    assert by_id[ids[0]].classification == "design flaw"
    assert by_id[ids[0]].culprit == 8 and by_id[ids[0]].share == pytest.approx(8 / 12)
    assert by_id[ids[0]].expected == pytest.approx(11 / 5)  # 11 traces name a culprit
    assert by_id[ids[1]].classification == "bad luck"
    assert by_id[ids[2]].classification == "suspect"  # twice, but not above chance
    assert by_id[ids[3]].classification == "not blamed"
    assert "Design flaw" in headline(result)
    # Placebo: culprits spread evenly over the steps is bad luck everywhere, no design flaw.
    even = [_verdict(f"e{n}", ids[n % 5], {**flat, ids[n % 5]: 0.7}) for n in range(10)]
    placebo = aggregate(even)
    assert not any(s.classification == "design flaw" for s in placebo.steps)
    assert headline(placebo).startswith("No systematic weak step")


# -- the planted weak step --------------------------------------------------------------------
def _registry() -> PolicyRegistry:
    registry = PolicyRegistry()
    registry.register("llm", CallableLLMPolicy(AGENT_MODULE["decide"], name="agent"))
    registry.register("tool:*", CallableToolPolicy(AGENT_MODULE["run_tool"], name="tools"))
    return registry


def test_aggregate_finds_the_planted_weak_step(tmp_path: Path):
    runs = batch(weak=9, one_off=[0, 1, 2, 4, 5], passing=2)
    dump = write_dump(
        tmp_path / "batch.json",
        [
            agent_trace_otlp(tid, choices, start_ns=1_780_000_000_000_000_000 + n * 10**10)
            for n, (tid, choices) in enumerate(runs)
        ],
    )
    steps = read_otlp(dump)
    traces = [(tid, steps.filter(steps["trace_id"] == tid)) for tid, _ in runs]
    seen: list[str] = []
    verdicts = attribute_traces(
        traces,
        registry=_registry(),
        outcome=FunctionOutcome(AGENT_MODULE["fails"], "a tool was called with choice BAD"),
        on_trace=lambda v: seen.append(v.status),
        seed=3,
    )
    assert seen.count("attributed") == 14 and seen.count("passed") == 2
    result = aggregate(verdicts)
    top = result.steps[0]
    assert top.identity == WEAK and top.classification == "design flaw"
    assert top.culprit == 9 and top.p_adjusted < 0.001
    assert top.mean_delta is not None and top.mean_delta > 0.2
    assert top.expected == pytest.approx(14 / 7)  # one decision in seven, in every trace
    one_offs = {f"support · scripted-model → {TOOLS[i]}" for i in (0, 1, 2, 4, 5)}
    blamed_once = {s.identity for s in result.steps if s.classification == "bad luck"}
    assert blamed_once <= one_offs and len(blamed_once) >= 4
    document = result_document(result)
    schema = json.loads((ROOT / "schemas" / "aggregate.schema.json").read_text())
    jsonschema.validate(document, schema)
    assert document["counts"] == {"attributed": 14, "passed": 2, "skipped": 0}


def test_cli_aggregate_selects_by_service_and_time_and_writes_reports(tmp_path: Path):
    (tmp_path / "agent_under_test.py").write_text(AGENT_SOURCE)
    config = tmp_path / "otelcar.toml"
    config.write_text(
        '[policies.llm]\ntype = "python"\nfunction = "agent_under_test:decide"\n'
        '[policies."tool:*"]\ntype = "python"\nfunction = "agent_under_test:run_tool"\n'
        "keywords = false\n"
        '[outcome]\ntype = "function"\nfunction = "agent_under_test:fails"\n'
        "[replay]\nseed = 5\n"
    )
    runs = batch(weak=6, one_off=[1, 4], passing=1)
    entries = [
        agent_trace_otlp(tid, choices, start_ns=1_780_000_000_000_000_000 + n * 10**10)
        for n, (tid, choices) in enumerate(runs)
    ]
    weak = ["ok", "ok", "ok", "BAD", "ok", "ok"]
    entries.append(agent_trace_otlp("e" * 32, weak, service="another-bot"))
    entries.append(agent_trace_otlp("f" * 32, weak, start_ns=1_500_000_000_000_000_000))
    dump = write_dump(tmp_path / "batch.json", entries)
    store = ["--store", str(tmp_path / "store")]
    runner = CliRunner()
    imported = runner.invoke(cli, [*store, "import", str(dump)], catch_exceptions=False)
    assert imported.exit_code == 0, imported.output
    out = runner.invoke(
        cli,
        [
            *store,
            "aggregate",
            "--service",
            SERVICE,
            "--since",
            "2026-01-01",
            "-c",
            str(config),
            "--json",
            str(tmp_path / "aggregate.json"),
            "--html",
            str(tmp_path / "aggregate.html"),
        ],
        catch_exceptions=False,
    )
    assert out.exit_code == 0, out.output
    assert "Design flaw" in out.output and WEAK in out.output
    document = json.loads((tmp_path / "aggregate.json").read_text())
    jsonschema.validate(
        document, json.loads((ROOT / "schemas" / "aggregate.schema.json").read_text())
    )
    ids = {t["trace_id"] for t in document["traces"]}
    assert "e" * 32 not in ids and "f" * 32 not in ids and len(ids) == 9
    assert document["steps"][0]["identity"] == WEAK
    assert document["counts"] == {"attributed": 8, "passed": 1, "skipped": 0}
    html = (tmp_path / "aggregate.html").read_text()
    assert "issue_refund" in html and 'id="share-chart"' in html
    again = runner.invoke(cli, ["report", str(tmp_path / "aggregate.json")])
    assert again.exit_code == 0 and "Design flaw" in again.output
    explicit = runner.invoke(cli, [*store, "aggregate", "f" * 8, "-c", str(config), "--json", "-"])
    assert explicit.exit_code == 0, explicit.output
    assert [t["trace_id"] for t in json.loads(explicit.stdout)["traces"]] == ["f" * 32]
    bad = runner.invoke(cli, [*store, "aggregate", "--since", "yesterday", "-c", str(config)])
    assert bad.exit_code == 2 and "--since" in bad.output


@pytest.mark.parametrize("option", ["rolouts", "budget", "env"])
def test_an_option_attribute_cannot_take_is_refused_before_any_trace_is_read(option: str):
    """A misspelt option (or one set per trace) used to fail inside the first trace's
    attribution, or on a worker; it is a TypeError naming it, and no trace is read."""
    read: list[str] = []

    def traces():
        read.append("read")
        yield ("t", None)

    outcome = FunctionOutcome(AGENT_MODULE["fails"], "a tool was called with choice BAD")
    with pytest.raises(TypeError, match=rf"cannot pass on: {option};.* rollouts, first_look"):
        attribute_traces(traces(), registry=_registry(), outcome=outcome, **{option: 1})
    assert read == []


def test_a_declaration_that_does_not_fit_a_trace_skips_it_with_the_reason(tmp_path: Path):
    """[agent] reaches every trace of a batch; a step it names that one trace lacks skips
    that trace, saying why, instead of stopping the batch or being ignored."""
    from otelcar.replay.requests import AgentDeclaration

    runs = batch(weak=1, one_off=[], passing=0)
    dump = write_dump(
        tmp_path / "one.json",
        [
            agent_trace_otlp(tid, choices, start_ns=1_780_000_000_000_000_000)
            for tid, choices in runs
        ],
    )
    steps = read_otlp(dump)
    traces = [(tid, steps.filter(steps["trace_id"] == tid)) for tid, _ in runs]
    declared = AgentDeclaration.from_config({"decision": [{"step": 999, "tools": []}]})
    (verdict,) = attribute_traces(
        traces,
        registry=_registry(),
        outcome=FunctionOutcome(AGENT_MODULE["fails"], "a tool was called with choice BAD"),
        agent=declared,
        seed=3,
    )
    assert verdict.status == "skipped" and "step 999 is not a decision" in verdict.reason
