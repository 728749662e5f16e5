"""OpenLLMetry / Traceloop: the real fixtures (fixtures/openllmetry) and synthetic pitfalls."""

from __future__ import annotations

import dataclasses
import json

import polars as pl
import pytest

from otelcar import read_otlp
from otelcar.conventions import map_span
from otelcar.conventions.genai import GenAIMapper
from otelcar.conventions.openllmetry import OpenLLMetryMapper
from otelcar.messages import Message, ToolCall, decode_arguments
from otelcar.trajectory import build_trace
from tests.conftest import NEW_CONTENT, OTLP, ROOT
from tests.equivalence import comparable
from tests.helpers.refund_fixture import (
    CALLS_1,
    CALLS_2,
    EXPECTED_CONTEXTS,
    FINAL,
    ORDER,
    POLICY,
    REFUND,
    TOOLS,
    USER,
)
from tests.synth import TRACE, log, span

OLL = ROOT / "fixtures" / "openllmetry"
# Trace ids of the committed fixtures (seeded id generator in make_fixtures.py).
INDEXED = "cdb307065cc9a1c0058c242b96206470"
NEW = "52d65a1b8012934e001b19e6ba3cdc0e"
TRACELOOP = "9a267267ca25deec0152506286489d9a"
TRACELOOP_INDEXED = "8ee2242cf705c52eb68d93c61cde1553"
EVICTED = "7c97cb3d138f141b0379b0b7734b8387"
TOOL_SCHEMA_0 = {
    "type": "object",
    "properties": {"order_id": {"type": "string", "description": "The order id, e.g. A-1001."}},
    "required": ["order_id"],
    "additionalProperties": False,
}


def _steps(name: str, trace_id: str) -> pl.DataFrame:
    steps = read_otlp(OLL / f"{name}.traces.jsonl").sort("step")
    assert steps["trace_id"].unique().to_list() == [trace_id]
    return steps


def _reference() -> list:
    steps = read_otlp(OTLP / "new_content.traces.jsonl")
    return comparable(steps.filter(pl.col("trace_id") == NEW_CONTENT))


def _calls(message):
    return [(c["id"], c["name"], decode_arguments(c["arguments"])) for c in message["tool_calls"]]


def _context(message):
    return (message["role"], message["content"], _calls(message), message["tool_call_id"])


def _tools(steps: pl.DataFrame) -> list[tuple]:
    return [
        (t["tool_name"], t["tool_call_id"], decode_arguments(t["tool_args"]), t["tool_result"])
        for t in steps.filter(pl.col("kind") == "tool").iter_rows(named=True)
    ]


def _check_llm_rows(steps: pl.DataFrame, source: str, *, reasoning: int | None) -> None:
    """The three LLM rows every OpenLLMetry fixture of the scenario must give."""
    llm = steps.filter(pl.col("kind") == "llm").to_dicts()
    assert len(llm) == 3
    for row, expected in zip(llm, EXPECTED_CONTEXTS, strict=True):
        assert [_context(m) for m in row["input_messages"]] == expected
        assert row["source"] == source
        assert row["provider"] == "openai"
        assert row["request_model"] == "gpt-4o-mini"
        assert row["response_model"] == row["name"] == "gpt-4o-mini-2024-07-18"
        # OpenLLMetry records temperature and max_tokens, but not the seed.
        assert row["params"]["temperature"] == 0.2 and row["params"]["max_tokens"] == 256
        assert row["params"]["seed"] is None
        assert [t["name"] for t in row["tools_available"]] == [
            "lookup_order",
            "get_refund_policy",
            "issue_refund",
        ]
        assert json.loads(row["tools_available"][0]["parameters"]) == TOOL_SCHEMA_0
        assert row["content_captured"] is True and row["content_truncated"] is False
        assert row["issues"] == []
    assert [_calls(r["output"]) for r in llm[:2]] == [CALLS_1, CALLS_2]
    assert llm[2]["output"]["content"] == FINAL and llm[2]["output"]["tool_calls"] == []
    assert [r["finish_reason"] for r in llm] == ["tool_call", "tool_call", "stop"]
    assert [r["response_id"] for r in llm] == [f"chatcmpl-fixture-{i}" for i in (1, 2, 3)]
    assert [r["usage"] for r in llm] == [
        {
            "input_tokens": i,
            "output_tokens": o,
            "cache_read_tokens": None,
            "reasoning_tokens": reasoning,
            "total_tokens": i + o,
        }
        for i, o in ((158, 51), (247, 27), (281, 19))
    ]


