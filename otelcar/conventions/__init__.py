"""Dialect mappers and their registry.

Built-ins register exactly as third-party mappers do: the ``register_mappers`` plugin hook
(:mod:`otelcar.plugins`) fills the registry, once, the first time it is consulted, through the
same function :func:`register_mapper` calls. For each span every mapper is asked to
:meth:`~otelcar.conventions.base.DialectMapper.claim` it; the lowest priority wins (ties: the
earlier registration). A mapper that raises is isolated: the span falls back to the generic
mapper with the error in its issues.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from otelcar.conventions.base import (
    PARAM_KEYS,
    STEP_KINDS,
    UNREAD,
    USAGE_KEYS,
    Attrs,
    DialectMapper,
    MappedSpan,
    storable,
)
from otelcar.conventions.generic import GenericMapper
from otelcar.conventions.memo import derived_each
from otelcar.conventions.normalize import decoded, messages, unwrap_arguments, unwrap_result
from otelcar.conventions.shapes import check_claimed, holding_text
from otelcar.ingest.frames import LogFrame, SpanFrame
from otelcar.messages import Message, normalize_role, text_of
from otelcar.plugins.door import RegistryHook

__all__ = [
    "PARAM_KEYS",
    "STEP_KINDS",
    "UNREAD",
    "USAGE_KEYS",
    "Attrs",
    "DialectMapper",
    "MappedSpan",
    "content_keys",
    "map_span",
    "mapper_names",
    "register_mapper",
]

CONTENT_PREFIXES = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.prompt.",
    "gen_ai.completion.",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "llm.input_messages.",
    "llm.output_messages.",
    "ai.prompt",
    "ai.response.text",
    "ai.response.toolCalls",
    "ai.toolCall.args",
    "ai.toolCall.result",
    "gcp.vertex.agent.llm_request",
    "gcp.vertex.agent.llm_response",
    "gcp.vertex.agent.tool_call_args",
    "gcp.vertex.agent.tool_response",
    "braintrust.input",
    "braintrust.output",
)
# Values that stand for content withheld by the producer (OpenInference's redaction), not content.
PLACEHOLDERS = frozenset({"", "__REDACTED__"})
CONTENT_KEYS = frozenset({"input.value", "output.value", "gen_ai.prompt", "gen_ai.completion"})
CONTENT_EVENTS = frozenset(
    {
        "gen_ai.client.inference.operation.details",
        "gen_ai.system.message",
        "gen_ai.user.message",
        "gen_ai.assistant.message",
        "gen_ai.tool.message",
        "gen_ai.choice",
        "gen_ai.content.prompt",
        "gen_ai.content.completion",
    }
)

_MAPPERS: list[DialectMapper] = []
_FALLBACK = GenericMapper()


def _add(mapper: DialectMapper) -> None:
    for attribute in ("name", "claim", "map"):
        if not hasattr(mapper, attribute):
            raise TypeError(f"a dialect mapper needs {attribute!r} (got {mapper!r})")
    _MAPPERS[:] = [m for m in _MAPPERS if m.name != mapper.name]
    _MAPPERS.append(mapper)


_PLUGINS = RegistryHook("register_mappers", _add)


def register_mapper(mapper: DialectMapper) -> None:
    """Add a dialect mapper, replacing a registered one of the same name.

    The plugins' mappers (the built-ins among them) are registered before this one, so it
    replaces any of the same name; ties of claim priority go to the earlier registration."""
    _PLUGINS.ensure()
    _add(mapper)


def mapper_names() -> list[str]:
    """Names of the registered mappers, in registration order."""
    _PLUGINS.ensure()
    return [m.name for m in _MAPPERS]


def map_span(span: SpanFrame, logs: Sequence[LogFrame] = ()) -> MappedSpan:
    """Map one span with the mapper that claims it most strongly."""
    _PLUGINS.ensure()
    best: tuple[int, int, DialectMapper] | None = None
    for order, mapper in enumerate(_MAPPERS):
        try:
            priority = mapper.claim(span)
        except Exception:
            priority = None
        if priority is not None and (best is None or (priority, order) < best[:2]):
            best = (priority, order, mapper)
    if best is None:
        return storable(_FALLBACK.map(span, logs))
    try:
        mapped = _normalized(best[2].map(span, logs))
        _provider_finish_reason(mapped, span)
        _fill_empty_messages(mapped, span)
        _fill_call_ids(mapped, span)
        return storable(_check_unread(mapped, span, logs))
    except Exception as exc:
        mapped = _FALLBACK.map(span, logs)
        mapped.issues.append(
            f"mapper {best[2].name!r} failed on this span: {type(exc).__name__}: {exc}"
        )
        return storable(mapped)


def content_keys(span: SpanFrame, logs: Sequence[LogFrame] = ()) -> list[str]:
    """The attributes and events of ``span`` that carry GenAI content (messages, prompts,
    completions, inputs and outputs) in any dialect otelcar knows of."""
    keys = sorted(
        key
        for key, value in span.attributes.items()
        if (key.startswith(CONTENT_PREFIXES) or key in CONTENT_KEYS)
        and not (isinstance(value, str) and value in PLACEHOLDERS)
        and not key.endswith(".role")  # a role alone is no content
    )
    events = {event.get("name") for event in span.events} | {log.event_name for log in logs}
    keys += sorted(name for name in events if name in CONTENT_EVENTS)
    return keys


def _check_unread(mapped: MappedSpan, span: SpanFrame, logs: Sequence[LogFrame]) -> MappedSpan:
    """Content the mapper left unread is said (:func:`.shapes.check_claimed`): an LLM or
    tool step left without content although its span carries some, or holding only part of
    what its span's message-shaped values hold, is *content unread* (an issue starting
    :data:`UNREAD`), never "not captured". A value named as content that holds only what
    the step already holds (a message's skeleton, recorded with content capture off) is no
    unread content (:func:`.shapes.holding_text`): that step says *not captured*."""
    if mapped.kind not in ("llm", "tool") or mapped.has_content():
        return check_claimed(mapped, span, logs, [])
    keys = holding_text(mapped, content_keys(span, logs), span, logs)
    return check_claimed(mapped, span, logs, keys)


def _with_normal_role(_position: int, message: Any) -> Any:
    """``message`` with its role in the normalized vocabulary (anything else unchanged)."""
    if not isinstance(message, Message):
        return message
    fixed = normalize_role(message.role) if isinstance(message.role, str) else message.role
    return message if fixed == message.role else replace(message, role=fixed)


def _normalized(mapped: MappedSpan) -> MappedSpan:
    """Roles in the normalized vocabulary, tool payloads out of the frameworks' wrappers
    (:mod:`.tool_payloads`): the same for every mapper, built-in or not."""

    if mapped.input_messages:
        inputs = list(mapped.input_messages)
        mapped.input_messages = derived_each("normalized-role", inputs, _with_normal_role)
    if isinstance(mapped.output, Message):
        mapped.output = _with_normal_role(0, mapped.output)
    mapped.alternates = [_with_normal_role(0, m) for m in mapped.alternates]
    if mapped.kind == "tool":
        if isinstance(mapped.tool_result, str):
            mapped.tool_result = unwrap_result(mapped.tool_result)
        mapped.tool_args = unwrap_arguments(mapped.tool_args)
    return mapped


#: The last part of the attribute names providers' own stop reasons are recorded under
#: (``anthropic.message.stop_reason``, ``llm.response.finish_reason``, …).
STOP_REASON_ENDINGS = (".stop_reason", ".finish_reason", ".stopReason", ".finishReason")
_STOP_SYNONYMS = {"tool_use": "tool_call", "tool_calls": "tool_call", "tool-calls": "tool_call"}


def _provider_finish_reason(mapped: MappedSpan, span: SpanFrame) -> None:
    """An LLM step without a finish reason takes the provider's own stop reason when the
    span records one under any ``….stop_reason`` / ``….finish_reason`` attribute."""
    if mapped.kind != "llm" or mapped.finish_reason is not None:
        return
    for key in sorted(span.attributes):
        value = span.attributes[key]
        if key.endswith(STOP_REASON_ENDINGS) and isinstance(value, str) and value.strip():
            mapped.finish_reason = _STOP_SYNONYMS.get(value.strip(), value.strip())
            mapped.consumed.add(key)
            mapped.issues.append(f"finish reason read from {key} (the provider's own stop reason)")
            return


#: Attributes that hold a model call's whole request, by dialect, tried first.
WHOLE_REQUEST_KEYS = (
    "input.value",
    "traceloop.entity.input",
    "langfuse.observation.input",
    "braintrust.input_json",
    "braintrust.input",
    "gen_ai.prompt",
    "ai.prompt",
    "mlflow.spanInputs",
)
#: The last part of other attribute names that may hold it.
_REQUEST_ENDINGS = ("input", "inputs", "request", "spaninputs", "input_value", "prompt")


#: Attributes that hold a model call's whole response, by dialect, tried first.
WHOLE_RESPONSE_KEYS = (
    "output.value",
    "traceloop.entity.output",
    "langfuse.observation.output",
    "braintrust.output_json",
    "braintrust.output",
    "gen_ai.completion",
    "mlflow.spanOutputs",
)
#: The last part of other attribute names that may hold it.
_RESPONSE_ENDINGS = ("output", "outputs", "response", "spanoutputs", "output_value", "completion")


def _whole_requests(
    span: SpanFrame, first: Sequence[str], endings: Sequence[str]
) -> list[tuple[str, Any]]:
    keys = [k for k in first if k in span.attributes]
    keys += sorted(
        k for k in span.attributes if k not in keys and k.rsplit(".", 1)[-1].lower() in endings
    )
    return [(key, span.attributes[key]) for key in keys]


def _empty(message: Any) -> bool:
    return (
        isinstance(message, Message)
        and message.content is None
        and message.reasoning is None
        and not message.tool_calls
    )


def _fill_empty_messages(mapped: MappedSpan, span: SpanFrame) -> None:
    """Input messages the structured attributes left without content (a system message
    whose content was a list of text blocks; history messages with only a role) are read
    from the span's whole request (``input.value`` or the dialect's equivalent) when it
    holds the same messages, with an issue; those that cannot be filled are flagged, unless
    no message holds any text (content capture was off: the step says so already)."""
    if mapped.kind != "llm" or not mapped.input_messages:
        return
    inputs = list(mapped.input_messages)
    empty = [i for i, m in enumerate(inputs) if _empty(m)]
    if not empty:
        return
    filled: list[int] = []
    held = _held(span, WHOLE_REQUEST_KEYS, _REQUEST_ENDINGS, inputs)
    source, found = held if held is not None else (None, [])
    for i in empty if found else ():
        if found[i].has_content() or found[i].tool_calls:
            inputs[i] = replace(
                inputs[i],
                content=found[i].content,
                tool_calls=inputs[i].tool_calls or found[i].tool_calls,
                reasoning=found[i].reasoning,
                tool_call_id=inputs[i].tool_call_id or found[i].tool_call_id,
                name=inputs[i].name or found[i].name,
            )
            filled.append(i)
    if filled:
        mapped.input_messages = inputs
        mapped.consumed.add(str(source))
        mapped.issues.append(
            f"input messages {_indexes(filled)} had no content in the structured attributes; "
            f"read from {source}"
        )
    left = [i for i in empty if i not in filled]
    if left and any(text_of(m.content) for m in inputs):  # no text at all: capture was off
        shown = ", ".join(f"{i} ({text_of(inputs[i].role)})" for i in left[:8])
        mapped.issues.append(
            f"input messages {shown} have no content, and the span holds no request to read "
            "it from; an empty message is not what the model saw"
        )


def _indexes(items: list[int]) -> str:
    return ", ".join(str(i) for i in items)


def _role(message: Message) -> Any:
    return normalize_role(message.role) if isinstance(message.role, str) else message.role


def _held(
    span: SpanFrame, first: Sequence[str], endings: Sequence[str], mine: Sequence[Any]
) -> tuple[str, list[Message]] | None:
    """The first whole request (or response) of ``span`` holding as many messages as
    ``mine``, with the same roles: where the structured attributes' messages came from."""
    for key, raw in _whole_requests(span, first, endings):
        if isinstance(raw, str) and raw in PLACEHOLDERS:
            continue
        found = messages(decoded(raw), [])
        if (
            found
            and len(found) == len(mine)
            and all(isinstance(m, Message) for m in mine)
            and [_role(m) for m in found] == [_role(m) for m in mine]
        ):
            return key, found
    return None


