"""Every committed fixture (made by the real SDK and openai-v2) maps to the expected rows."""

from __future__ import annotations

import json

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from otelcar import STEPS_SCHEMA, read_otlp
from otelcar.messages import decode_arguments
from tests.conftest import (
    BAD,
    LEGACY_CONTENT,
    LEGACY_NOCONTENT,
    LENGTH_LIMIT,
    MIXED_HTTP,
    NEW_CONTENT,
    NEW_NOCONTENT,
    OTLP,
)
from tests.helpers.refund_fixture import (
    CALLS_1,
    CALLS_2,
    EXPECTED_CONTEXTS,
    FINAL,
    ORDER,
    POLICY,
    SYSTEM,
    TOOLS,
    USER,
)


def _calls(message):
    return [(c["id"], c["name"], decode_arguments(c["arguments"])) for c in message["tool_calls"]]


def _context(message):
    return (message["role"], message["content"], _calls(message), message["tool_call_id"])


def _trace(steps: pl.DataFrame, trace_id: str) -> pl.DataFrame:
    out = steps.filter(pl.col("trace_id") == trace_id).sort("step")
    assert out.height, f"trace {trace_id} missing"
    return out


def _check_full_content(steps: pl.DataFrame) -> None:
    llm = steps.filter(pl.col("kind") == "llm").to_dicts()
    tools = steps.filter(pl.col("kind") == "tool").to_dicts()
    assert len(llm) == 3 and len(tools) == 3
    for row, expected in zip(llm, EXPECTED_CONTEXTS, strict=True):
        got = [_context(m) for m in row["input_messages"]]
        assert got == expected
    assert _calls(llm[0]["output"]) == CALLS_1 and llm[0]["finish_reason"] == "tool_call"
    assert _calls(llm[1]["output"]) == CALLS_2 and llm[1]["finish_reason"] == "tool_call"
    assert llm[2]["output"]["content"] == FINAL and llm[2]["finish_reason"] == "stop"
    for row in llm:
        assert row["request_model"] == "gpt-4o-mini"
        assert row["response_model"] == "gpt-4o-mini-2024-07-18"
        assert row["provider"] == "openai"
        assert row["params"]["temperature"] == 0.2 and row["params"]["max_tokens"] == 256
        assert row["content_captured"] is True
    assert [r["usage"]["input_tokens"] for r in llm] == [158, 247, 281]
    got_tools = [
        (t["tool_name"], t["tool_call_id"], decode_arguments(t["tool_args"]), t["tool_result"])
        for t in tools
    ]
    assert got_tools == TOOLS
    assert [t["call_step"] for t in tools] == [llm[0]["step"], llm[0]["step"], llm[1]["step"]]
    assert not any(t["link_inferred"] for t in tools)


def test_new_conventions_with_content():
    steps = _trace(
        read_otlp([OTLP / "new_content.traces.jsonl", OTLP / "new_content.logs.jsonl"]), NEW_CONTENT
    )
    assert steps["kind"].to_list() == ["agent", "llm", "tool", "tool", "llm", "tool", "llm"]
    assert steps["name"].to_list()[0] == "support_agent"
    assert set(steps["agent_name"].to_list()) == {"support_agent"}
    assert set(steps["episode_id"].to_list()) == {steps["span_id"][0]}
    assert not steps["synthesized"].any()
    assert steps["parent_span_id"].to_list()[1:] == [steps["span_id"][0]] * 6
    assert all(s == [] for s in steps["issues"].to_list())
    _check_full_content(steps)
    sources = steps.filter(pl.col("kind") == "llm")["source"].unique().to_list()
    assert sources == ["otel-genai 1.37+"]


@pytest.mark.parametrize(
    "files",
    [
        ["new_content.traces.json"],
        ["new_content.traces.pb"],
        ["new_content.traces.pb.gz"],
        ["new_content.traces.binpb", "new_content.logs.pb"],
        ["new_content.traces.jsonl.gz"],
    ],
)
def test_every_wire_form_of_the_same_trace_gives_the_same_steps(files):
    reference = read_otlp([OTLP / "new_content.traces.jsonl"])
    other = read_otlp([OTLP / f for f in files])
    assert_frame_equal(other, reference)


def test_new_conventions_without_content():
    steps = _trace(
        read_otlp([OTLP / "new_nocontent.traces.jsonl", OTLP / "new_nocontent.logs.jsonl"]),
        NEW_NOCONTENT,
    )
    assert steps["kind"].to_list() == ["agent", "llm", "tool", "tool", "llm", "tool", "llm"]
    llm = steps.filter(pl.col("kind") == "llm")
    assert llm["input_messages"].to_list() == [None] * 3
    assert llm["output"].to_list() == [None] * 3
    assert llm["finish_reason"].to_list() == ["tool_call", "tool_call", "stop"]
    assert (
        steps.filter(pl.col("kind").is_in(["llm", "tool"]))["content_captured"].to_list()
        == [False] * 6
    )
    tools = steps.filter(pl.col("kind") == "tool")
    # Ids and names survive without content.
    assert tools["tool_call_id"].to_list() == ["call_lookup_1", "call_policy_1", "call_refund_1"]
    assert tools["tool_args"].to_list() == [None] * 3


