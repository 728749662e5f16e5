"""Live replay (issue 43, DESIGN.md §5b): the user's own agent runs the counterfactuals.

The agents of ``tests/agents`` (the plain ``openai`` client, unmodified) are run as child
processes (``python -m tests.agents.run AGENT``) against otelcar's model endpoint. Their
traces are recorded once by the official openai-v2 instrumentation (which records no tool
definitions or tool choice) against the scripted model; then:

- a held live replay makes every recorded request again, and the endpoint reads what the
  trace did not record (tools, tool choice) from the agent's own requests;
- an agent that no longer makes the recorded requests is refused, with the first difference;
- every counterfactual request the policy sees is the agent's own (its real tools and tool
  choice), and the rollouts end where the agent's own code ends;
- ``attribute`` on the live agent names the misled decision and ``why`` the planted sentence;
- each rollout is a fresh process with a scratch directory of its own; one that hangs is
  killed with its whole process group and counted as failed, never judged.
"""

from __future__ import annotations

import asyncio
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from otelcar.analyses import attribute_run, why_run
from otelcar.live import AgentCommand, LiveExecutor, run_agent
from otelcar.live.check import LiveReplayError, check_live
from otelcar.outcome import outcome_from_config
from otelcar.policies.registry import PolicyRegistry
from otelcar.project_config import ProjectConfig
from otelcar.replay import Environment, Plan, Resample, run_plan
from otelcar.report.notes import worded
from otelcar.report.prose import headline
from otelcar.sync import run_sync
from tests.helpers.agents import CULPRIT_TOOL, OUTCOMES, Recorded, Seeing, agent_module

ROOT = Path(__file__).resolve().parents[1]


def command(agent: str, *extra: str, **options: Any) -> AgentCommand:
    line = [sys.executable, "-m", "tests.agents.run", agent, "--seed", "7", *extra]
    return AgentCommand.parse(line, cwd=ROOT, **options)


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Recorded]:
    out = tmp_path_factory.mktemp("live")
    return {a: Recorded(a, "openai-v2", out) for a in ("cleanup", "refund_loop", "handoff")}


@pytest.mark.parametrize("agent", ["cleanup", "refund_loop", "handoff"])
def test_a_held_live_replay_makes_every_recorded_request_again(
    traces: dict[str, Recorded], agent: str
) -> None:
    case = traces[agent]
    run = case.run()
    registry = PolicyRegistry().register("llm", Seeing(agent))
    outcome = outcome_from_config(OUTCOMES[agent], registry)
    check = run_sync(check_live(run, command(agent), Environment(registry), outcome=outcome))
    assert check.reproduced, check.first_difference()
    assert check.made == run.horizon and check.recorded_failed and check.replayed_failed
    # what openai-v2 did not record, read from the agent's own requests
    assert [r.tools for r in check.requests] == case.live_tools
    assert [check.captured[d.step]["tools"] != [] for d in run.decisions] == [
        bool(t) for t in case.live_tools
    ]


def test_an_agent_that_no_longer_makes_the_recorded_requests_is_refused(
    traces: dict[str, Recorded],
) -> None:
    run = traces["cleanup"].run()
    registry = PolicyRegistry().register("llm", Seeing("cleanup"))
    changed = command("cleanup", "--system", "You tidy a workspace. Be brief.")
    check = run_sync(check_live(run, changed, Environment(registry)))
    assert not check.reproduced
    assert "message 0 (system) differs" in (check.first_difference() or "")
    with pytest.raises(LiveReplayError, match="does NOT reproduce"):
        check.require()


def test_counterfactual_requests_are_the_agents_own_and_end_where_it_ends(
    traces: dict[str, Recorded],
) -> None:
    """Resampling the act step of the workflow agent: the policy is sent the agent's real
    tools (delete_file AND keep_file, which the trace never recorded) and tool choice, and
    the rollout ends after the tool-less report, as the agent's code does."""
    run = traces["cleanup"].run()
    policy = Seeing("cleanup")
    registry = PolicyRegistry().register("llm", policy)
    outcome = outcome_from_config(OUTCOMES["cleanup"], registry)
    act = run.decisions[2].step
    result = run_plan(
        run,
        Plan((Resample(act),)),
        Environment(registry),
        rollouts=4,
        outcome=outcome,
        executor=LiveExecutor(command("cleanup", concurrency=2)),
    )
    assert result.summary()["status"] == {"final": 4}
    acting = [r for r in policy.requests if r.step == act]
    assert len(acting) == 4
    for request in acting:
        assert [t["name"] for t in request.tools or ()] == ["delete_file", "keep_file"]
        assert request.tool_choice == "auto"
    reports = [r for r in policy.requests if r.step == run.decisions[3].step]
    assert reports and all(r.tools is None for r in reports)  # the report offers none
    assert all(len(r.decisions) == run.horizon for r in result.rollouts)


