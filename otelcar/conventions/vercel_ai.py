"""The Vercel AI SDK's telemetry (``experimental_telemetry``): ``ai.*`` spans, v4 to v6.

Every span carries ``ai.operationId``:

- ``ai.generateText.doGenerate`` / ``ai.streamText.doStream`` / ``ai.generateObject.doGenerate``
  / ``ai.streamObject.doStream``: one model call (``llm``). Input ``ai.prompt.messages`` (the
  SDK's messages: string content or ``text`` / ``tool-call`` / ``tool-result`` parts), tools
  ``ai.prompt.tools`` (JSON strings, ``inputSchema`` from v5, ``parameters`` before), output
  ``ai.response.text`` and ``ai.response.toolCalls`` (``input`` from v5, ``args`` before) or
  ``ai.response.object``, ``ai.response.finishReason`` (``tool-calls`` → ``tool_call``),
  ``ai.response.{id,model}``, settings ``ai.settings.*``, usage ``ai.usage.*`` (v6
  ``inputTokens``/``outputTokens``/``totalTokens``, v4/v5 ``promptTokens``/``completionTokens``).
- ``ai.toolCall``: a tool execution, ``ai.toolCall.{name,id,args,result}`` (``input``/``output``
  in later versions).
- ``ai.generateText`` / ``ai.streamText`` / ``ai.generateObject`` / ``ai.streamObject``: the
  call the user made, a loop of model calls and tools (``agent``, named by
  ``ai.telemetry.functionId``).
- ``ai.embed`` / ``ai.embedMany`` and their ``doEmbed``: ``other``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from otelcar.conventions.base import Attrs, MappedSpan
from otelcar.conventions.blocks import messages_from_blocks, read_blocks
from otelcar.conventions.genai import tool_definitions
from otelcar.conventions.normalize import tool_calls
from otelcar.conventions.openai_shapes import tool_choice_text
from otelcar.ingest.frames import LogFrame, SpanFrame
from otelcar.messages import Message, ToolCall, parse_arguments, text_of

NAME = "vercel-ai"
PRIORITY = 10  # before the GenAI mapper: these spans carry a few gen_ai.* keys too
MODEL_CALLS = frozenset(
    {
        "ai.generateText.doGenerate",
        "ai.streamText.doStream",
        "ai.generateObject.doGenerate",
        "ai.streamObject.doStream",
    }
)
CALLS = frozenset({"ai.generateText", "ai.streamText", "ai.generateObject", "ai.streamObject"})
TOOL_CALL = "ai.toolCall"
FINISH_REASONS = {"tool-calls": "tool_call", "content-filter": "content_filter"}
SETTINGS = {
    "temperature": "ai.settings.temperature",
    "top_p": "ai.settings.topP",
    "top_k": "ai.settings.topK",
    "max_tokens": ("ai.settings.maxOutputTokens", "ai.settings.maxTokens"),
    "seed": "ai.settings.seed",
    "frequency_penalty": "ai.settings.frequencyPenalty",
    "presence_penalty": "ai.settings.presencePenalty",
}
INT_SETTINGS = frozenset({"max_tokens", "seed"})


def operation_id(span: SpanFrame) -> str | None:
    value = span.attributes.get("ai.operationId")
    return value if isinstance(value, str) and value.startswith("ai.") else None


class VercelAIMapper:
    """Mapper for the Vercel AI SDK's spans (see the module docstring)."""

    name = NAME

    def claim(self, span: SpanFrame) -> int | None:
        return PRIORITY if operation_id(span) is not None else None

    def map(self, span: SpanFrame, logs: Sequence[LogFrame]) -> MappedSpan:
        del logs  # the SDK records everything on its spans
        consumed: set[str] = set()
        attrs = Attrs(span.attributes, consumed)
        op = attrs.text("ai.operationId")
        attrs.get("operation.name")
        if op in MODEL_CALLS:
            kind = "llm"
        elif op == TOOL_CALL:
            kind = "tool"
        elif op in CALLS:
            kind = "agent"
        else:
            kind = "other"
        mapped = MappedSpan(kind=kind, name=span.name, source=NAME, operation=op, consumed=consumed)
        mapped.provider = attrs.text("ai.model.provider", "gen_ai.system")
        mapped.request_model = attrs.text("ai.model.id", "gen_ai.request.model")
        function_id = attrs.text("ai.telemetry.functionId")
        if kind == "llm":
            _map_model_call(attrs, mapped)
        elif kind == "tool":
            _map_tool(attrs, mapped)
        elif kind == "agent":
            mapped.name = function_id or span.name
            mapped.agent_name = function_id
            mapped.episode_boundary = True
        return mapped


