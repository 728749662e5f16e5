"""OpenInference: the real fixtures (fixtures/openinference) and synthetic pitfalls."""

from __future__ import annotations

import dataclasses
import json

import polars as pl
import pytest

from otelcar import read_otlp
from otelcar.conventions import map_span
from otelcar.messages import Message, ToolCall, decode_arguments
from tests.conftest import NEW_CONTENT, OTLP, ROOT
from tests.equivalence import comparable
from tests.helpers.refund_fixture import CALLS_1, CALLS_2, EXPECTED_CONTEXTS, FINAL, TOOLS, USER
from tests.synth import span

OI = ROOT / "fixtures" / "openinference"
# Trace ids of the committed fixtures (seeded id generator in make_fixtures.py).
CONTENT = "2552a32e71b1e6f6b2f0edc34a977809"
EVICTED = "d778e67da22b78b1be1c7929324970d1"
STACKED = "3f813363ba94a6ff77636c928e4e20af"
HIDDEN = "b375ef1734db43e97b8686ce7ea16bfe"
KINDS = ["other", "agent", "llm", "tool", "tool", "llm", "tool", "llm"]


def _steps(name: str, trace_id: str) -> pl.DataFrame:
    steps = read_otlp(OI / f"{name}.traces.jsonl").sort("step")
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


def _check_llm_rows(steps: pl.DataFrame, *, final: str | None = FINAL) -> list[dict]:
    llm = steps.filter(pl.col("kind") == "llm").to_dicts()
    assert len(llm) == 3
    for row, expected in zip(llm, EXPECTED_CONTEXTS, strict=True):
        assert [_context(m) for m in row["input_messages"]] == expected
        assert row["provider"] == "openai"
        assert row["request_model"] == "gpt-4o-mini"  # from llm.invocation_parameters
        assert row["response_model"] == row["name"] == "gpt-4o-mini-2024-07-18"
        assert {k: v for k, v in row["params"].items() if v is not None} == {
            "temperature": 0.2,
            "max_tokens": 256,
            "seed": 7,
        }
        assert [t["name"] for t in row["tools_available"]] == [
            "lookup_order",
            "get_refund_policy",
            "issue_refund",
        ]
        assert row["content_truncated"] is False
    assert [_calls(r["output"]) for r in llm[:2]] == [CALLS_1, CALLS_2]
    assert llm[2]["output"]["content"] == final
    assert [r["finish_reason"] for r in llm] == ["tool_call", "tool_call", "stop"]
    assert [r["response_id"] for r in llm] == [f"chatcmpl-fixture-{i}" for i in (1, 2, 3)]
    assert [(r["usage"]["input_tokens"], r["usage"]["total_tokens"]) for r in llm] == [
        (158, 209),
        (247, 274),
        (281, 300),
    ]
    return llm


def test_decorated_chain_agent_llm_and_tool_spans():
    steps = _steps("content", CONTENT)
    assert steps["kind"].to_list() == KINDS
    assert steps["name"].to_list()[:2] == ["handle_support_request", "support_agent"]
    assert set(steps["source"].to_list()) == {"openinference"}
    agent_span = steps["span_id"][1]
    assert set(steps["episode_id"].to_list()[1:]) == {agent_span}
    assert set(steps["agent_name"].to_list()[1:]) == {"support_agent"}
    llm = _check_llm_rows(steps)
    assert all(row["issues"] == [] for row in llm)
    tools = steps.filter(pl.col("kind") == "tool")
    # @tracer.tool records no tool.id: linked by name and order, id taken from the call.
    assert _tools(steps) == TOOLS
    assert tools["link_inferred"].all() and not tools["synthesized"].any()
    assert tools["call_step"].to_list() == [2, 2, 5]
    # tool.parameters (a schema) is never the arguments, and stays in the attributes.
    schema = json.loads(json.loads(tools["attributes"][0])["tool.parameters"])
    assert schema["title"] == "lookup_order"
    assert decode_arguments(tools["tool_args"][0]) != schema
    assert comparable(steps) == _reference()


