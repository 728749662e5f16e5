"""Sizes and times of ``otelcar mcp`` results at the size of real traces (issue 39).

Generates, in a temporary store: a 500-step trace (250 chat turns, each chat span carrying
the whole conversation so far, as instrumentations record it:
:func:`otelcar.testing.long_traces.long_conversation`), a trace whose tool result is 1 MB,
and 1,200 one-turn traces. Serves it with ``otelcar mcp --http`` (a real subprocess, default
``--max-result-bytes``) and drives it with the MCP SDK's own client, measuring:

- the bytes (the whole ``CallToolResult`` as JSON) and wall time of ``show_trace`` on the
  500-step trace, of walking all its steps with ``show_steps`` cursors, of ``show_step`` on
  its last LLM step (498 input messages), of reading the 1 MB text with ``read_text``, of
  ``list_traces`` (``limit=1000``) and of walking every trace by cursor, of ``search_traces``;
- ``list_traces`` latency (p50, p99) alone, then while a second process asks for the
  500-step ``show_trace`` in a loop; and ``list_results`` on no kept run, the floor of a
  call over the SDK's streamable HTTP transport, alone and under the same load (what any
  call waits for its share of the CPU and the interpreter).

Timings are printed, never asserted.

    .venv/bin/python benchmarks/mcp_sizes.py            # about a minute on 2 cores
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from otelcar import Store, import_files
from otelcar.testing.long_traces import long_conversation

LONG = "5" * 32
BIG = "6" * 32
SMALL = 1200


def _store(root: Path) -> Path:
    """The store of the module docstring under ``root``."""
    (root / "long.json").write_text(json.dumps(long_conversation(250, fail_every=25)))
    big = long_conversation(2, payload=1_000_000, trace_id=BIG, start_ns=1_600_000_000 * 10**9)
    (root / "big.json").write_text(json.dumps(big))
    small = [
        long_conversation(1, trace_id=f"{i + 1:032x}", start_ns=(1_500_000_000 + i) * 10**9)
        for i in range(SMALL)
    ]
    merged = {"resourceSpans": [d["resourceSpans"][0] for d in small]}
    (root / "small.json").write_text(json.dumps(merged))
    store = root / "store"
    import_files(sorted(root.glob("*.json")), store=Store(store))
    return store


def _serve(store: Path, config: Path) -> tuple[subprocess.Popen, str]:
    command = [sys.executable, "-m", "otelcar.cli", "--store", str(store), "mcp", "--http"]
    server = subprocess.Popen(
        [*command, "-c", str(config)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    return server, server.stdout.readline().strip()


async def _timed(session: ClientSession, name: str, **arguments: Any) -> tuple[Any, float, int]:
    """(structured content, seconds, bytes of the whole result)."""
    started = time.perf_counter()
    result = await session.call_tool(name, arguments)
    took = time.perf_counter() - started
    assert not result.is_error, result.content
    size = len(result.model_dump_json(by_alias=True, exclude_none=True).encode())
    return result.structured_content, took, size


def _row(what: str, calls: int, seconds: float, largest: int) -> None:
    print(f"{what:<52} {calls:>6} {seconds:>9.3f} {largest / 1024:>10.1f}")


async def _walk(session: ClientSession, name: str, first: dict, key: str, **base: Any) -> tuple:
    """Follow ``next_cursor`` from ``first`` (``base`` arguments kept): (calls, seconds,
    largest bytes, items seen under ``key``)."""
    page, seconds, largest = await _timed(session, name, **first)
    calls, items = 1, list(page[key])
    while page.get("next_cursor"):
        page, took, size = await _timed(session, name, **base, cursor=page["next_cursor"])
        calls, seconds, largest = calls + 1, seconds + took, max(largest, size)
        items += page[key]
    return calls, seconds, largest, items


async def _sizes(url: str) -> None:
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        print(f"{'call':<52} {'calls':>6} {'seconds':>9} {'max KiB':>10}")
        times, sizes = [], []
        for _ in range(5):
            _shown, took, size = await _timed(s, "show_trace", trace_id=LONG)
            times.append(took)
            sizes.append(size)
        print(
            f"show_trace, 500 steps: median {statistics.median(times):.3f} s, "
            f"max {max(times):.3f} s"
        )
        _row("show_trace (500 steps; first page)", 5, statistics.median(times), max(sizes))
        calls, secs, big, steps = await _walk(
            s, "show_steps", {"trace_id": LONG}, "steps", trace_id=LONG
        )
        _row(f"show_steps walk ({len(steps)} steps, each once)", calls, secs, big)
        calls, secs, big, steps = await _walk(
            s, "show_steps", {"trace_id": LONG, "context": "all", "clip": None, "limit": 1000},
            "steps", trace_id=LONG,
        )  # fmt: skip
        _row(f"show_steps walk, whole contexts ({len(steps)} steps)", calls, secs, big)
        step, took, size = await _timed(s, "show_step", trace_id=LONG, step=497)
        n = len(step["step"]["input_messages"])
        _row(f"show_step 497 ({n} input messages)", 1, took, size)
        calls, secs, big, _ = await _walk(
            s, "show_step", {"trace_id": BIG, "step": 3}, "step", trace_id=BIG, step=3
        )
        _row("show_step on the 1 MB step (pages)", calls, secs, big)
        text, offset, calls, secs, big = "", 0, 0, 0.0, 0
        while offset is not None:
            piece, took, size = await _timed(
                s, "read_text", trace_id=BIG, step=2, path="tool_result", offset=offset
            )
            text, offset = text + piece["text"], piece["next_offset"]
            calls, secs, big = calls + 1, secs + took, max(big, size)
        _row(f"read_text, the 1 MB tool result ({len(text):,} chars)", calls, secs, big)
        listed, took, size = await _timed(s, "list_traces", limit=1000)
        _row(f"list_traces limit=1000 ({len(listed['traces'])} fit the cap)", 1, took, size)
        calls, secs, big, traces = await _walk(s, "list_traces", {"limit": 1000}, "traces")
        _row(
            f"list_traces walk ({len(set(t['trace_id'] for t in traces))} traces)", calls, secs, big
        )
        found, took, size = await _timed(s, "search_traces", query="refund", limit=1000)
        _row(f"search_traces 'refund' ({len(found['traces'])} fit)", 1, took, size)


async def _latencies(url: str, n: int, tool: str = "list_traces") -> list[float]:
    """``n`` calls of ``tool`` one after the other: their wall seconds."""
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        out = []
        for _ in range(n):
            out.append((await _timed(s, tool))[1])
            await anyio.sleep(0.01)
        return out


async def _load(url: str, seconds: float) -> None:
    """Ask for the 500-step show_trace again and again for ``seconds``."""
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        end, count = time.monotonic() + seconds, 0
        while time.monotonic() < end:
            await s.call_tool("show_trace", {"trace_id": LONG})
            count += 1
        print(f"(load: {count} show_trace calls in {seconds:.0f} s)")


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=200, help="list_traces calls per latency run")
    parser.add_argument(
        "--latency-only", action="store_true", help="only the latencies (no sizes table)"
    )
    parser.add_argument("--load", help=argparse.SUPPRESS)  # URL: be the loading process
    parser.add_argument("--seconds", type=float, default=20, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.load:
        anyio.run(_load, args.load, args.seconds)
        return 0
    with tempfile.TemporaryDirectory(prefix="mcp_sizes") as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        store = _store(root)
        print(
            f"store: 500-step trace, 1 MB trace, {SMALL} small "
            f"({time.perf_counter() - started:.1f} s)"
        )
        config = root / "otelcar.toml"
        config.write_text("")
        server, url = _serve(store, config)
        try:
            if not args.latency_only:
                anyio.run(_sizes, url)
            floor = anyio.run(_latencies, url, args.n, "list_results")  # no kept run: trivial
            alone = anyio.run(_latencies, url, args.n)
            loader = subprocess.Popen([sys.executable, __file__, "--load", url, "--seconds", "600"])
            time.sleep(3)  # the load is under way
            loaded = anyio.run(_latencies, url, args.n)
            loaded_floor = anyio.run(_latencies, url, args.n, "list_results")
            loader.terminate()
            loader.wait(timeout=30)
        finally:
            server.terminate()
            server.wait(timeout=30)
    for what, values in (
        ("list_results (empty: the HTTP transport's floor)", floor),
        ("list_traces alone", alone),
        ("list_traces while show_trace is served", loaded),
        ("list_results while show_trace is served (the floor under that load)", loaded_floor),
    ):
        print(
            f"{what}: p50 {_p(values, 0.5) * 1000:.0f} ms, "
            f"p99 {_p(values, 0.99) * 1000:.0f} ms, max {max(values) * 1000:.0f} ms "
            f"(n={len(values)})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