def _map_model_call(attrs: Attrs, mapped: MappedSpan) -> None:
    mapped.response_model = attrs.text("ai.response.model", "gen_ai.response.model")
    mapped.response_id = attrs.text("ai.response.id", "gen_ai.response.id")
    mapped.name = mapped.response_model or mapped.request_model or mapped.name
    reason = attrs.text("ai.response.finishReason")
    mapped.finish_reason = FINISH_REASONS.get(reason or "", reason)
    attrs.get("gen_ai.response.finish_reasons")
    for key, names in SETTINGS.items():
        keys = names if isinstance(names, tuple) else (names,)
        mapped.params[key] = attrs.int(*keys) if key in INT_SETTINGS else attrs.float(*keys)
    stop = attrs.get("ai.settings.stopSequences")
    mapped.params["stop"] = [str(s) for s in stop] if isinstance(stop, list) else None
    mapped.usage = {
        "input_tokens": attrs.int(
            "ai.usage.inputTokens", "ai.usage.promptTokens", "gen_ai.usage.input_tokens"
        ),
        "output_tokens": attrs.int(
            "ai.usage.outputTokens", "ai.usage.completionTokens", "gen_ai.usage.output_tokens"
        ),
        "cache_read_tokens": attrs.int(
            "ai.usage.cachedInputTokens", "ai.usage.inputTokenDetails.cacheReadTokens"
        ),
        "reasoning_tokens": attrs.int(
            "ai.usage.reasoningTokens", "ai.usage.outputTokenDetails.reasoningTokens"
        ),
        "total_tokens": attrs.int("ai.usage.totalTokens"),
    }
    prompt = attrs.json("ai.prompt.messages", mapped.issues)
    if prompt is not None:
        mapped.input_messages = _messages(prompt, mapped.issues)
    tools = attrs.get("ai.prompt.tools")
    if tools is not None:
        items = tools if isinstance(tools, list) else [tools]
        mapped.tools_available = tool_definitions(items, mapped.issues, "ai.prompt.tools")
    mapped.tool_choice = tool_choice_text(attrs.get("ai.prompt.toolChoice"))
    text = attrs.text("ai.response.text")
    obj = attrs.get("ai.response.object")
    calls_raw = attrs.json("ai.response.toolCalls", mapped.issues)
    calls = _response_calls(calls_raw)
    if text is not None or calls or obj is not None:
        content = text if text is not None else text_of(obj)
        mapped.output = Message(role="assistant", content=content, tool_calls=calls)
        mapped.n_choices = 1
    mapped.content_truncated = bool(attrs.truncated)


def _messages(prompt: Any, issues: list[str]) -> list[Message]:
    if not isinstance(prompt, list):
        issues.append("ai.prompt.messages is not a list; ignored")
        return []
    out: list[Message] = []
    for index, item in enumerate(prompt):
        if not isinstance(item, dict):
            issues.append(f"ai.prompt.messages[{index}] is not an object; ignored")
            continue
        blocks = read_blocks(item.get("content"), parse_json=False)
        for kind in blocks.unknown:
            issues.append(f"ai.prompt.messages[{index}]: part {kind!r} is not represented")
        out.extend(messages_from_blocks(str(item.get("role") or "user"), blocks))
    return out


def _response_calls(value: Any) -> tuple[ToolCall, ...]:
    """``ai.response.toolCalls``: ``{toolCallId, toolName, input}`` (``args`` before v5)."""
    return tool_calls(value) if isinstance(value, list) else ()


def _map_tool(attrs: Attrs, mapped: MappedSpan) -> None:
    mapped.tool_name = attrs.text("ai.toolCall.name")
    mapped.name = mapped.tool_name or mapped.name
    mapped.tool_call_id = attrs.text("ai.toolCall.id")
    raw_args = attrs.first("ai.toolCall.args", "ai.toolCall.input")
    mapped.tool_args = parse_arguments(raw_args)
    result = attrs.first("ai.toolCall.result", "ai.toolCall.output")
    mapped.tool_result = text_of(result)  # a JSON text: unwrapped by map_span