def test_stacked_instrumentations_merge_into_one_row_per_call():
    steps = _steps("stacked", STACKED)
    assert steps["kind"].to_list() == KINDS  # 11 spans, 8 rows
    llm = _check_llm_rows(steps)
    for row in llm:
        # The openai-v2 span (outer, CLIENT) is absorbed into the OpenInference span.
        assert len(row["merged_span_ids"]) == 1
        assert row["source"] == "openinference + otel-genai 1.37+"
    tools = steps.filter(pl.col("kind") == "tool")
    # Manual TOOL spans with tool.id: linked by id.
    assert _tools(steps) == TOOLS
    assert not tools["link_inferred"].any() and tools["call_step"].to_list() == [2, 2, 5]
    assert comparable(steps) == _reference()


def test_hidden_input_messages_fall_back_to_the_raw_request():
    steps = _steps("hidden", HIDDEN)
    assert steps["kind"].to_list() == KINDS
    llm = _check_llm_rows(steps, final=None)
    for row in llm:
        assert "input messages read from input.value (the raw request)" in row["issues"]
    assert any("__REDACTED__" in issue for issue in llm[2]["issues"])
    assert _tools(steps) == TOOLS
    # OPENINFERENCE_HIDE_OUTPUT_TEXT redacts the final answer's text, and only that: the one
    # difference from the reference run.
    reference = _reference()
    expected = [*reference[:-1], ("llm", reference[-1][1], (None, []))]
    assert comparable(steps) == expected


def test_attribute_count_eviction_is_reported():
    steps = _steps("evicted", EVICTED)
    llm = steps.filter(pl.col("kind") == "llm").to_dicts()
    last_missing = [3, 8, 11]
    incomplete = [4, 9, None]
    for row, last, partial in zip(llm, last_missing, incomplete, strict=True):
        assert row["content_truncated"] is True and row["content_captured"] is True
        # input.value, output.value, invocation parameters and llm.system went first
        assert row["request_model"] is None and row["provider"] is None
        assert row["response_id"] is None and row["params"] is None
        (issue,) = row["issues"]
        assert f"input messages 0–{last} are missing" in issue
        assert (f"{partial} incomplete" in issue) == (partial is not None)
    tail = [_context(m) for m in llm[2]["input_messages"]][-6:]
    assert tail == [("user", USER, [], None), *EXPECTED_CONTEXTS[2][2:]]
    assert llm[2]["output"]["content"] == FINAL
    assert _tools(steps) == TOOLS


# --------------------------------------------------------------------------------------
# Synthetic spans
# --------------------------------------------------------------------------------------


def _llm(attributes: dict) -> object:
    return span("1", "ChatCompletion", {"openinference.span.kind": "LLM", **attributes})


def _tool(attributes: dict) -> object:
    return span("2", "lookup", {"openinference.span.kind": "TOOL", **attributes})


def test_tool_parameters_are_never_read_as_arguments():
    mapped = map_span(
        _tool(
            {
                "tool.name": "lookup",
                "tool.parameters": json.dumps(
                    {"type": "object", "properties": {"order_id": {"type": "string"}}}
                ),
                "output.value": "ok",
            }
        )
    )
    assert (mapped.kind, mapped.tool_name, mapped.tool_args, mapped.tool_result) == (
        "tool",
        "lookup",
        None,
        "ok",
    )
    assert "tool.parameters" not in mapped.consumed


def test_tool_id_arguments_and_result():
    mapped = map_span(
        _tool(
            {
                "tool.name": "lookup",
                "tool.id": "call_1",
                "input.value": '{"order_id": "A-1"}',
                "input.mime_type": "application/json",
                "output.value": '{"ok": true}',
                "output.mime_type": "application/json",
            }
        )
    )
    assert mapped.tool_call_id == "call_1"
    assert mapped.tool_args == {"order_id": "A-1"}
    assert mapped.tool_result == '{"ok": true}'  # the result text as recorded


