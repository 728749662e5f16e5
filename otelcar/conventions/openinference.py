"""OpenInference (Arize Phoenix): ``openinference.span.kind`` spans
(``reference/otel-genai.md`` §4 and §8.3; observed on openinference-instrumentation-openai 0.1.66).

* **Kind**: ``LLM`` → llm, ``TOOL`` → tool, ``AGENT`` → agent (opens an episode; an agent's
  event recorded as an ``AGENT`` span becomes an ``other`` step of that agent once the trace is
  built: :mod:`otelcar.conventions.agent_events`), ``CHAIN`` and every other kind → other (a
  container, kept in place).
* **LLM input**: ``llm.input_messages.{i}.message.{role,content,name,tool_call_id,
  tool_calls.{j}.tool_call.{id,function.name,function.arguments},contents.{k}.message_content.*,
  function_call_name,function_call_arguments_json}``. When none are there (hidden by
  ``OPENINFERENCE_HIDE_INPUT_MESSAGES``, or evicted) the raw request in ``input.value`` (JSON)
  is read instead.
* **LLM output**: ``llm.output_messages.{i}.message.*`` (one per choice), else the raw response
  in ``output.value``; the response id (for de-duplicating stacked instrumentations) always
  comes from ``output.value``. Finish reason: ``llm.finish_reason``, else the raw response.
* **Request**: ``llm.invocation_parameters`` (JSON with the vendor's own keys: ``model``,
  ``temperature``, ``max_tokens``/``max_completion_tokens``, ``seed``, ``n``, ``stop``, …);
  ``llm.model_name`` is the *response* model; ``llm.provider ?? llm.system``;
  ``llm.tools.{i}.tool.json_schema``; ``llm.token_count.*``.
* **TOOL**: ``tool.name``; arguments = ``input.value`` (JSON-decoded); result = ``output.value``;
  id = ``tool.id`` when set (the ``@tracer.tool`` decorator does not set it, so the trajectory
  then links by name and order). ``tool.parameters`` is the tool's JSON *schema* and is never
  read as the arguments.

``__REDACTED__`` (OpenInference's hide switches) means "not captured": the value becomes
``None`` with an issue. Cut JSON and evicted messages are reported and set
``content_truncated``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from otelcar.conventions.base import Attrs, MappedSpan
from otelcar.conventions.genai import messages_from_any, normalize_finish_reason, tool_definitions
from otelcar.conventions.memo import decode_json
from otelcar.conventions.normalize import indexed, tool_calls, tool_message_call_id
from otelcar.conventions.openai_shapes import tool_choice_text
from otelcar.ingest.frames import LogFrame, SpanFrame
from otelcar.messages import Message, ToolCall, parse_arguments, text_of

NAME = "openinference"
PRIORITY = 30  # reference §8: after gen_ai messages (20), before OpenLLMetry (40, 50)
REDACTED = "__REDACTED__"
JSON_MIME = "application/json"
_KINDS = {"LLM": "llm", "TOOL": "tool", "AGENT": "agent"}
_ID_PREFIX = re.compile(r'^\s*\{\s*"id"\s*:\s*"([^"]+)"')


class OpenInferenceMapper:
    """Mapper for OpenInference spans (see the module docstring)."""

    name = NAME

    def claim(self, span: SpanFrame) -> int | None:
        """30 for any span with a non-empty ``openinference.span.kind``, else None."""
        kind = span.attributes.get("openinference.span.kind")
        return PRIORITY if isinstance(kind, str) and kind else None

    def map(self, span: SpanFrame, logs: Sequence[LogFrame]) -> MappedSpan:
        """One claimed span as a step (log events are not used); never raises for bad content."""
        consumed: set[str] = set()
        attrs = Attrs(span.attributes, consumed)
        oi_kind = str(attrs.get("openinference.span.kind")).upper()
        preparation = oi_kind == "LLM" and _prepares_a_request(span)
        mapped = MappedSpan(
            kind="other" if preparation else _KINDS.get(oi_kind, "other"),
            name=span.name,
            source=NAME,
            operation=oi_kind,
            consumed=consumed,
        )
        if preparation:
            mapped.issues.append(
                "an LLM-kind span whose output.value is a request to send (messages, no "
                "reply) and that counted no tokens: request preparation, not a model call; "
                "kept as an 'other' step"
            )
        mapped.conversation_id = attrs.text("session.id")
        mapped.agent_name = attrs.text("agent.name")
        if mapped.kind == "llm":
            _map_llm(span, attrs, mapped)
        elif mapped.kind == "tool":
            _map_tool(span, attrs, mapped)
        elif mapped.kind == "agent":
            mapped.name = mapped.agent_name or span.name
            mapped.agent_name = mapped.name
            mapped.episode_boundary = True
        mapped.content_truncated = mapped.content_truncated or bool(attrs.truncated)
        return mapped


def _prepares_a_request(span: SpanFrame) -> bool:
    """An LLM-kind span that builds a request rather than making the call (LlamaIndex's
    ``_prepare_chat_with_tools``): no message or token attributes, and an ``output.value``
    that is a request (``messages``) with no reply in it (no ``choices``, text or role)."""
    if any(
        key.startswith(("llm.input_messages.", "llm.output_messages.", "llm.token_count."))
        for key in span.attributes
    ):
        return False
    raw = span.attributes.get("output.value")
    if not isinstance(raw, str) or not raw.lstrip().startswith("{"):
        return False
    try:
        value = decode_json(raw)
    except ValueError:
        return False
    reply_keys = {"choices", "text", "content", "role", "output", "message"}
    return isinstance(value, dict) and "messages" in value and not reply_keys & value.keys()


def _redacted(key: str, value: Any, mapped: MappedSpan) -> bool:
    if value == REDACTED:
        mapped.issues.append(f"{key} is {REDACTED} (hidden by OpenInference); not captured")
        return True
    return False


# ------------------------------------------------------------------------------------------
# LLM spans
# ------------------------------------------------------------------------------------------


def _map_llm(span: SpanFrame, attrs: Attrs, mapped: MappedSpan) -> None:
    mapped.provider = attrs.text("llm.provider", "llm.system")
    mapped.response_model = attrs.text("llm.model_name")
    invocation = _json_attribute(span, attrs, "llm.invocation_parameters", mapped)
    if isinstance(invocation, dict):
        mapped.request_model = text_of(invocation.get("model"))
        mapped.params = _params(invocation)
        mapped.tool_choice = tool_choice_text(invocation.get("tool_choice"))
    mapped.name = mapped.response_model or mapped.request_model or span.name
    mapped.usage = {
        "input_tokens": attrs.int("llm.token_count.prompt"),
        "output_tokens": attrs.int("llm.token_count.completion"),
        "cache_read_tokens": attrs.int("llm.token_count.prompt_details.cache_read"),
        "reasoning_tokens": attrs.int("llm.token_count.completion_details.reasoning"),
        "total_tokens": attrs.int("llm.token_count.total"),
    }
    tools = indexed(span.attributes, "llm.tools")
    if tools:
        mapped.tools_available = _tools(tools, span, attrs, mapped)

    inputs = indexed(span.attributes, "llm.input_messages")
    if inputs:
        mapped.input_messages = _flat_messages(inputs, "llm.input_messages", attrs, mapped)
    outputs = indexed(span.attributes, "llm.output_messages")
    if outputs:
        choices = _flat_messages(outputs, "llm.output_messages", attrs, mapped)
        _set_choices(mapped, choices)
    reason: Any = attrs.get("llm.finish_reason")

    request = _raw_json(span, attrs, "input", mapped, consume=not inputs)
    if mapped.input_messages is None and isinstance(request, dict):
        messages = request.get("messages")
        if isinstance(messages, list):
            mapped.input_messages = [_openai_message(m, "user") for m in messages]
            mapped.issues.append("input messages read from input.value (the raw request)")
    elif mapped.input_messages is None and isinstance(request, list):
        read = messages_from_any(request, mapped.issues, "input")  # a message list itself
        if read is not None:
            mapped.input_messages = read
            mapped.issues.append("input messages read from input.value (a message list)")
    response = _raw_json(span, attrs, "output", mapped, consume=not outputs)
    if mapped.output is None and isinstance(response, dict) and not _raw_choices(response):
        read = messages_from_any(response, mapped.issues, "output")  # {"text", "finish_reason"}
        if read:
            _set_choices(mapped, read)
            mapped.issues.append("output read from output.value")
            reason = reason or response.get("finish_reason")
    if isinstance(response, dict):
        mapped.response_id = text_of(response.get("id"))
        raw_choices = _raw_choices(response)
        if mapped.output is None and raw_choices:
            _set_choices(
                mapped, [_openai_message(c.get("message"), "assistant") for c in raw_choices]
            )
            mapped.issues.append("output read from output.value (the raw response)")
        if reason is None and raw_choices:
            reason = raw_choices[0].get("finish_reason")
    elif isinstance(span.attributes.get("output.value"), str):
        match = _ID_PREFIX.match(span.attributes["output.value"])
        mapped.response_id = match.group(1) if match else None
    mapped.finish_reason = normalize_finish_reason(reason)
    _check_eviction(span, inputs, mapped)


def _params(invocation: dict[str, Any]) -> dict[str, Any]:
    """``llm.invocation_parameters`` (vendor keys) as the step's params."""

    def number(key: str, *, integer: bool = False) -> Any:
        value = invocation.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return int(value) if integer else float(value)

    stop = invocation.get("stop", invocation.get("stop_sequences"))
    max_tokens = number("max_tokens", integer=True)
    if max_tokens is None:
        max_tokens = number("max_completion_tokens", integer=True)
    return {
        "temperature": number("temperature"),
        "top_p": number("top_p"),
        "top_k": number("top_k"),
        "max_tokens": max_tokens,
        "seed": number("seed", integer=True),
        "stop": [stop] if isinstance(stop, str) else stop,
        "n": number("n", integer=True),
        "frequency_penalty": number("frequency_penalty"),
        "presence_penalty": number("presence_penalty"),
    }


