"""Outcomes on the agent's process (issue 43): ``exit_status`` and ``output_line``.

A live rollout is a run of the user's program, so its outcome can be how that program
ended — its exit status, a line it printed — as a user's acceptance script says it. The
refund agent of ``tests/agents`` (plain ``openai`` client, traced by openai-v2) runs with
``--fail-on issue_refund:order_id=B-7``: after its answer it prints ``CHECK FAILED: …`` and
exits 1 when it refunded the wrong order. A trace records no process, so the recorded run's
outcome is its held live replay's, which made every recorded request again.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from otelcar.analyses import attribute_run
from otelcar.cli import cli
from otelcar.cli.options import fail_if_rule
from otelcar.errors import OtelcarError
from otelcar.live import AgentCommand, LiveExecutor
from otelcar.live.agent import AgentRun
from otelcar.live.check import check_live
from otelcar.outcome import (
    ExitStatus,
    OutcomeError,
    outcome_from_config,
    recorded_verdict,
)
from otelcar.policies.registry import PolicyRegistry
from otelcar.project_config import ProjectConfig
from otelcar.replay import Environment, Plan, Resample, check_fidelity, run_plan
from otelcar.report.prose import headline
from otelcar.sync import run_sync
from tests.helpers.agents import Recorded, Seeing

ROOT = Path(__file__).resolve().parents[1]
FAIL_ON = "issue_refund:order_id=B-7"
EXIT = {"type": "exit_status"}
PRINTED = {"type": "output_line", "pattern": "^CHECK FAILED"}


def command(status: int = 1, **options: Any) -> AgentCommand:
    line = [sys.executable, "-m", "tests.agents.run", "refund_loop", "--seed", "7"]
    line += ["--fail-on", FAIL_ON]
    return AgentCommand.parse([*line, "--fail-status", str(status)], cwd=ROOT, **options)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    return Recorded("refund_loop", "openai-v2", tmp_path_factory.mktemp("process"))


def ended(code: int | None, stdout: str = "", stderr: str = "") -> AgentRun:
    return AgentRun(code, code is None, stderr, 0.1, stdout)


def test_process_outcomes_read_the_exit_status_and_the_output_lines() -> None:
    assert run_sync(_failed(EXIT, ended(1))) and not run_sync(_failed(EXIT, ended(0)))
    coded = {"type": "exit_status", "codes": [2, 3]}
    assert run_sync(_failed(coded, ended(3))) and not run_sync(_failed(coded, ended(1)))
    assert run_sync(_failed(PRINTED, ended(0, "answer\nCHECK FAILED: x\n")))
    assert not run_sync(_failed(PRINTED, ended(0, "answer CHECK FAILED\n")))  # ^: line start
    on_stderr = {**PRINTED, "stream": "stderr", "negate": True}
    assert run_sync(_failed(on_stderr, ended(0, "CHECK FAILED\n")))
    either = {"any": [coded, PRINTED]}
    assert run_sync(_failed(either, ended(0, "CHECK FAILED"))) and run_sync(
        _failed(either, ended(2))
    )
    with pytest.raises(OutcomeError, match="killed at its timeout"):
        ExitStatus().failed_on_process(ended(None))


def test_an_output_line_pattern_is_compiled_once_per_outcome(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Judging many rollouts compiles the pattern once (not once per rollout); the outcome
    still equals, hashes and pickles as its fields say."""
    import pickle
    import re

    compiled: list[str] = []
    real = re.compile
    monkeypatch.setattr(re, "compile", lambda p, *a: compiled.append(p) or real(p, *a))
    outcome = outcome_from_config(PRINTED)
    compiled.clear()  # the check of the pattern when the outcome is made
    judged = [outcome.failed_on_process(ended(0, f"{i}\nCHECK FAILED: {i}")) for i in range(5)]
    assert judged == [True] * 5 and compiled == [PRINTED["pattern"]]
    again = pickle.loads(pickle.dumps(outcome))
    assert again == outcome == outcome_from_config(PRINTED)
    assert hash(again) == hash(outcome) and again.failed_on_process(ended(0, "CHECK FAILED"))


async def _failed(spec: dict[str, Any], process: AgentRun) -> bool:
    return bool(outcome_from_config(spec).failed_on_process(process))  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"type": "exit_status", "codes": []}, "non-empty list"),
        ({"type": "exit_status", "codes": ["1"]}, "integers"),
        ({"type": "exit_status", "code": 1}, "unknown option"),
        ({"type": "output_line", "pattern": "("}, "pattern"),
        ({"type": "output_line", "pattern": "x", "stream": "stdin"}, "stdout or stderr"),
        (
            {"any": [EXIT, {"type": "tool_called", "tool": "issue_refund"}]},
            "cannot be combined",
        ),
    ],
)
def test_a_bad_process_outcome_is_refused_with_what_is_wrong(
    spec: dict[str, Any], message: str
) -> None:
    with pytest.raises(OutcomeError, match=message):
        outcome_from_config(spec)


