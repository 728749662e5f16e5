"""``otelcar mcp`` driven by the MCP SDK's own client, over stdio and streamable HTTP, with
the server a real subprocess (``python -m otelcar.cli --store S mcp``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest

pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from otelcar.cli import cli
from tests.conftest import NEW_CONTENT
from tests.helpers.scripted_refund import POLICY

ROOT = Path(__file__).resolve().parents[1]
OTLP = ROOT / "fixtures" / "otlp"
SCHEMAS = ROOT / "schemas"
TOOLS = {
    "list_traces",
    "search_traces",
    "show_trace",
    "show_steps",
    "show_step",
    "read_text",
    "attribute",
    "why",
    "fix",
    "list_results",
    "read_result",
    "list_timelines",
    "list_failures",
    "read_failure",
    "diff_timelines",
}


async def _timelines(session: ClientSession) -> None:
    """The timeline _project kept, listed and diffed against the recorded run; an unknown
    name is a one-line tool error."""
    listed = await _call(session, "list_timelines", trace_id=NEW_CONTENT[:8])
    _validate(listed, "timelines-list.schema.json")
    assert [t["name"] for t in listed["timelines"]] == ["resampled"]
    assert listed["timelines"][0]["rollouts"] and listed["trace_id"] == NEW_CONTENT
    diff = await _call(session, "diff_timelines", trace_id=NEW_CONTENT, a="resampled")
    _validate(diff, "diff.schema.json")
    assert (diff["a"], diff["b"], diff["trace_id"]) == ("resampled", "recorded", NEW_CONTENT)
    assert len(diff["rollouts"]) == len(listed["timelines"][0]["rollouts"])
    parted = [r for r in diff["rollouts"] if r["parted_at"] is not None]
    # nothing before the resampled step differs
    assert all(r["recorded_step"] is None or r["recorded_step"] >= 4 for r in parted)
    missing = await session.call_tool(
        "diff_timelines", {"trace_id": NEW_CONTENT, "a": "no-such-timeline"}
    )
    assert missing.is_error and "Traceback" not in missing.content[0].text
    assert "no-such-timeline" in missing.content[0].text


def _project(tmp_path: Path) -> tuple[Path, Path]:
    """A store with the refund agent's trace and an otelcar.toml with a scripted policy and
    the outcome 'issue_refund was called'."""
    from click.testing import CliRunner

    (tmp_path / "agent_policy.py").write_text(POLICY)
    config = tmp_path / "otelcar.toml"
    config.write_text(
        '[policies.llm]\ntype = "python"\nfunction = "agent_policy:decide"\n'
        '[outcome]\ntype = "tool_called"\ntool = "issue_refund"\n[replay]\nseed = 4\n'
    )
    store = tmp_path / "store"
    imported = CliRunner().invoke(
        cli, ["--store", str(store), "import", str(OTLP / "new_content.traces.jsonl")]
    )
    assert imported.exit_code == 0, imported.output
    plan = ["--resample", "4", "-n", "4", "--save", "resampled"]
    kept = CliRunner().invoke(
        cli, ["--store", str(store), "rollout", NEW_CONTENT[:8], "-c", str(config), *plan]
    )
    assert kept.exit_code == 0, kept.output
    return store, config


def _validate(value: Any, name: str) -> None:
    """Validate against schemas/NAME, its references to other files resolved from there."""
    from referencing import Registry, Resource

    documents = {p.name: json.loads(p.read_text()) for p in SCHEMAS.glob("*.schema.json")}
    registry = Registry().with_resources(
        (n, Resource.from_contents(d)) for n, d in documents.items() if "$schema" in d
    )
    schema = documents[name]
    jsonschema.validators.validator_for(schema)(schema, registry=registry).validate(value)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _server_args(store: Path, config: Path, *extra: str) -> list[str]:
    return ["-m", "otelcar.cli", "--store", str(store), "mcp", "-c", str(config), *extra]


async def _call(session: ClientSession, name: str, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(name, arguments)
    assert not result.is_error, result.content
    return result.structured_content


async def _browse(session: ClientSession) -> None:
    """Tools listed, traces listed, searched, shown; an unknown trace is a tool error."""
    await session.initialize()
    tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(tools) == TOOLS
    assert tools["show_trace"].input_schema["required"] == ["trace_id"]
    assert tools["attribute"].output_schema["properties"]["result"]["required"]

    listed = await _call(session, "list_traces", limit=10)
    jsonschema.validate(
        listed["traces"], json.loads((SCHEMAS / "traces-list.schema.json").read_text())
    )
    assert [t["trace_id"] for t in listed["traces"]] == [NEW_CONTENT]
    assert (await _call(session, "list_traces", service="no-such-service"))["traces"] == []

    found = await _call(session, "search_traces", query="ISSUE_REFUND")
    assert [t["trace_id"] for t in found["traces"]] == [NEW_CONTENT]
    assert found["traces"][0]["matched_steps"]
    assert (await _call(session, "search_traces", query="zebra-unicorn"))["traces"] == []

    shown = await _call(session, "show_trace", trace_id=NEW_CONTENT[:8], context="all", clip=None)
    _validate({"trace": shown["trace"], "steps": shown["steps"]}, "show.schema.json")
    assert shown["trace"]["trace_id"] == NEW_CONTENT and shown["next_cursor"] is None
    step = shown["steps"][-1]["step"]
    one = await _call(session, "show_step", trace_id=NEW_CONTENT, step=step)
    assert {**one["step"], "input_messages_omitted": None} == shown["steps"][-1]
    assert one["next_cursor"] is None

    missing = await session.call_tool("show_trace", {"trace_id": "ffffffff"})
    assert missing.is_error
    text = missing.content[0].text
    assert "no trace id starts with 'ffffffff'" in text and "\n" not in text
    assert "Traceback" not in text
    no_step = await session.call_tool("show_step", {"trace_id": NEW_CONTENT, "step": 999})
    assert no_step.is_error and "has no step 999" in no_step.content[0].text


async def _attribute(session: ClientSession) -> None:
    """An attribution with progress notifications, kept and read back; budgets enforced."""
    progress: list[tuple[float, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, message))

    result = await session.call_tool(
        "attribute",
        {"trace_id": NEW_CONTENT[:8], "rollouts": 16, "refute": False},
        progress_callback=on_progress,
    )
    assert not result.is_error, result.content
    data = result.structured_content
    _validate(data["result"], "attribution.schema.json")
    assert data["trace_id"] == NEW_CONTENT
    assert data["result"]["verdict"] == "culprit" and data["result"]["culprit"] == 4
    # The SDK hands each progress notification to a task of its own, so the last one (sent
    # before the result) may be delivered just after it: wait for it, briefly.
    with anyio.move_on_after(5):
        while not progress or progress[-1][0] <= 0:
            await anyio.sleep(0.01)
    assert progress, "no progress notification arrived"
    assert progress[-1][0] > 0 and "policy calls" in (progress[-1][1] or "")
    assert [p[0] for p in progress] == sorted(p[0] for p in progress)

    kept = await _call(session, "read_result", result_id=data["result_id"])
    assert kept["result"] == data["result"] and kept["kind"] == "attribute"
    assert kept["options"]["rollouts"] == 16 and kept["status"] == "done"
    listed = await _call(session, "list_results", trace_id=NEW_CONTENT[:6])
    assert [r["id"] for r in listed["results"]] == [data["result_id"]]
    assert listed["results"][0]["step"] == 4

    await _why_and_fix(session, data["result_id"])

    unknown = await session.call_tool("read_result", {"result_id": "../../etc/passwd"})
    assert unknown.is_error and "is not a run id" in unknown.content[0].text
    over = await session.call_tool("attribute", {"trace_id": NEW_CONTENT, "max_calls": 5000})
    assert over.is_error and "ceiling of 1000" in over.content[0].text


async def _why_and_fix(session: ClientSession, attribution_id: str) -> None:
    """why on the culprit step (validated, kept, listed) and fix on it (a clear refusal)."""
    why = await session.call_tool(
        "why", {"trace_id": NEW_CONTENT, "step": 4, "samples": 10, "seed": 1}
    )
    assert not why.is_error, why.content
    _validate(why.structured_content["result"], "why.schema.json")
    assert why.structured_content["result"]["step"] == 4
    # With this policy the bad action did not come back in 10 re-decisions: nothing to fix,
    # said as a one-line tool error (and no run is kept).
    fixed = await session.call_tool(
        "fix", {"trace_id": NEW_CONTENT, "step": 4, "samples": 10, "seed": 1}
    )
    assert fixed.is_error
    text = fixed.content[0].text
    assert "nothing to fix" in text and "did not recur" in text and "Traceback" not in text
    listed = await _call(session, "list_results", trace_id=NEW_CONTENT)
    kinds = [r["kind"] for r in listed["results"]]
    assert kinds == ["why", "attribute"], kinds
    assert listed["results"][-1]["id"] == attribution_id


def test_stdio_server_lists_shows_and_attributes(tmp_path: Path):
    store, config = _project(tmp_path)
    params = StdioServerParameters(
        command=sys.executable,
        args=_server_args(store, config, "--max-calls", "1000"),
        env=_env(),
        cwd=str(tmp_path),
    )

    async def main() -> None:
        with anyio.fail_after(90), (tmp_path / "stderr.log").open("w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await _browse(session)
                await _attribute(session)
                await _timelines(session)

    anyio.run(main)


def test_http_server_on_a_free_port(tmp_path: Path):
    store, config = _project(tmp_path)
    process = subprocess.Popen(
        [sys.executable, *_server_args(store, config, "--http", "--port", "0")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=tmp_path,
    )
    try:
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp"), (
            url,
            process.stderr.read() if process.poll() is not None else "",
        )

        async def main() -> None:
            with anyio.fail_after(60):
                await browse()

        async def browse() -> None:
            async with (
                streamable_http_client(url) as (read, write),
                ClientSession(read, write) as session,
            ):
                await _browse(session)

        anyio.run(main)
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_a_broken_config_stops_the_server_at_start(tmp_path: Path):
    (tmp_path / "otelcar.toml").write_text("[nonsense]\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "otelcar.cli",
            "--store",
            str(tmp_path / "s"),
            "mcp",
            "-c",
            str(tmp_path / "otelcar.toml"),
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert "unknown section(s) nonsense" in done.stderr


def test_list_filters_select_by_dialect_and_time(tmp_path: Path):
    """The list tool's filters, on the store directly (the transport tests cover the wire)."""
    from otelcar import Store, import_files
    from otelcar.mcp.queries import QueryError, list_traces

    store = Store(tmp_path / "store")
    import_files([OTLP, OTLP.parent / "openinference"], store=store)
    index = store.traces()
    everything = list_traces(store, limit=1000)
    assert [t["trace_id"] for t in everything] == index["trace_id"].to_list()
    mapped = list_traces(store, dialect="openinference", limit=1000)
    want = index.filter(index["dialects"].list.contains("openinference"))["trace_id"]
    assert 0 < len(mapped) < len(everything)
    assert [t["trace_id"] for t in mapped] == want.to_list()
    starts = sorted(index["start_ns"].to_list())
    cut = starts[len(starts) // 2]
    stamp = datetime.fromtimestamp(cut / 1e9, tz=UTC).isoformat()
    late = list_traces(store, since=stamp, limit=1000)
    early = list_traces(store, until=stamp, limit=1000)
    assert len(late) + len(early) == len(everything) and late and early
    assert {t["trace_id"] for t in late}.isdisjoint(t["trace_id"] for t in early)
    assert [t["trace_id"] for t in list_traces(store, limit=2)] == [
        t["trace_id"] for t in everything[-2:]
    ]
    assert list_traces(store, errors_only=True, limit=1000) == [
        t for t in everything if t["n_errors"] > 0
    ]
    with pytest.raises(QueryError, match="since"):
        list_traces(store, since="last tuesday")


# Blocks its thread for each call, as a synchronous client of a slow model server does, and
# counts its calls in a file.
SLOW_POLICY = """
import pathlib, time
from otelcar.messages import Message, ToolCall

COUNT = pathlib.Path(__file__).with_name("calls.txt")

def decide(request):
    time.sleep(0.15)
    COUNT.write_text(str(int(COUNT.read_text() or 0) + 1) if COUNT.exists() else "1")
    tools = [m for m in request.messages if m.role == "tool"]
    if not tools:
        return Message("assistant", None, (
            ToolCall("lookup_order", {"order_id": "A-1001"}, "c1"),
            ToolCall("get_refund_policy", {"category": "electronics"}, "c2")))
    return Message("assistant", "This needs a manager's approval.")
"""


def test_a_run_with_a_blocking_policy_leaves_the_server_responsive_and_stops_when_cancelled(
    tmp_path: Path,
):
    store, config = _project(tmp_path)
    (tmp_path / "slow_policy.py").write_text(SLOW_POLICY)
    config.write_text(config.read_text().replace("agent_policy:decide", "slow_policy:decide"))
    params = StdioServerParameters(
        command=sys.executable, args=_server_args(store, config), env=_env(), cwd=str(tmp_path)
    )
    calls = tmp_path / "calls.txt"

    def count() -> int:
        return int(calls.read_text() or 0) if calls.exists() else 0

    async def main() -> None:
        with anyio.fail_after(90), (tmp_path / "stderr.log").open("w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()

                request = anyio.CancelScope()

                async def attribute() -> None:
                    with request:  # cancelled by the client below, once the run is under way
                        await session.call_tool(
                            "attribute", {"trace_id": NEW_CONTENT, "rollouts": 64}
                        )

                async with anyio.create_task_group() as group:
                    group.start_soon(attribute)
                    while count() < 3:  # the run is under way (however slow the start)
                        await anyio.sleep(0.05)
                    # Another request while the policy blocks: answered between its calls
                    # (the whole run would take 64 × 3 calls of 0.15 s).
                    with anyio.fail_after(5):
                        listed = await _call(session, "list_traces", limit=5)
                    assert [t["trace_id"] for t in listed["traces"]] == [NEW_CONTENT]
                    request.cancel()
                stopped = count()
                await anyio.sleep(1.5)  # 10 calls' time: the cancelled run makes at most 1
                assert count() - stopped <= 1, (stopped, count())
                assert stopped < 64 * 3  # it was stopped, not finished

    anyio.run(main)
