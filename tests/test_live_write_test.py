"""``otelcar fix --agent CMD --write-test`` (issue 43): the written pytest file runs the real agent.

The refund agent of ``tests/agents`` is recorded once (openai-v2 instrumentation) and imported;
its policy is the agent's own brain as a python policy, so the written tests run in a pytest
subprocess with nothing but the otelcar.toml. The brain follows the planted customer note
(refund B-7) 6 times in 10 and ignores system-prompt rules, so the ``source`` fix (the note
removed) keeps the run from failing and the ``guard`` rule does not:

- ``--agent CMD``: the command is written into the file (with the folder it ran in); the
  guard's test fails with the failure rate, the bound and the failed rollouts;
- ``[agent] command``: the file reads it from the otelcar.toml when it runs; the source fix's
  test passes, and once the agent changed (another system prompt) the same test fails with
  the live check's first difference instead of running rollouts on another run.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from otelcar.analyses import live_rollouts
from otelcar.attribution.fixes.regression import check_fix_rollouts_async, rollout_plan
from otelcar.cli import cli
from otelcar.errors import OtelcarError
from otelcar.live import AgentCommand
from otelcar.outcome import outcome_from_config
from otelcar.policies.registry import PolicyRegistry
from otelcar.project_config import ProjectConfig
from otelcar.pytest_plugin import RecordedAgent
from otelcar.sync import run_sync
from tests.helpers.agents import OUTCOMES, Recorded, Seeing

ROOT = Path(__file__).resolve().parents[1]
AGENT = [sys.executable, "-m", "tests.agents.run", "refund_loop", "--seed", "7"]
CONFIG = """[policies.llm]
type = "python"
function = "tests.agents.refund_loop:decide"

