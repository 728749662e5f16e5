"""LiteLLM's raw provider span: ``raw_gen_ai_request``, ``llm.<provider>.*``.

LiteLLM's OpenTelemetry callback writes, under its ``litellm_request`` span (read by the
OpenLLMetry/GenAI mappers), a child span with the provider's request and response as they
went over the wire, one attribute per top-level key, prefixed by the provider
(``llm.openai.messages``, ``llm.openai.choices``, ``llm.openai.tools``, ``llm.openai.usage``,
``llm.openai.id``, ``llm.openai.model``, ``llm.openai.temperature`` …). Lists and objects are
Python reprs (``{'role': 'user', …}``), sometimes JSON.

The span is one model call (``llm``): nested in ``litellm_request`` for the same call, the
two become one step (:mod:`otelcar.trajectory` merges stacked instrumentation), each filling
what the other lacks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from otelcar.conventions.base import Attrs, MappedSpan
from otelcar.conventions.genai import messages_from_any, tool_definitions
from otelcar.conventions.openai_shapes import (
    read_reply,
    request_params,
    tool_choice_text,
    usage_object,
)
from otelcar.ingest.frames import LogFrame, SpanFrame
from otelcar.ingest.jsontext import json_or_literal

NAME = "litellm-raw"
PRIORITY = 12  # before OpenLLMetry and GenAI, which claim any llm.* / gen_ai.* span
_PAYLOAD_KEY = re.compile(r"^llm\.([A-Za-z0-9_-]+)\.(messages|choices)$")
#: Second segments that are other dialects' namespaces, never a provider.
_NOT_PROVIDERS = frozenset({"request", "response", "usage", "input_messages", "output_messages"})


def provider_of(span: SpanFrame) -> str | None:
    """The provider segment of the span's ``llm.<provider>.messages``/``.choices``, if any."""
    for key in span.attributes:
        match = _PAYLOAD_KEY.match(key)
        if match and match.group(1) not in _NOT_PROVIDERS:
            return match.group(1)
    return None


def _value(raw: Any) -> Any:
    """A payload attribute: JSON, else a Python literal, else the text itself."""
    if not isinstance(raw, str):
        return raw
    try:
        return json_or_literal(raw)
    except ValueError:
        return raw


class LiteLLMRawMapper:
    """Mapper for LiteLLM's ``raw_gen_ai_request`` spans (see the module docstring)."""

    name = NAME

    def claim(self, span: SpanFrame) -> int | None:
        return PRIORITY if provider_of(span) is not None else None

    def map(self, span: SpanFrame, logs: Sequence[LogFrame]) -> MappedSpan:
        del logs
        provider = provider_of(span) or ""
        prefix = f"llm.{provider}."
        consumed: set[str] = set()
        attrs = Attrs(span.attributes, consumed)
        request = {
            key[len(prefix) :]: _value(attrs.get(key))
            for key in span.attributes
            if key.startswith(prefix)
        }
        mapped = MappedSpan(
            kind="llm", name=span.name, source=NAME, operation="chat", consumed=consumed
        )
        mapped.provider = provider
        model = request.get("model")
        mapped.response_model = model if isinstance(model, str) and model else None
        mapped.name = mapped.response_model or span.name
        response_id = request.get("id")
        mapped.response_id = response_id if isinstance(response_id, str) and response_id else None
        mapped.params = request_params(request)
        mapped.tool_choice = tool_choice_text(request.get("tool_choice"))
        if "messages" in request:
            messages = messages_from_any(request["messages"], mapped.issues, "input")
            if messages is None:
                mapped.issues.append(f"{prefix}messages is not a list of messages; not read")
            else:
                mapped.input_messages = messages
        tools = request.get("tools")
        if isinstance(tools, list):
            mapped.tools_available = tool_definitions(tools, mapped.issues)
        if "choices" in request:
            read_reply(request["choices"], mapped, f"{prefix}choices")
        mapped.usage = usage_object(request.get("usage"))
        return mapped