def _json_attribute(span: SpanFrame, attrs: Attrs, key: str, mapped: MappedSpan) -> Any:
    """A JSON-string attribute, decoded; ``__REDACTED__`` and undecodable values give
    ``None`` (the latter reported as truncated and left in the attributes)."""
    value = span.attributes.get(key)
    if value is None or _redacted(key, value, mapped):
        return None
    return attrs.json(key, mapped.issues)


def _raw_json(
    span: SpanFrame, attrs: Attrs, which: str, mapped: MappedSpan, *, consume: bool
) -> Any:
    """``input.value`` / ``output.value`` decoded when its mime type is JSON. It is consumed
    (and a failure to decode reported) only when the step relies on it."""
    key, mime_key = f"{which}.value", f"{which}.mime_type"
    value = span.attributes.get(key)
    if not isinstance(value, str) or span.attributes.get(mime_key) != JSON_MIME:
        return None
    if value == REDACTED:
        if consume:
            _redacted(key, value, mapped)
        return None
    if consume:
        attrs.get(mime_key)
        return attrs.json(key, mapped.issues)
    try:
        return decode_json(value)
    except ValueError:
        return None


def _raw_choices(response: dict[str, Any]) -> list[dict[str, Any]]:
    choices = response.get("choices")
    if not isinstance(choices, list):
        return []
    items = [c for c in choices if isinstance(c, dict)]
    return sorted(items, key=lambda c: c.get("index") if isinstance(c.get("index"), int) else 0)


