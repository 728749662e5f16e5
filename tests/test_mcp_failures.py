"""The MCP server's triage tools (issue 41): ``list_failures`` lists what triage found as
traces arrived, with counts, states, culprit steps and cause sentences, filtered and paged
by cursor; ``read_failure`` gives one trace's whole attribution. Through the official client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

from mcp import Client

from otelcar.mcp.runs import RunContext
from otelcar.mcp.server import build_server
from tests import triage_states


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], dict]:
    root = tmp_path_factory.mktemp("triaged")
    result = triage_states.attribution()
    ids = triage_states.write_states(root, result)
    return root, ids, result[0]


def call(root: Path, name: str, cap: int = 256 * 1024, **arguments: Any) -> Any:
    async def main() -> Any:
        async with Client(build_server(RunContext(root), max_result_bytes=cap)) as client:
            return await client.call_tool(name, arguments)

    return anyio.run(main)


def test_list_failures_says_what_triage_found(store) -> None:
    root, ids, _ = store
    result = call(root, "list_failures")
    assert not result.is_error, result.content
    found = result.structured_content
    assert found["counts"] == {"queued": 1, "running": 0, "done": 1, "skipped": 1, "passed": 1}
    by_state = {f["state"]: f for f in found["failures"]}
    assert set(by_state) == {"done", "skipped", "queued"}  # passed only when asked
    done = by_state["done"]
    assert done["trace_id"] == ids["done"] and done["cause"] == triage_states.CAUSE
    assert done["culprit"]["step"] == 3 or isinstance(done["culprit"]["step"], int)
    assert by_state["skipped"]["reason"] == triage_states.UNSAFE
    assert "triaged trace(s)" in result.content[0].text
    passed = call(root, "list_failures", state="passed").structured_content["failures"]
    assert [f["trace_id"] for f in passed] == [ids["passed"]]
    billing = call(root, "list_failures", service="billing").structured_content["failures"]
    assert [f["state"] for f in billing] == ["queued"]
    bad = call(root, "list_failures", state="lost")
    assert bad.is_error and "\n" not in bad.content[0].text


def test_read_failure_gives_the_whole_attribution(store) -> None:
    root, ids, attribution = store
    result = call(root, "read_failure", trace_id=ids["done"][:12])  # a prefix is enough
    assert not result.is_error, result.content
    state = result.structured_content
    assert state["attribution"]["culprit"] == attribution["culprit"]
    assert state["why"]["cause"]["text"] == triage_states.CAUSE
    unseen = call(root, "read_failure", trace_id="f" * 32)
    assert unseen.is_error
