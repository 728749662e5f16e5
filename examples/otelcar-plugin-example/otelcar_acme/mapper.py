"""The ACME dialect: a made-up instrumentation whose spans carry their content as JSON.

| attribute | on | holds |
|---|---|---|
| ``acme.agent.name`` | the run's root span | the agent's name (an ``agent`` step, an episode) |
| ``acme.llm.prompt`` | a model call | JSON list of ACME messages: the context |
| ``acme.llm.completion`` | a model call | one JSON ACME message: the answer |
| ``acme.llm.model``, ``acme.llm.temperature`` | a model call | model name, temperature |
| ``acme.llm.tokens.in`` / ``.out`` | a model call | token counts |
| ``acme.tool.name``, ``acme.tool.call_id`` | a tool run | tool name, call id |
| ``acme.tool.input``, ``acme.tool.output`` | a tool run | JSON arguments, result text |

An ACME message is ``{"role", "text", "calls": [{"id", "tool", "input"}], "call_id"}``: the
mapper turns it into otelcar's normalized :class:`~otelcar.Message` (``text`` → content,
``calls`` → tool calls, ``call_id`` → the tool call a ``tool`` message answers). As every
mapper must, it never raises for bad content: an attribute that is not valid JSON is reported
among the step's issues and left in its attributes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from otelcar.conventions.base import Attrs, MappedSpan
from otelcar.ingest.frames import LogFrame, SpanFrame
from otelcar.messages import Message, ToolCall, parse_arguments

NAME = "acme"
PRIORITY = 20  # as specific as the built-in dialects (lower wins; the generic mapper is 1000)
PROMPT = "acme.llm.prompt"
COMPLETION = "acme.llm.completion"
TOOL = "acme.tool.name"
AGENT = "acme.agent.name"


class AcmeMapper:
    """Maps ACME spans (see the module docstring) to steps."""

    name = NAME

    def claim(self, span: SpanFrame) -> int | None:
        attributes = span.attributes
        if PROMPT in attributes or COMPLETION in attributes or TOOL in attributes:
            return PRIORITY
        return PRIORITY if AGENT in attributes else None

    def map(self, span: SpanFrame, logs: Sequence[LogFrame]) -> MappedSpan:
        del logs  # ACME puts everything on the span
        consumed: set[str] = set()
        attrs = Attrs(span.attributes, consumed)
        if TOOL in span.attributes:
            return self._tool(span, attrs, consumed)
        if PROMPT in span.attributes or COMPLETION in span.attributes:
            return self._llm(span, attrs, consumed)
        mapped = MappedSpan(kind="agent", name=span.name, source=NAME, consumed=consumed)
        mapped.agent_name = attrs.text(AGENT)
        mapped.episode_boundary = True
        return mapped

    def _llm(self, span: SpanFrame, attrs: Attrs, consumed: set[str]) -> MappedSpan:
        mapped = MappedSpan(kind="llm", name=span.name, source=NAME, consumed=consumed)
        mapped.operation = "chat"
        mapped.request_model = mapped.response_model = attrs.text("acme.llm.model")
        temperature = attrs.float("acme.llm.temperature")
        if temperature is not None:
            mapped.params["temperature"] = temperature
        mapped.usage = {
            "input_tokens": attrs.int("acme.llm.tokens.in"),
            "output_tokens": attrs.int("acme.llm.tokens.out"),
        }
        prompt = attrs.json(PROMPT, mapped.issues)
        if isinstance(prompt, list):
            mapped.input_messages = [_message(item) for item in prompt]
        elif prompt is not None:
            mapped.issues.append(f"{PROMPT} is a {type(prompt).__name__}, not a list")
        completion = attrs.json(COMPLETION, mapped.issues)
        if isinstance(completion, dict):
            mapped.output = _message({"role": "assistant", **completion})
            mapped.finish_reason = "tool_calls" if mapped.output.tool_calls else "stop"
        elif completion is not None:
            mapped.issues.append(f"{COMPLETION} is a {type(completion).__name__}, not an object")
        return mapped

    def _tool(self, span: SpanFrame, attrs: Attrs, consumed: set[str]) -> MappedSpan:
        mapped = MappedSpan(kind="tool", name=span.name, source=NAME, consumed=consumed)
        mapped.operation = "execute_tool"
        mapped.tool_name = attrs.text(TOOL)
        mapped.tool_call_id = attrs.text("acme.tool.call_id")
        mapped.tool_args = parse_arguments(attrs.get("acme.tool.input"))  # bad JSON stays text
        mapped.tool_result = attrs.text("acme.tool.output")
        if span.status_code == "ERROR":
            mapped.error = span.status_message or "error"
        return mapped


def _message(item: Any) -> Message:
    """An ACME message as a normalized one (anything that is not an object becomes text)."""
    if not isinstance(item, dict):
        return Message("user", str(item))
    calls = tuple(
        ToolCall(call.get("tool"), parse_arguments(call.get("input")), call.get("id"))
        for call in item.get("calls") or ()
        if isinstance(call, dict)
    )
    text = item.get("text")
    return Message(
        role=str(item.get("role") or "user"),
        content=text if isinstance(text, str) else None,
        tool_calls=calls,
        tool_call_id=item.get("call_id"),
    )