@pytest.mark.parametrize(
    ("name", "trace_id", "source", "reasoning"),
    [
        ("indexed", INDEXED, "openllmetry 0.52 indexed", 0),
        ("new", NEW, "openllmetry 0.62 (otel-genai 1.37+)", None),
    ],
)
def test_client_only_fixtures_synthesize_tool_steps_from_ids(name, trace_id, source, reasoning):
    steps = _steps(name, trace_id)
    assert steps["kind"].to_list() == ["other", "llm", "tool", "tool", "llm", "tool", "llm"]
    assert steps["name"][0] == "handle_support_request"
    _check_llm_rows(steps, source, reasoning=reasoning)
    tools = steps.filter(pl.col("kind") == "tool")
    assert _tools(steps) == TOOLS
    assert tools["synthesized"].all() and not tools["link_inferred"].any()
    assert tools["call_step"].to_list() == [1, 1, 4]
    # What the mapper does not represent stays in the attributes.
    rest = json.loads(steps["attributes"][1])
    streaming = "llm.is_streaming" if name == "indexed" else "gen_ai.is_streaming"
    assert rest[streaming] is False and "gen_ai.prompt.0.content" not in rest
    assert comparable(steps) == _reference()


@pytest.mark.parametrize(
    ("name", "trace_id", "source", "reasoning"),
    [
        ("traceloop", TRACELOOP, "openllmetry 0.62 (otel-genai 1.37+)", None),
        ("traceloop_indexed", TRACELOOP_INDEXED, "openllmetry 0.52 indexed", 0),
    ],
)
def test_traceloop_decorator_fixtures_link_tools_by_name_and_order(
    name, trace_id, source, reasoning
):
    steps = _steps(name, trace_id)
    assert steps["kind"].to_list() == [
        "agent",
        "agent",
        "llm",
        "tool",
        "tool",
        "llm",
        "tool",
        "llm",
    ]
    assert steps["name"].to_list()[:2] == ["refund_support", "support_agent"]
    assert steps["source"].to_list()[:2] == ["openllmetry traceloop"] * 2
    agent_span = steps["span_id"][1]
    assert set(steps["episode_id"].to_list()[1:]) == {agent_span}
    assert set(steps["agent_name"].to_list()[1:]) == {"support_agent"}
    _check_llm_rows(steps, source, reasoning=reasoning)
    tools = steps.filter(pl.col("kind") == "tool")
    # Tool spans carry no call id: linked by name and order, the id taken from the call.
    assert _tools(steps) == TOOLS
    assert tools["link_inferred"].all() and not tools["synthesized"].any()
    assert tools["span_id"].null_count() == 0
    assert tools["call_step"].to_list() == [2, 2, 5]
    assert tools["source"].to_list() == ["openllmetry traceloop"] * 3
    assert all(issues == [] for issues in tools["issues"].to_list())
    assert comparable(steps) == _reference()


