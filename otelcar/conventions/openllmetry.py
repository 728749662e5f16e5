"""OpenLLMetry (Traceloop): indexed ``gen_ai.prompt.N.*`` spans, the ≥0.55 form, and the
``traceloop-sdk`` decorator spans (``reference/otel-genai.md`` §3 and §8.2).

Three span shapes, one mapper:

1. **Indexed** (``opentelemetry-instrumentation-openai`` ≤0.54, observed on 0.52.6): request
   messages are ``gen_ai.prompt.{i}.{role,content,tool_call_id,tool_calls.{j}.{id,name,arguments}}``
   grouped by the *numeric* index ``i``; choices are ``gen_ai.completion.{i}.*`` with
   ``finish_reason``; tool definitions are ``llm.request.functions.{i}.{name,description,
   parameters}``; usage adds ``llm.usage.total_tokens``. List content is a JSON string (decoded,
   text parts joined); ``"FILTERED"`` is the content-filter placeholder, not model text; a legacy
   ``function_call`` is ``tool_calls.0`` without an id.
2. **New form** (≥0.55, observed on 0.62.4): OTel GenAI ``gen_ai.input.messages`` /
   ``gen_ai.output.messages`` / ``gen_ai.tool.definitions``. The OTel GenAI mapper reads those
   correctly, so content is delegated to it (one home for that schema); this mapper claims the
   span first only to label its source and to read the OpenLLMetry extras.
3. **Decorator spans** (``@workflow``/``@task``/``@agent``/``@tool``): ``traceloop.span.kind`` and
   ``traceloop.entity.{name,input,output}``. A tool's input ``{"args": [...], "kwargs": {...}}``
   gives the arguments from ``kwargs``; its output (JSON) gives the result text. Tool spans have
   no call id, so the trajectory links them to the assistant call by name and order.
   LangChain's callback record (``{"input_str", "inputs", "kwargs", "tags", "metadata"}``)
   gives the arguments from ``inputs``, its serialized ``ToolMessage`` output the result
   (:mod:`otelcar.conventions.normalize`); a tool span with ``gen_ai.tool.call.arguments`` /
   ``.result`` / ``.id`` and no ``traceloop.entity.*`` is read from those.

Content that an attribute limit cut (invalid JSON) is reported and flagged
``content_truncated``; messages evicted by the SDK's attribute-count limit (the oldest
attributes go first, so the *first* messages) are reported and flagged too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from otelcar.conventions.base import Attrs, MappedSpan
from otelcar.conventions.genai import (
    CHOICE_EVENT,
    LEGACY_MESSAGE_EVENTS,
    GenAIMapper,
    content_events,
    legacy_messages,
    normalize_finish_reason,
)
from otelcar.conventions.memo import decode_json
from otelcar.conventions.normalize import (
    decoded,
    indexed,
    message_tool_calls,
    tool_arguments,
    tool_message_call_id,
    tool_result,
    unwrap_arguments,
)
from otelcar.ingest.frames import LogFrame, SpanFrame
from otelcar.messages import Message, ToolCall, parse_arguments, text_of

NAME = "openllmetry"
# Reference §8 classification order: gen_ai messages (otel-genai, 20) < OpenInference (30) <
# indexed OpenLLMetry (40) < traceloop decorators (50) < bare gen_ai op (otel-genai, 60).
# The new form outranks otel-genai only when OpenLLMetry's own markers are on the span, and
# then maps it with otel-genai's code.
PRIORITY_NEW_FORM = 15
PRIORITY_INDEXED = 40
PRIORITY_TRACELOOP = 50

FILTERED = "FILTERED"
LLM_REQUEST_TYPES = frozenset({"chat", "completion"})
_INDEXED = re.compile(r"^(gen_ai\.prompt|gen_ai\.completion|llm\.request\.functions)\.\d+\.")
# Attributes only OpenLLMetry's instrumentations set on LLM spans (not traceloop-sdk stamps,
# which it also puts on spans of other instrumentations under a workflow).
_INSTRUMENTATION_MARKERS = (
    "llm.request.type",
    "llm.is_streaming",
    "gen_ai.is_streaming",
    "gen_ai.openai.api_base",
    "llm.usage.total_tokens",
)
_DECORATOR_KINDS = {
    "workflow": "agent",
    "agent": "agent",
    "tool": "tool",
    "task": "other",
}


def is_indexed(attributes: dict[str, Any]) -> bool:
    """Whether a span carries the indexed (≤0.54) form: ``llm.request.type`` or any
    ``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*`` / ``llm.request.functions.N.*`` key
    (eviction can remove ``llm.request.type``, which is set first)."""
    if "gen_ai.input.messages" in attributes or "gen_ai.output.messages" in attributes:
        return False
    return "llm.request.type" in attributes or any(_INDEXED.match(k) for k in attributes)


def is_new_form(attributes: dict[str, Any]) -> bool:
    """Whether a span is an OpenLLMetry ≥0.55 LLM span (GenAI messages + OpenLLMetry markers),
    or a hybrid carrying GenAI messages beside indexed keys (LiteLLM's callback: its tool
    call only in ``gen_ai.completion.0.function_call.*``, its tools in
    ``llm.request.functions.*``)."""
    has_messages = "gen_ai.input.messages" in attributes or "gen_ai.output.messages" in attributes
    return has_messages and (
        any(k in attributes for k in _INSTRUMENTATION_MARKERS)
        or any(_INDEXED.match(k) for k in attributes)
    )


class OpenLLMetryMapper:
    """Mapper for OpenLLMetry / Traceloop spans (see the module docstring)."""

    name = NAME

    def claim(self, span: SpanFrame) -> int | None:
        """15 for a ≥0.55 LLM span, 40 for an indexed one, 50 for a decorator span, else None."""
        attrs = span.attributes
        if is_new_form(attrs):
            return PRIORITY_NEW_FORM
        if is_indexed(attrs):
            return PRIORITY_INDEXED
        if isinstance(attrs.get("traceloop.span.kind"), str):
            return PRIORITY_TRACELOOP
        return None

    def map(self, span: SpanFrame, logs: Sequence[LogFrame]) -> MappedSpan:
        """One claimed span (and its log events) as a step; never raises for bad content."""
        if is_new_form(span.attributes):
            return _map_new_form(span, logs)
        consumed: set[str] = set()
        attrs = Attrs(span.attributes, consumed)
        if is_indexed(span.attributes):
            mapped = MappedSpan(kind="llm", name=span.name, source=NAME, consumed=consumed)
            _map_indexed(span, attrs, mapped)
            _events_content(content_events(span, logs), mapped)
        else:
            mapped = MappedSpan(kind="other", name=span.name, source=NAME, consumed=consumed)
            _map_decorator(span, attrs, mapped)
        mapped.agent_name = mapped.agent_name or attrs.text("gen_ai.agent.name")
        mapped.conversation_id = attrs.text("gen_ai.conversation.id")
        mapped.content_truncated = mapped.content_truncated or bool(attrs.truncated)
        return mapped


def _version(span: SpanFrame) -> str:
    """``major.minor`` of the instrumentation (scope version), or empty."""
    parts = (span.scope_version or "").split(".")
    return " " + ".".join(parts[:2]) if len(parts) >= 2 and parts[0].isdigit() else ""


# ------------------------------------------------------------------------------------------
# New form (≥0.55): delegated to the OTel GenAI mapper
# ------------------------------------------------------------------------------------------


def _map_new_form(span: SpanFrame, logs: Sequence[LogFrame]) -> MappedSpan:
    mapped = GenAIMapper().map(span, logs)
    mapped.source = f"{NAME}{_version(span)} ({mapped.source})"
    attrs = Attrs(span.attributes, mapped.consumed)
    if mapped.usage and mapped.usage.get("total_tokens") is None:
        mapped.usage["total_tokens"] = attrs.int("llm.usage.total_tokens")
    # What only the indexed keys beside the GenAI messages hold.
    completion = indexed(span.attributes, "gen_ai.completion").get(0)
    if mapped.output is not None and not mapped.output.tool_calls and completion:
        calls = _tool_calls(completion, "gen_ai.completion.0", attrs, mapped)
        if calls:
            mapped.output = replace(mapped.output, tool_calls=calls)
            mapped.issues.append(
                "tool call read from gen_ai.completion.0 (gen_ai.output.messages has none)"
            )
    functions = indexed(span.attributes, "llm.request.functions")
    if mapped.tools_available is None and functions:
        mapped.tools_available = _functions(functions, attrs, mapped)
    return mapped


def _events_content(logs: Sequence[LogFrame], mapped: MappedSpan) -> None:
    """``use_legacy_attributes=False``: the content travels as v1.28-style log events
    (``gen_ai.*.message`` in emission order, ``gen_ai.choice`` by index), read with the OTel
    GenAI mapper's :func:`~otelcar.conventions.genai.legacy_messages`."""
    if mapped.kind != "llm" or mapped.input_messages is not None or mapped.output is not None:
        return
    messages = [
        m
        for log in logs
        if log.event_name in LEGACY_MESSAGE_EVENTS
        for m in legacy_messages(log, mapped.issues)
    ]
    choices = sorted(
        (log for log in logs if log.event_name == CHOICE_EVENT),
        key=lambda log: _index(log.body.get("index") if isinstance(log.body, dict) else None),
    )
    if not messages and not choices:
        return
    mapped.input_messages = messages or None
    if choices:
        outputs = [m for log in choices for m in legacy_messages(log, mapped.issues)]
        mapped.output, mapped.alternates, mapped.n_choices = outputs[0], outputs[1:], len(outputs)
        body = choices[0].body if isinstance(choices[0].body, dict) else {}
        mapped.finish_reason = mapped.finish_reason or normalize_finish_reason(
            body.get("finish_reason")
        )
    mapped.source = f"{mapped.source} + events"