@pytest.mark.slow  # a process per rollout: 100-140 s each on 2 cores
@pytest.mark.parametrize("agent", ["refund_loop", "cleanup"])
def test_live_attribute_and_why_name_the_culprit_and_the_sentence(
    traces: dict[str, Recorded], agent: str
) -> None:
    """The refund loop and the fixed workflow with a tool-less final reply, each run as a
    process per rollout: attribute names the misled decision, why the planted sentence."""
    case = traces[agent]
    run = case.run()
    registry = PolicyRegistry().register("llm", Seeing(agent))
    config = ProjectConfig(registry, outcome_from_config(OUTCOMES[agent], registry))
    config.agent_command = command(agent, concurrency=4)
    result = run_sync(  # adaptive: the workflow's act step needs more than the refund's
        attribute_run(run, config, seed=1, max_rollouts=32, refutation=False, policy_check=0)
    )
    culprit = next(d for d in run.decisions if d.action and d.action.tool_calls
                   and d.action.tool_calls[0].name == CULPRIT_TOOL[agent])  # fmt: skip
    assert result.culprit is not None and result.culprit.step == culprit.step, headline(result)
    assert any("made every recorded request again" in n for n in worded(result.notes))
    assert not any("no tool policy" in n for n in worded(result.notes))  # the agent's tools ran
    why = run_sync(why_run(run, config, step=culprit.step, seed=1))
    assert why.headline is not None
    assert agent_module(agent).PLANTED in why.headline.text


def _run_once(line: str, *, timeout_s: float = 30) -> Any:
    agent = AgentCommand.parse(
        [sys.executable, "-c", textwrap.dedent(line)], cwd=ROOT, timeout_s=timeout_s
    )
    return run_sync(
        run_agent(
            agent,
            base_url="http://127.0.0.1:9/r/t/v1",
            rollout=3,
            seed=11,
            trace_id="ab" * 16,
            input_text="hello",
            token="t",
        )
    )


def test_each_run_has_its_own_scratch_dir_and_the_rollouts_environment() -> None:
    line = """
        import os, sys
        d = os.environ["OTELCAR_ROLLOUT_DIR"]
        assert os.environ["TMPDIR"] == d and os.listdir(d) == [], os.listdir(d)
        open(os.path.join(d, "left.txt"), "w").write("x")
        assert os.environ["OPENAI_BASE_URL"] == "http://127.0.0.1:9/r/t/v1"
        assert os.environ["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9/r/t"
        assert os.environ["OTELCAR_SEED"] == "11" and os.environ["OTELCAR_ROLLOUT"] == "3"
        assert os.environ["OTELCAR_INPUT"] == "hello" and os.environ["OPENAI_API_KEY"]
        assert "otelcar.rollout=t" in os.environ["OTEL_RESOURCE_ATTRIBUTES"]
        print(d, file=sys.stderr)
    """
    first, second = _run_once(line), _run_once(line)
    assert first.returncode == 0 and second.returncode == 0, first.stderr_tail
    assert first.stderr_tail.strip() != second.stderr_tail.strip()
    assert not Path(first.stderr_tail.strip()).exists()  # removed after the run


def test_a_hanging_agent_is_killed_with_its_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    line = f"""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open({str(pid_file)!r}, "w").write(str(child.pid))
        time.sleep(60)
    """
    ran = _run_once(line, timeout_s=2)
    assert ran.timed_out and ran.returncode is None
    assert "ran past timeout_s = 2 s" in (ran.failure(2) or "")
    child = int(pid_file.read_text())
    for _ in range(50):  # the child of the agent went with its group
        try:
            Path(f"/proc/{child}/stat").read_text()
        except FileNotFoundError:
            break
        state = Path(f"/proc/{child}/stat").read_text().split()[2]
        if state == "Z":
            break
        asyncio.run(asyncio.sleep(0.05))
    else:
        pytest.fail("the agent's child process outlived the rollout")


def test_a_failing_agent_is_counted_as_failed_not_judged(traces: dict[str, Recorded]) -> None:
    run = traces["cleanup"].run()
    registry = PolicyRegistry().register("llm", Seeing("cleanup"))
    outcome = outcome_from_config(OUTCOMES["cleanup"], registry)
    broken = AgentCommand.parse(
        [sys.executable, "-c", "import sys; sys.exit('no model configured')"], cwd=ROOT
    )
    result = run_plan(
        run,
        Plan(),
        Environment(registry),
        rollouts=2,
        outcome=outcome,
        executor=LiveExecutor(broken),
        stop_when_most_fail=False,
    )
    summary = result.summary()
    assert summary["status"] == {"failed": 2} and summary["judged"] == 0
    assert "exited with status 1: no model configured" in summary["errors"][0]
