"""The fallback mapper: spans no dialect claims (HTTP, DB, framework internals).

They become ``other`` steps with every attribute kept, so nothing is dropped. A span that
looks like an LLM or tool call but that no dialect mapper recognises says so in its issues.
"""

from __future__ import annotations

from collections.abc import Sequence

from otelcar.conventions.base import MappedSpan
from otelcar.ingest.frames import LogFrame, SpanFrame

NAME = "generic"
PRIORITY = 1000
_LLM_HINTS = ("gen_ai.", "llm.", "openinference.", "traceloop.", "langfuse.", "braintrust.", "ai.")


class GenericMapper:
    """Maps any span to an ``other`` step; claims everything, with the weakest priority."""

    name = NAME

    def claim(self, span: SpanFrame) -> int | None:
        return PRIORITY

    def map(self, span: SpanFrame, logs: Sequence[LogFrame]) -> MappedSpan:
        mapped = MappedSpan(kind="other", name=span.name, source=NAME)
        hinted = sorted({k.split(".", 1)[0] for k in span.attributes if k.startswith(_LLM_HINTS)})
        if hinted:
            mapped.issues.append(
                f"unmapped dialect: span has {', '.join(h + '.*' for h in hinted)} attributes "
                "but no dialect mapper recognised it; kept as an 'other' step"
            )
        mapped.error = (
            span.attributes.get("error.type")
            if isinstance(span.attributes.get("error.type"), str)
            else None
        )
        return mapped