def test_a_dspy_tool_span_without_tool_name_is_named_by_its_tool():
    # openinference-instrumentation-dspy 0.1.48 names a Tool's span "<tool name>.__call__"
    # (".acall" when awaited) and records no tool.name.
    for span_name in ("get_weather.__call__", "get_weather.acall"):
        attributes = {"openinference.span.kind": "TOOL", "input.value": '{"kwargs": {}}'}
        mapped = map_span(span("2", span_name, attributes))
        assert (mapped.name, mapped.tool_name) == ("get_weather", "get_weather")
    named = map_span(
        span("2", "x.__call__", {"openinference.span.kind": "TOOL", "tool.name": "x.__call__"})
    )
    assert named.tool_name == "x.__call__"  # a recorded tool.name is kept as it is


def test_a_langchain_tool_without_tool_id_takes_the_id_of_its_tool_message():
    # openinference-instrumentation-langchain 0.1.80: a tool run with a ToolCall records the
    # bare input_str and the ToolMessage as message_to_dict's {"type": "tool", "data": {...}}.
    data = {"content": "18 degrees", "type": "tool", "name": "lookup", "tool_call_id": "call_1"}
    mapped = map_span(
        _tool(
            {
                "tool.name": "lookup",
                "input.value": "Paris",
                "output.value": json.dumps({"type": "tool", "data": data}),
                "output.mime_type": "application/json",
            }
        )
    )
    assert (mapped.tool_call_id, mapped.tool_result) == ("call_1", "18 degrees")
    plain = map_span(_tool({"tool.name": "lookup", "output.value": '{"type": "tool"}'}))
    assert plain.tool_call_id is None


def test_redacted_values_are_not_content():
    mapped = map_span(
        _llm(
            {
                "llm.input_messages.0.message.role": "user",
                "llm.input_messages.0.message.content": "__REDACTED__",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.tool_calls.0.tool_call.id": "c1",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "f",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": (
                    "__REDACTED__"
                ),
                "input.value": "__REDACTED__",
                "input.mime_type": "application/json",
            }
        )
    )
    assert mapped.input_messages == [Message("user", None)]
    assert mapped.output.tool_calls == (ToolCall("f", None, "c1"),)
    assert not mapped.has_content()
    assert sum("__REDACTED__" in i for i in mapped.issues) == 2
    tool = map_span(
        _tool({"tool.name": "f", "input.value": "__REDACTED__", "output.value": "__REDACTED__"})
    )
    assert tool.tool_args is None and tool.tool_result is None
    assert len(tool.issues) == 2


def test_truncated_json_is_reported_and_kept_raw():
    mapped = map_span(
        _llm(
            {
                "llm.invocation_parameters": '{"model": "m", "temper',
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "f",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": (
                    '{"q": "cut'
                ),
                "output.value": '{"id": "chatcmpl-9", "choices": [{"message": {"conte',
                "output.mime_type": "application/json",
            }
        )
    )
    assert mapped.content_truncated
    assert mapped.request_model is None and mapped.params == {}
    assert "llm.invocation_parameters" not in mapped.consumed
    assert mapped.output.tool_calls == (ToolCall("f", '{"q": "cut'),)
    assert mapped.response_id == "chatcmpl-9"  # read from the start of the cut response
    tool = map_span(
        _tool(
            {
                "tool.name": "f",
                "input.value": '{"order_id": "A-',
                "input.mime_type": "application/json",
            }
        )
    )
    assert tool.tool_args == '{"order_id": "A-' and tool.content_truncated
    assert any("not valid JSON" in i for i in tool.issues)


def test_eviction_of_the_first_messages_is_reported():
    attrs = {
        "llm.input_messages.2.message.content": "partial",
        "llm.input_messages.3.message.role": "user",
        "llm.input_messages.3.message.content": "kept",
    }
    mapped = map_span(dataclasses.replace(_llm(attrs), dropped_attributes_count=12))
    assert mapped.input_messages == [Message("user", "kept")]
    assert mapped.content_truncated
    (issue,) = mapped.issues
    assert "input messages 0–1 are missing, 2 incomplete" in issue


