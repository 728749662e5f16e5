"""Decode binary OTLP protobuf (``ExportTraceServiceRequest`` / ``ExportLogsServiceRequest``).

Pure functions, no I/O. Trace and logs requests share their outer wire shape (field 1 of
each level is a repeated message), so :func:`detect_signal` looks at the wire types of the
first span/log record's fields to tell them apart without trusting a file name.
"""

from __future__ import annotations

import base64
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otelcar.errors import FormatError
from otelcar.ingest.frames import (
    SPAN_KINDS,
    STATUS_CODES,
    Decoded,
    LogFrame,
    SpanFrame,
    check_time,
    normalize_id,
)

_LEN, _VARINT, _I64, _I32 = 2, 0, 1, 5


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise FormatError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise FormatError("varint too long")


def wire_fields(data: bytes) -> list[tuple[int, int, int, int]]:
    """Top-level fields of a protobuf message as ``(field, wire_type, start, end)``.

    Raises :class:`FormatError` when the bytes are not a well-formed protobuf message.
    """
    fields = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise FormatError("field number 0")
        if wire == _VARINT:
            _, end = _varint(data, pos)
            start = pos
        elif wire == _I64:
            start, end = pos, pos + 8
        elif wire == _I32:
            start, end = pos, pos + 4
        elif wire == _LEN:
            length, start = _varint(data, pos)
            end = start + length
        else:
            raise FormatError(f"unsupported wire type {wire}")
        if end > len(data):
            raise FormatError("field runs past the end of the message")
        fields.append((number, wire, start, end))
        pos = end
    return fields


def _first_field(data: bytes, number: int) -> bytes | None:
    for field_number, wire, start, end in wire_fields(data):
        if field_number == number and wire == _LEN:
            return data[start:end]
    return None


def detect_signal(data: bytes) -> str | None:
    """``"traces"``, ``"logs"`` or ``None`` (empty request: either would do).

    Walks request → resource_* → scope_* → first span/log record, then reads the wire types:
    a span has field 1 (trace_id) as bytes and field 6 (kind) as a varint; a log record has
    field 1 (time) as fixed64 and field 6 (attributes) as a message.
    Raises :class:`FormatError` when the bytes are not an OTLP export request.
    """
    for number, wire, _, _ in wire_fields(data):
        if number != 1 or wire != _LEN:
            raise FormatError(f"unexpected top-level field {number} (wire type {wire})")
    item = _first_item(data)
    if item is None:
        return None
    kinds = {number: wire for number, wire, _, _ in wire_fields(item)}
    if kinds.get(1) == _LEN or kinds.get(6) == _VARINT or kinds.get(7) == _I64:
        return "traces"
    if kinds.get(1) == _I64 or kinds.get(6) == _LEN or kinds.get(2) == _VARINT:
        return "logs"
    if kinds.get(9) == _LEN or kinds.get(12) == _LEN or kinds.get(11) == _I64:
        return "logs"
    return "traces"


def _first_item(data: bytes) -> bytes | None:
    """The first span or log record of a request: in the first resource and scope that hold
    one (an empty scope or resource before it says nothing about the signal)."""
    for number, wire, start, end in wire_fields(data):
        if number != 1 or wire != _LEN:
            continue
        resource = data[start:end]
        for r_number, r_wire, r_start, r_end in wire_fields(resource):
            if r_number == 2 and r_wire == _LEN:
                item = _first_field(resource[r_start:r_end], 2)
                if item is not None:
                    return item
    return None


def any_value(value: Any) -> Any:
    """A protobuf ``AnyValue`` as a plain Python value (bytes as base64 text)."""
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return key_values(value.kvlist_value.values)
    if which == "bytes_value":
        return base64.b64encode(value.bytes_value).decode("ascii")
    return getattr(value, which)


def key_values(items: Any) -> dict[str, Any]:
    """Repeated ``KeyValue`` as a dict."""
    return {item.key: any_value(item.value) for item in items}


def _parse(cls: Any, data: bytes) -> Any:
    try:
        return cls.FromString(data)
    except DecodeError as exc:
        raise FormatError(f"protobuf does not parse as {cls.__name__}: {exc}") from None


def decode_traces(data: bytes) -> Decoded:
    """Decode one binary ``ExportTraceServiceRequest`` (or ``TracesData``)."""
    request = _parse(ExportTraceServiceRequest, data)
    out = Decoded()
    for r_index, resource_spans in enumerate(request.resource_spans):
        resource = key_values(resource_spans.resource.attributes)
        for s_index, scope_spans in enumerate(resource_spans.scope_spans):
            scope = scope_spans.scope
            for p_index, span in enumerate(scope_spans.spans):
                try:
                    out.spans.append(_span(span, resource, scope))
                except ValueError as exc:
                    where = f"resourceSpans[{r_index}].scopeSpans[{s_index}].spans[{p_index}]"
                    out.problems.append(f"{where}: {exc}")
    return out


