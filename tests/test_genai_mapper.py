"""The OTel GenAI mapper on synthetic spans: every content form and its pitfalls."""

from __future__ import annotations

import json

from otelcar.conventions import map_span
from otelcar.messages import Message, ToolCall
from tests.synth import calls, chat, log, responses, span, text


def test_v137_messages_system_instructions_tools_and_finish_reason():
    s = chat(
        "1",
        [text("user", "hi"), calls(("c1", "f", {"x": 1})), responses(("c1", "ok"))],
        [
            {
                "role": "assistant",
                "parts": [{"type": "text", "content": "done"}],
                "finish_reason": "stop",
            }
        ],
        attributes={
            "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "sys"}]),
            "gen_ai.tool.definitions": json.dumps(
                [{"type": "function", "name": "f", "parameters": {"type": "object"}}]
            ),
            "gen_ai.response.finish_reasons": ["tool_calls"],
            "gen_ai.request.temperature": 0.5,
            "gen_ai.request.seed": 3,
            "gen_ai.usage.input_tokens": 10,
            "gen_ai.usage.output_tokens": 2,
            "gen_ai.response.model": "m-2024",
            "custom.attr": "kept",
        },
    )
    mapped = map_span(s)
    assert mapped.kind == "llm" and mapped.name == "m-2024"
    assert mapped.input_messages == [
        Message("system", "sys"),
        Message("user", "hi"),
        Message("assistant", None, (ToolCall("f", {"x": 1}, "c1"),)),
        Message("tool", "ok", tool_call_id="c1"),
    ]
    assert mapped.output == Message("assistant", "done")
    assert mapped.finish_reason == "tool_call"  # span attribute wins, normalized
    assert mapped.tools_available == [
        {"type": "function", "name": "f", "description": None, "parameters": '{"type": "object"}'}
    ]
    assert mapped.params["temperature"] == 0.5 and mapped.params["seed"] == 3
    assert mapped.usage["input_tokens"] == 10 and mapped.usage["output_tokens"] == 2
    assert mapped.source == "otel-genai 1.37+"
    assert "custom.attr" not in mapped.consumed
    assert "gen_ai.input.messages" in mapped.consumed


def test_tool_call_response_result_spelling_and_raw_string_arguments():
    s = chat(
        "1",
        [
            {
                "role": "tool",
                "parts": [{"type": "tool_call_response", "id": "c", "result": {"a": 1}}],
            }
        ],
        [
            {
                "role": "assistant",
                "parts": [{"type": "tool_call", "id": "d", "name": "g", "arguments": "{not json"}],
            }
        ],
    )
    mapped = map_span(s)
    assert mapped.input_messages == [Message("tool", '{"a": 1}', tool_call_id="c")]
    assert mapped.output.tool_calls == (ToolCall("g", "{not json", "d"),)


def test_truncated_content_is_reported_and_left_in_attributes():
    s = chat("1", [], [], attributes={"gen_ai.input.messages": '[{"role":"user","parts":[{"ty'})
    mapped = map_span(s)
    assert mapped.input_messages is None
    assert mapped.content_truncated
    assert any("not valid JSON" in issue for issue in mapped.issues)
    assert "gen_ai.input.messages" not in mapped.consumed


def test_details_event_is_the_fallback_for_content():
    s = span("1", "chat m", {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai"})
    details = log(
        "1",
        "gen_ai.client.inference.operation.details",
        {},
        attributes={
            "gen_ai.input.messages": [text("user", "from event")],
            "gen_ai.output.messages": [
                {
                    "role": "assistant",
                    "parts": [{"type": "text", "content": "answer"}],
                    "finish_reason": "stop",
                }
            ],
        },
    )
    mapped = map_span(s, [details])
    assert mapped.input_messages == [Message("user", "from event")]
    assert mapped.output == Message("assistant", "answer")
    assert mapped.finish_reason == "stop"


def test_legacy_log_events_in_order_with_choices():
    s = span("1", "chat m", {"gen_ai.operation.name": "chat", "gen_ai.system": "openai"})
    events = [
        log("1", "gen_ai.system.message", {"content": "sys"}, observed=1, seq=1),
        log("1", "gen_ai.user.message", {"content": "hi"}, observed=2, seq=2),
        log(
            "1",
            "gen_ai.assistant.message",
            {
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "f", "arguments": '{"x": 1}'},
                    }
                ]
            },
            observed=3,
            seq=3,
        ),
        log("1", "gen_ai.tool.message", {"content": "r", "id": "c1"}, observed=4, seq=4),
        log(
            "1",
            "gen_ai.choice",
            {"index": 1, "finish_reason": "stop", "message": {"content": "second"}},
            observed=5,
            seq=5,
        ),
        log(
            "1",
            "gen_ai.choice",
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "g"}}],
                },
            },
            observed=5,
            seq=6,
        ),
    ]
    mapped = map_span(s, events)
    assert mapped.provider == "openai"
    assert [m.role for m in mapped.input_messages] == ["system", "user", "assistant", "tool"]
    assert mapped.input_messages[2].tool_calls == (ToolCall("f", {"x": 1}, "c1"),)
    assert mapped.input_messages[3] == Message("tool", "r", tool_call_id="c1")
    assert mapped.output.tool_calls == (ToolCall("g", None, "c2"),)
    assert mapped.alternates == [Message("assistant", "second")]
    assert mapped.n_choices == 2
    assert mapped.finish_reason == "tool_call"
    assert mapped.source == "otel-genai 1.28 events"
    assert mapped.has_content()


def test_v126_span_events_json_or_python_repr():
    s = span(
        "1",
        "chat m",
        {"gen_ai.operation.name": "chat"},
        events=[
            {
                "name": "gen_ai.content.prompt",
                "time_ns": 1,
                "attributes": {"gen_ai.prompt": "[{'role': 'user', 'content': 'hi'}]"},
            },
            {
                "name": "gen_ai.content.completion",
                "time_ns": 2,
                "attributes": {"gen_ai.completion": '[{"role": "assistant", "content": "yo"}]'},
            },
        ],
    )
    mapped = map_span(s)
    assert mapped.input_messages == [Message("user", "hi")]
    assert mapped.output == Message("assistant", "yo")


def test_tool_and_agent_spans_and_unknown_llm_dialect():
    t = map_span(
        span(
            "2",
            "execute_tool lookup",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "lookup",
                "gen_ai.tool.call.id": "c1",
                "gen_ai.tool.call.arguments": '{"id": 3}',
                "gen_ai.tool.call.result": {"ok": True},
            },
        )
    )
    assert (t.kind, t.name, t.tool_call_id, t.tool_args, t.tool_result) == (
        "tool",
        "lookup",
        "c1",
        {"id": 3},
        '{"ok": true}',
    )
    a = map_span(
        span(
            "3",
            "invoke_agent planner",
            {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"},
        )
    )
    assert (a.kind, a.name, a.episode_boundary) == ("agent", "planner", True)
    # No registered dialect reads acme.*: message-shaped content there is said, whatever the
    # namespace; a short plain value is no content.
    unknown = map_span(
        span("4", "acme.chat", {"acme.prompt": '[{"role": "user", "content": "hi"}]'})
    )
    assert unknown.kind == "other"
    assert any(issue.startswith("content unread: acme.prompt") for issue in unknown.issues)
    assert map_span(span("6", "acme.x", {"llm.acme.prompt": "hi"})).issues == []
    http = map_span(span("5", "GET /x", {"http.request.method": "GET"}))
    assert (http.kind, http.issues) == ("other", [])
