"""A command that cannot do its job says so: one ``error:`` line, exit status ≠ 0, quickly.

Run as a user runs them (``python -m otelcar.cli`` in a subprocess, so stderr is what a
terminal shows), on the committed new-content fixture with the project config of
``tests/test_attribution.py``, pointed at what users get wrong: a policy server that is not
there, an outcome function with the wrong signature, tool functions that raise.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from tests.conftest import NEW_CONTENT
from tests.helpers.scripted_refund import imported_trace_with_policy

ROOT = Path(__file__).resolve().parents[1]


def _otelcar(tmp_path: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    env.pop("OTELCAR_DEBUG", None)
    command = [sys.executable, "-m", "otelcar.cli", "--store", str(tmp_path / "store"), *args]
    return subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout
    )


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _config(tmp_path: Path, text: str) -> Path:
    imported_trace_with_policy(tmp_path)  # the store, and agent_policy.py
    config = tmp_path / "custom.toml"
    config.write_text(text)
    return config


def _one_error_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode != 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, done.stderr
    return errors[0]


def test_an_unreachable_policy_server_stops_attribute_at_once(tmp_path: Path):
    port = _closed_port()
    config = _config(
        tmp_path,
        f'[policies.llm]\ntype = "openai"\nbase_url = "http://127.0.0.1:{port}/v1"\n'
        '[outcome]\ntype = "tool_called"\ntool = "issue_refund"\n',
    )
    # Before: 320 rollouts each failed "Connection error" for 648 s, then exit 0, "Undecided".
    done = _otelcar(tmp_path, "attribute", NEW_CONTENT[:8], "-c", str(config), timeout=90)
    line = _one_error_line(done)
    assert f"127.0.0.1:{port}" in line and "cannot be reached" in line, line
    assert "Undecided" not in done.stdout


def test_an_outcome_function_that_raises_is_named_without_a_traceback(tmp_path: Path):
    (tmp_path / "agent_outcome.py").write_text("def judge(steps, extra):\n    return True\n")
    config = _config(
        tmp_path,
        '[policies.llm]\ntype = "python"\nfunction = "agent_policy:decide"\n'
        '[outcome]\ntype = "function"\nfunction = "agent_outcome:judge"\n',
    )
    for command in ("replay", "attribute"):
        done = _otelcar(tmp_path, command, NEW_CONTENT[:8], "-c", str(config))
        line = _one_error_line(done)
        assert "outcome function agent_outcome:judge raised TypeError" in line, line
    debug = _otelcar(tmp_path, "--debug", "replay", NEW_CONTENT[:8], "-c", str(config))
    assert debug.returncode != 0 and "Traceback" in debug.stderr


def test_most_rollouts_failing_is_an_error_not_a_verdict(tmp_path: Path):
    (tmp_path / "broken_policy.py").write_text(
        "def decide(request):\n    raise RuntimeError('the gateway is down')\n"
    )
    config = _config(
        tmp_path,
        '[policies.llm]\ntype = "python"\nfunction = "broken_policy:decide"\n'
        '[outcome]\ntype = "tool_called"\ntool = "issue_refund"\n',
    )
    done = _otelcar(
        tmp_path, "rollout", NEW_CONTENT[:8], "-c", str(config), "--from-step", "1", "-n", "12"
    )
    line = _one_error_line(done)
    assert "12 of 12 rollouts failed" in line, line
    assert "policy function broken_policy:decide raised RuntimeError: the gateway is down" in line
    attribute = _otelcar(tmp_path, "attribute", NEW_CONTENT[:8], "-c", str(config))
    why = _otelcar(tmp_path, "why", NEW_CONTENT[:8], "-c", str(config), "--step", "4")
    for done in (attribute, why):
        line = _one_error_line(done)
        assert "failed, too many for any result to mean something" in line, line