def test_attribute_count_eviction_is_reported():
    steps = _steps("evicted", EVICTED)
    llm = steps.filter(pl.col("kind") == "llm").to_dicts()
    # The oldest attributes went first: llm.request.type, the model, the parameters, and
    # then the first request messages (the system prompt included).
    first_missing = [10, 15, 17]  # last missing index per call; call 3 also lost 18.role
    for row, last in zip(llm, first_missing, strict=True):
        assert row["content_truncated"] is True and row["content_captured"] is True
        assert row["request_model"] is None and row["response_model"] == "gpt-4o-mini-2024-07-18"
        assert row["input_messages"][0]["role"] != "system"
        assert row["source"] == "openllmetry 0.52 indexed"
        (issue,) = row["issues"]
        assert "evicted by the SDK's attribute count limit" in issue
        assert f"request messages 0–{last} are missing" in issue
    assert "18 incomplete" in llm[2]["issues"][0]
    # The incomplete message's surviving attribute is kept verbatim.
    assert json.loads(llm[2]["attributes"])["gen_ai.prompt.18.content"] == "Earlier answer 9."
    # What survived is the tail of the real context.
    tail = [_context(m) for m in llm[2]["input_messages"]][-6:]
    assert tail == [("user", USER, [], None), *EXPECTED_CONTEXTS[2][2:]]
    assert llm[0]["input_messages"][0]["content"] == "Earlier question 6?"
    assert _tools(steps) == TOOLS


# --------------------------------------------------------------------------------------
# Synthetic spans
# --------------------------------------------------------------------------------------


def _indexed(attributes: dict, **kw) -> object:
    attrs = {"llm.request.type": "chat", "gen_ai.system": "openai", **attributes}
    return span("1", "openai.chat", attrs, kind="CLIENT", **kw)


