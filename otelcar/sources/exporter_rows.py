"""Rows of the OpenTelemetry Collector ``clickhouse`` exporter's tables → span and log frames.

The exporter writes one ``otel_traces`` row per span and one ``otel_logs`` row per log record.
Every attribute value (span, resource, event, link and log attributes) is stored in a
``Map(LowCardinality(String), String)`` as the Collector's ``pcommon.Value.AsString()``
renders it, so the typed OTLP value is lost:

| OTLP value | stored text |
|---|---|
| string | the string itself |
| bool | ``true`` / ``false`` |
| int | decimal digits (``42``) |
| double | shortest round-trip decimal, ES6 style (``0.2``; ``2`` for 2.0; ``1e-7``) |
| array, map | ``json.Marshal`` of the value (compact JSON, map keys sorted) |
| bytes | base64 |

:func:`restore_value` turns the text back into a value, by these rules, in order:

1. ``true`` / ``false`` → bool;
2. an integer in canonical form (no sign ``+``, no leading zeros, within int64) → int;
3. a decimal in the exporter's canonical float form (``-?D.D`` without trailing zeros, or the
   exponent form) that reads back to the same text → float;
4. a JSON array whose items are all strings, numbers, booleans or nulls (OTLP's homogeneous
   attribute arrays) → list;
5. anything else stays a string, JSON objects and arrays of objects included: a map-valued
   attribute cannot be told from a string holding JSON, and every mapper that expects
   structure (``gen_ai.input.messages``, tool definitions, …) decodes JSON strings itself.

So a *string* attribute that looks like a number, a boolean or a primitive JSON array comes
back as that type, a double with an integral value comes back as an int, and a map-valued
attribute comes back as its JSON text. Log bodies (``Body String``) are restored apart: JSON
object or array text → the decoded value (GenAI event bodies are maps), the empty string →
no body, anything else → the string. The exporter does not store dropped-attribute counts, a
log's observed time (its ``Timestamp`` is the event time, else the observed time), trace
flags on spans or link trace states; none of them reaches a step except the
dropped-attribute count, whose issue line is therefore missing on steps read from ClickHouse.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from otelcar.ingest.frames import SPAN_KINDS, STATUS_CODES, LogFrame, SpanFrame, normalize_id
from otelcar.ingest.otlp_json import enum_name

_INT = re.compile(r"-?(0|[1-9][0-9]*)")
_FLOAT = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]*[1-9])?(e[-+][0-9]+)?")
_INT64 = (-(2**63), 2**63 - 1)
_SCOPE_ATTRIBUTES = ("otel.scope.name", "otel.scope.version")  # exporters before ScopeName


def go_float_text(value: float) -> str:
    """A double as the Collector renders it (``float64AsString``: ES6 number formatting)."""
    if math.isnan(value) or math.isinf(value):  # Go's FormatFloat(f, 'g'): NaN, +Inf, -Inf
        word = "NaN" if math.isnan(value) else "+Inf" if value > 0 else "-Inf"
        return f"json: unsupported value: {word}"
    magnitude = abs(value)
    if magnitude != 0 and (magnitude < 1e-6 or magnitude >= 1e21):
        text = repr(value)  # Python's repr is exponent form in this range, shortest digits
        mantissa, _, exponent = text.partition("e")
        sign, digits = exponent[0], exponent[1:].lstrip("0") or "0"
        if sign == "+" and len(digits) < 2:
            digits = digits.rjust(2, "0")
        return f"{mantissa}e{sign}{digits}"
    text = format(Decimal(repr(value)), "f")  # shortest digits, fixed notation
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def restore_value(text: str) -> Any:
    """The typed value behind an exporter-stringified attribute (rules in the module doc)."""
    if text in ("true", "false"):
        return text == "true"
    if _INT.fullmatch(text):
        number = int(text)
        if _INT64[0] <= number <= _INT64[1]:
            return number
        return text
    if ("." in text or "e" in text) and _FLOAT.fullmatch(text):
        try:
            number = float(text)
        except ValueError:
            return text
        return number if go_float_text(number) == text else text
    if text.startswith("[") and text.endswith("]"):
        try:
            items = json.loads(text)
        except ValueError:
            return text
        if isinstance(items, list) and all(
            item is None or isinstance(item, str | int | float | bool) for item in items
        ):
            return items
    return text


def restore_attributes(stored: Mapping[str, str] | None) -> dict[str, Any]:
    """A stored attribute map with each value restored by :func:`restore_value`."""
    return {str(key): restore_value(value) for key, value in (stored or {}).items()}


def restore_body(text: str | None) -> Any:
    """A log body as stored (``Body.AsString()``) → the body value (maps decoded)."""
    if not text:
        return None
    if text[0] in "{[" and text[-1] in "}]":
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def _id(value: str | None, size: int) -> str | None:
    try:
        return normalize_id(value or None, size=size)
    except ValueError:
        return None


def span_from_row(row: Mapping[str, Any], seq: int) -> SpanFrame:
    """One ``otel_traces`` row (selected as :data:`otelcar.sources.clickhouse.SPAN_COLUMNS`
    names it) as a :class:`SpanFrame`; raises ``ValueError`` for a row without ids."""
    trace_id = normalize_id(row["trace_id"], size=16)
    span_id = normalize_id(row["span_id"], size=8)
    if trace_id is None or span_id is None:
        raise ValueError(f"row without a trace or span id: {row['trace_id']!r}/{row['span_id']!r}")
    attributes = restore_attributes(row["attributes"])
    scope_name, scope_version = row.get("scope_name") or None, row.get("scope_version") or None
    if "scope_name" not in row:  # old exporters put the scope into the span attributes
        name, version = (attributes.pop(key, None) for key in _SCOPE_ATTRIBUTES)
        scope_name, scope_version = name and str(name), version and str(version)
    start_ns = int(row["start_ns"])
    events = [
        {"name": name, "time_ns": int(time_ns), "attributes": restore_attributes(attrs)}
        for time_ns, name, attrs in zip(
            row["event_times"], row["event_names"], row["event_attributes"], strict=False
        )
    ]
    links = [
        {
            "trace_id": _id(link_trace, 16),
            "span_id": _id(link_span, 8),
            "attributes": restore_attributes(attrs),
        }
        for link_trace, link_span, attrs in zip(
            row["link_trace_ids"], row["link_span_ids"], row["link_attributes"], strict=False
        )
    ]
    return SpanFrame(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=_id(row["parent_span_id"], 8),
        name=str(row["name"]),
        kind=enum_name(row["kind"] or None, SPAN_KINDS, "SPAN_KIND_"),
        start_ns=start_ns,
        end_ns=start_ns + int(row["duration_ns"]),
        status_code=enum_name(row["status_code"] or None, STATUS_CODES, "STATUS_CODE_"),
        status_message=row["status_message"] or None,
        attributes=attributes,
        events=events,
        links=links,
        resource=restore_attributes(row["resource"]),
        scope_name=scope_name,
        scope_version=scope_version,
        seq=seq,
    )


def log_from_row(row: Mapping[str, Any], seq: int) -> LogFrame:
    """One ``otel_logs`` row (selected as :data:`otelcar.sources.clickhouse.LOG_COLUMNS`
    names it) as a :class:`LogFrame`."""
    attributes = restore_attributes(row["attributes"])
    event_name = row.get("event_name") or attributes.get("event.name")
    return LogFrame(
        trace_id=_id(row["trace_id"], 16),
        span_id=_id(row["span_id"], 8),
        time_ns=int(row["time_ns"]) or None,
        observed_time_ns=None,
        event_name=event_name if isinstance(event_name, str) and event_name else None,
        body=restore_body(row["body"]),
        attributes=attributes,
        severity_number=int(row["severity_number"] or 0),
        severity_text=row["severity_text"] or None,
        resource=restore_attributes(row["resource"]),
        scope_name=row["scope_name"] or None,
        seq=seq,
    )