def test_legacy_function_call_multiple_choices_and_multimodal_content():
    mapped = map_span(
        _llm(
            {
                "llm.provider": "azure",
                "llm.system": "openai",
                "llm.invocation_parameters": json.dumps(
                    {"model": "gpt-4o", "max_completion_tokens": 50, "n": 2, "stop": "END"}
                ),
                "llm.input_messages.0.message.role": "user",
                "llm.input_messages.0.message.contents.0.message_content.type": "text",
                "llm.input_messages.0.message.contents.0.message_content.text": "look:",
                "llm.input_messages.0.message.contents.1.message_content.type": "image",
                "llm.input_messages.0.message.contents.1.message_content.image.image.url": "u",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.function_call_name": "weather",
                "llm.output_messages.0.message.function_call_arguments_json": '{"city": "X"}',
                "llm.output_messages.1.message.role": "assistant",
                "llm.output_messages.1.message.content": "second",
                "llm.finish_reason": "function_call",
            }
        )
    )
    assert mapped.provider == "azure"
    assert mapped.request_model == mapped.name == "gpt-4o"
    assert mapped.params["max_tokens"] == 50 and mapped.params["n"] == 2
    assert mapped.params["stop"] == ["END"]
    assert mapped.input_messages == [Message("user", "look:")]
    assert any("'image' is not represented" in i for i in mapped.issues)
    assert mapped.output == Message("assistant", None, (ToolCall("weather", {"city": "X"}),))
    assert mapped.alternates == [Message("assistant", "second")]
    assert mapped.n_choices == 2 and mapped.finish_reason == "function_call"


def test_raw_request_and_response_fallback():
    request = {
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "r"},
        ]
    }
    response = {
        "id": "chatcmpl-7",
        "choices": [
            {"index": 1, "finish_reason": "stop", "message": {"role": "assistant", "content": "b"}},
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "a"}},
        ],
    }
    mapped = map_span(
        _llm(
            {
                "input.value": json.dumps(request),
                "input.mime_type": "application/json",
                "output.value": json.dumps(response),
                "output.mime_type": "application/json",
            }
        )
    )
    assert mapped.input_messages == [
        Message("system", "sys"),
        Message("user", "hi"),
        Message("assistant", None, (ToolCall("f", {}, "c1"),)),
        Message("tool", "r", tool_call_id="c1"),
    ]
    assert mapped.output == Message("assistant", "a")
    assert mapped.alternates == [Message("assistant", "b")]
    assert mapped.response_id == "chatcmpl-7" and mapped.finish_reason == "stop"
    assert {"input.value", "output.value"} <= mapped.consumed


@pytest.mark.parametrize(
    ("kind", "expected"),
    [("CHAIN", "other"), ("RETRIEVER", "other"), ("AGENT", "agent"), ("EMBEDDING", "other")],
)
def test_span_kinds(kind, expected):
    mapped = map_span(span("3", "x", {"openinference.span.kind": kind, "agent.name": "a"}))
    assert mapped.kind == expected and mapped.source == "openinference"
    assert mapped.episode_boundary == (kind == "AGENT")


def test_tool_call_id_on_a_content_part_is_read():
    """BeeAI writes a tool message's call id on its content part, not on the message."""
    prefix = "llm.input_messages.0.message"
    mapped = map_span(
        _llm(
            {
                f"{prefix}.role": "tool",
                f"{prefix}.contents.0.message.tool_call_id": "call_weather_1",
                f"{prefix}.contents.0.message_content.type": "text",
                f"{prefix}.contents.0.message_content.text": "18 degrees, sunny",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": "It is 18 degrees.",
            }
        )
    )
    [message] = mapped.input_messages
    assert (message.role, message.content, message.tool_call_id) == (
        "tool",
        "18 degrees, sunny",
        "call_weather_1",
    )
