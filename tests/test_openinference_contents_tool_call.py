"""OpenInference's Anthropic instrumentation writes a ``tool_use`` block both under
``message.tool_calls`` and as a content part (``message.contents.{k}.tool_call.*``): the part
is that tool call, kept once and not reported as unrepresented; alone it is still read."""

from __future__ import annotations

from otelcar.conventions import map_span
from tests.synth import span

CALL = {
    "tool_call.id": "toolu_weather_1",
    "tool_call.function.name": "get_weather",
    "tool_call.function.arguments": '{"city": "Paris"}',
}


def _llm(with_tool_calls: bool) -> dict:
    attrs = {
        "openinference.span.kind": "LLM",
        "llm.model_name": "claude-small",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "What is the weather in Paris?",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.contents.0.message_content.type": "tool_use",
    }
    for field, value in CALL.items():
        attrs[f"llm.output_messages.0.message.contents.0.{field}"] = value
        if with_tool_calls:
            attrs[f"llm.output_messages.0.message.tool_calls.0.{field}"] = value
    return attrs


def test_tool_use_part_beside_tool_calls_is_the_same_call_without_issue() -> None:
    mapped = map_span(span("a", "messages.create", _llm(True)))
    calls = mapped.output.tool_calls
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("toolu_weather_1", "get_weather", {"city": "Paris"})
    ]
    assert not [i for i in mapped.issues if "not represented" in i], mapped.issues


def test_tool_use_part_alone_is_read_as_the_tool_call() -> None:
    mapped = map_span(span("a", "messages.create", _llm(False)))
    assert [c.id for c in mapped.output.tool_calls] == ["toolu_weather_1"]
    assert not [i for i in mapped.issues if "not represented" in i], mapped.issues