def _set_choices(mapped: MappedSpan, choices: list[Message]) -> None:
    if choices:
        mapped.output, mapped.alternates, mapped.n_choices = choices[0], choices[1:], len(choices)


def _flat_messages(
    groups: dict[int, dict[str, Any]], prefix: str, attrs: Attrs, mapped: MappedSpan
) -> list[Message]:
    """``{prefix}.{i}.message.*`` as messages; a message whose role was evicted is skipped
    (reported by :func:`_check_eviction`, its attributes kept)."""
    out = []
    for i, fields in groups.items():
        key = f"{prefix}.{i}.message"
        message = {k[len("message.") :]: v for k, v in fields.items() if k.startswith("message.")}
        role = message.get("role")
        if not isinstance(role, str):
            continue
        extra = {k: v for k, v in fields.items() if not k.startswith("message.")}
        results = _function_results(f"{prefix}.{i}", extra, attrs)
        if results:  # AutoGen: results as {prefix}.{i}.function.{k} JSON, not message.*
            out.extend(results)
            continue
        if extra:
            mapped.issues.append(
                f"{prefix}.{i}: {', '.join(sorted(extra))} not read (not message.* keys)"
            )
        out.append(_flat_message(key, message, attrs, mapped))
    return out


def _function_results(key: str, extra: dict[str, Any], attrs: Attrs) -> list[Message]:
    """``function.{k}`` entries holding JSON ``{name, content, call_id}`` as tool messages."""
    messages = []
    for name, value in sorted(extra.items()):
        if not name.startswith("function.") or not isinstance(value, str):
            continue
        try:
            item = decode_json(value)
        except ValueError:
            continue
        if not isinstance(item, dict) or "content" not in item:
            continue
        attrs.get(f"{key}.{name}")
        messages.append(
            Message(
                role="tool",
                content=text_of(item.get("content")),
                tool_call_id=text_of(item.get("call_id") or item.get("tool_call_id")),
                name=text_of(item.get("name")),
            )
        )
    return messages


