"""``list_traces`` answered again from what the server kept while the store is unchanged
(issue 39: the list while ``show_trace`` is served), through the MCP SDK's own client: a
trace that arrives is listed at the next call, a relative time is resolved at every call,
and ``otelcar.toml`` is still read at every call (a config broken meanwhile is said)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import polars as pl
import pytest

pytest.importorskip("mcp")

from mcp import Client

from otelcar import Store, import_files
from otelcar.mcp.runs import RunContext
from otelcar.mcp.server import build_server
from otelcar.sources import TraceFilter
from otelcar.testing.long_traces import long_conversation

FIRST, SECOND = "1" * 32, "2" * 32


class CountingStore(Store):
    """The local store, counting how often its trace index is read."""

    reads = 0

    def traces(self, filter: TraceFilter | None = None) -> pl.DataFrame:
        CountingStore.reads += 1
        return super().traces(filter)


class CountingContext(RunContext):
    def open_source(self, config: object = None) -> CountingStore:
        return CountingStore(self.store_root)


def _import(store: Path, trace_id: str, start_s: int) -> None:
    dump = store.parent / f"{trace_id}.json"
    document = long_conversation(1, trace_id=trace_id, start_ns=start_s * 10**9)
    dump.write_text(json.dumps(document), "utf-8")
    import_files([dump], store=Store(store))


def test_list_traces_is_kept_until_a_trace_arrives(tmp_path: Path) -> None:
    store, config = tmp_path / "store", tmp_path / "otelcar.toml"
    _import(store, FIRST, 1_700_000_000)
    config.write_text("")

    async def main() -> None:
        async with Client(build_server(CountingContext(store, config))) as client:

            async def listed(**arguments: object) -> list[str]:
                result = await client.call_tool("list_traces", arguments)
                assert not result.is_error, result.content
                return [t["trace_id"] for t in result.structured_content["traces"]]

            assert await listed() == [FIRST]
            reads = CountingStore.reads
            assert await listed() == [FIRST] and CountingStore.reads == reads  # kept
            _import(store, SECOND, 1_700_000_100)
            assert await listed() == [FIRST, SECOND]  # arrived: read again
            assert await listed(until="2000-01-01") == []  # other arguments, another answer
            reads = CountingStore.reads
            assert await listed(since="1h") == []
            await listed(since="1h")
            assert CountingStore.reads > reads + 1  # an age is another instant at each call
            config.write_text("[source]\nkind = 'nothing-such'\n")  # broken meanwhile
            broken = await client.call_tool("list_traces", {})
            assert broken.is_error and "\n" not in broken.content[0].text

    anyio.run(main)


def test_list_traces_says_what_is_received_but_not_derived(tmp_path: Path) -> None:
    """A receiver's backlog is said in ``list_traces`` (``pending`` and the summary), as
    ``otelcar traces`` and the console say it, and a kept answer is not sent once the
    backlog has changed (issue 40)."""
    from otelcar.importer import iter_file_records

    store, config = tmp_path / "store", tmp_path / "otelcar.toml"
    _import(store, FIRST, 1_700_000_000)
    config.write_text("")
    dump = tmp_path / "backlog.json"
    document = long_conversation(1, trace_id=SECOND, start_ns=1_700_000_100 * 10**9)
    dump.write_text(json.dumps(document), "utf-8")

    async def main() -> None:
        async with Client(build_server(CountingContext(store, config))) as client:
            quiet = await client.call_tool("list_traces", {})
            assert quiet.structured_content["pending"] is None
            Store(store).append(list(iter_file_records([dump])))  # durable, not derived
            waiting = await client.call_tool("list_traces", {})
            assert [t["trace_id"] for t in waiting.structured_content["traces"]] == [FIRST]
            said = waiting.structured_content["pending"]
            assert "MB of received batches are not derived yet" in said
            assert said in waiting.content[0].text
            Store(store).catch_up()  # what a running `otelcar collect` does
            derived = await client.call_tool("list_traces", {})
            assert derived.structured_content["pending"] is None
            assert [t["trace_id"] for t in derived.structured_content["traces"]] == [FIRST, SECOND]

    anyio.run(main)