def _with_ids(mine: Message, theirs: Message) -> Message:
    """``mine`` with the tool-call ids (or the tool calls) and the answered call's id that it
    lacks and ``theirs``, the same message read from the whole request, holds."""
    fixed = mine
    if _role(mine) == "tool" and not mine.tool_call_id and theirs.tool_call_id:
        fixed = replace(fixed, tool_call_id=theirs.tool_call_id)
    if not mine.tool_calls and theirs.tool_calls and _role(mine) == "assistant":
        fixed = replace(fixed, tool_calls=theirs.tool_calls)
    elif (
        mine.tool_calls
        and len(mine.tool_calls) == len(theirs.tool_calls)
        and any(not c.id for c in mine.tool_calls)
        and all(
            a.name is None or a.name == b.name
            for a, b in zip(mine.tool_calls, theirs.tool_calls, strict=True)
        )
    ):
        calls = tuple(
            a if a.id or not b.id else replace(a, id=b.id, name=a.name or b.name)
            for a, b in zip(mine.tool_calls, theirs.tool_calls, strict=True)
        )
        fixed = replace(fixed, tool_calls=calls)
    return fixed


def _null_content(mine: Message, theirs: Message) -> Message:
    """An input assistant message given its calls from the request keeps the request's null
    content where the attributes say ``""`` (LangChain's stand-in for it), as the request
    read alone (the shape reader) gives it."""
    fixed = _with_ids(mine, theirs)
    if fixed is not mine and fixed.tool_calls and mine.content == "" and theirs.content is None:
        fixed = replace(fixed, content=None)
    return fixed


