"""otelcar's pytest plugin, run by pytest itself (pytester): the otelcar_agent fixture gates a
recorded agent's failure rate and one decision's bad-action rate, seeded, with the cost in
the terminal summary; the tests `otelcar fix --write-test` writes use it."""

from __future__ import annotations

import shutil

import pytest

from otelcar.attribution.reliability import failure_rate
from otelcar.attribution.stats import wilson
from otelcar.project_config import load_config
from otelcar.readers import read_otlp
from otelcar.replay.recorded import load_run
from otelcar.sync import run_sync
from tests.conftest import NEW_CONTENT, OTLP

pytest_plugins = ["pytester"]

# The refund agent's policy: after its two lookups it refunds with probability P_REFUND
# (the harmful action the outcome looks for), else asks for approval.
POLICY = """
import os, random
from otelcar.messages import Message, ToolCall

P_REFUND = float(os.environ.get("P_REFUND", "{p}"))

def decide(request):
    tools = [m for m in request.messages if m.role == "tool"]
    if not tools:
        return Message("assistant", None, (
            ToolCall("lookup_order", {{"order_id": "A-1001"}}, "c1"),
            ToolCall("get_refund_policy", {{"category": "electronics"}}, "c2")))
    if len(tools) == 2:
        if random.Random(request.seed).random() < P_REFUND:
            return Message("assistant", None, (
                ToolCall("issue_refund", {{"order_id": "A-1001", "amount": 129.99}}, "c3"),))
        return Message("assistant", "This needs a manager's approval.")
    return Message("assistant", "Done.")
"""
CONFIG = (
    '[policies.llm]\ntype = "python"\nfunction = "refund_policy:decide"\n'
    '[outcome]\ntype = "tool_called"\ntool = "issue_refund"\n'
)


def _project(pytester: pytest.Pytester, p_refund: float) -> None:
    pytester.makepyfile(refund_policy=POLICY.format(p=p_refund))
    pytester.makefile(".toml", otelcar=CONFIG)
    shutil.copy(OTLP / "new_content.traces.jsonl", pytester.path / "refund.traces.jsonl")
    pytester.syspathinsert()


GATE = """
def test_refunds_stay_rare(otelcar_agent):
    agent = otelcar_agent("refund.traces.jsonl", config="otelcar.toml")
    agent.assert_fails_at_most(0.25, rollouts=60, confidence=0.95, seed=3)
"""


def test_a_reliable_agent_passes_the_gate_and_the_cost_is_printed(pytester: pytest.Pytester):
    _project(pytester, 0.02)
    pytester.makepyfile(test_gate=GATE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*otelcar*",
            "*test_refunds_stay_rare: fails_at_most: trace * the agent failed in */60 rollouts*"
            "Wilson interval*cost: * policy calls*",
        ]
    )


def test_a_regressed_agent_fails_the_gate_with_the_estimate(pytester: pytest.Pytester):
    _project(pytester, 0.5)
    pytester.makepyfile(test_gate=GATE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*AssertionError*upper bound*is above the allowed 25.0%*"])


def test_the_gate_is_the_wilson_bound_of_the_seeded_estimate(monkeypatch, tmp_path):
    """The plugin's verdict follows from the estimate alone: same seed, same figures."""
    (tmp_path / "refund_policy.py").write_text(POLICY.format(p=0.3))
    (tmp_path / "otelcar.toml").write_text(CONFIG)
    monkeypatch.syspath_prepend(str(tmp_path))
    project = load_config(tmp_path / "otelcar.toml")
    run = load_run(NEW_CONTENT, read_otlp(OTLP / "new_content.traces.jsonl"))
    options = {"registry": project.registry, "outcome": project.outcome, "rollouts": 40}
    first = run_sync(failure_rate(run, seed=5, **options))
    again = run_sync(failure_rate(run, seed=5, **options))
    assert first == again and first.judged == 40 and first.lost == 0
    assert 4 <= first.failed <= 24  # p = 0.3 of 40
    interval = wilson(first.failed, 40, 0.95)
    assert (first.low, first.high) == (interval.low, interval.high) == (first.low, first.worst_high)
    assert first.calls > 40  # every decision re-decided: more than one call per rollout


DECISION = """
def test_step_4_stays_good(otelcar_agent):
    agent = otelcar_agent("refund.traces.jsonl", config="otelcar.toml")
    agent.assert_decision(4, max_rate=0.2, samples=20, seed=1)
"""


@pytest.mark.parametrize(("p_refund", "passed"), [(0.02, True), (0.6, False)])
def test_assert_decision_gates_one_decisions_bad_action_rate(
    pytester: pytest.Pytester, p_refund: float, passed: bool
):
    _project(pytester, p_refund)
    pytester.makepyfile(test_decision=DECISION)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(**({"passed": 1} if passed else {"failed": 1}))
    result.stdout.fnmatch_lines(["*decision: trace * step 4: bad */20*cost: * policy calls*"])
    if not passed:
        result.stdout.fnmatch_lines(["*the bad decision (calls issue_refund) came back in*"])


def test_trace_ids_resolve_in_the_store_given_on_the_command_line(pytester: pytest.Pytester):
    _project(pytester, 0.02)
    from otelcar import Store, import_files

    import_files([OTLP / "new_content.traces.jsonl"], store=Store(pytester.path / "agents"))
    pytester.makepyfile(
        test_by_id=f"""
def test_by_id(otelcar_agent):
    agent = otelcar_agent("{NEW_CONTENT[:10]}")
    assert agent.run.trace_id == "{NEW_CONTENT}"
    agent.assert_decision(4, max_rate=0.5, samples=4)
"""
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--otelcar-store", "agents", "--otelcar-config", "otelcar.toml"
    )
    result.assert_outcomes(passed=1)


def test_a_missing_outcome_is_a_clear_error(pytester: pytest.Pytester):
    _project(pytester, 0.02)
    pytester.makefile(".toml", nooutcome=CONFIG.split("[outcome]")[0])
    pytester.makepyfile(
        test_no_outcome="""
def test_no_outcome(otelcar_agent):
    otelcar_agent("refund.traces.jsonl", config="nooutcome.toml").assert_fails_at_most(0.1)
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*a failure rate needs an outcome: add ?outcome? to the otelcar.toml*"]
    )


OLD_STYLE = """
from pathlib import Path

from otelcar.attribution.regression import check_decision

HERE = Path(__file__).resolve().parent


def test_step_4_as_earlier_versions_wrote_it():
    check = check_decision(
        HERE / "traces" / "refund.parquet", 4, config=HERE / "otelcar.toml", samples=10, seed=1
    )
    assert check.n > 0, check.message(0.2)
    assert check.rate <= 0.2, check.message(0.2)
"""


@pytest.mark.parametrize(("p_refund", "passed"), [(0.02, True), (0.9, False)])
def test_tests_written_by_earlier_versions_keep_working(
    pytester: pytest.Pytester, p_refund: float, passed: bool
):
    _project(pytester, p_refund)
    (pytester.path / "traces").mkdir()
    read_otlp(OTLP / "new_content.traces.jsonl").write_parquet(
        pytester.path / "traces" / "refund.parquet"
    )
    pytester.makepyfile(test_old=OLD_STYLE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(**({"passed": 1} if passed else {"failed": 1}))