[outcome]
type = "tool_called"
tool = "issue_refund"
args = { order_id = "B-7" }
"""


def _agent_table(*extra: str) -> str:
    command = ", ".join(f'"{part}"' for part in [*AGENT, *extra])
    return f'\n[agent]\ncommand = [{command}]\ncwd = "{ROOT}"\nconcurrency = 3\n'


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    return Recorded("refund_loop", "openai-v2", tmp_path_factory.mktemp("live-write-test"))


def _refund_step(recorded: Recorded) -> int:
    """The misled decision: the refund of B-7 the planted note asked for."""
    (step,) = [
        d.step
        for d in recorded.run().decisions
        if d.action and any(c.name == "issue_refund" for c in d.action.tool_calls)
    ]
    return step


def _pytest(where: Path, *paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *map(str, paths)],
        capture_output=True,
        text=True,
        cwd=where,  # not ROOT: the agent runs where the file says, not where pytest runs
        env={**os.environ, "PYTHONPATH": str(ROOT)},  # the brain policy's module
        timeout=300,
    )


def test_fix_write_test_runs_the_agent_and_keeps_the_fix(
    recorded: Recorded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)  # --agent's command runs where otelcar runs
    given = tmp_path / "given.toml"  # the command comes from --agent
    given.write_text(CONFIG)
    declared = tmp_path / "declared.toml"  # the command comes from [agent]
    declared.write_text(CONFIG + _agent_table())
    runner = CliRunner()
    store = ["--store", str(tmp_path / "store")]
    runner.invoke(cli, [*store, "import", str(recorded.path)], catch_exceptions=False)
    checks = tmp_path / "checks"  # not "tests": that package is the agents'
    step = _refund_step(recorded)
    args = [*store, "fix", recorded.trace_id[:8], "--step", str(step), "--rollouts", "3"]
    guard_args = ["-c", str(given), "--agent", shlex.join(AGENT), "--use", "guard"]
    guard = runner.invoke(
        cli,
        [*args, *guard_args, "--write-test", str(checks / "test_guard.py")],
        catch_exceptions=False,
    )
    assert guard.exit_code == 0, guard.output
    assert "regression test (3 rollouts of `" in guard.output
    source = runner.invoke(
        cli,
        [*args, "-c", str(declared), "--write-test", str(checks / "test_source.py")],
        catch_exceptions=False,
    )
    assert source.exit_code == 0, source.output
    assert "best fix 'source'" in source.output
    guard_file = (checks / "test_guard.py").read_text()
    assert f"AGENT = {json.dumps(shlex.join(AGENT))}" in guard_file
    assert "AGENT_CWD = HERE / " in guard_file and "agent.assert_fix_live(" in guard_file
    assert f"{{'kind': 'resample', 'step': {step}}}" in guard_file  # decided again there
    source_file = (checks / "test_source.py").read_text()
    assert "AGENT = None" in source_file and "AGENT_CWD = None" in source_file

    ran = _pytest(tmp_path, checks)
    out = ran.stdout + ran.stderr
    assert "1 failed, 1 passed" in ran.stdout, out
    assert f"FAILED checks/test_guard.py::test_step_{step}_with_guard_on_the_agent" in ran.stdout
    assert (
        f"step {step} with the fix (guard), rolled out on the agent `" in ran.stdout
        and "the run still failed (a call of issue_refund(order_id='B-7')) in 2/3 rollouts "
        "(67%; allowed ≤ 20%)"
        in ran.stdout
        and f"Failed rollouts: rollout 1: step {step} issue_refund" in ran.stdout
    ), out
    assert f"test_step_{step}_with_source_on_the_agent: fix on the agent" in ran.stdout
    assert "bad 0/3 (rate 0%; allowed ≤ 20%)" in ran.stdout  # the terminal summary

    # the agent changed since: the same test refuses, with the first difference
    declared.write_text(CONFIG + _agent_table("--system", "You refund. Be brief."))
    changed = _pytest(tmp_path, checks / "test_source.py")
    out = changed.stdout + changed.stderr
    assert "1 failed" in changed.stdout, out
    assert f"step {step}: the fix cannot be checked on the agent: live replay of" in changed.stdout
    assert "does NOT reproduce the recorded run" in changed.stdout, out
    assert "message 0 (system) differs" in changed.stdout, out
    assert "LiveReplayError" not in out  # an assertion message, not the library's traceback


def test_a_broken_agent_counts_every_rollout_against_the_bound(recorded: Recorded) -> None:
    """A rollout whose agent exits non-zero is never judged, so it counts as a failure."""
    run, step = recorded.run(), _refund_step(recorded)
    registry = PolicyRegistry().register("llm", Seeing("refund_loop"))
    config = ProjectConfig(registry, outcome_from_config(OUTCOMES["refund_loop"], registry))
    config.agent_command = AgentCommand.parse(
        [sys.executable, "-c", "import sys; sys.exit('no model configured')"], cwd=ROOT
    )

    async def check() -> object:
        with live_rollouts(config):
            return await check_fix_rollouts_async(
                run,
                step,
                registry=registry,
                outcome=config.outcome,
                plan=rollout_plan(run, step, None).to_dict(),
                rollouts=2,
                agent="broken",
            )

    result = run_sync(check())
    assert (result.failed, result.judged, result.lost, result.rate) == (0, 0, 2, 1.0)
    message = result.message(0.2)
    assert "(no fix applied), rolled out on the agent `broken`" in message
    assert "in 2/2 rollouts (100%; allowed ≤ 20%)" in message
    assert "exited with status 1: no model configured" in message


def test_a_live_check_without_an_agent_command_says_so(recorded: Recorded) -> None:
    registry = PolicyRegistry().register("llm", Seeing("refund_loop"))
    config = ProjectConfig(registry, outcome_from_config(OUTCOMES["refund_loop"], registry))
    agent = RecordedAgent(recorded.run(), config)
    with pytest.raises(OtelcarError, match=r"\[agent\] command, and the otelcar.toml names none"):
        agent.assert_fix_live(_refund_step(recorded), max_rate=0.2, plan={"interventions": []})