def _lacks_ids(message: Any) -> bool:
    if not isinstance(message, Message):
        return False
    if _role(message) == "tool":
        return not message.tool_call_id
    return _role(message) == "assistant" and (
        not message.tool_calls or any(not c.id for c in message.tool_calls)
    )


def _fill_call_ids(mapped: MappedSpan, span: SpanFrame) -> None:
    """Tool-call ids (or whole tool calls) and tool messages' call ids that the structured
    attributes left out of an LLM step's messages are read from the span's whole request /
    response (``input.value`` / ``output.value`` or the dialect's equivalent, LangChain's
    ``generations`` reply too) when it holds the same messages (same count and roles, the
    calls' names matching), with an issue: OpenInference's LangChain.js instrumentation
    records no ``tool_call.id`` / ``tool_call_id`` attributes."""
    if mapped.kind != "llm":
        return
    inputs = list(mapped.input_messages or ())
    if any(_lacks_ids(m) for m in inputs):
        held = _held(span, WHOLE_REQUEST_KEYS, _REQUEST_ENDINGS, inputs)
        if held is not None:
            key, found = held
            fixed = [_null_content(a, b) for a, b in zip(inputs, found, strict=True)]
            changed = [i for i, (a, b) in enumerate(zip(inputs, fixed, strict=True)) if a != b]
            if changed:
                mapped.input_messages = fixed
                mapped.consumed.add(key)
                mapped.issues.append(
                    f"tool-call ids of input messages {_indexes(changed)} are not in the "
                    f"structured attributes; read from {key}"
                )
    output = mapped.output
    if isinstance(output, Message) and _lacks_ids(output):
        held = _held(span, WHOLE_RESPONSE_KEYS, _RESPONSE_ENDINGS, [output])
        if held is not None:
            fixed_output = _with_ids(output, held[1][0])
            if fixed_output != output:
                mapped.output = fixed_output
                mapped.consumed.add(held[0])
                mapped.issues.append(
                    f"the output's tool-call ids are not in the structured attributes; "
                    f"read from {held[0]}"
                )
