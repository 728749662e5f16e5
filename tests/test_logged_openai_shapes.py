"""Mappers of producers that log OpenAI's request and reply objects whole (Braintrust's
``braintrust.*`` fields, LiteLLM's ``raw_gen_ai_request``): every shape the SDKs log.
The files those producers wrote are read in ``test_external_traces.py``."""

from __future__ import annotations

import json

from otelcar.conventions import map_span
from tests.synth import span

MESSAGES = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Refund order 7?"},
]
CALL = {"id": "c1", "type": "function", "function": {"name": "refund", "arguments": '{"o": 7}'}}
TOOLS = [{"type": "function", "function": {"name": "refund", "parameters": {"type": "object"}}}]


def _braintrust(kind: str, **fields: object) -> dict[str, object]:
    attrs = {"braintrust.span_attributes": json.dumps({"type": kind, "name": "step"})}
    attrs.update({f"braintrust.{k}": json.dumps(v) for k, v in fields.items()})
    return attrs


def test_braintrust_wrap_openai_shape_choices_and_request_in_metadata():
    attrs = _braintrust(
        "llm",
        input_json=MESSAGES,
        output_json=[
            {
                "index": 0,
                "message": {"role": "assistant", "tool_calls": [CALL]},
                "finish_reason": "tool_calls",
            }
        ],
        metadata={"model": "gpt-4o", "temperature": 0.2, "max_tokens": 50, "tools": TOOLS},
        metrics={"prompt_tokens": 9, "completion_tokens": 3, "completion_reasoning_tokens": 1},
    )
    mapped = map_span(span("a", "Chat Completion", attrs))
    assert mapped.kind == "llm" and mapped.source == "braintrust"
    assert [m.role for m in mapped.input_messages] == ["system", "user"]
    assert mapped.output.tool_calls[0].name == "refund" and mapped.output.tool_calls[0].id == "c1"
    assert mapped.finish_reason == "tool_call" and mapped.n_choices == 1
    assert mapped.params["temperature"] == 0.2 and mapped.params["max_tokens"] == 50
    assert [t["name"] for t in mapped.tools_available] == ["refund"]
    assert mapped.usage["input_tokens"] == 9 and mapped.usage["reasoning_tokens"] == 1
    assert mapped.request_model == "gpt-4o"


def test_braintrust_messages_object_input_and_text_output():
    attrs = _braintrust("llm", input={"messages": MESSAGES, "temperature": 0.0}, output="Done.")
    mapped = map_span(span("a", "llm", attrs))
    assert len(mapped.input_messages) == 2 and mapped.params["temperature"] == 0.0
    assert mapped.output.role == "assistant" and mapped.output.content == "Done."


def test_braintrust_tool_task_and_unreadable_content():
    tool = map_span(span("t", "refund", _braintrust("tool", input={"o": 7}, output={"ok": True})))
    assert tool.kind == "tool" and tool.tool_args == {"o": 7}
    assert json.loads(tool.tool_result) == {"ok": True}
    assert map_span(span("k", "run", _braintrust("task"))).kind == "agent"
    assert map_span(span("f", "helper", _braintrust("function"))).kind == "other"
    odd = map_span(span("o", "llm", _braintrust("llm", input=42, output={"x": 1})))
    assert not odd.has_content()
    assert any("braintrust.input" in i for i in odd.issues)
    assert any(i.startswith("content unread: ") for i in odd.issues)


def test_litellm_raw_span_python_reprs():
    choices = [
        {
            "finish_reason": "tool_calls",
            "index": 0,
            "message": {"role": "assistant", "content": None, "tool_calls": [CALL]},
        }
    ]
    attrs = {
        "llm.anthropic.messages": repr(MESSAGES),
        "llm.anthropic.choices": repr(choices),
        "llm.anthropic.tools": repr(TOOLS),
        "llm.anthropic.usage": repr(
            {
                "prompt_tokens": 5,
                "completion_tokens": 2,
                "prompt_tokens_details": {"cached_tokens": 4},
            }
        ),
        "llm.anthropic.id": "msg_1",
        "llm.anthropic.model": "claude-x",
        "llm.anthropic.temperature": 0.3,
    }
    mapped = map_span(span("r", "raw_gen_ai_request", attrs))
    assert mapped.kind == "llm" and mapped.provider == "anthropic"
    assert mapped.response_id == "msg_1" and mapped.name == "claude-x"
    assert len(mapped.input_messages) == 2 and mapped.output.tool_calls[0].name == "refund"
    assert mapped.usage["cache_read_tokens"] == 4 and mapped.params["temperature"] == 0.3
    assert mapped.finish_reason == "tool_call"


def test_openinference_and_openllmetry_llm_keys_are_not_litellm_providers():
    oi = map_span(span("o", "llm", {"llm.input_messages.0.message.role": "user", "llm.usage.x": 1}))
    assert oi.source != "litellm-raw"


def test_tool_call_reprs_in_text_parts_are_read_never_evaluated():
    from otelcar.conventions.python_reprs import tool_call_from_repr

    responses = tool_call_from_repr(
        "ResponseFunctionToolCall(arguments='{\"city\": \"Paris\"}', call_id='call_1', "
        "name='get_weather', type='function_call', id='fc_1', status='completed')"
    )
    assert responses.name == "get_weather" and responses.id == "call_1"
    assert responses.arguments == {"city": "Paris"}
    chat = tool_call_from_repr(
        "ChatCompletionMessageToolCall(id='call_2', function=Function(arguments='{}', "
        "name='refund'), type='function')"
    )
    assert chat.name == "refund" and chat.id == "call_2"
    for text in (
        "It is sunny.",
        "ToolCall(name=__import__('os').system('echo no'))",  # not a literal: not read
        "FunctionCall('positional')",
        "ResponseFunctionToolCall(arguments='{}'",  # cut
        "ToolCall(arguments='{}')",  # no name
    ):
        assert tool_call_from_repr(text) is None, text
