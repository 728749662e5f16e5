"""Google ADK's own attributes (``gcp.vertex.agent.*``, the legacy telemetry schema).

With ``ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1`` (and in ADK releases before the GenAI schema),
a model call is a ``call_llm`` span holding the content, around a ``generate_content`` child
holding only metadata (the two merge as stacked instrumentation of one call):

- ``gcp.vertex.agent.llm_request``: JSON ``{model, config: {system_instruction, tools:
  [{function_declarations: [...]}]}, contents: [{role, parts}]}``, Gemini parts (``text``,
  ``function_call {id, name, args}``, ``function_response {id, name, response}``);
- ``gcp.vertex.agent.llm_response``: JSON ``{content: {role, parts}, finish_reason,
  usage_metadata}``.

Tool spans (``execute_tool``) carry ``gcp.vertex.agent.tool_call_args`` and
``gcp.vertex.agent.tool_response`` next to ``gen_ai.tool.name`` / ``gen_ai.tool.call.id``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from otelcar.conventions.base import Attrs, MappedSpan
from otelcar.conventions.blocks import messages_from_blocks, read_blocks
from otelcar.conventions.genai import normalize_finish_reason, tool_definitions
from otelcar.ingest.frames import LogFrame, SpanFrame
from otelcar.messages import Message, parse_arguments, text_of

NAME = "google-adk"
PRIORITY = 15  # before the GenAI mapper, which sees only the gen_ai.* keys beside these
REQUEST, RESPONSE = "gcp.vertex.agent.llm_request", "gcp.vertex.agent.llm_response"
TOOL_ARGS, TOOL_RESPONSE = "gcp.vertex.agent.tool_call_args", "gcp.vertex.agent.tool_response"


def _has_json(attributes: dict[str, Any], key: str) -> bool:
    value = attributes.get(key)
    return isinstance(value, str) and value.strip() not in ("", "{}")


class GoogleADKMapper:
    """Mapper for ADK's ``gcp.vertex.agent.*`` content (see the module docstring)."""

    name = NAME

    def claim(self, span: SpanFrame) -> int | None:
        attrs = span.attributes
        if _has_json(attrs, REQUEST) or _has_json(attrs, RESPONSE):
            return PRIORITY
        if TOOL_ARGS in attrs and attrs.get("gen_ai.operation.name") == "execute_tool":
            return PRIORITY
        return None

    def map(self, span: SpanFrame, logs: Sequence[LogFrame]) -> MappedSpan:
        del logs
        consumed: set[str] = set()
        attrs = Attrs(span.attributes, consumed)
        attrs.get(REQUEST)  # an empty {} on tool spans
        attrs.get(RESPONSE)
        if attrs.text("gen_ai.operation.name") == "execute_tool":
            mapped = MappedSpan(kind="tool", name=span.name, source=NAME, consumed=consumed)
            mapped.tool_name = attrs.text("gen_ai.tool.name")
            mapped.name = mapped.tool_name or span.name
            mapped.tool_call_id = attrs.text("gen_ai.tool.call.id")
            mapped.tool_args = parse_arguments(attrs.get(TOOL_ARGS))
            mapped.tool_result = text_of(attrs.get(TOOL_RESPONSE))  # unwrapped by map_span
            mapped.agent_name = attrs.text("gen_ai.agent.name")
            return mapped
        mapped = MappedSpan(kind="llm", name=span.name, source=NAME, consumed=consumed)
        mapped.provider = attrs.text("gen_ai.system")
        mapped.request_model = attrs.text("gen_ai.request.model")
        mapped.conversation_id = attrs.text("gcp.vertex.agent.session_id")
        request = attrs.json(REQUEST, mapped.issues)
        if isinstance(request, dict):
            _read_request(request, mapped)
        response = attrs.json(RESPONSE, mapped.issues)
        if isinstance(response, dict):
            _read_response(response, mapped)
        mapped.name = mapped.response_model or mapped.request_model or span.name
        mapped.usage.update(
            {
                "input_tokens": attrs.int("gen_ai.usage.input_tokens"),
                "output_tokens": attrs.int("gen_ai.usage.output_tokens"),
                "cache_read_tokens": attrs.int("gen_ai.usage.cache_read.input_tokens"),
            }
        )
        attrs.get("gen_ai.response.finish_reasons")
        return mapped


def _contents(items: Any, mapped: MappedSpan, where: str) -> list[Message]:
    out: list[Message] = []
    for item in items if isinstance(items, list) else [items]:
        if not isinstance(item, dict):
            continue
        blocks = read_blocks(item.get("parts"), parse_json=False)
        for kind in blocks.unknown:
            mapped.issues.append(f"{where}: Gemini part {kind!r} is not represented")
        out.extend(messages_from_blocks(str(item.get("role") or "user"), blocks))
    return out


def _read_request(request: dict[str, Any], mapped: MappedSpan) -> None:
    config = request.get("config") if isinstance(request.get("config"), dict) else {}
    messages = []
    system = config.get("system_instruction")
    if system is not None:
        messages.append(Message(role="system", content=read_blocks(system).text))
    messages += _contents(request.get("contents") or [], mapped, REQUEST)
    mapped.input_messages = messages
    mapped.request_model = mapped.request_model or text_of(request.get("model"))
    declarations = [
        declaration
        for tool in config.get("tools") or ()
        if isinstance(tool, dict)
        for declaration in tool.get("function_declarations") or ()
    ]
    if declarations:
        mapped.tools_available = tool_definitions(declarations, mapped.issues, "config.tools")
    for key, name in (("temperature", "temperature"), ("top_p", "top_p"), ("top_k", "top_k")):
        if isinstance(config.get(name), int | float):
            mapped.params[key] = float(config[name])
    if isinstance(config.get("max_output_tokens"), int):
        mapped.params["max_tokens"] = config["max_output_tokens"]


def _read_response(response: dict[str, Any], mapped: MappedSpan) -> None:
    content = response.get("content")
    if isinstance(content, dict):
        choices = _contents([content], mapped, RESPONSE)
        if choices:
            mapped.output = choices[0]
            mapped.n_choices = 1
    mapped.response_model = text_of(response.get("model_version"))
    reason = response.get("finish_reason")
    mapped.finish_reason = normalize_finish_reason(
        str(reason).lower() if isinstance(reason, str) else reason
    )
    usage = response.get("usage_metadata")
    if isinstance(usage, dict):
        mapped.usage.setdefault("total_tokens", usage.get("total_token_count"))
