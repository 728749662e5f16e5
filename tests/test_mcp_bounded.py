"""``otelcar mcp`` at the size of real traces (issue 39), driven by the MCP SDK's own client:
every result under the byte cap, sent once, cursors that walk every step and trace exactly
once, one-line errors, runs refused before they start, a client that goes away.

The store holds a 500-step trace (250 chat turns, each chat span carrying the whole
conversation so far, as instrumentations record it), a trace with a 1 MB tool result and
30 one-turn traces (some starting at the same instant)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

from mcp import Client

from otelcar import Store, import_files
from otelcar.mcp.runs import RunContext
from otelcar.mcp.server import build_server
from otelcar.testing.long_traces import long_conversation
from otelcar.views import step_view

ROOT = Path(__file__).resolve().parents[1]
LONG = "5" * 32
BIG = "6" * 32
MB = 1_000_000
CAP = 256 * 1024


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(store, otelcar.toml) with the traces of the module docstring."""
    root = tmp_path_factory.mktemp("bounded")
    documents = {
        "long.json": long_conversation(250, fail_every=25, trace_id=LONG),
        "big.json": long_conversation(2, payload=MB, trace_id=BIG, start_ns=1_600_000_000 * 10**9),
    }
    for i in range(30):
        start = (1_500_000_000 + (i // 3) * 60) * 10**9  # three traces per start
        documents[f"small{i}.json"] = long_conversation(1, trace_id=f"{i + 1:032x}", start_ns=start)
    for name, document in documents.items():
        (root / name).write_text(json.dumps(document))
    import_files(sorted(root.glob("*.json")), store=Store(root / "store"))
    config = root / "otelcar.toml"
    config.write_text("")
    return root / "store", config


def _client(project: tuple[Path, Path], cap: int = CAP) -> Client:
    store, config = project
    return Client(build_server(RunContext(store, config), max_result_bytes=cap))


def _bytes(result: Any) -> int:
    return len(result.model_dump_json(by_alias=True, exclude_none=True).encode())


async def _call(client: Client, cap: int, name: str, **arguments: Any) -> dict[str, Any]:
    """The structured content of a call that must succeed, its whole result within ``cap``
    and sent once: one short text block beside the structured content."""
    result = await client.call_tool(name, arguments)
    assert not result.is_error, result.content
    assert _bytes(result) <= cap, (name, _bytes(result))
    [text] = result.content
    assert len(text.text) <= 1000 and "{" not in text.text[:1], text.text
    return result.structured_content


def test_show_trace_on_500_steps_is_bounded_fast_and_sent_once(project):
    async def main() -> None:
        async with _client(project) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert all("262,144 bytes" in t.description for t in tools.values())
            started = time.perf_counter()
            shown = await _call(client, CAP, "show_trace", trace_id=LONG[:8])
            took = time.perf_counter() - started
            assert took < 5, took  # benchmarks/mcp_sizes.py measures it (goal: 1 s)
            assert shown["trace"]["n_steps"] == 500 and shown["steps"][0]["step"] == 0
            assert shown["page"]["left"] == 500 - len(shown["steps"]) and shown["next_cursor"]
            last = shown["steps"][-1]
            llm = [s for s in shown["steps"] if s["kind"] == "llm"]
            # an LLM step lists what its context adds to the previous LLM step's
            assert all(len(s["input_messages"]) <= 3 for s in llm)
            assert any(s["input_messages_omitted"] for s in llm)
            assert last["step"] == shown["page"]["last_step"]
            text = (await client.call_tool("show_trace", {"trace_id": LONG})).content[0].text
            assert "500 steps" in text and "show_steps" in text

    anyio.run(main)


def test_cursors_walk_every_step_exactly_once_under_a_small_cap(project):
    cap = 32 * 1024
    store = Store(project[0])
    every = store.load(LONG).steps["step"].to_list()

    async def main() -> None:
        async with _client(project, cap) as client:
            page = await _call(client, cap, "show_trace", trace_id=LONG, clip=None, limit=1000)
            seen = [s["step"] for s in page["steps"]]
            stops = {page["page"]["stopped_by"]}
            while page["next_cursor"]:
                page = await _call(
                    client, cap, "show_steps", trace_id=LONG, cursor=page["next_cursor"]
                )
                seen += [s["step"] for s in page["steps"]]
                stops.add(page["page"]["stopped_by"])
            assert seen == every
            assert "byte cap" in stops
            # a range, of one kind
            tools = await _call(client, cap, "show_steps", trace_id=LONG, first=10, last=20,
                                kinds=["tool"])  # fmt: skip
            assert [s["step"] for s in tools["steps"]] == [n for n in range(10, 21) if n % 2 == 0]
            # a step too big alone: texts clipped, then its first input messages left out
            alone = await _call(client, cap, "show_steps", trace_id=LONG, first=497, last=497,
                                context="all", clip=None)  # fmt: skip
            [step] = alone["steps"]
            omitted = step["input_messages_omitted"]["count"]
            assert omitted > 0 and alone["next_cursor"] is None
            assert omitted + len(step["input_messages"]) == 2 * 248 + 2

    anyio.run(main)


def test_one_step_and_a_1mb_text_are_read_in_pieces(project):
    cap = 32 * 1024
    store = Store(project[0])
    steps = store.load(BIG).steps
    llm = [r for r in steps.iter_rows(named=True) if r["kind"] == "llm"][-1]
    whole = step_view(llm)

    async def main() -> None:
        async with _client(project, cap) as client:
            page = await _call(client, cap, "show_step", trace_id=BIG, step=llm["step"])
            messages = list(page["step"]["input_messages"])
            while page["next_cursor"]:
                page = await _call(
                    client, cap, "show_step", trace_id=BIG, step=llm["step"],
                    cursor=page["next_cursor"],
                )  # fmt: skip
                assert page["input_messages_from"] == len(messages)
                messages += page["step"]["input_messages"]
            assert len(messages) == len(whole["input_messages"])
            clipped = [i for i, m in enumerate(messages) if m != whole["input_messages"][i]]
            assert clipped, "the 1 MB message was not clipped"
            marker = json.dumps(messages[clipped[0]])
            assert "read_text" in marker and f"input_messages.{clipped[0]}" in marker
            path = next(
                f"input_messages.{clipped[0]}.{k}"
                for k, v in messages[clipped[0]].items()
                if isinstance(v, str) and "clipped" in v
            )
            text, offset = "", 0
            while offset is not None:
                piece = await _call(
                    client, cap, "read_text", trace_id=BIG, step=llm["step"], path=path,
                    offset=offset,
                )  # fmt: skip
                text += piece["text"]
                offset = piece["next_offset"]
            key = path.rsplit(".", 1)[1]
            assert text == whole["input_messages"][clipped[0]][key] and len(text) >= MB

    anyio.run(main)


def test_list_and_search_page_past_any_limit_each_trace_once(project):
    store = Store(project[0])
    every = set(store.traces()["trace_id"].to_list())

    async def main() -> None:
        async with _client(project) as client:
            page = await _call(client, CAP, "list_traces", limit=7)
            seen = [t["trace_id"] for t in page["traces"]]
            while page["next_cursor"]:
                page = await _call(client, CAP, "list_traces", cursor=page["next_cursor"])
                assert len(page["traces"]) <= 7
                seen = [t["trace_id"] for t in page["traces"]] + seen
            assert len(seen) == len(set(seen)) and set(seen) == every
            starts = [t["start_ns"] for t in store.traces().iter_rows(named=True)]
            assert len(starts) > len(set(starts))  # ties at a page's edge were crossed

            found = await _call(client, CAP, "search_traces", query="refund", limit=4)
            hits = [t["trace_id"] for t in found["traces"]]
            while found["next_cursor"]:
                found = await _call(
                    client, CAP, "search_traces", query="refund", cursor=found["next_cursor"]
                )
                hits += [t["trace_id"] for t in found["traces"]]
            assert len(hits) == len(set(hits)) == len(every)
        async with _client(project, 16 * 1024) as client:  # the cap cuts a page, oldest first
            page = await _call(client, 16 * 1024, "list_traces", limit=1000)
            assert 0 < len(page["traces"]) < len(every) and page["next_cursor"]

    anyio.run(main)


def test_errors_are_one_line_naming_the_argument(project):
    async def main() -> None:
        async with _client(project) as client:
            cases = [
                ("show_step", {"trace_id": LONG, "step": "abc"}, "step"),
                ("show_trace", {}, "trace_id"),
                ("show_trace", {"trace_id": LONG, "limit": 0}, "limit"),
                ("list_traces", {"cursor": "not-a-cursor"}, "cursor"),
                ("show_steps", {"trace_id": LONG, "cursor": "eyJ0b29sIjoieCJ9"}, "cursor"),
                ("show_trace", {"trace_id": "ffffffff"}, "ffffffff"),
                ("read_text", {"trace_id": LONG, "step": 1, "path": "nope"}, "nope"),
                ("attribute", {"trace_id": LONG, "rollouts": 0}, "rollouts"),
            ]
            for name, arguments, named in cases:
                result = await client.call_tool(name, arguments)
                assert result.is_error, (name, arguments)
                [text] = result.content
                assert "\n" not in text.text and named in text.text, text.text
                assert "Traceback" not in text.text and len(text.text) < 300, text.text

    anyio.run(main)


def test_a_run_on_an_unknown_trace_is_refused_and_not_kept(project):
    async def main() -> None:
        async with _client(project) as client:
            for name in ("attribute", "why", "fix"):
                result = await client.call_tool(name, {"trace_id": "ffffffff"})
                assert result.is_error and "no trace id starts with" in result.content[0].text
            kept = await _call(client, CAP, "list_results")
            assert kept["results"] == []

    anyio.run(main)


def test_a_client_that_goes_away_is_a_normal_end(project):
    """The client stops reading while a large answer is on its way, then closes stdin: the
    server ends with status 0 and logs no error."""
    store, config = project
    server = subprocess.Popen(
        [sys.executable, "-m", "otelcar.cli", "--store", str(store), "mcp", "-c", str(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={"PYTHONPATH": str(ROOT), "PATH": ""},
    )

    def send(message: dict[str, Any]) -> None:
        server.stdin.write((json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode())
        server.stdin.flush()

    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}}
    send({"id": 1, "method": "initialize", "params": {**hello, "clientInfo": {
        "name": "t", "version": "1"}}})  # fmt: skip
    assert b'"id":1' in server.stdout.readline()
    send({"method": "notifications/initialized"})
    call = {"name": "show_steps", "arguments": {"trace_id": LONG, "context": "all"}}
    send({"id": 2, "method": "tools/call", "params": call})
    server.stdout.close()  # gone: the answer meets a closed pipe
    time.sleep(1.5)
    server.stdin.close()
    assert server.wait(timeout=30) == 0
    errors = server.stderr.read().decode()
    assert "unexpected" not in errors and "Traceback" not in errors, errors
    assert "ERROR" not in errors, errors


def test_an_http_client_that_drops_a_request_is_a_normal_end(project):
    """Over streamable HTTP, a client that gives up on a large answer and leaves: the
    server logs no error and answers the next client."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    store, config = project
    command = [sys.executable, "-m", "otelcar.cli", "--store", str(store), "mcp", "--http"]
    server = subprocess.Popen(
        [*command, "-c", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": ""},
    )
    try:
        url = server.stdout.readline().strip()

        async def main() -> None:
            arguments = {"trace_id": LONG, "context": "all", "clip": None, "limit": 1000}
            with anyio.fail_after(60):
                for delay in (0.02, 0.05, 0.1, 0.2):  # gives up while the answer is built
                    async with (
                        streamable_http_client(url) as (read, write),
                        ClientSession(read, write) as session,
                    ):
                        await session.initialize()
                        with anyio.move_on_after(delay):
                            await session.call_tool("show_steps", arguments)
                async with (
                    streamable_http_client(url) as (read, write),
                    ClientSession(read, write) as session,
                ):
                    await session.initialize()
                    listed = await session.call_tool("list_traces", {"limit": 5})
                    assert not listed.is_error and len(listed.structured_content["traces"]) == 5

        anyio.run(main)
    finally:
        server.terminate()
        server.wait(timeout=30)
    errors = server.stderr.read()
    assert "Traceback" not in errors and "ERROR" not in errors, errors


def test_a_kept_result_over_the_cap_is_cut_at_items_and_continued(project, tmp_path):
    """A result with no pages of its own (here a kept run with 400 large rollouts): its
    largest list cut at an item boundary, left_out naming it, next_cursor continuing it in
    read_result until every item was shown once."""
    from otelcar.mcp.results import save_result

    cap = 32 * 1024
    store = tmp_path / "store"
    rollouts = [{"index": i, "note": "x" * 500} for i in range(400)]
    record = save_result(
        store,
        kind="attribute",
        trace_id=LONG,
        arguments={},
        result={"verdict": "culprit", "rollouts": rollouts},
        started=time.time(),
    )

    async def main() -> None:
        client = Client(build_server(RunContext(store, project[1]), max_result_bytes=cap))
        async with client:
            page = await _call(client, cap, "read_result", result_id=record["id"])
            seen = list(page["result"]["rollouts"])
            [cut], first = page["left_out"], page["next_cursor"]
            assert cut["path"] == "result.rollouts" and cut["total"] == 400
            assert cut["shown"] == [0, len(seen)]
            while page["next_cursor"]:
                page = await _call(
                    client, cap, "read_result", result_id=record["id"], cursor=page["next_cursor"]
                )
                assert page["left_out"][0]["shown"][0] == len(seen)
                seen += page["result"]["rollouts"]
            assert seen == rollouts
            # a cursor is for the tool (and arguments) that made it
            other = await client.call_tool("list_results", {"cursor": first})
            assert other.is_error and "not a cursor of list_results" in other.content[0].text

    anyio.run(main)


def test_a_clip_marker_names_the_path_read_text_reads(project):
    """With context="new" a page lists an LLM step's input messages from the first its
    previous LLM step lacked; a clip marker still names the message's index in the whole
    step, which read_text reads."""
    import re

    async def main() -> None:
        async with _client(project) as client:
            shown = await _call(client, CAP, "show_trace", trace_id=BIG)
            marked = [
                (step["step"], message)
                for step in shown["steps"]
                if step["input_messages_omitted"]
                for message in step["input_messages"]
                if "clipped" in json.dumps(message)
            ]
            assert marked, "no clipped message after a shared context"
            step, message = marked[0]
            found = re.search(r"read_text \(step=(\d+), path=([\w.]+)\)", json.dumps(message))
            assert found and int(found[1]) == step
            whole = await _call(client, CAP, "read_text", trace_id=BIG, step=step, path=found[2])
            assert whole["total_chars"] >= MB
            clipped = next(v for v in message.values() if isinstance(v, str) and "clipped" in v)
            assert clipped.startswith(whole["text"][:500])

    anyio.run(main)
