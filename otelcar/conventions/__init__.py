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
    USAGE_KEYS,
    Attrs,
    DialectMapper,
    MappedSpan,
    storable,
)
from otelcar.conventions.generic import GenericMapper
from otelcar.conventions.memo import derived_each
from otelcar.conventions.tool_payloads import unwrap_arguments, unwrap_result
from otelcar.ingest.frames import LogFrame, SpanFrame
from otelcar.messages import Message, normalize_role
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

#: The prefix of the issue on a step whose span carries content no mapper read.
UNREAD = "content unread: "
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
        return storable(_check_unread(_normalized(best[2].map(span, logs)), span, logs))
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
    """An LLM or tool step left without content although its span carries some is
    *content unread* (an issue starting :data:`UNREAD`), never "not captured"."""
    if mapped.kind not in ("llm", "tool") or mapped.has_content():
        return mapped
    keys = content_keys(span, logs)
    if keys:
        shown = ", ".join(keys[:6]) + (f" … {len(keys) - 6} more" if len(keys) > 6 else "")
        mapped.issues.append(f"{UNREAD}{shown} carry content {mapped.source!r} did not read")
    return mapped


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