def test_without_an_agent_a_process_outcome_says_to_run_one(recorded: Recorded) -> None:
    """A trace records no process: judging it asks for --agent, in plain words, and the
    trace list shows the outcome as the agent's, not as an error."""
    run = recorded.run()
    registry = PolicyRegistry().register("llm", Seeing("refund_loop"))
    outcome = outcome_from_config(EXIT)
    assert run_sync(recorded_verdict(outcome, run.steps)) == ("agent", None)
    with pytest.raises(OutcomeError, match="run with --agent CMD"):
        check_fidelity(run, outcome=outcome, env=Environment(registry))
    config = ProjectConfig(registry=registry, outcome=outcome)
    with pytest.raises(OtelcarError, match="judges the agent's process"):
        run_sync(attribute_run(run, config, rollouts=2, refutation=False))


def test_the_held_replays_exit_status_is_the_recorded_runs(recorded: Recorded) -> None:
    run = recorded.run()
    registry = PolicyRegistry().register("llm", Seeing("refund_loop"))
    check = run_sync(
        check_live(run, command(), Environment(registry), outcome=outcome_from_config(EXIT))
    )
    assert check.reproduced, check.first_difference()
    assert check.status == "final" and check.process.returncode == 1  # judged, not "failed"
    assert check.recorded_failed is True and check.judged_on == "process"
    assert "exit status 1" in headline(check) and "records no process" in headline(check)
    assert check.to_dict()["exit_status"] == 1


@pytest.mark.parametrize(("spec", "status"), [(EXIT, 1), (PRINTED, 0)])
def test_live_rollouts_are_judged_on_how_the_agent_ended(
    recorded: Recorded, spec: dict[str, Any], status: int
) -> None:
    """Re-deciding the refund: each rollout's verdict is its process's — a nonzero exit is
    a judged failure under ``exit_status``, never a rollout that failed to run; under
    ``output_line`` the agent (exiting 0) is judged on what it printed — and agrees with
    what the agent did (its acceptance check's line)."""
    run = recorded.run()
    registry = PolicyRegistry().register("llm", Seeing("refund_loop"))
    refund = next(
        d.step for d in run.decisions if d.action and d.action.tool_calls[:1]
        and d.action.tool_calls[0].name == "issue_refund"
    )  # fmt: skip
    executor = LiveExecutor(command(status, concurrency=2))
    result = run_plan(
        run,
        Plan((Resample(refund),)),
        Environment(registry),
        rollouts=6,
        outcome=outcome_from_config(spec),
        executor=executor,
    )
    summary = result.summary()
    assert summary["status"] == {"final": 6} and summary["judged"] == 6, summary
    assert executor.judged_on["process"] == 6
    for rollout, failed in zip(result.rollouts, result.failures, strict=True):
        wrong = "CHECK FAILED" in rollout.process.stdout_tail
        assert failed == wrong, rollout
        assert rollout.process.returncode == (status if wrong else 0), rollout
    assert 0 < sum(result.failures) < 6  # the brain refunds B-7 6 times in 10


def test_under_output_line_a_crash_is_a_failed_rollout_not_a_verdict(recorded: Recorded) -> None:
    """Only ``exit_status`` reads the exit status: under ``output_line`` an agent that exits
    nonzero failed to run, and is counted so (never judged)."""
    run = recorded.run()
    registry = PolicyRegistry().register("llm", Seeing("refund_loop"))
    broken = AgentCommand.parse([sys.executable, "-c", "print('CHECK FAILED'); exit(2)"])
    result = run_plan(
        run,
        Plan(),
        Environment(registry),
        rollouts=1,
        outcome=outcome_from_config(PRINTED),
        executor=LiveExecutor(broken),
        stop_when_most_fail=False,
    )
    assert result.summary()["status"] == {"failed": 1} and result.failures == [None]


def test_replay_with_the_agent_shows_the_held_runs_exit_status(
    recorded: Recorded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From the command line, with ``[outcome] type = "exit_status"``: ``replay --agent``
    shows the held run's exit status as the recorded run's outcome; without an agent the
    same outcome is refused with one error line, no traceback; ``--fail-if exit_status:…``
    is parsed, and a bad one refused with what to write."""
    monkeypatch.chdir(ROOT)  # the agent runs as python -m tests.agents.run
    store = tmp_path / "store"
    config = tmp_path / "otelcar.toml"
    config.write_text('[outcome]\ntype = "exit_status"\n', encoding="utf-8")
    assert _cli(store, "import", str(recorded.path)).exit_code == 0
    trace = recorded.trace_id
    line = shlex.join(command().argv)
    done = _cli(store, "replay", trace, "-c", str(config), "--agent", line, "--json")
    assert done.exit_code == 0, done.output
    live = json.loads(done.stdout)["live"]
    assert live["reproduced"] and live["exit_status"] == 1 and live["judged_on"] == "process"
    assert live["recorded_failed"] is True

    refused = _cli(store, "replay", trace, "-c", str(config))
    assert refused.exit_code == 2 and "run with --agent CMD" in refused.output, refused.output
    assert "Traceback" not in refused.output
    assert fail_if_rule("exit_status:1,3") == {"type": "exit_status", "codes": [1, 3]}
    assert fail_if_rule("output_line:^FAIL") == {"type": "output_line", "pattern": "^FAIL"}
    bad = _cli(store, "attribute", trace, "--fail-if", "exit_status:one")
    assert bad.exit_code == 2 and "exit_status[:CODE,...]" in bad.output, bad.output


def _cli(store: Path, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--store", str(store), *args])
