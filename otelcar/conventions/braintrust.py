"""Braintrust's span processor and its ``braintrust.*`` ingestion attributes.

The Braintrust SDK (``BraintrustSpanProcessor``, ``@traced``, ``wrap_openai`` under OTel
compatibility) writes a logged span's fields as attributes, each JSON text:

- ``braintrust.span_attributes``: ``{"type", "name"}``; ``type`` ``llm`` → ``llm``, ``tool``
  → ``tool``, ``task`` / ``eval`` → ``agent``; ``function`` (any ``@traced`` function),
  ``score`` and the rest → ``other``.
- ``braintrust.input_json`` / ``braintrust.input``: an LLM span's OpenAI-style messages
  (a list, or ``{"messages": [...]}`` with request parameters beside them); a tool span's
  arguments.
- ``braintrust.output_json`` / ``braintrust.output``: an LLM span's reply — a list of
  messages, a list of OpenAI choices (``{"message", "finish_reason"}``), one message, or text;
  a tool span's result.
- ``braintrust.metadata``: ``model``, ``provider``, request parameters and ``tools``.
- ``braintrust.metrics``: ``prompt_tokens``, ``completion_tokens``, ``tokens``,
  ``prompt_cached_tokens``, ``completion_reasoning_tokens``.
- ``braintrust.scores`` / ``expected`` / ``tags`` / ``context_json``: evaluation data, kept
  in the step's attributes (not step content).

``gen_ai.request.model`` / ``gen_ai.response.model`` beside them are read as models.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from otelcar.conventions.base import Attrs, MappedSpan
from otelcar.conventions.genai import messages_from_any, tool_definitions
from otelcar.conventions.memo import decode_json
from otelcar.conventions.openai_shapes import count, read_reply, request_params, tool_choice_text
from otelcar.ingest.frames import LogFrame, SpanFrame
from otelcar.messages import parse_arguments, text_of

NAME = "braintrust"
PRIORITY = 15  # before the GenAI mapper: the spans carry a gen_ai.* model or two
PREFIX = "braintrust."
SPAN_ATTRIBUTES = PREFIX + "span_attributes"
INPUT = (PREFIX + "input_json", PREFIX + "input")
OUTPUT = (PREFIX + "output_json", PREFIX + "output")
METADATA = PREFIX + "metadata"
METRICS = PREFIX + "metrics"
PARENT_TYPES = frozenset({"task", "eval"})
USAGE = {
    "input_tokens": "prompt_tokens",
    "output_tokens": "completion_tokens",
    "cache_read_tokens": "prompt_cached_tokens",
    "reasoning_tokens": "completion_reasoning_tokens",
    "total_tokens": "tokens",
}


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return decode_json(value)
        except ValueError:
            return value
    return value


def _span_type(span: SpanFrame) -> tuple[str | None, str | None] | None:
    """``(type, name)`` of ``braintrust.span_attributes``; ``None`` when the span has no
    ``braintrust.*`` field at all."""
    if not any(key.startswith(PREFIX) for key in span.attributes):
        return None
    value = _json(span.attributes.get(SPAN_ATTRIBUTES))
    if not isinstance(value, dict):
        return (None, None)
    kind, name = value.get("type"), value.get("name")
    return (
        kind.lower() if isinstance(kind, str) else None,
        name if isinstance(name, str) else None,
    )


class BraintrustMapper:
    """Mapper for spans written by Braintrust's SDK (see the module docstring)."""

    name = NAME

    def claim(self, span: SpanFrame) -> int | None:
        return PRIORITY if _span_type(span) is not None else None

    def map(self, span: SpanFrame, logs: Sequence[LogFrame]) -> MappedSpan:
        del logs  # the SDK records everything on its spans
        consumed: set[str] = set()
        attrs = Attrs(span.attributes, consumed)
        span_type, span_name = _span_type(span) or (None, None)
        attrs.get(SPAN_ATTRIBUTES)
        name = span_name or span.name
        if span_type == "llm":
            kind = "llm"
        elif span_type == "tool":
            kind = "tool"
        elif span_type in PARENT_TYPES:
            kind = "agent"
        else:
            kind = "other"
        mapped = MappedSpan(kind=kind, name=name, source=NAME, operation=span_type)
        metadata = _json(attrs.get(METADATA))
        metadata = metadata if isinstance(metadata, dict) else {}
        if kind == "llm":
            _map_llm(attrs, metadata, mapped)
        elif kind == "tool":
            _map_tool(attrs, mapped)
        elif kind == "agent":
            mapped.agent_name = name
        return mapped


def _map_llm(attrs: Attrs, metadata: dict[str, Any], mapped: MappedSpan) -> None:
    model = text_of(metadata.get("model"))
    mapped.request_model = attrs.text("gen_ai.request.model") or model
    mapped.response_model = attrs.text("gen_ai.response.model") or model
    mapped.provider = text_of(metadata.get("provider")) or attrs.text("gen_ai.system")
    raw_input = _json(attrs.first(*INPUT))
    request = raw_input if isinstance(raw_input, dict) and "messages" in raw_input else {}
    settings = {**metadata, **request}
    mapped.params = request_params(settings)
    mapped.tool_choice = tool_choice_text(settings.get("tool_choice"))
    tools = settings.get("tools")
    if isinstance(tools, list):
        mapped.tools_available = tool_definitions(tools, mapped.issues)
    if raw_input is not None:
        messages = messages_from_any(request.get("messages", raw_input), mapped.issues, "input")
        if messages is None:
            mapped.issues.append("braintrust.input is not a list of messages; not read")
        else:
            mapped.input_messages = messages
    raw_output = _json(attrs.first(*OUTPUT))
    if raw_output is not None:
        read_reply(raw_output, mapped, "braintrust.output")
    metrics = _json(attrs.get(METRICS))
    if isinstance(metrics, dict):
        mapped.usage = {key: count(metrics.get(source)) for key, source in USAGE.items()}
    mapped.name = mapped.response_model or mapped.request_model or mapped.name


def _map_tool(attrs: Attrs, mapped: MappedSpan) -> None:
    mapped.tool_name = mapped.name
    raw_input = attrs.first(*INPUT)
    if raw_input is not None:
        mapped.tool_args = parse_arguments(_json(raw_input))
    raw_output = attrs.first(*OUTPUT)
    if raw_output is not None:
        mapped.tool_result = text_of(raw_output)
