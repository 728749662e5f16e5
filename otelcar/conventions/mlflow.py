"""MLflow tracing's own spans (``mlflow.*``), as MLflow exports them over OTLP
(``fixtures/frameworks/mlflow``; observed on mlflow-tracing 3.17.2).

* **Kind**: ``mlflow.spanType`` ``CHAT_MODEL`` / ``LLM`` → llm, ``TOOL`` → tool, ``AGENT`` →
  agent (opens an episode); ``CHAIN``, ``RETRIEVER``, ``UNKNOWN`` and the rest → other.
* **LLM**: ``mlflow.spanInputs`` is the request as the autologged client was called (JSON):
  OpenAI chat ``{"model", "messages", "tools", …}``, the Responses API (``input``,
  ``instructions``), Anthropic (``system`` beside ``messages``), a completion ``prompt``, or
  LangChain's messages (``[[{"type": "human", "content"}]]``). ``mlflow.spanOutputs`` is the
  reply object (a ChatCompletion's ``choices``, a Response's ``output`` items, an Anthropic
  message's ``content`` blocks, LangChain's ``generations``) or text. A stream's output is the
  object MLflow rebuilt from it; without one, the ``mlflow.chunk.item.N`` events
  (``mlflow.chunk.value``, chat-completion chunks) are joined. Tokens:
  ``mlflow.chat.tokenUsage`` (``input_tokens`` / ``output_tokens`` / ``total_tokens`` /
  ``cache_read_input_tokens``), else the reply's ``usage``. Model: ``mlflow.llm.model``, the
  reply's ``model``; provider ``mlflow.llm.provider``; tools ``mlflow.chat.tools``. MLflow 2.x's
  ``mlflow.chat.messages`` (the history plus the reply, OpenAI form) is read when the inputs
  are not.
* **TOOL**: a ``@mlflow.trace`` function: its keyword arguments are ``mlflow.spanInputs``,
  its return value ``mlflow.spanOutputs``, its name the span's. MLflow records no tool-call
  id, so the trajectory links the tool to the call that asked for it by name and order.
* **Errors**: the span's status message, else its ``exception`` event.

Content in ``mlflow.spanInputs`` / ``mlflow.spanOutputs`` of an LLM or tool span that this
mapper could not read is reported as *content unread*.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from otelcar.conventions.base import UNREAD, Attrs, MappedSpan, span_error
from otelcar.conventions.blocks import messages_from_blocks, read_blocks
from otelcar.conventions.genai import messages_from_any, normalize_finish_reason, tool_definitions
from otelcar.conventions.openai_shapes import (
    count,
    read_reply,
    request_params,
    tool_choice_text,
    usage_object,
)
from otelcar.ingest.frames import LogFrame, SpanFrame
from otelcar.messages import Message, ToolCall, parse_arguments, text_of

NAME = "mlflow"
PRIORITY = 15  # before the GenAI mapper: MLflow spans may carry a few gen_ai.* keys too
SPAN_TYPE, INPUTS, OUTPUTS = "mlflow.spanType", "mlflow.spanInputs", "mlflow.spanOutputs"
_KINDS = {"CHAT_MODEL": "llm", "LLM": "llm", "TOOL": "tool", "AGENT": "agent"}
_LANGCHAIN_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}
CHUNK_EVENT, CHUNK_VALUE = "mlflow.chunk.item.", "mlflow.chunk.value"


def _is_langchain(value: Any) -> bool:
    """Whether ``value`` is a LangChain message dict (its ``type`` a role name; a ``type``
    that is a list or an object is not, and is no error)."""
    kind = value.get("type") if isinstance(value, dict) else None
    return isinstance(kind, str) and kind in _LANGCHAIN_ROLES


class MLflowMapper:
    """Mapper for MLflow tracing spans (see the module docstring)."""

    name = NAME

    def claim(self, span: SpanFrame) -> int | None:
        """15 for a span with ``mlflow.spanType`` (MLflow sets it on every span it makes)."""
        kind = span.attributes.get(SPAN_TYPE)
        return PRIORITY if isinstance(kind, str) else None

    def map(self, span: SpanFrame, logs: Sequence[LogFrame]) -> MappedSpan:
        del logs
        consumed: set[str] = set()
        attrs = Attrs(span.attributes, consumed)
        span_type = _json_text(attrs.get(SPAN_TYPE)).upper()
        mapped = MappedSpan(
            kind=_KINDS.get(span_type, "other"),
            name=span.name,
            source=NAME,
            operation=span_type,
            consumed=consumed,
        )
        attrs.get("mlflow.traceRequestId")
        attrs.get("mlflow.spanLogLevel")
        attrs.get("mlflow.spanFunctionName")
        mapped.error = span_error(span)
        if mapped.kind == "llm":
            _map_llm(span, attrs, mapped)
        elif mapped.kind == "tool":
            _map_tool(span, attrs, mapped)
        elif mapped.kind == "agent":
            mapped.agent_name = mapped.name
            mapped.episode_boundary = True
        mapped.content_truncated = bool(attrs.truncated)
        return mapped


def _json_text(value: Any) -> str:
    """A name MLflow wrote as JSON text (``"CHAT_MODEL"`` with its quotes), or as it is."""
    try:
        decoded = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        decoded = value
    return str(decoded) if isinstance(decoded, str) else str(value)


def _unread(mapped: MappedSpan, key: str, what: str) -> None:
    mapped.issues.append(f"{UNREAD}{key} ({what}) carries content {NAME!r} did not read")


# ------------------------------------------------------------------------------------------
# LLM spans
# ------------------------------------------------------------------------------------------


def _map_llm(span: SpanFrame, attrs: Attrs, mapped: MappedSpan) -> None:
    mapped.provider = text_of(attrs.json("mlflow.llm.provider", mapped.issues))
    mapped.request_model = text_of(attrs.json("mlflow.llm.model", mapped.issues))
    attrs.get("mlflow.message.format")
    request = attrs.json(INPUTS, mapped.issues)
    if isinstance(request, dict):
        _read_request(request, mapped)
    elif request is not None:
        read = _messages(request, mapped)
        if read is not None:
            mapped.input_messages = read
    tools = attrs.json("mlflow.chat.tools", mapped.issues)
    if tools is not None:
        mapped.tools_available = tool_definitions(tools, mapped.issues, "mlflow.chat.tools")
    reply = attrs.json(OUTPUTS, mapped.issues)
    if reply is not None:
        _read_reply(reply, mapped)
    elif _read_chunks(span, mapped):
        mapped.issues.append("output joined from the mlflow.chunk.item.* stream events")
    history = attrs.json("mlflow.chat.messages", mapped.issues)  # MLflow 2.x
    if isinstance(history, list) and (mapped.input_messages is None or mapped.output is None):
        _read_history(history, mapped)
    usage = attrs.json("mlflow.chat.tokenUsage", mapped.issues)
    if isinstance(usage, dict):
        mapped.usage.update(
            {
                "input_tokens": count(usage.get("input_tokens")),
                "output_tokens": count(usage.get("output_tokens")),
                "cache_read_tokens": count(usage.get("cache_read_input_tokens")),
                "total_tokens": count(usage.get("total_tokens")),
            }
        )
    mapped.name = mapped.response_model or mapped.request_model or span.name
    if request is not None and mapped.input_messages is None:
        _unread(mapped, INPUTS, f"a {type(request).__name__} in no request shape known")
    if reply is not None and mapped.output is None:
        _unread(mapped, OUTPUTS, f"a {type(reply).__name__} in no reply shape known")


def _read_request(request: dict[str, Any], mapped: MappedSpan) -> None:
    mapped.request_model = mapped.request_model or text_of(request.get("model"))
    mapped.params = {k: v for k, v in request_params(request).items() if v is not None}
    mapped.tool_choice = tool_choice_text(request.get("tool_choice"))
    if isinstance(request.get("tools"), list):
        mapped.tools_available = tool_definitions(request["tools"], mapped.issues, "tools")
    system: list[Message] = []
    for key in ("system", "instructions"):  # Anthropic, the Responses API
        if request.get(key) is not None:
            text = read_blocks(request[key]).text
            if text:
                system.append(Message(role="system", content=text))
    body = next(
        (request[k] for k in ("messages", "input", "prompt", "contents") if k in request), None
    )
    read = _messages(body, mapped) if body is not None else None
    if read is not None:
        mapped.input_messages = system + read
    elif system:
        mapped.input_messages = system


def _messages(value: Any, mapped: MappedSpan) -> list[Message] | None:
    """Input messages from a request's message list in OpenAI's, Anthropic's, the Responses
    API's or LangChain's form, or a prompt text."""
    if isinstance(value, str):
        return [Message(role="user", content=value)]
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], list):
        value = value[0]  # LangChain's batch of one: [[message, …]]
    if not isinstance(value, list):
        return None
    if value and all(isinstance(m, dict) and "role" in m for m in value):
        return messages_from_any(value, mapped.issues, "input")
    out: list[Message] = []
    for item in value:
        if isinstance(item, str):
            out.append(Message(role="user", content=item))
        elif isinstance(item, dict) and "role" in item:
            out.extend(messages_from_any([item], mapped.issues, "input") or [])
        elif _is_langchain(item):
            out.append(_langchain_message(item))
        elif isinstance(item, dict):  # a Responses API item: function_call / _output
            blocks = read_blocks([item], parse_json=False)
            if blocks.unknown:
                mapped.issues.append(f"{INPUTS}: item {', '.join(blocks.unknown)} not read")
            out.extend(messages_from_blocks("assistant", blocks))
        else:
            return None
    return out


def _langchain_message(item: dict[str, Any]) -> Message:
    role = _LANGCHAIN_ROLES[item["type"]]
    blocks = read_blocks(item.get("content"), parse_json=False)
    calls = tuple(
        ToolCall(name=c.get("name"), arguments=parse_arguments(c.get("args")), id=c.get("id"))
        for c in item.get("tool_calls") or ()
        if isinstance(c, dict)
    )
    return Message(
        role=role,
        content=blocks.text,
        tool_calls=calls or tuple(blocks.calls),
        tool_call_id=text_of(item.get("tool_call_id")),
        name=text_of(item.get("name")),
    )


def _read_reply(reply: Any, mapped: MappedSpan) -> None:
    if isinstance(reply, dict):
        mapped.response_id = text_of(reply.get("id"))
        mapped.response_model = text_of(reply.get("model"))
        if not mapped.usage:
            mapped.usage = _reply_usage(reply.get("usage"))
        if isinstance(reply.get("choices"), list):
            read_reply(reply["choices"], mapped, OUTPUTS)
            return
        if isinstance(reply.get("output"), list):  # the Responses API
            blocks = read_blocks(reply["output"], parse_json=False)
            _set_blocks(blocks, mapped, reply.get("status"))
            return
        if isinstance(reply.get("content"), list):  # Anthropic's message
            blocks = read_blocks(reply["content"], parse_json=False)
            _set_blocks(blocks, mapped, reply.get("stop_reason"))
            return
        generations = reply.get("generations")  # LangChain's ChatResult / LLMResult
        if isinstance(generations, list) and generations:
            first = generations[0][0] if isinstance(generations[0], list) else generations[0]
            if isinstance(first, dict):
                message = first.get("message")
                if _is_langchain(message):
                    mapped.output = _langchain_message(message)
                elif isinstance(first.get("text"), str):
                    mapped.output = Message(role="assistant", content=first["text"])
                if mapped.output is not None:
                    mapped.n_choices = 1
                    info = first.get("generation_info") or {}
                    if isinstance(info, dict):
                        mapped.finish_reason = normalize_finish_reason(info.get("finish_reason"))
            return
        if "role" in reply or "content" in reply:
            read_reply(reply, mapped, OUTPUTS)
        return
    if isinstance(reply, str):
        mapped.output = Message(role="assistant", content=reply)
        mapped.n_choices = 1


def _set_blocks(blocks: Any, mapped: MappedSpan, reason: Any) -> None:
    for kind in blocks.unknown:
        mapped.issues.append(f"{OUTPUTS}: block {kind!r} is not represented")
    if blocks.empty():
        return
    mapped.output = messages_from_blocks("assistant", blocks)[0]
    mapped.n_choices = 1
    if mapped.output.tool_calls:
        mapped.finish_reason = "tool_call"
    elif reason in ("end_turn", "completed", "stop"):
        mapped.finish_reason = "stop"
    else:
        mapped.finish_reason = normalize_finish_reason(reason)


def _reply_usage(usage: Any) -> dict[str, int | None]:
    if not isinstance(usage, dict):
        return {}
    if "prompt_tokens" in usage:
        return usage_object(usage)
    return {  # the Responses API and Anthropic
        "input_tokens": count(usage.get("input_tokens")),
        "output_tokens": count(usage.get("output_tokens")),
        "cache_read_tokens": count(usage.get("cache_read_input_tokens")),
        "total_tokens": count(usage.get("total_tokens")),
    }


def _read_chunks(span: SpanFrame, mapped: MappedSpan) -> bool:
    """The reply joined from the chat-completion chunks of the stream events."""
    texts: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    reason = None
    found = False
    for event in span.events:
        if not str(event.get("name") or "").startswith(CHUNK_EVENT):
            continue
        value = (event.get("attributes") or {}).get(CHUNK_VALUE)
        try:
            chunk = json.loads(value) if isinstance(value, str) else value
        except ValueError:
            continue
        if not isinstance(chunk, dict):
            continue
        found = True
        mapped.response_id = mapped.response_id or text_of(chunk.get("id"))
        mapped.response_model = mapped.response_model or text_of(chunk.get("model"))
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            reason = choice.get("finish_reason") or reason
            delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
            if isinstance(delta.get("content"), str):
                texts.append(delta["content"])
            for call in delta.get("tool_calls") or ():
                if not isinstance(call, dict):
                    continue
                slot = calls.setdefault(int(call.get("index") or 0), {"arguments": ""})
                function = call.get("function") if isinstance(call.get("function"), dict) else {}
                slot["id"] = call.get("id") or slot.get("id")
                slot["name"] = function.get("name") or slot.get("name")
                slot["arguments"] += str(function.get("arguments") or "")
    if not found:
        return False
    mapped.output = Message(
        role="assistant",
        content="".join(texts) or None,
        tool_calls=tuple(
            ToolCall(name=c.get("name"), arguments=parse_arguments(c["arguments"]), id=c.get("id"))
            for _, c in sorted(calls.items())
        ),
    )
    mapped.n_choices = 1
    mapped.finish_reason = normalize_finish_reason(reason)
    return True


def _read_history(history: list[Any], mapped: MappedSpan) -> None:
    read = messages_from_any(history, mapped.issues, "input") or []
    if mapped.output is None and read and read[-1].role == "assistant":
        mapped.output, read = read[-1], read[:-1]
        mapped.n_choices = 1
    if mapped.input_messages is None and read:
        mapped.input_messages = read
        mapped.issues.append("input messages read from mlflow.chat.messages")


# ------------------------------------------------------------------------------------------
# Tool spans
# ------------------------------------------------------------------------------------------


def _map_tool(span: SpanFrame, attrs: Attrs, mapped: MappedSpan) -> None:
    mapped.tool_name = span.name
    arguments = attrs.json(INPUTS, mapped.issues)
    if arguments is not None:
        mapped.tool_args = arguments if isinstance(arguments, dict) else text_of(arguments)
    result = attrs.json(OUTPUTS, mapped.issues)
    if result is not None:
        mapped.tool_result = text_of(result)
    if isinstance(arguments, dict) and isinstance(arguments.get("tool_call_id"), str):
        mapped.tool_call_id = arguments["tool_call_id"]  # a tool that takes its call's id
