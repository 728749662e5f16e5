"""GenAI spans as an instrumented agent records them, for the scripted agents of this package.

The scripted runs become steps tables the way real traces do: their spans carry the OTel
GenAI attributes (``gen_ai.input.messages`` / ``gen_ai.output.messages`` in the parts
shape), and the real trajectory builder (:func:`otelcar.trajectory.build_trace`) maps them.
"""

from __future__ import annotations

from typing import Any

from otelcar.ingest.frames import SpanFrame
from otelcar.messages import Message

SERVICE = "scripted"


def message_parts(message: Message) -> dict[str, Any]:
    """``message`` in the GenAI parts shape (``{"role", "parts": [...]}``): text and tool-call
    parts, or one ``tool_call_response`` part for a tool message."""
    if message.role == "tool":
        return {
            "role": "tool",
            "parts": [
                {
                    "type": "tool_call_response",
                    "id": message.tool_call_id,
                    "response": message.content,
                }
            ],
        }
    parts: list[dict[str, Any]] = []
    if message.content is not None:
        parts.append({"type": "text", "content": message.content})
    parts += [
        {"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments}
        for c in message.tool_calls
    ]
    return {"role": message.role, "parts": parts}


def span(
    trace_id: str,
    number: int,
    name: str,
    attributes: dict[str, Any],
    parent: int | None,
    *,
    start_ns: int | None = None,
) -> SpanFrame:
    """Span ``number`` of a scripted trace (span id = the number in hex, ``parent`` likewise),
    5 ns long, starting at ``start_ns`` (default ``10 · number``)."""
    start = number * 10 if start_ns is None else start_ns
    return SpanFrame(
        trace_id=trace_id,
        span_id=f"{number:016x}",
        parent_span_id=f"{parent:016x}" if parent else None,
        name=name,
        kind="INTERNAL",
        start_ns=start,
        end_ns=start + 5,
        attributes=attributes,
        resource={"service.name": SERVICE},
        seq=number,
    )