def test_numeric_grouping_tool_calls_and_list_content():
    attrs = {f"gen_ai.prompt.{i}.role": "user" for i in range(12)}
    attrs.update({f"gen_ai.prompt.{i}.content": f"m{i}" for i in range(12)})
    attrs.update(
        {
            "gen_ai.prompt.1.content": json.dumps(
                [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
            ),
            "gen_ai.prompt.2.content": json.dumps(
                [{"type": "image_url", "image_url": {"url": "x"}}]
            ),
            "gen_ai.prompt.10.role": "assistant",
            "gen_ai.prompt.10.tool_calls.0.id": "c1",
            "gen_ai.prompt.10.tool_calls.0.name": "f",
            "gen_ai.prompt.10.tool_calls.0.arguments": '{"x": 1}',
            "gen_ai.prompt.11.role": "tool",
            "gen_ai.prompt.11.tool_call_id": "c1",
        }
    )
    del attrs["gen_ai.prompt.10.content"]
    mapped = map_span(_indexed(attrs))
    roles = [m.role for m in mapped.input_messages]
    assert roles == ["user"] * 10 + ["assistant", "tool"]  # 10 after 9, not after 1
    assert mapped.input_messages[1].content == "a\nb"
    assert mapped.input_messages[2].content.startswith('[{"type": "image_url"')
    assert any("non-text content parts" in i for i in mapped.issues)
    assert mapped.input_messages[10] == Message("assistant", None, (ToolCall("f", {"x": 1}, "c1"),))
    assert mapped.input_messages[11] == Message("tool", "m11", tool_call_id="c1")


def test_filtered_completion_is_a_placeholder_not_text():
    mapped = map_span(
        _indexed(
            {
                "gen_ai.completion.0.finish_reason": "content_filter",
                "gen_ai.completion.0.role": "assistant",
                "gen_ai.completion.0.content": "FILTERED",
                "gen_ai.completion.0.content_filter_results": '{"hate": {"filtered": true}}',
            }
        )
    )
    assert mapped.output == Message("assistant", None)
    assert mapped.finish_reason == "content_filter"
    assert any("content filter fired" in i for i in mapped.issues)


def test_multiple_choices_and_refusal():
    mapped = map_span(
        _indexed(
            {
                "gen_ai.completion.0.finish_reason": "stop",
                "gen_ai.completion.0.role": "assistant",
                "gen_ai.completion.0.content": "first",
                "gen_ai.completion.1.finish_reason": "stop",
                "gen_ai.completion.1.role": "assistant",
                "gen_ai.completion.1.refusal": "I can't help with that.",
            }
        )
    )
    assert mapped.output == Message("assistant", "first")
    assert mapped.alternates == [Message("assistant", "I can't help with that.")]
    assert mapped.n_choices == 2 and mapped.finish_reason == "stop"


def test_legacy_function_call_without_id_links_by_name_and_order():
    llm = _indexed(
        {
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "weather?",
            "gen_ai.completion.0.finish_reason": "function_call",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.tool_calls.0.name": "weather",
            "gen_ai.completion.0.tool_calls.0.arguments": '{"city": "Paris"}',
        },
        parent="a",
        start=1,
        end=2,
    )
    tool = span(
        "2",
        "weather.tool",
        {
            "traceloop.span.kind": "tool",
            "traceloop.entity.name": "weather",
            "traceloop.entity.input": json.dumps({"args": [], "kwargs": {"city": "Paris"}}),
            "traceloop.entity.output": json.dumps("rain"),
        },
        parent="a",
        start=3,
        end=4,
    )
    root = span("a", "weather.agent", {"traceloop.span.kind": "agent"}, start=0, end=9)
    steps = build_trace(TRACE, [root, llm, tool]).steps
    assert [s["kind"] for s in steps] == ["agent", "llm", "tool"]
    call = steps[1]["output"]["tool_calls"][0]
    assert (call["id"], call["name"]) == (None, "weather")
    assert steps[1]["finish_reason"] == "function_call"
    row = steps[2]
    assert (row["tool_name"], row["tool_call_id"], row["tool_result"]) == ("weather", None, "rain")
    assert decode_arguments(row["tool_args"]) == {"city": "Paris"}
    assert row["link_inferred"] is True and row["call_step"] == 1


def test_truncated_values_are_reported_and_kept_raw():
    mapped = map_span(
        _indexed(
            {
                "gen_ai.completion.0.role": "assistant",
                "gen_ai.completion.0.tool_calls.0.id": "c1",
                "gen_ai.completion.0.tool_calls.0.name": "f",
                "gen_ai.completion.0.tool_calls.0.arguments": '{"query": "a long que',
                "llm.request.functions.0.name": "f",
                "llm.request.functions.0.parameters": '{"type": "obj',
            }
        )
    )
    assert mapped.output.tool_calls == (ToolCall("f", '{"query": "a long que', "c1"),)
    assert mapped.content_truncated
    assert mapped.tools_available[0]["parameters"] is None
    assert "llm.request.functions.0.parameters" not in mapped.consumed
    assert sum("not valid JSON" in i for i in mapped.issues) == 2
    tool = map_span(
        span(
            "2",
            "f.tool",
            {
                "traceloop.span.kind": "tool",
                "traceloop.entity.name": "f",
                "traceloop.entity.input": '{"args": [], "kwargs": {"query": "a lo',
                "traceloop.entity.output": '"ok"',
            },
        )
    )
    assert tool.tool_args == '{"args": [], "kwargs": {"query": "a lo'
    assert tool.tool_result == "ok" and tool.content_truncated
    assert "traceloop.entity.input" not in tool.consumed


def test_positional_tool_arguments_are_left_to_the_linked_call():
    tool = map_span(
        span(
            "2",
            "f.tool",
            {
                "traceloop.span.kind": "tool",
                "traceloop.entity.name": "f",
                "traceloop.entity.input": json.dumps({"args": ["A-1"], "kwargs": {}}),
                "traceloop.entity.output": json.dumps({"ok": True}),
            },
        )
    )
    assert tool.tool_args is None and tool.tool_result == '{"ok": true}'
    assert any("positional arguments" in i for i in tool.issues)
    assert "traceloop.entity.input" not in tool.consumed


def test_eviction_of_the_first_prompts_is_reported():
    attrs = {
        "gen_ai.prompt.3.content": "partial",
        "gen_ai.prompt.4.role": "user",
        "gen_ai.prompt.4.content": "kept",
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": "ok",
    }
    evicted = dataclasses.replace(
        span("1", "openai.chat", attrs), dropped_attributes_count=9
    )  # llm.request.type itself was evicted: the indexed keys still identify the dialect
    mapped = map_span(evicted)
    assert mapped.kind == "llm" and mapped.source == "openllmetry indexed"
    assert mapped.input_messages == [Message("user", "kept")]
    assert mapped.content_truncated
    (issue,) = mapped.issues
    assert "request messages 0–2 are missing, 3 incomplete" in issue
    assert "gen_ai.prompt.3.content" not in mapped.consumed


def test_claims_new_form_only_with_openllmetry_markers():
    messages = {"gen_ai.operation.name": "chat", "gen_ai.input.messages": "[]"}
    ours = span("1", "openai.chat", {**messages, "gen_ai.is_streaming": False})
    # util-genai span under a traceloop workflow: stamped, but not OpenLLMetry's
    stamped = span("2", "chat m", {**messages, "traceloop.workflow.name": "w"})
    mapper, genai = OpenLLMetryMapper(), GenAIMapper()
    assert mapper.claim(ours) < genai.claim(ours)
    assert mapper.claim(stamped) is None
    assert map_span(stamped).source == "otel-genai 1.37+"
    mapped = map_span(ours)
    assert mapped.source == "openllmetry (otel-genai 1.37+)" and mapped.kind == "llm"
    assert mapper.claim(span("3", "x", {"traceloop.span.kind": "task"})) == 50
    assert map_span(span("3", "x.task", {"traceloop.span.kind": "task"})).kind == "other"
    embedding = map_span(_indexed({"llm.request.type": "embedding"}))
    assert embedding.kind == "other"


def test_reference_fixture_results_are_the_shared_constants():
    # Guards the imports above: the scenario's tool results are the ones of fixtures/otlp.
    assert [t[3] for t in TOOLS] == [ORDER, POLICY, REFUND]


def test_events_mode_reads_the_log_events():
    # use_legacy_attributes=False: no gen_ai.prompt.* on the span, v1.28 log events instead.
    events = [
        log("1", "gen_ai.user.message", {"content": "hi"}, observed=1, seq=1),
        log(
            "1",
            "gen_ai.choice",
            {"index": 0, "finish_reason": "stop", "message": {"content": "yo"}},
            observed=2,
            seq=2,
        ),
    ]
    mapped = map_span(_indexed({"gen_ai.request.model": "m"}), events)
    assert mapped.input_messages == [Message("user", "hi")]
    assert mapped.output == Message("assistant", "yo") and mapped.finish_reason == "stop"
    assert mapped.source == "openllmetry indexed + events"


def test_a_llamaindex_call_tool_task_with_tool_name_is_the_tool_step():
    # opentelemetry-instrumentation-llamaindex 0.62.4: the agent workflow's call_tool step is
    # a task span with tool.name / tool.arguments and the ToolCallResult event as its output.
    output = {"blocks": [{"block_type": "text", "text": "18 degrees"}], "raw_output": "18 degrees"}
    record = {
        "tool_name": "get_weather",
        "tool_kwargs": {"city": "Paris"},
        "tool_id": "call_1",
        "tool_output": {**output, "tool_name": "get_weather", "is_error": False},
        "return_direct": False,
    }
    attributes = {
        "traceloop.span.kind": "task",
        "traceloop.entity.name": "BaseWorkflowAgent.task",
        "tool.name": "get_weather",
        "tool.arguments": json.dumps({"city": "Paris"}),
        "traceloop.entity.output": json.dumps(record),
    }
    tool = map_span(span("2", "BaseWorkflowAgent.task", attributes))
    assert (tool.kind, tool.name, tool.tool_name, tool.tool_call_id) == (
        "tool",
        "get_weather",
        "get_weather",
        "call_1",
    )
    assert tool.tool_args == {"city": "Paris"}
    assert tool.tool_result == "18 degrees"
    plain = {k: v for k, v in attributes.items() if k != "tool.name"}
    assert map_span(span("3", "BaseWorkflowAgent.task", plain)).kind == "other"
