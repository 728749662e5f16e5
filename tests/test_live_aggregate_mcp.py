"""Live replay (issue 43, docs/live.md) beyond one trace at a time: ``otelcar aggregate
--agent CMD`` and the MCP tools' ``agent`` argument.

Two traces are recorded from the scripted agents of ``tests/agents`` (as in
``tests/test_live.py``): the refund loop's and the cleanup workflow's. Given the refund
agent's command, ``aggregate`` replays each failing trace on it first: the refund trace is
reproduced and attributed with rollouts that are runs of the agent; the cleanup trace, which
this agent does not reproduce, is counted as skipped with the first difference, never as
passed or failed. The MCP ``attribute`` tool given the same command does what ``--agent``
does, and its result carries the live check's headline.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner

from otelcar.cli import cli
from tests.helpers.agents import OUTCOMES, Recorded

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Recorded]]:
    """A store holding the refund loop's and the cleanup workflow's recorded traces."""
    out = tmp_path_factory.mktemp("live-batch")
    traces = {a: Recorded(a, "openai-v2", out) for a in ("refund_loop", "cleanup")}
    root = out / "store"
    for case in traces.values():
        done = CliRunner().invoke(cli, ["--store", str(root), "import", str(case.path)])
        assert done.exit_code == 0, done.output
    return root, traces


def _config(tmp_path: Path, agents: tuple[str, ...] = ("refund_loop", "cleanup")) -> Path:
    """The refund brain as the policy; an outcome every recorded run of ``agents`` fails;
    ``[agent]`` whose command ``--agent`` replaces while its cwd (where ``-m
    tests.agents.run`` resolves), env and concurrency stay."""
    rules = [
        {"type": "tool_called", "tool": OUTCOMES[a]["tool"], "args": OUTCOMES[a]["args"]}
        for a in agents
    ]
    config = tmp_path / "otelcar.toml"
    config.write_text(
        '[policies.llm]\ntype = "python"\nfunction = "tests.agents.refund_loop:decide"\n'
        f"[outcome]\nany = {_toml(rules)}\n"
        "[replay]\nseed = 3\n"
        '[agent]\ncommand = "false"\n'
        f"cwd = {json.dumps(str(ROOT))}\n"
        f"env = {{ RUNS_LOG = {json.dumps(str(tmp_path / 'runs.log'))} }}\n"
        "concurrency = 4\ntimeout_s = 60\n"
    )
    return config


def _toml(rules: list[dict[str, Any]]) -> str:
    def value(v: Any) -> str:
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + " }"
        return json.dumps(v)

    return "[" + ", ".join(value(r) for r in rules) + "]"


#: The refund agent, each run counted in $RUNS_LOG (the kept [agent] env) first.
AGENT = (
    "sh -c "
    + shlex.quote('echo run >> "$RUNS_LOG" && exec "$0" -m tests.agents.run refund_loop --seed 7')
    + f" {shlex.quote(sys.executable)}"
)


def test_aggregate_with_an_agent_attributes_what_it_reproduces_and_says_why_not_the_rest(
    store: tuple[Path, dict[str, Recorded]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, traces = store
    config = _config(tmp_path)
    monkeypatch.chdir(tmp_path)  # the agent runs in [agent] cwd, not here
    written = tmp_path / "aggregate.json"
    line = ["aggregate", "-c", str(config), "-n", "4", "--agent", AGENT, "--json", str(written)]
    out = CliRunner().invoke(cli, ["--store", str(root), *line])
    assert out.exit_code == 0, out.output
    document = json.loads(written.read_text())
    assert document["counts"] == {"attributed": 1, "passed": 0, "skipped": 1}
    verdicts = {t["trace_id"]: t for t in document["traces"]}
    refund = verdicts[traces["refund_loop"].trace_id]
    assert refund["status"] == "attributed", refund
    assert any("issue_refund" in identity for identity in refund["effects"]), refund
    cleanup = verdicts[traces["cleanup"].trace_id]
    assert cleanup["status"] == "skipped"
    assert "does NOT reproduce the recorded run" in cleanup["reason"]
    assert "differs" in cleanup["reason"], cleanup["reason"]  # the first difference
    assert f"skipped: live replay of {traces['cleanup'].trace_id}" in out.output
    # every rollout was a run of the agent, besides one live check per failing trace
    runs = (tmp_path / "runs.log").read_text().count("run")
    assert refund["cost"]["rollouts_run"] > 0
    assert runs == 2 + refund["cost"]["rollouts_run"], (runs, refund["cost"])


def test_aggregate_with_an_agent_refuses_an_executor(
    store: tuple[Path, dict[str, Recorded]], tmp_path: Path
) -> None:
    root, _ = store
    line = ["aggregate", "-c", str(_config(tmp_path)), "--executor", "local"]
    out = CliRunner().invoke(cli, ["--store", str(root), *line])
    assert out.exit_code == 2 and "leave out --executor" in out.output


def test_the_mcp_tools_take_an_agent_command_as_agent_does(
    store: tuple[Path, dict[str, Recorded]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from otelcar.mcp.runs import RunContext
    from otelcar.mcp.server import build_server

    root, traces = store
    config = _config(tmp_path, ("refund_loop",))
    refund = traces["refund_loop"].trace_id
    monkeypatch.chdir(tmp_path)
    arguments = {"trace_id": refund[:10], "rollouts": 2, "refute": False, "agent": AGENT}

    async def main() -> tuple[Any, Any, Any]:
        with anyio.fail_after(120):
            async with Client(build_server(RunContext(root, config))) as client:
                tools = {t.name: t for t in (await client.list_tools()).tools}
                described = {n: "agent" in tools[n].input_schema["properties"] for n in tools}
                ran = await client.call_tool("attribute", arguments)
            async with Client(build_server(RunContext(root, config, agent_commands=False))) as c:
                refused = await c.call_tool("attribute", arguments)
        return described, ran, refused

    described, ran, refused = anyio.run(main)
    assert {n for n, has in described.items() if has} == {"attribute", "why", "fix"}
    assert not ran.is_error, ran.content
    result = ran.structured_content["result"]
    assert ran.structured_content["trace_id"] == refund
    headline = next(n for n in result["notes"] if n.startswith("live replay of"))
    assert "made every recorded request again" in headline and "refund_loop" in headline
    runs = (tmp_path / "runs.log").read_text().count("run")
    assert runs == 1 + result["cost"]["rollouts_run"] and runs > 1, (runs, result["cost"])
    assert refused.is_error and "--allow-agent" in refused.content[0].text
