"""Dialect mappers and their registry.

Built-ins register exactly as third-party mappers do, through :func:`register_mapper`.
For each span every mapper is asked to :meth:`~otelcar.conventions.base.DialectMapper.claim`
it; the lowest priority wins (ties: the earlier registration). A mapper that raises is
isolated: the span falls back to the generic mapper with the error in its issues.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from otelcar.conventions.base import (
    PARAM_KEYS,
    STEP_KINDS,
    USAGE_KEYS,
    Attrs,
    DialectMapper,
    MappedSpan,
    storable,
)
from otelcar.conventions.genai import GenAIMapper
from otelcar.conventions.generic import GenericMapper
from otelcar.conventions.langfuse import LangfuseMapper
from otelcar.conventions.langsmith import LangSmithMapper
from otelcar.conventions.openinference import OpenInferenceMapper
from otelcar.conventions.openllmetry import OpenLLMetryMapper
from otelcar.conventions.tool_payloads import unwrap_arguments, unwrap_result
from otelcar.conventions.vercel_ai import VercelAIMapper
from otelcar.conventions.whowhen import WhoWhenMapper
from otelcar.ingest.frames import LogFrame, SpanFrame
from otelcar.messages import Message, normalize_role

__all__ = [
    "PARAM_KEYS",
    "STEP_KINDS",
    "USAGE_KEYS",
    "Attrs",
    "DialectMapper",
    "MappedSpan",
    "map_span",
    "mapper_names",
    "register_mapper",
]

_MAPPERS: list[DialectMapper] = []
_FALLBACK = GenericMapper()


def register_mapper(mapper: DialectMapper) -> None:
    """Add a dialect mapper (replacing a registered one of the same name)."""
    _MAPPERS[:] = [m for m in _MAPPERS if m.name != mapper.name]
    _MAPPERS.append(mapper)


def mapper_names() -> list[str]:
    """Names of the registered mappers, in registration order."""
    return [m.name for m in _MAPPERS]


def map_span(span: SpanFrame, logs: Sequence[LogFrame] = ()) -> MappedSpan:
    """Map one span with the mapper that claims it most strongly."""
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
        return storable(_normalized(best[2].map(span, logs)))
    except Exception as exc:
        mapped = _FALLBACK.map(span, logs)
        mapped.issues.append(
            f"mapper {best[2].name!r} failed on this span: {type(exc).__name__}: {exc}"
        )
        return storable(mapped)


def _normalized(mapped: MappedSpan) -> MappedSpan:
    """Roles in the normalized vocabulary, tool payloads out of the frameworks' wrappers
    (:mod:`.tool_payloads`): the same for every mapper, built-in or not."""

    def role(message: Message) -> Message:
        fixed = normalize_role(message.role) if isinstance(message.role, str) else message.role
        return message if fixed == message.role else replace(message, role=fixed)

    if mapped.input_messages:
        mapped.input_messages = [
            role(m) if isinstance(m, Message) else m for m in mapped.input_messages
        ]
    if isinstance(mapped.output, Message):
        mapped.output = role(mapped.output)
    mapped.alternates = [role(m) if isinstance(m, Message) else m for m in mapped.alternates]
    if mapped.kind == "tool":
        if isinstance(mapped.tool_result, str):
            mapped.tool_result = unwrap_result(mapped.tool_result)
        mapped.tool_args = unwrap_arguments(mapped.tool_args)
    return mapped


register_mapper(GenAIMapper())
register_mapper(WhoWhenMapper())
register_mapper(LangfuseMapper())
register_mapper(LangSmithMapper())
register_mapper(OpenInferenceMapper())
register_mapper(OpenLLMetryMapper())
register_mapper(VercelAIMapper())
