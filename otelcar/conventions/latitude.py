"""Latitude's telemetry (``@latitude-data/telemetry``): the spans its GenAI mapper cannot own.

Latitude marks every span with ``latitude.type``. Model calls (``completion``, with
``gen_ai.operation.name`` = ``completion``) and tool runs (``tool``) are GenAI spans that
:mod:`otelcar.conventions.genai` reads; ``http`` spans are the transport. A ``prompt`` span is
the run of one prompt document (``latitude.document_uuid``, rendered from
``gen_ai.request.template`` with ``gen_ai.request.parameters``) and holds that run's model
calls and tools: an ``agent`` step that starts an episode, the template and its parameters
kept in its attributes.
"""

from __future__ import annotations

from collections.abc import Sequence

from otelcar.conventions.base import Attrs, MappedSpan
from otelcar.ingest.frames import LogFrame, SpanFrame

NAME = "latitude"
PRIORITY = 20
TYPE = "latitude.type"
RUN_TYPES = frozenset({"prompt", "chat", "external", "unresolved_external", "step"})


class LatitudeMapper:
    """Mapper for Latitude's prompt-run spans (see the module docstring)."""

    name = NAME

    def claim(self, span: SpanFrame) -> int | None:
        kind = span.attributes.get(TYPE)
        return PRIORITY if isinstance(kind, str) and kind in RUN_TYPES else None

    def map(self, span: SpanFrame, logs: Sequence[LogFrame]) -> MappedSpan:
        del logs
        consumed: set[str] = set()
        attrs = Attrs(span.attributes, consumed)
        run_type = attrs.text(TYPE)
        document = attrs.text("latitude.document_uuid")
        mapped = MappedSpan(
            kind="agent", name=span.name, source=NAME, operation=run_type, consumed=consumed
        )
        mapped.agent_name = document or span.name
        mapped.episode_boundary = True
        return mapped
