"""OpenTelemetry GenAI semantic conventions: v1.37+ attributes and the older event forms.

Reads, in order of preference (``reference/otel-genai.md`` §1 and §8.1):

1. span attributes ``gen_ai.input.messages`` / ``gen_ai.output.messages`` /
   ``gen_ai.system_instructions`` / ``gen_ai.tool.definitions`` (v1.37+; JSON strings on spans);
2. the v1.37+ log event ``gen_ai.client.inference.operation.details`` with the same span id
   (the same attributes, structured);
3. the v1.28–v1.36 log events ``gen_ai.{system,user,assistant,tool}.message`` and
   ``gen_ai.choice`` joined by span id, in emission order;
4. the v1.26/27 span events ``gen_ai.content.prompt`` / ``gen_ai.content.completion``.

The events of 2 and 3 are read the same whether they are log records or events on the span
itself (Strands, several agent frameworks, the Semantic Kernel shape): a span event's
attributes are the event's body, JSON-string values parsed. Content may be any provider's
content blocks (:mod:`otelcar.conventions.blocks`: Bedrock ``toolUse``/``toolResult``,
OpenAI arrays, Anthropic …).

Tool spans (``execute_tool``) give ``gen_ai.tool.name`` / ``.call.id`` / ``.call.arguments`` /
``.call.result``; agent spans (``invoke_agent``) open an episode.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from itertools import chain
from operator import itemgetter
from typing import Any

from otelcar.conventions.base import Attrs, MappedSpan
from otelcar.conventions.blocks import messages_from_blocks, read_blocks
from otelcar.conventions.memo import decode_json, derived_each
from otelcar.conventions.normalize import repr_tool_call, tool_calls
from otelcar.ingest.frames import LogFrame, SpanFrame
from otelcar.ingest.jsontext import json_or_literal
from otelcar.messages import Message, ToolCall, parse_arguments, text_of

NAME = "otel-genai"
LLM_OPS = frozenset({"chat", "text_completion", "generate_content"})
AGENT_OPS = frozenset({"invoke_agent", "create_agent", "invoke_workflow"})
OTHER_OPS = frozenset({"embeddings", "retrieval"})
# Operation names outside the conventions that producers use for a model call (Latitude).
LLM_SYNONYMS = frozenset({"completion", "chat_completion", "chat.completions", "llm"})
TOOL_OPS = frozenset({"execute_tool", "tool", "tool_call"})  # the last two: Latitude and others
KNOWN_OPS = LLM_OPS | AGENT_OPS | OTHER_OPS | {"execute_tool"}

DETAILS_EVENT = "gen_ai.client.inference.operation.details"
LEGACY_MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
CHOICE_EVENT = "gen_ai.choice"
GENAI_EVENTS = frozenset({DETAILS_EVENT, CHOICE_EVENT, *LEGACY_MESSAGE_EVENTS})

PRIORITY_WITH_MESSAGES = 20
PRIORITY_BARE_OPERATION = 60


#: Keys a tool definition keeps its JSON schema under, by producer.
SCHEMA_KEYS = ("parameters_json_schema", "inputSchema", "input_schema", "parameters")


def normalize_finish_reason(reason: Any) -> str | None:
    """Finish reasons in the schema's vocabulary (OpenAI's ``tool_calls`` → ``tool_call``)."""
    if reason is None:
        return None
    text = str(reason)
    return "tool_call" if text == "tool_calls" else text


def _names_a_model(attributes: dict[str, Any]) -> bool:
    return "gen_ai.request.model" in attributes or "gen_ai.response.model" in attributes


def _has_content_events(span: SpanFrame) -> bool:
    return any(event.get("name") in GENAI_EVENTS for event in span.events)


def operation_of(span: SpanFrame) -> str | None:
    """``gen_ai.operation.name``, else the span-name prefix when it is a known operation."""
    op = span.attributes.get("gen_ai.operation.name")
    if isinstance(op, str) and op:
        return op
    prefix = span.name.split(" ", 1)[0]
    if prefix in KNOWN_OPS and any(k.startswith("gen_ai.") for k in span.attributes):
        return prefix
    return None


class GenAIMapper:
    """Mapper for the OTel GenAI conventions (see the module docstring)."""

    name = NAME

    def claim(self, span: SpanFrame) -> int | None:
        attrs = span.attributes
        if "gen_ai.input.messages" in attrs or "gen_ai.output.messages" in attrs:
            return PRIORITY_WITH_MESSAGES
        if _has_content_events(span):
            return PRIORITY_WITH_MESSAGES
        if operation_of(span) is not None:
            return PRIORITY_BARE_OPERATION
        return None

    def map(self, span: SpanFrame, logs: Sequence[LogFrame]) -> MappedSpan:
        logs = content_events(span, logs)
        consumed: set[str] = set()
        attrs = Attrs(span.attributes, consumed)
        op = operation_of(span)
        attrs.get("gen_ai.operation.name")
        carries_messages = (
            "gen_ai.input.messages" in span.attributes
            or "gen_ai.output.messages" in span.attributes
            or any(log.event_name in GENAI_EVENTS for log in logs)
        )
        nonstandard = None
        if op in LLM_OPS:
            kind = "llm"
        elif op in TOOL_OPS:
            kind = "tool"
        elif op in AGENT_OPS:
            kind = "agent"
        elif carries_messages and (
            op in LLM_SYNONYMS or (op is None and _names_a_model(span.attributes))
        ):
            kind = "llm"  # Latitude's "completion"; the Semantic Kernel shape's no name
            nonstandard = op
        else:
            kind = "other"
        mapped = MappedSpan(kind=kind, name=span.name, source=NAME, operation=op, consumed=consumed)
        if kind in ("other", "agent") and carries_messages:
            mapped.issues.append(
                f"carries GenAI messages but is not an LLM call (operation {op!r}); they are "
                "kept in the span's attributes, not read as a step's messages"
            )
        if kind == "llm" and op not in LLM_OPS:
            mapped.issues.append(
                f"gen_ai.operation.name {nonstandard!r} is not a GenAI operation; read as an "
                "LLM call because the span carries messages"
                if nonstandard is not None
                else "no gen_ai.operation.name; read as an LLM call because the span carries "
                "messages"
            )
        mapped.provider = attrs.text("gen_ai.provider.name", "gen_ai.system")
        mapped.agent_name = attrs.text("gen_ai.agent.name")
        mapped.conversation_id = attrs.text("gen_ai.conversation.id")
        mapped.error = attrs.text("error.type")
        if span.dropped_attributes_count:
            mapped.issues.append(
                f"{span.dropped_attributes_count} attributes dropped by the SDK's attribute "
                "count limit (the oldest are evicted first)"
            )
        if kind == "llm":
            _map_llm(span, attrs, logs, mapped)
        elif kind == "tool":
            _map_tool(span, attrs, mapped, logs)
        elif kind == "agent":
            mapped.name = attrs.text("gen_ai.agent.name", "gen_ai.workflow.name") or span.name
            mapped.episode_boundary = op == "invoke_agent"
            mapped.request_model = attrs.text("gen_ai.request.model")
        else:
            mapped.request_model = attrs.text("gen_ai.request.model")
        return mapped


def _map_llm(span: SpanFrame, attrs: Attrs, logs: Sequence[LogFrame], mapped: MappedSpan) -> None:
    mapped.request_model = attrs.text("gen_ai.request.model")
    mapped.response_model = attrs.text("gen_ai.response.model")
    mapped.name = mapped.response_model or mapped.request_model or span.name
    mapped.response_id = attrs.text("gen_ai.response.id")
    stop = attrs.get("gen_ai.request.stop_sequences")
    mapped.params = {
        "temperature": attrs.float("gen_ai.request.temperature"),
        "top_p": attrs.float("gen_ai.request.top_p"),
        "top_k": attrs.float("gen_ai.request.top_k"),
        "max_tokens": _set_or_none(attrs.int("gen_ai.request.max_tokens")),
        "seed": attrs.int("gen_ai.request.seed"),
        "stop": [str(s) for s in stop] if isinstance(stop, list) else stop,
        "n": attrs.int("gen_ai.request.choice.count"),
        "frequency_penalty": attrs.float("gen_ai.request.frequency_penalty"),
        "presence_penalty": attrs.float("gen_ai.request.presence_penalty"),
    }
    mapped.usage = {
        "input_tokens": attrs.int("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens"),
        "output_tokens": attrs.int("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens"),
        "cache_read_tokens": attrs.int("gen_ai.usage.cache_read.input_tokens"),
        "reasoning_tokens": attrs.int(
            "gen_ai.usage.reasoning.output_tokens", "gen_ai.usage.reasoning_tokens"
        ),
        "total_tokens": attrs.int("gen_ai.usage.total_tokens"),
    }
    details = [log for log in logs if log.event_name == DETAILS_EVENT]
    merged: dict[str, Any] = {}
    for log in details:  # one event with every attribute, or one event per attribute
        for key, value in log.attributes.items():
            merged.setdefault(key, value)
    detail_attrs = Attrs(merged, set()) if details else None

    versions: list[str] = []
    # Input messages.
    inputs = attrs.json("gen_ai.input.messages", mapped.issues)
    instructions = attrs.json("gen_ai.system_instructions", mapped.issues)
    if inputs is None and detail_attrs is not None:
        inputs = detail_attrs.json("gen_ai.input.messages", mapped.issues)
        instructions = instructions or detail_attrs.json(
            "gen_ai.system_instructions", mapped.issues
        )
    if inputs is not None or instructions is not None:
        versions.append("1.37+")
        messages = []
        if instructions is not None:
            messages.append(Message(role="system", content=_join_text_parts(instructions)))
        messages.extend(messages_from_parts(inputs or [], mapped.issues, "input"))
        mapped.input_messages = messages
    # Output.
    outputs = attrs.json("gen_ai.output.messages", mapped.issues)
    if outputs is None and detail_attrs is not None:
        outputs = detail_attrs.json("gen_ai.output.messages", mapped.issues)
    reasons = attrs.get("gen_ai.response.finish_reasons")
    first_reason = reasons[0] if isinstance(reasons, list) and reasons else None
    if outputs is not None:
        if "1.37+" not in versions:
            versions.append("1.37+")
        choices = messages_from_parts(outputs, mapped.issues, "output")
        _set_choices(mapped, choices)
        if first_reason is None and isinstance(outputs, list) and outputs:
            first = outputs[0]
            first_reason = first.get("finish_reason") if isinstance(first, dict) else None
    tools = attrs.json("gen_ai.tool.definitions", mapped.issues)
    if tools is None and detail_attrs is not None:
        tools = detail_attrs.json("gen_ai.tool.definitions", mapped.issues)
    if tools is not None:
        mapped.tools_available = tool_definitions(tools, mapped.issues)

    # Older forms, only where the newer ones gave nothing.
    legacy = [log for log in logs if log.event_name in LEGACY_MESSAGE_EVENTS]
    choices = [log for log in logs if log.event_name == CHOICE_EVENT]
    if mapped.input_messages is None and legacy:
        versions.append("1.28 events")
        mapped.input_messages = [m for log in legacy for m in legacy_messages(log, mapped.issues)]
    if mapped.output is None and choices:
        if "1.28 events" not in versions:
            versions.append("1.28 events")
        ordered = sorted(choices, key=lambda log: _int(_body(log).get("index"), 0))
        _set_choices(mapped, [m for log in ordered for m in legacy_messages(log, mapped.issues)])
        first_reason = first_reason or _body(ordered[0]).get("finish_reason")
    if mapped.input_messages is None or mapped.output is None:
        _span_event_content(span, mapped, versions)
    # The deprecated gen_ai.prompt / gen_ai.completion attributes (JSON in them).
    if mapped.input_messages is None and "gen_ai.prompt" in span.attributes:
        read = messages_from_any(span.attributes["gen_ai.prompt"], mapped.issues, "input")
        if read is not None:
            attrs.get("gen_ai.prompt")
            mapped.input_messages = read
            versions.append("gen_ai.prompt attribute")
    if mapped.output is None and "gen_ai.completion" in span.attributes:
        read = messages_from_any(span.attributes["gen_ai.completion"], mapped.issues, "output")
        if read:
            attrs.get("gen_ai.completion")
            _set_choices(mapped, read)
            completion = _parsed(span.attributes["gen_ai.completion"])
            if first_reason is None and isinstance(completion, dict):
                first_reason = completion.get("finish_reason")

    mapped.content_truncated = bool(attrs.truncated or (detail_attrs and detail_attrs.truncated))
    mapped.finish_reason = normalize_finish_reason(first_reason)
    if not versions:
        versions.append("1.37+" if "gen_ai.provider.name" in span.attributes else "≤1.36")
    mapped.source = f"{NAME} {'+'.join(versions)}"


def _set_or_none(value: int | None) -> int | None:
    """A count where a negative one means "not set" (OpenLIT records ``max_tokens = -1``)."""
    return None if value is None or value < 0 else value


def _set_choices(mapped: MappedSpan, choices: list[Message]) -> None:
    if not choices:
        return
    mapped.output = choices[0]
    mapped.alternates = choices[1:]
    mapped.n_choices = len(choices)


def _map_tool(span: SpanFrame, attrs: Attrs, mapped: MappedSpan, logs: Sequence[LogFrame]) -> None:
    name = attrs.text("gen_ai.tool.name")
    if name is None and span.name.startswith("execute_tool "):
        name = span.name[len("execute_tool ") :]
    mapped.name = name or span.name
    mapped.tool_name = name
    mapped.tool_call_id = attrs.text("gen_ai.tool.call.id")
    attrs.get("gen_ai.tool.type")
    # gen_ai.tool.call.*; Latitude's gen_ai.tool.result.value; bare input/output (the
    # OpenInference GenAI converter's fixtures) only where neither is present.
    args_key = next(
        (k for k in ("gen_ai.tool.call.arguments", "input") if span.attributes.get(k) is not None),
        None,
    )
    if args_key is not None:
        mapped.tool_args = parse_arguments(attrs.get(args_key))
        if isinstance(mapped.tool_args, str):
            mapped.issues.append(f"{args_key} is not a JSON object; kept as text")
    result = attrs.first("gen_ai.tool.call.result", "gen_ai.tool.result.value", "output")
    mapped.tool_result = text_of(result)
    if attrs.get("gen_ai.tool.result.is_error") is True:
        mapped.error = mapped.error or "the tool reported an error (gen_ai.tool.result.is_error)"
    # Events on the tool span (Strands): the call as a tool message, the result as a choice.
    for log in logs:
        body = _body(log)
        if log.event_name == "gen_ai.tool.message" and mapped.tool_args is None:
            mapped.tool_args = parse_arguments(body.get("content"))
            mapped.tool_call_id = mapped.tool_call_id or _text(body.get("id"))
        elif log.event_name == CHOICE_EVENT and mapped.tool_result is None:
            blocks = read_blocks(body.get("message"))
            texts = [text for _, text in blocks.results if text is not None] or blocks.texts
            mapped.tool_result = "\n".join(texts) if texts else text_of(body.get("message"))


def _body(log: LogFrame) -> dict[str, Any]:
    return log.body if isinstance(log.body, dict) else {}


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):  # int(inf)
        return default


def _content_text(value: Any) -> str | None:
    """Message content as text: strings as they are, OpenAI content arrays joined."""
    if isinstance(value, list) and all(isinstance(p, dict) for p in value):
        texts = [p.get("text") or p.get("content") for p in value]
        if all(isinstance(t, str) for t in texts):
            return "\n".join(texts)  # type: ignore[arg-type]
    return text_of(value)


def _openai_tool_calls(items: Any) -> tuple[ToolCall, ...]:
    return tool_calls(items) if isinstance(items, list | tuple) else ()


def legacy_messages(log: LogFrame, issues: list[str]) -> list[Message]:
    """A v1.28-style ``gen_ai.*.message`` or ``gen_ai.choice`` event as messages: one, or
    one ``tool`` message per tool result its content blocks hold."""
    body = _body(log)
    if log.event_name == CHOICE_EVENT:
        message = body.get("message")
        if not isinstance(message, dict):  # content blocks, or text, in place of a message
            message = {"role": "assistant", "content": message}
        role = str(message.get("role") or "assistant")
        content = message.get("content")
        tool_calls = message.get("tool_calls")
        call_id = None
    else:
        role = str(body.get("role") or LEGACY_MESSAGE_EVENTS[log.event_name or ""])
        content = body.get("content")
        tool_calls = body.get("tool_calls")
        call_id = _text(body.get("id")) if role == "tool" else None
    blocks = read_blocks(content)
    for kind in blocks.unknown:
        issues.append(f"{log.event_name} content block {kind!r} is not represented")
    return messages_from_blocks(
        role,
        blocks,
        calls=(*_openai_tool_calls(tool_calls), *blocks.calls),
        tool_call_id=call_id,
        name=_text(body.get("name")),
    )


def content_events(span: SpanFrame, logs: Sequence[LogFrame]) -> list[LogFrame]:
    """The span's GenAI content events: its log records, then the events recorded on the
    span itself under the same names, each with a dict body (a span event's attributes,
    a log's JSON-text body, parsed)."""
    out = [
        log if isinstance(log.body, dict) else _with_parsed_body(log)
        for log in logs
        if log.event_name in GENAI_EVENTS
    ]
    out += [log for log in logs if log.event_name not in GENAI_EVENTS]
    for event in span.events:
        name = event.get("name")
        if name not in GENAI_EVENTS:
            continue
        attributes = event.get("attributes") or {}
        out.append(
            LogFrame(
                trace_id=span.trace_id,
                span_id=span.span_id,
                time_ns=event.get("time_unix_nano") or event.get("time_ns"),
                observed_time_ns=None,
                event_name=name,
                body={key: _parsed(value) for key, value in attributes.items()},
                attributes=dict(attributes),
            )
        )
    return out


def _parsed(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return decode_json(value)
        except ValueError:
            return value
    return value


def _with_parsed_body(log: LogFrame) -> LogFrame:
    body = _parsed(log.body)
    return replace(log, body=body) if isinstance(body, dict) else log


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _join_text_parts(parts: Any) -> str | None:
    if isinstance(parts, str):
        return parts
    texts = [
        p.get("content") for p in parts or () if isinstance(p, dict) and p.get("type") == "text"
    ]
    return "\n".join(t for t in texts if isinstance(t, str)) if texts else None


def messages_from_parts(items: Any, issues: list[str], where: str) -> list[Message]:
    """Structured GenAI ``ChatMessage``/``OutputMessage`` lists as normalized messages.

    A message carrying ``tool_call_response`` parts becomes one ``tool`` message per
    response (the normalized form has one ``tool_call_id`` per message).
    """
    if not isinstance(items, list):
        issues.append(f"{where} messages are a {type(items).__name__}, not a list; ignored")
        return []
    results = derived_each(("genai-parts", where), items, partial(_item_messages, where=where))
    issues.extend(chain.from_iterable(map(itemgetter(1), results)))
    return list(chain.from_iterable(map(itemgetter(0), results)))


def _item_messages(index: int, item: Any, where: str) -> tuple[list[Message], list[str]]:
    """One structured GenAI message (``item``, at ``index`` of its list) as normalized
    messages, with the issues found reading it."""
    if not isinstance(item, dict):
        return [], [f"{where} message {index} is not an object; ignored"]
    out: list[Message] = []
    issues: list[str] = []
    role = str(item.get("role") or ("assistant" if where == "output" else "user"))
    texts: list[str] = []
    calls: list[ToolCall] = []
    reasoning: list[str] = []
    responses: list[Message] = []
    parts = item.get("parts")
    if parts is None and "content" in item:  # the flat {role, content} (OpenAI) form
        flat = read_blocks(item["content"], parse_json=False)
        parts = [{"type": "text", "content": text} for text in flat.texts]
        calls.extend(flat.calls)
        responses.extend(
            Message(role="tool", content=text, tool_call_id=call_id)
            for call_id, text in flat.results
        )
    # OpenAI-shaped tool calls beside (or instead of) parts: AG2, LiteLLM.
    calls.extend(_openai_tool_calls(item.get("tool_calls")))
    for part in parts or ():
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            content = part.get("content")
            from_repr = repr_tool_call(content, issues, f"{where} message {index}")
            if from_repr is not None:  # str() of an SDK object (OpenAI Agents)
                calls.append(from_repr)
            elif content is not None:
                texts.append(text_of(content) or "")
        elif kind == "tool_call":
            calls.append(
                ToolCall(
                    name=part.get("name"),
                    arguments=parse_arguments(part.get("arguments")),
                    id=part.get("id"),
                )
            )
        elif kind == "tool_call_response":
            response = part.get("response", part.get("result"))
            responses.append(
                Message(role="tool", content=text_of(response), tool_call_id=part.get("id"))
            )
        elif kind == "reasoning":
            if part.get("content") is not None:
                reasoning.append(str(part.get("content")))
        else:
            issues.append(
                f"{where} message {index}: part type {kind!r} is not "
                "represented in the normalized message"
            )
    name = _text(item.get("name"))
    if name is not None:  # the results of a named tool message keep its name
        responses = [r if r.name else replace(r, name=name) for r in responses]
    if responses and not texts and not calls:
        return responses, issues
    out.append(
        Message(
            role=role,
            content="\n".join(texts) if texts else None,
            tool_calls=tuple(calls),
            tool_call_id=_text(item.get("tool_call_id")),
            name=item.get("name"),
            reasoning="\n".join(reasoning) if reasoning else None,
        )
    )
    out.extend(responses)
    return out, issues


def messages_from_any(value: Any, issues: list[str], where: str) -> list[Message] | None:
    """Messages from the loosely shaped content older forms record: a list of GenAI or
    OpenAI-style messages, a ``{"text", "finish_reason"}`` completion, or plain text;
    ``None`` when ``value`` is none of these."""
    if isinstance(value, str):
        value = _parsed(value)
    if isinstance(value, list) and value and all(isinstance(m, dict) for m in value):
        if all("role" in m or "parts" in m for m in value):
            return messages_from_parts(value, issues, where)
        return None
    role = "assistant" if where == "output" else "user"
    if isinstance(value, dict):
        text = value.get("text", value.get("content"))
        if isinstance(text, str) and set(value) <= {"text", "content", "finish_reason", "role"}:
            return [Message(role=str(value.get("role") or role), content=text)]
        return None
    if isinstance(value, str) and value:
        return [Message(role=role, content=value)]
    return None


def tool_definitions(
    items: Any, issues: list[str], where: str = "gen_ai.tool.definitions"
) -> list[dict[str, Any]] | None:
    """Tool definitions in any shape producers record them — flat or OpenAI-nested
    (``{"function": {…}}``), each possibly a JSON text (the Vercel AI SDK), the schema under
    ``parameters``, ``inputSchema`` / ``input_schema`` (Vercel v5+, Anthropic) or
    ``parameters_json_schema`` (Gemini) — as dicts with the keys ``type``, ``name``,
    ``description``, ``parameters`` (JSON text). ``where`` names the source in issues."""
    if not isinstance(items, list):
        issues.append(f"{where} is not a list; ignored")
        return None
    out = []
    for item in items:
        if isinstance(item, str):
            try:
                item = decode_json(item)
            except ValueError:
                issues.append(f"a {where} entry is not JSON; ignored")
                continue
        if not isinstance(item, dict):
            continue
        body = item.get("function") if isinstance(item.get("function"), dict) else item
        schema = next(
            (body[key] for key in SCHEMA_KEYS if key in body and body[key] is not None),
            None,
        )
        out.append(
            {
                "type": item.get("type") or "function",
                "name": text_of(body.get("name")),
                "description": text_of(body.get("description")),
                "parameters": None if schema is None else json.dumps(schema, ensure_ascii=False),
            }
        )
    return out


def _loose_list(text: Any) -> list[Any] | None:
    """v1.26 span-event payloads: JSON, or the Python-repr form the spec's example uses."""
    if isinstance(text, list):
        return text
    if not isinstance(text, str):
        return None
    try:
        value = json_or_literal(text)
    except ValueError:
        return None
    return value if isinstance(value, list) else [value]


def _span_event_content(span: SpanFrame, mapped: MappedSpan, versions: list[str]) -> None:
    for event in span.events:
        name = event.get("name")
        attributes = event.get("attributes") or {}
        if name == "gen_ai.content.prompt" and mapped.input_messages is None:
            raw = attributes.get("gen_ai.prompt")
            items = _loose_list(raw) or _role_lines(raw)
            if items is None:
                mapped.issues.append("gen_ai.content.prompt event is not parseable; ignored")
                continue
            mapped.input_messages = [_flat_message(m, "user") for m in items]
            versions.append("1.26 span events")
        elif name == "gen_ai.content.completion" and mapped.output is None:
            raw = attributes.get("gen_ai.completion")
            items = _loose_list(raw)
            if items is None and isinstance(raw, str):
                items = [{"role": "assistant", "content": raw}]  # OpenLIT: the text itself
            if items is None:
                mapped.issues.append("gen_ai.content.completion event is not parseable; ignored")
                continue
            _set_choices(mapped, [_flat_message(m, "assistant") for m in items])
            if "1.26 span events" not in versions:
                versions.append("1.26 span events")


_ROLE_LINE = re.compile(r"^(system|user|assistant|tool|developer|function|model):\s?(.*)$")


def _role_lines(text: Any) -> list[dict[str, Any]] | None:
    """OpenLIT's prompt text: ``role: text`` lines (a line without a role continues the
    message before it); ``None`` when the text does not start with a role."""
    if not isinstance(text, str):
        return None
    out: list[dict[str, Any]] = []
    for line in text.splitlines():
        match = _ROLE_LINE.match(line)
        if match:
            out.append({"role": match.group(1), "content": match.group(2)})
        elif out:
            out[-1]["content"] += "\n" + line
        else:
            return None
    return out or None


def _flat_message(item: Any, default_role: str) -> Message:
    if not isinstance(item, dict):
        return Message(role=default_role, content=text_of(item))
    return Message(
        role=str(item.get("role") or default_role),
        content=_content_text(item.get("content")),
        tool_calls=_openai_tool_calls(item.get("tool_calls")),
        tool_call_id=item.get("tool_call_id"),
    )