def _index(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


# ------------------------------------------------------------------------------------------
# Indexed form (≤0.54)
# ------------------------------------------------------------------------------------------


def _map_indexed(span: SpanFrame, attrs: Attrs, mapped: MappedSpan) -> None:
    request_type = attrs.text("llm.request.type")
    if request_type is not None and request_type not in LLM_REQUEST_TYPES:
        mapped.kind = "other"  # embeddings, rerank, …
    mapped.operation = request_type
    mapped.source = f"{NAME}{_version(span)} indexed"
    mapped.provider = attrs.text("gen_ai.provider.name", "gen_ai.system")
    mapped.request_model = attrs.text("gen_ai.request.model")
    mapped.response_model = attrs.text("gen_ai.response.model")
    mapped.name = mapped.response_model or mapped.request_model or span.name
    mapped.response_id = attrs.text("gen_ai.response.id")
    mapped.error = attrs.text("error.type")
    mapped.params = _indexed_params(attrs)
    mapped.usage = {
        "input_tokens": attrs.int("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens"),
        "output_tokens": attrs.int("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens"),
        "cache_read_tokens": attrs.int("gen_ai.usage.cache_read_input_tokens"),
        "reasoning_tokens": attrs.int("llm.usage.reasoning_tokens"),
        "total_tokens": attrs.int("llm.usage.total_tokens", "gen_ai.usage.total_tokens"),
    }
    prompts = indexed(span.attributes, "gen_ai.prompt")
    if prompts:
        mapped.input_messages = _prompt_messages(prompts, attrs, mapped)
    completions = indexed(span.attributes, "gen_ai.completion")
    if completions:
        _set_completions(completions, attrs, mapped)
    functions = indexed(span.attributes, "llm.request.functions")
    if functions:
        mapped.tools_available = _functions(functions, attrs, mapped)
    _check_eviction(span, prompts, mapped)


def _indexed_params(attrs: Attrs) -> dict[str, Any]:
    stop = attrs.get("llm.chat.stop_sequences")
    if stop is None:
        stop = attrs.get("gen_ai.request.stop_sequences")
    return {
        "temperature": attrs.float("gen_ai.request.temperature"),
        "top_p": attrs.float("gen_ai.request.top_p"),
        "top_k": attrs.float("llm.top_k", "gen_ai.request.top_k"),
        "max_tokens": attrs.int("gen_ai.request.max_tokens"),
        "seed": attrs.int("gen_ai.request.seed"),
        "stop": [str(s) for s in stop] if isinstance(stop, list) else stop,
        "n": None,
        "frequency_penalty": attrs.float(
            "llm.frequency_penalty", "gen_ai.request.frequency_penalty"
        ),
        "presence_penalty": attrs.float("llm.presence_penalty", "gen_ai.request.presence_penalty"),
    }


def _content(key: str, value: Any, attrs: Attrs, mapped: MappedSpan) -> str | None:
    """A ``…content`` value as text. OpenLLMetry ``json.dumps`` list content (OpenAI content
    parts): text parts are joined with newlines; other parts keep the JSON text."""
    attrs.get(key)
    if not isinstance(value, str) or not value.startswith("[{"):
        return text_of(value)
    try:
        parts = decode_json(value)
    except ValueError:
        attrs.truncated.append(key)
        mapped.issues.append(
            f"{key} looks like JSON list content but does not decode (cut by an attribute "
            "length limit?); kept as text"
        )
        return value
    if not isinstance(parts, list) or not all(isinstance(p, dict) for p in parts):
        return value
    texts = [p.get("text") for p in parts if p.get("type") == "text"]
    if len(texts) == len(parts) and all(isinstance(t, str) for t in texts):
        return "\n".join(texts)  # type: ignore[arg-type]
    mapped.issues.append(f"{key}: non-text content parts kept as their JSON text")
    return value


def _tool_calls(
    fields: dict[str, Any], base_key: str, attrs: Attrs, mapped: MappedSpan
) -> tuple[ToolCall, ...]:
    """A message's ``tool_calls.{j}.{id,name,arguments}`` (or the pre-tools
    ``function_call.{name,arguments}``: one call, no id), read by the normaliser
    (:func:`~.normalize.message_tool_calls`); arguments cut by an attribute length limit are
    reported and flagged."""
    calls = indexed(fields, "tool_calls")
    read = "tool_calls." if calls else ("function_call.name", "function_call.arguments")
    for field in fields:
        if field.startswith(read):
            attrs.get(f"{base_key}.{field}")
    for j, call in calls.items():
        raw = call.get("arguments")
        cut = isinstance(raw, str) and raw.lstrip().startswith("{")
        if cut and isinstance(parse_arguments(raw), str):
            key = f"{base_key}.tool_calls.{j}"
            attrs.truncated.append(f"{key}.arguments")
            mapped.issues.append(
                f"{key}.arguments is not valid JSON (cut by an attribute length limit, or "
                "the model's own output); kept as the raw string"
            )
    return message_tool_calls(fields, mapped.issues)


def _prompt_messages(
    prompts: dict[int, dict[str, Any]], attrs: Attrs, mapped: MappedSpan
) -> list[Message]:
    messages = []
    for i, fields in prompts.items():
        key = f"gen_ai.prompt.{i}"
        role = fields.get("role")
        if not isinstance(role, str):
            continue  # partially evicted; reported by _check_eviction, kept in attributes
        attrs.get(f"{key}.role")
        messages.append(
            Message(
                role=role,
                content=_content(f"{key}.content", fields.get("content"), attrs, mapped),
                tool_calls=_tool_calls(fields, key, attrs, mapped),
                tool_call_id=attrs.text(f"{key}.tool_call_id"),
                name=attrs.text(f"{key}.name"),
            )
        )
    return messages


def _set_completions(
    completions: dict[int, dict[str, Any]], attrs: Attrs, mapped: MappedSpan
) -> None:
    choices: list[Message] = []
    reasons: list[Any] = []
    for i, fields in completions.items():
        key = f"gen_ai.completion.{i}"
        reason = attrs.get(f"{key}.finish_reason")
        content = fields.get("content")
        refusal = attrs.text(f"{key}.refusal")
        if content == FILTERED and reason in ("content_filter", None):
            attrs.get(f"{key}.content")
            attrs.get(f"{key}.content_filter_results")
            mapped.issues.append(
                f"{key}: the provider's content filter fired; 'FILTERED' is OpenLLMetry's "
                "placeholder, not model text (content set to None)"
            )
            reason = "content_filter"
            text = None
        elif refusal is not None and content is None:
            mapped.issues.append(f"{key}: the model refused; its refusal text is the content")
            text = refusal
        else:
            text = _content(f"{key}.content", content, attrs, mapped)
        attrs.get(f"{key}.role")
        choices.append(
            Message(
                role=str(fields.get("role") or "assistant"),
                content=text,
                tool_calls=_tool_calls(fields, key, attrs, mapped),
            )
        )
        reasons.append(reason)
    mapped.output = choices[0]
    mapped.alternates = choices[1:]
    mapped.n_choices = len(choices)
    mapped.finish_reason = normalize_finish_reason(reasons[0])


def _functions(
    functions: dict[int, dict[str, Any]], attrs: Attrs, mapped: MappedSpan
) -> list[dict[str, Any]]:
    """``llm.request.functions.N.*`` in the shape of ``genai.tool_definitions``."""
    out = []
    for i, fields in functions.items():
        key = f"llm.request.functions.{i}"
        for field in ("name", "description"):
            attrs.get(f"{key}.{field}")
        parameters = fields.get("parameters")
        if isinstance(parameters, str):
            try:
                decode_json(parameters)
            except ValueError:
                attrs.truncated.append(f"{key}.parameters")
                mapped.issues.append(
                    f"{key}.parameters is not valid JSON (cut by an attribute length limit?); "
                    "raw value kept in attributes"
                )
                parameters = None
            else:
                attrs.get(f"{key}.parameters")
        elif parameters is not None:
            attrs.get(f"{key}.parameters")
            parameters = json.dumps(parameters, ensure_ascii=False)
        out.append(
            {
                "type": "function",
                "name": text_of(fields.get("name")),
                "description": text_of(fields.get("description")),
                "parameters": parameters,
            }
        )
    return out


def _check_eviction(
    span: SpanFrame, prompts: dict[int, dict[str, Any]], mapped: MappedSpan
) -> None:
    """Report what the SDK's attribute-count limit evicted (the oldest attributes first)."""
    dropped = span.dropped_attributes_count
    partial = [i for i, fields in prompts.items() if not isinstance(fields.get("role"), str)]
    if not dropped:
        if partial:
            mapped.issues.append(
                f"request messages {_ranges(partial)} have no role; kept in attributes"
            )
        return
    missing = sorted(set(range(max(prompts, default=-1) + 1)) - set(prompts))
    if missing or partial:
        lost = _ranges(missing)
        mapped.issues.append(
            f"{dropped} attributes were evicted by the SDK's attribute count limit (the oldest "
            f"go first): request messages {lost or 'none'} are missing"
            + (f", {_ranges(partial)} incomplete (kept in attributes)" if partial else "")
            + "; the input context is incomplete"
        )
        mapped.content_truncated = True
    else:
        mapped.issues.append(
            f"{dropped} attributes dropped by the SDK's attribute count limit (the oldest are "
            "evicted first: request type, model and parameters may be missing)"
        )


def _ranges(indexes: list[int]) -> str:
    """``[0, 1, 2, 5]`` → ``"0–2, 5"``."""
    out: list[str] = []
    for i in indexes:
        if out and out[-1].split("–")[-1] == str(i - 1):
            out[-1] = f"{out[-1].split('–')[0]}–{i}"
        else:
            out.append(str(i))
    return ", ".join(out)


# ------------------------------------------------------------------------------------------
# traceloop-sdk decorator spans
# ------------------------------------------------------------------------------------------


def _map_decorator(span: SpanFrame, attrs: Attrs, mapped: MappedSpan) -> None:
    """``traceloop.span.kind`` workflow/agent → agent (an agent opens an episode), tool →
    tool (arguments and result from ``traceloop.entity.input``/``.output``), task and unknown →
    other."""
    kind = attrs.text("traceloop.span.kind") or "unknown"
    entity = attrs.text("traceloop.entity.name") or _strip_kind(span.name, kind)
    mapped.kind = _DECORATOR_KINDS.get(kind, "other")
    if kind == "task" and attrs.text("tool.name"):
        _map_llamaindex_call_tool(span, attrs, mapped)
        return
    mapped.operation = kind
    mapped.name = entity
    mapped.source = f"{NAME} traceloop"
    if kind == "agent":
        mapped.episode_boundary = True
        mapped.agent_name = attrs.text("gen_ai.agent.name") or entity
    elif kind == "tool":
        name = attrs.text("gen_ai.tool.name") or entity
        mapped.name = name
        mapped.tool_name = name
        mapped.tool_call_id = attrs.text("gen_ai.tool.call.id")
        mapped.tool_args = _entity_arguments(span, attrs, mapped)
        _, output = _entity_json(span, attrs, "traceloop.entity.output", mapped)
        mapped.tool_result = text_of(output)
        # Instrumentations that record the GenAI tool attributes instead (or as well).
        if mapped.tool_args is None and "traceloop.entity.input" not in span.attributes:
            raw = attrs.get("gen_ai.tool.call.arguments")
            mapped.tool_args = None if raw is None else tool_arguments(raw)
        if mapped.tool_result is None:
            mapped.tool_result = text_of(attrs.get("gen_ai.tool.call.result"))
        if mapped.tool_call_id is None:
            mapped.tool_call_id = _callback_call_id(span)


def _map_llamaindex_call_tool(span: SpanFrame, attrs: Attrs, mapped: MappedSpan) -> None:
    """OpenLLMetry's LlamaIndex instrumentation (0.62.4) records an agent's tool run as a
    ``task`` span (``BaseWorkflowAgent.task``, the workflow's ``call_tool`` step) with
    ``tool.name`` and ``tool.arguments`` (JSON), and as ``traceloop.entity.output`` the
    ``ToolCallResult`` event: ``{tool_name, tool_kwargs, tool_id, tool_output: ToolOutput}``.
    It is the tool step: id ``tool_id``, result the ``ToolOutput``'s text. (The nested
    ``FunctionTool.task`` span holds the same run again and stays an ``other`` step.)"""
    name = attrs.text("tool.name")
    mapped.kind = "tool"
    mapped.operation = "task"
    mapped.source = f"{NAME} traceloop"
    mapped.name = mapped.tool_name = name
    raw = attrs.get("tool.arguments")
    mapped.tool_args = None if raw is None else tool_arguments(raw)
    _, record = _entity_json(span, attrs, "traceloop.entity.output", mapped)
    if isinstance(record, dict):
        call_id = record.get("tool_id")
        mapped.tool_call_id = call_id if isinstance(call_id, str) and call_id else None
        if mapped.tool_args is None and isinstance(record.get("tool_kwargs"), dict):
            mapped.tool_args = record["tool_kwargs"]
        mapped.tool_result = tool_result(record.get("tool_output"))
    elif record is not None:
        mapped.tool_result = text_of(record)


#: Where OpenLLMetry's LangChain instrumentation puts LangChain's callback records.
_CALLBACK_RECORD_KEYS = (
    "traceloop.entity.output",
    "gen_ai.tool.call.result",
    "traceloop.entity.input",
    "gen_ai.tool.call.arguments",
)


def _callback_call_id(span: SpanFrame) -> str | None:
    """The tool call's id inside LangChain's callback records, for a tool span without
    ``gen_ai.tool.call.id``: the ``tool_call_id`` of the ``ToolMessage`` ``on_tool_end``
    returned (``{"output": <ToolMessage>, "kwargs": …}``), else ``on_tool_start``'s
    ``kwargs.tool_call_id``."""
    for key in _CALLBACK_RECORD_KEYS:
        record = decoded(span.attributes.get(key))
        if not isinstance(record, dict):
            continue
        call_id = tool_message_call_id(record.get("output"))
        if call_id:
            return call_id
        kwargs = record.get("kwargs")
        if isinstance(kwargs, dict) and isinstance(kwargs.get("tool_call_id"), str):
            return kwargs["tool_call_id"] or None
    return None


def _strip_kind(span_name: str, kind: str) -> str:
    suffix = f".{kind}"
    return span_name[: -len(suffix)] if span_name.endswith(suffix) else span_name


def _entity_json(span: SpanFrame, attrs: Attrs, key: str, mapped: MappedSpan) -> tuple[bool, Any]:
    """``(decoded, value)``: the JSON-decoded attribute, or ``(False, raw string)`` when it does
    not decode (reported as truncated), or ``(False, None)`` when absent."""
    raw = span.attributes.get(key)
    if raw is None:
        return False, None
    if not isinstance(raw, str):
        attrs.get(key)
        return True, raw
    try:
        value = decode_json(raw)
    except ValueError:
        attrs.truncated.append(key)
        mapped.issues.append(
            f"{key} is not valid JSON ({len(raw)} chars; cut by traceloop's or the SDK's "
            "attribute length limit?); raw value kept"
        )
        return False, raw
    attrs.get(key)
    return True, value


def _entity_arguments(span: SpanFrame, attrs: Attrs, mapped: MappedSpan) -> Any:
    """Tool arguments from ``{"args": [...], "kwargs": {...}}``: the kwargs when no positional
    arguments were passed; otherwise ``None`` (the trajectory then takes the arguments from the
    linked assistant tool call) and an issue."""
    ok, value = _entity_json(span, attrs, "traceloop.entity.input", mapped)
    if not ok:
        return value if isinstance(value, str) else None
    if unwrap_arguments(value) is not value:  # a wrapper: LangChain's callback record, …
        return tool_arguments(value)
    if isinstance(value, dict) and ("args" in value or "kwargs" in value):
        args, kwargs = value.get("args") or [], value.get("kwargs") or {}
        if not args and isinstance(kwargs, dict):
            return kwargs
        mapped.issues.append(
            "traceloop.entity.input has positional arguments, whose parameter names are not "
            "recorded; arguments left to the linked assistant tool call"
        )
        mapped.consumed.discard("traceloop.entity.input")
        return None
    return parse_arguments(value)
