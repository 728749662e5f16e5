"""Phoenix span exports → span frames.

Arize Phoenix hands spans out as JSON objects (its REST API ``/v1/projects/{id}/spans``,
``phoenix.client``'s ``spans`` methods, a JSON list or one span per line, or a
``{"data": [...], "next_cursor"}`` page). One span::

    {"id", "name", "context": {"trace_id", "span_id"}, "span_kind": "LLM" | "TOOL" | …,
     "parent_id", "start_time", "end_time", "status_code", "status_message",
     "attributes": {…flat OpenInference keys…}, "events": [{"name", "timestamp",
     "attributes"}]}

Each becomes a :class:`~otelcar.ingest.frames.SpanFrame` carrying its attributes as they are,
with ``span_kind`` as ``openinference.span.kind`` when the attributes lack it, so the
OpenInference mapper reads it like any OTLP span of that dialect. Ids that are not OTLP hex
(Phoenix's fixtures and some exports use readable ids) are derived stably
(:func:`~otelcar.ingest.formats.derived_id`); times are ISO 8601 in any spelling
(:mod:`.timestamps`).
"""

from __future__ import annotations

from typing import Any

from otelcar.errors import FormatError
from otelcar.ingest import jsontext
from otelcar.ingest.exports.timestamps import time_ns
from otelcar.ingest.formats import ExportFormat, derived_id
from otelcar.ingest.frames import Decoded, SpanFrame, check_time

FORMAT = "phoenix-spans"
KIND_ATTR = "openinference.span.kind"
EXPORT_ATTR = "phoenix.export"
SCOPE_NAME = "phoenix"
STATUS = {"OK": "OK", "ERROR": "ERROR", "UNSET": "UNSET"}
PAGE_KEYS = ("data", "spans")


def _is_span(value: Any) -> bool:
    """A Phoenix span: ``context`` with ``trace_id`` and ``span_id``, plus ``span_kind`` or
    ``attributes``."""
    if not isinstance(value, dict):
        return False
    context = value.get("context")
    if not isinstance(context, dict) or not context.get("trace_id") or not context.get("span_id"):
        return False
    return "span_kind" in value or isinstance(value.get("attributes"), dict)


def _spans_of(value: Any) -> list[Any] | None:
    """The span list of one JSON value: a span, a list, or a ``data``/``spans`` page."""
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        if _is_span(value):
            return [value]
        for key in PAGE_KEYS:
            if isinstance(value.get(key), list):
                return value[key]
    return None


def detect(value: Any) -> bool:
    """Whether a JSON value is a Phoenix span export (its first span decides)."""
    spans = _spans_of(value)
    return bool(spans) and _is_span(spans[0])


def decode(payload: bytes) -> Decoded:
    """Decode one JSON record (a line, or a whole document) of Phoenix spans."""
    return decode_value(*jsontext.loads(payload))


def decode_value(value: Any, replaced: int) -> Decoded:
    """:func:`decode` of a record already parsed (``replaced``: surrogates replaced)."""
    spans = _spans_of(value)
    if spans is None:
        raise FormatError(f"a JSON {type(value).__name__}, not Phoenix spans")
    decoded = Decoded()
    if replaced:
        decoded.problems.append(jsontext.surrogate_note(replaced))
    for index, item in enumerate(spans):
        if not _is_span(item):
            decoded.problems.append(
                f"item {index}: a {type(item).__name__}, not a Phoenix span (no context "
                "with trace_id and span_id); skipped"
            )
            continue
        try:
            decoded.spans.append(span_to_frame(item))
        except ValueError as exc:
            decoded.problems.append(f"span {index} ({str(item.get('name'))[:80]!r}): {exc}")
    return decoded


def span_to_frame(span: dict[str, Any]) -> SpanFrame:
    """One Phoenix span as a frame (see the module docstring); ``ValueError`` when its
    times are unreadable or out of range, or its attributes or events have the wrong type."""
    context = span["context"]
    start_ns = _time(span.get("start_time"), "start_time")
    end_ns = _time(span.get("end_time"), "end_time") if span.get("end_time") else start_ns
    raw_attributes = span.get("attributes") or {}
    if not isinstance(raw_attributes, dict):
        raise ValueError(f"attributes is a {type(raw_attributes).__name__}, not an object")
    attributes = dict(raw_attributes)
    kind = span.get("span_kind")
    if isinstance(kind, str) and kind and KIND_ATTR not in attributes:
        attributes[KIND_ATTR] = kind.upper()
    attributes[EXPORT_ATTR] = "spans"
    parent = span.get("parent_id")
    status = str(span.get("status_code") or "UNSET").upper()
    raw_events = span.get("events") or []
    if not isinstance(raw_events, list):
        raise ValueError(f"events is a {type(raw_events).__name__}, not a list")
    events = [_event(e) for e in raw_events if isinstance(e, dict)]
    return SpanFrame(
        trace_id=derived_id(str(context["trace_id"]), size=16),
        span_id=derived_id(str(context["span_id"]), size=8),
        parent_span_id=derived_id(str(parent), size=8) if parent else None,
        name=str(span.get("name") or kind or "span"),
        kind="CLIENT" if kind in ("LLM", "EMBEDDING", "RETRIEVER") else "INTERNAL",
        start_ns=start_ns,
        end_ns=max(end_ns, start_ns),
        status_code=STATUS.get(status, "UNSET"),
        status_message=str(span.get("status_message") or "") or None,
        attributes=attributes,
        events=events,
        scope_name=SCOPE_NAME,
    )


def _time(value: Any, name: str) -> int:
    ns = time_ns(value)
    if ns is None:
        raise ValueError(f"{name} {str(value)[:40]!r} is not a time")
    return check_time(ns, name)


def _event(event: dict[str, Any]) -> dict[str, Any]:
    """An event in the frames' shape (``name``, ``time_ns``, ``attributes``)."""
    try:
        stamp = time_ns(event.get("timestamp"))
    except ValueError:
        stamp = None
    attributes = event.get("attributes")
    return {
        "name": str(event.get("name") or ""),
        "time_ns": stamp if stamp is not None and 0 <= stamp < 2**63 else 0,
        "attributes": attributes if isinstance(attributes, dict) else {},
    }


#: The formats of this module, registered by the built-in plugin (:mod:`otelcar.plugins`).
FORMATS = (
    ExportFormat(
        FORMAT,
        "Arize Phoenix span exports: REST /v1/projects/{id}/spans, phoenix.client span "
        "lists (JSON, JSONL)",
        decode,
        detect=detect,
        decode_value=decode_value,
    ),
)