def test_legacy_events_with_content_synthesize_the_tool_steps():
    steps = _trace(
        read_otlp([OTLP / "legacy_content.traces.jsonl", OTLP / "legacy_content.logs.jsonl"]),
        LEGACY_CONTENT,
    )
    assert steps["kind"].to_list() == ["other", "llm", "tool", "tool", "llm", "tool", "llm"]
    tools = steps.filter(pl.col("kind") == "tool")
    assert tools["synthesized"].all() and tools["span_id"].null_count() == 3
    assert set(steps.filter(pl.col("kind") == "llm")["source"].to_list()) == {
        "otel-genai 1.28 events"
    }
    _check_full_content(steps)


def test_legacy_events_without_content_keep_ids_and_roles():
    steps = _trace(
        read_otlp([OTLP / "legacy_nocontent.traces.jsonl", OTLP / "legacy_nocontent.logs.jsonl"]),
        LEGACY_NOCONTENT,
    )
    llm = steps.filter(pl.col("kind") == "llm").to_dicts()
    roles = [[m["role"] for m in row["input_messages"]] for row in llm]
    assert roles[2] == ["system", "user", "assistant", "tool", "tool", "assistant", "tool"]
    assert all(m["content"] is None for row in llm for m in row["input_messages"])
    assert [c[:2] for c in _calls(llm[0]["output"])] == [c[:2] for c in CALLS_1]
    assert [row["content_captured"] for row in llm] == [False] * 3
    tools = steps.filter(pl.col("kind") == "tool")
    assert tools["tool_call_id"].to_list() == ["call_lookup_1", "call_policy_1", "call_refund_1"]
    assert tools["tool_result"].to_list() == [None] * 3


def test_attribute_length_limit_is_reported_not_hidden():
    steps = _trace(read_otlp(BAD / "length_limit.traces.jsonl"), LENGTH_LIMIT)
    llm = steps.filter(pl.col("kind") == "llm").to_dicts()
    for row in llm:
        assert row["input_messages"] is None and row["content_truncated"] is True
        assert any("gen_ai.input.messages is not valid JSON" in i for i in row["issues"])
        raw = json.loads(row["attributes"])["gen_ai.input.messages"]
        assert len(raw) == 120  # the cut value is kept verbatim
    tools = steps.filter(pl.col("kind") == "tool")
    assert tools["tool_result"].to_list()[1] == POLICY


def test_non_genai_spans_are_kept_as_other_steps_in_place():
    steps = _trace(read_otlp(BAD / "mixed_http.traces.jsonl"), MIXED_HTTP)
    assert steps["name"].to_list()[2:5] == ["lookup_order", "GET /orders/A-1001", "SELECT orders"]
    http = steps.filter(pl.col("name") == "GET /orders/A-1001").row(0, named=True)
    assert http["kind"] == "other" and http["issues"] == []
    assert json.loads(http["attributes"])["http.request.method"] == "GET"


def test_orphaned_children_become_roots_with_an_issue():
    steps = _trace(read_otlp(BAD / "orphans.traces.jsonl"), NEW_CONTENT)
    assert steps.height == 6 and "agent" not in steps["kind"].to_list()
    assert all(any("not in the trace" in i for i in issues) for issues in steps["issues"])


def test_steps_table_has_the_declared_schema():
    steps = read_otlp(OTLP / "new_content.traces.jsonl")
    assert steps.schema == STEPS_SCHEMA


def test_read_otlp_warns_about_what_it_skips():
    from otelcar.importer import UndecodedRecordWarning

    with pytest.warns(UndecodedRecordWarning, match="line 2: invalid JSON"):
        steps = read_otlp(BAD / "truncated_line.traces.jsonl")
    assert steps.height > 0


def test_reference_projection_for_the_cross_dialect_contract():
    from tests.equivalence import comparable

    steps = _trace(read_otlp([OTLP / "new_content.traces.jsonl"]), NEW_CONTENT)
    projection = comparable(steps)
    assert [p[0] for p in projection] == ["llm", "tool", "tool", "llm", "tool", "llm"]
    assert projection[0][1] == [("system", SYSTEM, []), ("user", USER, [])]
    assert projection[1] == ("tool", "lookup_order", {"order_id": "A-1001"}, ORDER)
    legacy = _trace(
        read_otlp([OTLP / "legacy_content.traces.jsonl", OTLP / "legacy_content.logs.jsonl"]),
        LEGACY_CONTENT,
    )
    assert comparable(legacy) == projection