def _flat_message(key: str, fields: dict[str, Any], attrs: Attrs, mapped: MappedSpan) -> Message:
    for field in fields:
        attrs.get(f"{key}.{field}")
    calls = []
    for j, call in indexed(fields, "tool_calls").items():
        raw = call.get("tool_call.function.arguments")
        if _redacted(f"{key}.tool_calls.{j}.tool_call.function.arguments", raw, mapped):
            raw = None
        calls.append(
            _tool_call(
                call.get("tool_call.function.name"),
                raw,
                call.get("tool_call.id"),
                mapped,
                f"{key}.tool_calls.{j}",
            )
        )
    if fields.get("function_call_name") is not None:  # legacy function calling: no id
        raw = fields.get("function_call_arguments_json")
        calls.append(_tool_call(fields["function_call_name"], raw, None, mapped, key))
    content = fields.get("content")
    if _redacted(f"{key}.content", content, mapped):
        content = None
    elif content is None:
        content = _contents(key, fields, mapped, calls)
    return Message(
        role=str(fields["role"]),
        content=text_of(content),
        tool_calls=tuple(calls),
        tool_call_id=text_of(fields.get("tool_call_id")) or _nested_tool_call_id(fields),
        name=text_of(fields.get("name")),
    )


def _nested_tool_call_id(fields: dict[str, Any]) -> str | None:
    """A tool message's call id under a deeper key than ``message.tool_call_id``: BeeAI writes
    it on the content part (``message.contents.0.message.tool_call_id``). Taken when every
    such key holds the same id."""
    ids = {
        text_of(value)
        for field, value in fields.items()
        if field.endswith(".tool_call_id") and not field.startswith("tool_calls.")
    }
    ids.discard(None)
    return ids.pop() if len(ids) == 1 else None


def _tool_call(name: Any, raw: Any, call_id: Any, mapped: MappedSpan, key: str) -> ToolCall:
    arguments = parse_arguments(raw)
    if isinstance(raw, str) and isinstance(arguments, str) and raw.lstrip().startswith("{"):
        mapped.content_truncated = True
        mapped.issues.append(
            f"{key} arguments are not valid JSON (cut by an attribute length limit, or the "
            "model's own output); kept as the raw string"
        )
    return ToolCall(name=text_of(name), arguments=arguments, id=text_of(call_id))


def _contents(
    key: str, fields: dict[str, Any], mapped: MappedSpan, calls: list[ToolCall]
) -> str | None:
    """Multimodal ``contents.{k}.message_content.*``: text parts joined; a part holding a
    ``tool_call.*`` (Anthropic's ``tool_use`` block, which OpenInference's Anthropic
    instrumentation writes here as well as under ``message.tool_calls``) is a tool call,
    added to ``calls`` unless one with its id (or, without ids, its name and arguments) is
    there; others reported."""
    parts = indexed(fields, "contents")
    texts = []
    for k, part in parts.items():
        kind = part.get("message_content.type")
        text = part.get("message_content.text")
        if _redacted(f"{key}.contents.{k}.message_content.text", text, mapped):
            continue
        if kind in ("text", None) and isinstance(text, str):
            texts.append(text)
        elif any(field.startswith("tool_call.") for field in part):
            raw = part.get("tool_call.function.arguments")
            if _redacted(f"{key}.contents.{k}.tool_call.function.arguments", raw, mapped):
                raw = None
            name, call_id = part.get("tool_call.function.name"), part.get("tool_call.id")
            call = _tool_call(name, raw, call_id, mapped, f"{key}.contents.{k}")
            if not any(_same_call(c, call) for c in calls):
                calls.append(call)
        else:
            mapped.issues.append(
                f"{key}.contents.{k}: content part {kind!r} is not represented in the "
                "normalized message"
            )
    return "\n".join(texts) if texts else None


def _same_call(a: ToolCall, b: ToolCall) -> bool:
    if a.id or b.id:
        return a.id == b.id
    return (a.name, a.arguments) == (b.name, b.arguments)


