"""The MLflow-tracing and Haystack-tracer mappers on hand-made spans: the shapes the
recorded fixtures (``fixtures/frameworks/mlflow``, ``haystack``) lack — errors, streams,
several tool calls, other providers' request and reply forms, the tool invoker — and never a
raise on arbitrary attribute values."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from otelcar.conventions import map_span
from otelcar.conventions.haystack import HaystackMapper, python_repr
from otelcar.conventions.mlflow import MLflowMapper
from otelcar.ingest.frames import SpanFrame


def _span(name: str, attributes: dict[str, Any], **extra: Any) -> SpanFrame:
    return SpanFrame(
        trace_id="t" * 32,
        span_id="s" * 16,
        parent_span_id=None,
        name=name,
        kind="INTERNAL",
        start_ns=1,
        end_ns=2,
        attributes=attributes,
        **extra,
    )


def _mlflow(span_type: str, inputs: Any = None, outputs: Any = None, **more: Any) -> SpanFrame:
    attrs: dict[str, Any] = {"mlflow.spanType": json.dumps(span_type), **more}
    if inputs is not None:
        attrs["mlflow.spanInputs"] = json.dumps(inputs)
    if outputs is not None:
        attrs["mlflow.spanOutputs"] = json.dumps(outputs)
    return _span("Completions", attrs)


CALL = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}


def test_mlflow_claims_only_its_spans() -> None:
    assert MLflowMapper().claim(_mlflow("CHAT_MODEL")) == 15
    assert MLflowMapper().claim(_span("x", {"gen_ai.request.model": "m"})) is None
    assert HaystackMapper().claim(_mlflow("CHAT_MODEL")) is None


def test_mlflow_several_tool_calls_and_error_status() -> None:
    two = [CALL, {**CALL, "id": "c2", "function": {"name": "get_time", "arguments": '{"tz": 1}'}}]
    span = _mlflow(
        "CHAT_MODEL",
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.5},
        {
            "id": "r1",
            "model": "m-1",
            "choices": [
                {"finish_reason": "tool_calls", "message": {"role": "assistant", "tool_calls": two}}
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
        },
    )
    span.status_code, span.status_message = "ERROR", "RateLimitError: slow down"
    mapped = map_span(span)
    assert mapped.kind == "llm" and mapped.source == "mlflow"
    assert [c.name for c in mapped.output.tool_calls] == ["get_weather", "get_time"]
    assert [c.id for c in mapped.output.tool_calls] == ["c1", "c2"]
    assert mapped.output.tool_calls[1].arguments == {"tz": 1}
    assert mapped.finish_reason == "tool_call" and mapped.response_id == "r1"
    assert mapped.usage["input_tokens"] == 3 and mapped.usage["total_tokens"] == 7  # from reply
    assert mapped.params["temperature"] == 0.5
    assert mapped.error == "RateLimitError: slow down"


def test_mlflow_error_from_the_exception_event() -> None:
    span = _mlflow("TOOL", {"city": "Paris"})
    span.status_code = "ERROR"
    span.events = [{"name": "exception", "attributes": {"exception.message": "boom"}}]
    mapped = map_span(span)
    assert mapped.kind == "tool" and mapped.error == "boom"
    assert mapped.tool_args == {"city": "Paris"} and mapped.tool_result is None


def test_mlflow_stream_without_output_is_joined_from_chunk_events() -> None:
    chunks = [
        {"id": "r9", "model": "m", "choices": [{"index": 0, "delta": {"content": "It is "}}]},
        {"id": "r9", "choices": [{"index": 0, "delta": {"content": "sunny."}}]},
        {"id": "r9", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    span = _mlflow("CHAT_MODEL", {"messages": [{"role": "user", "content": "hi"}], "stream": True})
    span.events = [
        {"name": f"mlflow.chunk.item.{i}", "attributes": {"mlflow.chunk.value": json.dumps(c)}}
        for i, c in enumerate(chunks)
    ]
    mapped = map_span(span)
    assert mapped.output.content == "It is sunny."
    assert mapped.finish_reason == "stop" and mapped.response_id == "r9"


def test_mlflow_stream_tool_call_deltas() -> None:
    delta = [{"index": 0, "id": "c1", "function": {"name": "get_weather", "arguments": '{"ci'}}]
    rest = [{"index": 0, "function": {"arguments": 'ty": "Paris"}'}}]
    span = _mlflow("CHAT_MODEL", {"messages": [{"role": "user", "content": "hi"}]})
    span.events = [
        {
            "name": f"mlflow.chunk.item.{i}",
            "attributes": {
                "mlflow.chunk.value": json.dumps(
                    {"choices": [{"index": 0, "delta": {"tool_calls": d}}]}
                )
            },
        }
        for i, d in enumerate((delta, rest))
    ]
    call = map_span(span).output.tool_calls[0]
    assert (call.id, call.name, call.arguments) == ("c1", "get_weather", {"city": "Paris"})


def test_mlflow_anthropic_and_responses_shapes() -> None:
    anthropic = map_span(
        _mlflow(
            "CHAT_MODEL",
            {
                "model": "claude",
                "system": "be brief",
                "messages": [{"role": "user", "content": "q"}],
            },
            {
                "id": "msg_1",
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "tu1", "name": "f", "input": {"a": 1}}],
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 5, "output_tokens": 6},
            },
        )
    )
    assert [m.role for m in anthropic.input_messages] == ["system", "user"]
    assert anthropic.output.tool_calls[0].arguments == {"a": 1}
    assert anthropic.usage["output_tokens"] == 6
    responses = map_span(
        _mlflow(
            "CHAT_MODEL",
            {
                "instructions": "sys",
                "input": [
                    {"role": "user", "content": "q"},
                    {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                    {"type": "function_call_output", "call_id": "c1", "output": "done"},
                ],
            },
            {
                "id": "resp_1",
                "output": [{"type": "output_text", "text": "ok"}],
                "status": "completed",
            },
        )
    )
    assert [m.role for m in responses.input_messages] == ["system", "user", "assistant", "tool"]
    assert responses.input_messages[-1].tool_call_id == "c1"
    assert responses.output.content == "ok" and responses.finish_reason == "stop"


def test_mlflow_langchain_messages_and_unknown_shapes_are_reported() -> None:
    mapped = map_span(
        _mlflow(
            "CHAT_MODEL",
            [
                [
                    {"type": "human", "content": "q"},
                    {
                        "type": "ai",
                        "content": "",
                        "tool_calls": [{"name": "f", "args": {"x": 1}, "id": "c1"}],
                    },
                ]
            ],
            {"generations": [[{"message": {"type": "ai", "content": "answer"}}]]},
        )
    )
    assert [m.role for m in mapped.input_messages] == ["user", "assistant"]
    assert mapped.input_messages[1].tool_calls[0].arguments == {"x": 1}
    assert mapped.output.content == "answer"
    odd = map_span(_mlflow("CHAT_MODEL", {"weird": 1}, {"nothing": "here"}))
    assert any(i.startswith("content unread: mlflow.spanInputs") for i in odd.issues)
    assert any(i.startswith("content unread: mlflow.spanOutputs") for i in odd.issues)


def test_mlflow_agent_and_chain_kinds() -> None:
    assert map_span(_mlflow("AGENT", {"q": 1})).kind == "agent"
    assert map_span(_mlflow("CHAIN", {"q": 1})).kind == "other"
    assert map_span(_mlflow("RETRIEVER", {"q": 1})).kind == "other"


# ------------------------------------------------------------------------------------------
# Haystack
# ------------------------------------------------------------------------------------------

REPR_INPUT = (
    "{'messages': [ChatMessage(_role=<ChatRole.USER: 'user'>, _content=[TextContent("
    "text='a <b> c')], _name=None, _meta={}), ChatMessage(_role=<ChatRole.ASSISTANT: "
    "'assistant'>, _content=[ToolCall(tool_name='f', arguments={'x': 1}, id='c1', extra=None),"
    " ToolCall(tool_name='g', arguments={}, id='c2', extra=None)], _name=None, _meta={}), "
    "ChatMessage(_role=<ChatRole.TOOL: 'tool'>, _content=[ToolCallResult(result='r1', "
    "origin=ToolCall(tool_name='f', arguments={'x': 1}, id='c1', extra=None), error=False)], "
    "_name=None, _meta={})], 'tools': [Tool(name='f', description='d', parameters={'type': "
    "'object'}, function=<function main.<locals>.f at 0x7f>)]}"
)


def test_python_repr_keeps_angle_brackets_inside_strings() -> None:
    value = python_repr(REPR_INPUT)
    assert value["messages"][0]["_role"] == "user"
    assert value["messages"][0]["_content"][0]["text"] == "a <b> c"
    assert value["tools"][0]["function"] is None
    assert python_repr("{'a': <unclosed") is None


def test_python_repr_never_evaluates() -> None:
    value = python_repr("Foo(x=__import__('os').getcwd())")
    assert value == {"__class__": "Foo", "x": {"__class__": "getcwd"}}  # data, not a call


def test_haystack_repr_input_with_several_calls_and_streamed_reply() -> None:
    reply = {
        "replies": [
            {
                "role": "assistant",
                "content": [{"text": "It is sunny."}],
                "meta": {
                    "model": "m-2",
                    "finish_reason": "stop",
                    "completion_start_time": "2026-01-01T00:00:00",  # a streamed reply
                    "usage": {"input_tokens": 9, "output_tokens": 2},
                },
            }
        ]
    }
    span = _span(
        "haystack.agent.step.llm",
        {
            "haystack.agent.step.llm.input": REPR_INPUT,
            "haystack.agent.step.llm.output": json.dumps(reply),
        },
        scope_name="haystack",
    )
    mapped = map_span(span)
    assert mapped.kind == "llm" and mapped.source == "haystack"
    assert [m.role for m in mapped.input_messages] == ["user", "assistant", "tool"]
    assert [c.id for c in mapped.input_messages[1].tool_calls] == ["c1", "c2"]
    assert mapped.input_messages[2].tool_call_id == "c1"
    assert mapped.input_messages[2].content == "r1"
    assert mapped.tools_available[0]["name"] == "f"
    assert mapped.output.content == "It is sunny." and mapped.response_model == "m-2"
    assert mapped.usage["input_tokens"] == 9 and mapped.finish_reason == "stop"


def test_haystack_unreadable_input_and_error_are_reported() -> None:
    span = _span(
        "haystack.agent.step.llm",
        {
            "haystack.agent.step.llm.input": "{'messages': <broken",
            "haystack.agent.step.llm.output": "x",
        },
    )
    span.status_code, span.status_message = "ERROR", "APIConnectionError"
    mapped = map_span(span)
    assert mapped.error == "APIConnectionError"
    unread = [i for i in mapped.issues if i.startswith("content unread: ")]
    assert len(unread) == 2


def test_haystack_generator_component_and_tool_invoker() -> None:
    generator = _span(
        "haystack.component.run",
        {
            "haystack.component.type": "OpenAIChatGenerator",
            "haystack.component.input": json.dumps(
                {"messages": [{"role": "user", "content": [{"text": "q"}], "meta": {}}]}
            ),
            "haystack.component.output": json.dumps(
                {
                    "replies": [
                        {
                            "role": "assistant",
                            "content": [
                                {"tool_call": {"tool_name": "f", "arguments": {"x": 1}, "id": "c1"}}
                            ],
                            "meta": {"finish_reason": "tool_calls"},
                        }
                    ]
                }
            ),
        },
    )
    mapped = map_span(generator)
    assert mapped.kind == "llm" and mapped.output.tool_calls[0].id == "c1"
    assert mapped.finish_reason == "tool_call"
    assistant = {
        "role": "assistant",
        "content": [{"tool_call": {"tool_name": "f", "arguments": {"x": 1}, "id": "c1"}}],
    }
    result = {
        "role": "tool",
        "content": [
            {
                "tool_call_result": {
                    "result": "r",
                    "origin": {"tool_name": "f", "arguments": {"x": 1}, "id": "c1"},
                    "error": False,
                }
            }
        ],
    }
    invoker = _span(
        "haystack.component.run",
        {
            "haystack.component.type": "ToolInvoker",
            "haystack.component.input": json.dumps({"messages": [assistant]}),
            "haystack.component.output": json.dumps({"tool_messages": [result]}),
        },
    )
    tool = map_span(invoker)
    assert (tool.kind, tool.tool_name, tool.tool_call_id, tool.tool_result) == (
        "tool",
        "f",
        "c1",
        "r",
    )
    assert tool.tool_args == {"x": 1}
    two = _span(
        "haystack.component.run",
        {
            "haystack.component.type": "ToolInvoker",
            "haystack.component.output": json.dumps({"tool_messages": [result, result]}),
        },
    )
    many = map_span(two)
    assert many.kind == "other" and any("2 tool calls" in i for i in many.issues)


def test_haystack_tool_span_and_containers() -> None:
    tool = map_span(
        _span(
            "haystack.agent.step.tool",
            {
                "haystack.tool.name": "f",
                "haystack.agent.step.tool.input": "{'x': 1}",  # a repr when not JSON-able
                "haystack.agent.step.tool.output": "r",
            },
        )
    )
    assert (tool.kind, tool.name, tool.tool_args, tool.tool_result) == ("tool", "f", {"x": 1}, "r")
    agent = map_span(_span("haystack.agent.run", {"haystack.agent.input": "{}"}))
    assert agent.kind == "agent" and agent.episode_boundary
    assert any("haystack.agent.input not read" in i for i in agent.issues)
    assert map_span(_span("haystack.agent.step", {"haystack.agent.step": 0})).kind == "other"


values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=60),
    st.sampled_from(['"CHAT_MODEL"', '"TOOL"', "{'messages': [", "[[{}]]", '{"replies": [1]}']),
    st.lists(st.text(max_size=5), max_size=3),
)
KEYS = st.sampled_from(
    [
        "mlflow.spanType",
        "mlflow.spanInputs",
        "mlflow.spanOutputs",
        "mlflow.chat.tokenUsage",
        "mlflow.llm.model",
        "mlflow.chat.tools",
        "mlflow.chat.messages",
        "haystack.agent.step.llm.input",
        "haystack.agent.step.llm.output",
        "haystack.agent.step.tool.input",
        "haystack.agent.step.tool.output",
        "haystack.tool.name",
        "haystack.component.type",
        "haystack.component.input",
        "haystack.component.output",
    ]
)
NAMES = st.sampled_from(
    [
        "haystack.agent.step.llm",
        "haystack.agent.step.tool",
        "haystack.agent.run",
        "haystack.component.run",
        "x",
    ]
)


@settings(max_examples=300, deadline=None)
@given(NAMES, st.dictionaries(KEYS, values, max_size=8), st.sampled_from(["OK", "ERROR", "UNSET"]))
def test_mappers_never_raise_on_arbitrary_values(name: str, attributes: dict, status: str) -> None:
    span = _span(name, attributes, status_code=status)
    for mapper in (MLflowMapper(), HaystackMapper()):
        if mapper.claim(span) is not None:
            mapper.map(span, ())  # directly: map_span would hide a raise behind the fallback
