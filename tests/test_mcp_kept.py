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