def _openai_message(item: Any, default_role: str) -> Message:
    """A raw OpenAI chat message (request ``messages[i]`` or response ``choices[i].message``)."""
    if not isinstance(item, dict):
        return Message(role=default_role, content=text_of(item))
    content = item.get("content")
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        content = "\n".join(t for t in texts if isinstance(t, str)) if texts else text_of(content)
    calls = (
        list(tool_calls(item.get("tool_calls"))) if isinstance(item.get("tool_calls"), list) else []
    )
    function_call = item.get("function_call")
    if isinstance(function_call, dict):
        calls.append(
            ToolCall(
                name=function_call.get("name"),
                arguments=parse_arguments(function_call.get("arguments")),
            )
        )
    return Message(
        role=str(item.get("role") or default_role),
        content=text_of(content),
        tool_calls=tuple(calls),
        tool_call_id=item.get("tool_call_id"),
        name=item.get("name"),
    )


def _tools(
    groups: dict[int, dict[str, Any]], span: SpanFrame, attrs: Attrs, mapped: MappedSpan
) -> list[dict[str, Any]] | None:
    schemas = []
    for i in groups:
        schema = _json_attribute(span, attrs, f"llm.tools.{i}.tool.json_schema", mapped)
        if schema is not None:
            schemas.append(schema)
    return tool_definitions(schemas, mapped.issues) if schemas else None


def _check_eviction(span: SpanFrame, inputs: dict[int, dict[str, Any]], mapped: MappedSpan) -> None:
    """Report what the SDK's attribute-count limit evicted (the oldest attributes first)."""
    dropped = span.dropped_attributes_count
    if not dropped:
        return
    missing = sorted(set(range(max(inputs, default=-1) + 1)) - set(inputs))
    partial = [i for i, f in inputs.items() if not isinstance(f.get("message.role"), str)]
    if missing or partial:
        gone = [str(i) for i in missing]
        detail = f"input messages {_span_of(missing)} are missing" if gone else ""
        if partial:
            detail += (
                ", " if detail else ""
            ) + f"{_span_of(partial)} incomplete (kept in attributes)"
        mapped.issues.append(
            f"{dropped} attributes were evicted by the SDK's attribute count limit (the oldest "
            f"go first): {detail}; the input context is incomplete"
        )
        mapped.content_truncated = True
    else:
        mapped.issues.append(
            f"{dropped} attributes dropped by the SDK's attribute count limit (the oldest are "
            "evicted first: input.value, invocation parameters and tools may be missing)"
        )


def _span_of(indexes: list[int]) -> str:
    """``[0, 1, 2]`` → ``"0–2"``; a single index as is."""
    if not indexes:
        return ""
    if indexes == list(range(indexes[0], indexes[-1] + 1)) and len(indexes) > 1:
        return f"{indexes[0]}–{indexes[-1]}"
    return ", ".join(str(i) for i in indexes)


# ------------------------------------------------------------------------------------------
# TOOL spans
# ------------------------------------------------------------------------------------------


def _tool_name_of_span(name: str) -> str:
    for suffix in (".__call__", ".acall"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def _map_tool(span: SpanFrame, attrs: Attrs, mapped: MappedSpan) -> None:
    """Arguments from ``input.value``, result from ``output.value``, id from ``tool.id`` (else
    the ``tool_call_id`` of the tool message ``output.value`` holds, as LangChain's does);
    ``tool.parameters`` (a schema) is deliberately left unread. Without ``tool.name`` the name
    is the span's, less the ``.__call__`` / ``.acall`` that OpenInference's DSPy instrumentation
    appends to the tool's name (``get_weather.__call__``)."""
    name = attrs.text("tool.name") or _tool_name_of_span(span.name)
    mapped.name = name
    mapped.tool_name = name
    mapped.tool_call_id = attrs.text("tool.id")
    raw = span.attributes.get("input.value")
    if raw is not None and not _redacted("input.value", raw, mapped):
        attrs.get("input.value")
        mime = attrs.text("input.mime_type")
        mapped.tool_args = parse_arguments(raw)
        if mime == JSON_MIME and isinstance(raw, str) and isinstance(mapped.tool_args, str):
            try:
                decode_json(raw)
            except ValueError:
                attrs.truncated.append("input.value")
                mapped.issues.append(
                    "input.value is not valid JSON although its mime type is JSON (cut by an "
                    "attribute length limit?); arguments kept as the raw string"
                )
    result = span.attributes.get("output.value")
    if result is not None and not _redacted("output.value", result, mapped):
        attrs.get("output.value")
        attrs.get("output.mime_type")
        mapped.tool_result = text_of(result)
        if mapped.tool_call_id is None:  # a LangChain tool's ToolMessage holds the call's id
            mapped.tool_call_id = tool_message_call_id(result)