def _span(span: Any, resource: dict[str, Any], scope: Any) -> SpanFrame:
    trace_id = normalize_id(span.trace_id, size=16)
    span_id = normalize_id(span.span_id, size=8)
    if trace_id is None or span_id is None:
        raise ValueError("span has no trace_id or span_id")
    kind = span.kind
    code = span.status.code
    return SpanFrame(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=normalize_id(span.parent_span_id, size=8),
        name=span.name,
        kind=SPAN_KINDS[kind] if 0 <= kind < len(SPAN_KINDS) else f"SPAN_KIND_{kind}",
        start_ns=check_time(span.start_time_unix_nano, "start_time_unix_nano"),
        end_ns=check_time(span.end_time_unix_nano, "end_time_unix_nano"),
        status_code=STATUS_CODES[code] if 0 <= code < len(STATUS_CODES) else f"CODE_{code}",
        status_message=span.status.message or None,
        attributes=key_values(span.attributes),
        events=[
            {
                "name": e.name,
                "time_ns": check_time(e.time_unix_nano, "events.time_unix_nano"),
                "attributes": key_values(e.attributes),
            }
            for e in span.events
        ],
        links=[
            {
                "trace_id": normalize_id(link.trace_id, size=16),
                "span_id": normalize_id(link.span_id, size=8),
                "attributes": key_values(link.attributes),
            }
            for link in span.links
        ],
        resource=resource,
        scope_name=scope.name or None,
        scope_version=scope.version or None,
        dropped_attributes_count=span.dropped_attributes_count,
    )


def decode_logs(data: bytes) -> Decoded:
    """Decode one binary ``ExportLogsServiceRequest`` (or ``LogsData``)."""
    request = _parse(ExportLogsServiceRequest, data)
    out = Decoded()
    for r_index, resource_logs in enumerate(request.resource_logs):
        resource = key_values(resource_logs.resource.attributes)
        for s_index, scope_logs in enumerate(resource_logs.scope_logs):
            for l_index, record in enumerate(scope_logs.log_records):
                try:
                    attributes = key_values(record.attributes)
                    event_name = record.event_name or attributes.get("event.name")
                    out.logs.append(
                        LogFrame(
                            trace_id=normalize_id(record.trace_id, size=16),
                            span_id=normalize_id(record.span_id, size=8),
                            time_ns=check_time(record.time_unix_nano, "time_unix_nano") or None,
                            observed_time_ns=check_time(
                                record.observed_time_unix_nano, "observed_time_unix_nano"
                            )
                            or None,
                            event_name=event_name if isinstance(event_name, str) else None,
                            body=any_value(record.body),
                            attributes=attributes,
                            severity_number=record.severity_number,
                            severity_text=record.severity_text or None,
                            resource=resource,
                            scope_name=scope_logs.scope.name or None,
                        )
                    )
                except ValueError as exc:
                    where = f"resourceLogs[{r_index}].scopeLogs[{s_index}].logRecords[{l_index}]"
                    out.problems.append(f"{where}: {exc}")
    return out


def survey(data: bytes, signal: str) -> tuple[int, list[str], set[str]]:
    """Count a request's spans (or log records), check their ids and collect the trace ids,
    without converting attributes: the receiver's cheap admission check. It reports exactly
    the problems :func:`decode_traces` / :func:`decode_logs` would (ids, link ids and times are
    the parts of a parsed message that can be invalid).
    """
    problems: list[str] = []
    trace_ids: set[str] = set()
    count = 0
    if signal == "logs":
        request = _parse(ExportLogsServiceRequest, data)
        for r, resource_logs in enumerate(request.resource_logs):
            for s, scope_logs in enumerate(resource_logs.scope_logs):
                for i, record in enumerate(scope_logs.log_records):
                    try:
                        trace_id = normalize_id(record.trace_id, size=16)
                        normalize_id(record.span_id, size=8)
                        check_time(record.time_unix_nano, "time_unix_nano")
                        check_time(record.observed_time_unix_nano, "observed_time_unix_nano")
                    except ValueError as exc:
                        problems.append(f"resourceLogs[{r}].scopeLogs[{s}].logRecords[{i}]: {exc}")
                        continue
                    count += 1
                    if trace_id:
                        trace_ids.add(trace_id)
        return count, problems, trace_ids
    request = _parse(ExportTraceServiceRequest, data)
    for r, resource_spans in enumerate(request.resource_spans):
        for s, scope_spans in enumerate(resource_spans.scope_spans):
            for i, span in enumerate(scope_spans.spans):
                try:
                    trace_id = normalize_id(span.trace_id, size=16)
                    span_id = normalize_id(span.span_id, size=8)
                    normalize_id(span.parent_span_id, size=8)
                    if trace_id is None or span_id is None:
                        raise ValueError("span has no trace_id or span_id")
                    check_time(span.start_time_unix_nano, "start_time_unix_nano")
                    check_time(span.end_time_unix_nano, "end_time_unix_nano")
                    for event in span.events:
                        check_time(event.time_unix_nano, "events.time_unix_nano")
                    for link in span.links:
                        normalize_id(link.trace_id, size=16)
                        normalize_id(link.span_id, size=8)
                except ValueError as exc:
                    problems.append(f"resourceSpans[{r}].scopeSpans[{s}].spans[{i}]: {exc}")
                    continue
                count += 1
                trace_ids.add(trace_id)
    return count, problems, trace_ids
