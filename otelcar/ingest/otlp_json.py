"""Decode OTLP/JSON (``ExportTraceServiceRequest`` / ``ExportLogsServiceRequest``) into frames.

Pure functions, no I/O. The OTLP/JSON mapping differs from protobuf's generic JSON mapping:
ids are hex (``google.protobuf.json_format`` would read them as base64 and corrupt them, so
the mapping is done here by hand), 64-bit integers come as strings or numbers, enums as
integers or names. Ids in base64 (a ``MessageToJson`` dump, not OTLP/JSON) are accepted and
reported. Keys are accepted in lowerCamelCase and in snake_case.

One bad span or log record never spoils its neighbours: it is skipped and described in
:attr:`Decoded.problems`, and the record's raw bytes stay in the store. An envelope of the
wrong JSON types (``"resourceSpans": "oops"``, ``"resource": "r"``, a span list that is not
an array) is no request at all: :func:`check_structure` raises :class:`FormatError` with
where and why (the receiver answers 400 / INVALID_ARGUMENT with it).
"""

from __future__ import annotations

import base64
import binascii
import math
from typing import Any

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
from otelcar.ingest.jsontext import MAX_DEPTH

_FLOAT_WORDS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
#: Field ranges of the protobuf types behind OTLP/JSON numbers (the tables store int64).
UINT32_MAX = 2**32 - 1
INT32 = (-(2**31), 2**31 - 1)


def _get(obj: dict[str, Any], camel: str, snake: str | None = None, default: Any = None) -> Any:
    value = obj.get(camel)
    if value is None and snake is not None:
        value = obj.get(snake)
    return default if value is None else value


def any_value(value: Any, depth: int = 0) -> Any:
    """An OTLP/JSON ``AnyValue`` object as a plain Python value (bytes as base64 text).

    Raises ``ValueError`` for a value of the wrong JSON type (``stringValue`` that is not a
    string) or nested more than :data:`~otelcar.ingest.jsontext.MAX_DEPTH` levels deep.
    """
    if not isinstance(value, dict) or not value:
        return None
    if depth > MAX_DEPTH:
        raise ValueError(f"attribute value nested more than {MAX_DEPTH} levels deep")
    if "stringValue" in value:
        return _string(value["stringValue"], "stringValue")
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:
        return _int(value["intValue"])
    if "doubleValue" in value:
        raw = value["doubleValue"]
        if isinstance(raw, str) and raw in _FLOAT_WORDS:
            return _FLOAT_WORDS[raw]
        if isinstance(raw, bool) or not isinstance(raw, int | float | str):
            raise ValueError(f"doubleValue is a {type(raw).__name__}, not a number")
        return float(raw)
    if "arrayValue" in value:
        values = (value["arrayValue"] or {}).get("values") or ()
        return [any_value(v, depth + 1) for v in _as_list(values, "arrayValue.values", None)]
    if "kvlistValue" in value:
        return key_values((value["kvlistValue"] or {}).get("values") or (), depth + 1)
    if "bytesValue" in value:
        return _string(value["bytesValue"], "bytesValue")
    for snake, camel in (
        ("string_value", "stringValue"),
        ("bool_value", "boolValue"),
        ("int_value", "intValue"),
        ("double_value", "doubleValue"),
        ("array_value", "arrayValue"),
        ("kvlist_value", "kvlistValue"),
        ("bytes_value", "bytesValue"),
    ):
        if snake in value:
            return any_value({camel: value[snake]}, depth)
    raise ValueError(f"unknown AnyValue form with keys {sorted(value)[:5]}")


def key_values(items: Any, depth: int = 0) -> dict[str, Any]:
    """A list of OTLP/JSON ``KeyValue`` as a dict (later duplicates win, as in the SDK)."""
    out: dict[str, Any] = {}
    for item in _as_list(items or [], "attributes", None):
        # A key of "" is protobuf's default: the OTLP/JSON mapping leaves it out.
        out[_text(item.get("key"), "key") or ""] = any_value(item.get("value"), depth)
    return out


def _string(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{name} is a {type(value).__name__}, not a string")
    return value


def _text(value: Any, name: str) -> str | None:
    """An optional string field: ``None`` when absent or empty, numbers as their text;
    ``ValueError`` for an object or an array."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return str(value)
    raise ValueError(f"{name} is a {type(value).__name__}, not a string")


def _int(value: Any, default: int = 0) -> int:
    """An integer field (a JSON number or decimal string); ``ValueError`` for anything else
    (a non-finite number, an object)."""
    if value is None or value == "":
        return default
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{value} is not an integer")
    if not isinstance(value, int | float | str):
        raise ValueError(f"a {type(value).__name__} is not an integer")
    return int(value)


def _bounded(value: int, name: str, low: int, high: int) -> int:
    if not low <= value <= high:
        raise ValueError(f"{name} {value} is out of range ({low} … {high})")
    return value


_SEVERITY_NAMES = ("UNSPECIFIED", "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL")


def _severity(value: Any) -> int:
    """Severity number from an int, a digit string or a name like ``SEVERITY_NUMBER_INFO2``."""
    if value is None or isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
        return _bounded(_int(value), "severityNumber", *INT32)
    text = str(value).upper().removeprefix("SEVERITY_NUMBER_")
    base = text.rstrip("0123456789")
    if base not in _SEVERITY_NAMES:
        raise ValueError(f"unknown severityNumber {value!r}")
    if base == "UNSPECIFIED":
        return 0
    offset = int(text[len(base) :][:3] or 1)
    if not 1 <= offset <= 4:
        raise ValueError(f"unknown severityNumber {value!r}")
    return (_SEVERITY_NAMES.index(base) - 1) * 4 + offset


def enum_name(value: Any, names: tuple[str, ...], prefix: str) -> str:
    """An OTLP enum as its name without ``prefix``: from its number (``names[n]``, or
    ``PREFIXn`` out of range), its name with or without the prefix, ``names[0]`` when unset."""
    if value is None or value == "":
        return names[0]
    if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
        index = int(value)
        return names[index] if 0 <= index < len(names) else f"{prefix}{index}"
    text = str(value).upper()
    return text[len(prefix) :] if text.startswith(prefix) else text


class _IdReader:
    """Reads hex ids, falling back to base64 (reported once per record)."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        self.warned = False

    def __call__(self, value: Any, size: int) -> str | None:
        if not isinstance(value, str) or not value:
            return None
        if len(value) == 2 * size:
            return normalize_id(value, size=size)
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raw = b""
        if len(raw) == size:
            if not self.warned:
                self.problems.append(
                    "ids are base64 (protobuf's generic JSON mapping, not OTLP/JSON); "
                    "decoded as base64"
                )
                self.warned = True
            return normalize_id(raw, size=size)
        return normalize_id(value, size=size)  # raises with a clear message


def _events(items: Any) -> list[dict[str, Any]]:
    return [
        {
            "name": _text(item.get("name"), "events.name") or "",
            "time_ns": check_time(
                _int(_get(item, "timeUnixNano", "time_unix_nano")), "events.timeUnixNano"
            ),
            "attributes": key_values(item.get("attributes")),
        }
        for item in items or ()
    ]


def _links(items: Any, read_id: _IdReader) -> list[dict[str, Any]]:
    return [
        {
            "trace_id": read_id(_get(item, "traceId", "trace_id"), 16),
            "span_id": read_id(_get(item, "spanId", "span_id"), 8),
            "attributes": key_values(item.get("attributes")),
        }
        for item in items or ()
    ]


def decode_traces(obj: Any) -> Decoded:
    """Decode one OTLP/JSON traces object (``{"resourceSpans": [...]}``)."""
    out = Decoded()
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    read_id = _IdReader(out.problems)
    check_structure(obj, "traces")
    resource_list = _get(obj, "resourceSpans", "resource_spans", [])
    for r_index, resource_spans in enumerate(_as_list(resource_list, "resourceSpans", out)):
        try:
            resource = key_values((resource_spans.get("resource") or {}).get("attributes"))
            scopes = _as_list(_get(resource_spans, "scopeSpans", "scope_spans", []), None, None)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            out.problems.append(f"resourceSpans[{r_index}]: malformed resource level ({exc})")
            continue
        for s_index, scope_spans in enumerate(scopes):
            where_scope = f"resourceSpans[{r_index}].scopeSpans[{s_index}]"
            try:
                scope = scope_spans.get("scope") or {}
                spans = _as_list(scope_spans.get("spans") or (), None, None)
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                out.problems.append(f"{where_scope}: malformed scope level ({exc})")
                continue
            for p_index, span in enumerate(spans):
                try:
                    out.spans.append(_span(span, resource, scope, read_id))
                except (ValueError, TypeError, KeyError, AttributeError) as exc:
                    out.problems.append(f"{where_scope}.spans[{p_index}]: {exc}")
    return out


#: Each signal's envelope: (camelCase, snake_case) of the list at each level.
_LEVELS = {
    "traces": (
        ("resourceSpans", "resource_spans"),
        ("scopeSpans", "scope_spans"),
        ("spans", "spans"),
    ),
    "logs": (
        ("resourceLogs", "resource_logs"),
        ("scopeLogs", "scope_logs"),
        ("logRecords", "log_records"),
    ),
}


def check_structure(obj: Any, signal: str) -> None:
    """Raise :class:`~otelcar.errors.FormatError` naming the first place where an OTLP/JSON
    request's envelope has the wrong JSON type: the resource and scope lists that are not
    arrays, their entries, ``resource`` and ``scope`` that are not objects, a span or log
    record list that is not an array or holds something else than objects. Such a body is
    not a request with a bad span in it but no request at all (the receiver answers 400 /
    INVALID_ARGUMENT). What is inside a span or log record is checked span by span."""
    resources_key, scopes_key, items_key = _LEVELS[signal]
    resources = _get(obj, *resources_key)
    path = resources_key[0]
    _expect(resources, list, path)
    for r_index, resource_level in enumerate(resources or ()):
        where = f"{path}[{r_index}]"
        _expect(resource_level, dict, where)
        resource_level = resource_level or {}  # null: the protobuf default, an empty level
        _expect(resource_level.get("resource"), dict, f"{where}.resource")
        resource = resource_level.get("resource") or {}
        _expect(resource.get("attributes"), list, f"{where}.resource.attributes")
        scopes = _get(resource_level, *scopes_key)
        _expect(scopes, list, f"{where}.{scopes_key[0]}")
        for s_index, scope_level in enumerate(scopes or ()):
            at = f"{where}.{scopes_key[0]}[{s_index}]"
            _expect(scope_level, dict, at)
            scope_level = scope_level or {}
            _expect(scope_level.get("scope"), dict, f"{at}.scope")
            items = _get(scope_level, *items_key)
            _expect(items, list, f"{at}.{items_key[0]}")
            for i_index, item in enumerate(items or ()):
                _expect(item, dict, f"{at}.{items_key[0]}[{i_index}]")


_JSON_TYPES = {list: "an array", dict: "an object"}


def _expect(value: Any, kind: type, where: str) -> None:
    if value is not None and not isinstance(value, kind):
        raise FormatError(
            f"not an OTLP/JSON request: {where} is {_json_type(value)}, not {_JSON_TYPES[kind]}"
        )


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        shown = value if len(value) <= 20 else value[:19] + "…"
        return f"the string {shown!r}"
    return _JSON_TYPES.get(type(value), f"a {type(value).__name__}")


def _as_list(value: Any, name: str | None, out: Decoded | None) -> list[Any]:
    """``value`` when it is a JSON array; else ``TypeError`` (or, with ``out``, one problem
    recorded and nothing to iterate)."""
    if isinstance(value, list | tuple):
        return list(value)
    message = f"{name or 'value'} is a {type(value).__name__}, not an array"
    if out is None:
        raise TypeError(message)
    out.problems.append(message)
    return []


def _span(
    span: dict[str, Any], resource: dict[str, Any], scope: dict[str, Any], read_id: _IdReader
) -> SpanFrame:
    trace_id = read_id(_get(span, "traceId", "trace_id"), 16)
    span_id = read_id(_get(span, "spanId", "span_id"), 8)
    if trace_id is None or span_id is None:
        raise ValueError("span has no traceId or spanId")
    status = span.get("status") or {}
    return SpanFrame(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=read_id(_get(span, "parentSpanId", "parent_span_id"), 8),
        name=str(span.get("name", "")),
        kind=enum_name(span.get("kind"), SPAN_KINDS, "SPAN_KIND_"),
        start_ns=check_time(
            _int(_get(span, "startTimeUnixNano", "start_time_unix_nano")), "startTimeUnixNano"
        ),
        end_ns=check_time(
            _int(_get(span, "endTimeUnixNano", "end_time_unix_nano")), "endTimeUnixNano"
        ),
        status_code=enum_name(status.get("code"), STATUS_CODES, "STATUS_CODE_"),
        status_message=_text(status.get("message"), "status.message"),
        attributes=key_values(span.get("attributes")),
        events=_events(span.get("events")),
        links=_links(span.get("links"), read_id),
        resource=resource,
        scope_name=_text(scope.get("name"), "scope.name"),
        scope_version=_text(scope.get("version"), "scope.version"),
        dropped_attributes_count=_bounded(
            _int(_get(span, "droppedAttributesCount", "dropped_attributes_count")),
            "droppedAttributesCount",
            0,
            UINT32_MAX,
        ),
    )


def decode_logs(obj: Any) -> Decoded:
    """Decode one OTLP/JSON logs object (``{"resourceLogs": [...]}``)."""
    out = Decoded()
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    read_id = _IdReader(out.problems)
    check_structure(obj, "logs")
    resource_list = _get(obj, "resourceLogs", "resource_logs", [])
    for r_index, resource_logs in enumerate(_as_list(resource_list, "resourceLogs", out)):
        try:
            resource = key_values((resource_logs.get("resource") or {}).get("attributes"))
            scopes = _as_list(_get(resource_logs, "scopeLogs", "scope_logs", []), None, None)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            out.problems.append(f"resourceLogs[{r_index}]: malformed resource level ({exc})")
            continue
        for s_index, scope_logs in enumerate(scopes):
            where_scope = f"resourceLogs[{r_index}].scopeLogs[{s_index}]"
            try:
                scope = scope_logs.get("scope") or {}
                records = _as_list(_get(scope_logs, "logRecords", "log_records", []), None, None)
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                out.problems.append(f"{where_scope}: malformed scope level ({exc})")
                continue
            for l_index, record in enumerate(records):
                try:
                    out.logs.append(_log(record, resource, scope, read_id))
                except (ValueError, TypeError, KeyError, AttributeError) as exc:
                    out.problems.append(f"{where_scope}.logRecords[{l_index}]: {exc}")
    return out


def _log(
    record: dict[str, Any], resource: dict[str, Any], scope: dict[str, Any], read_id: _IdReader
) -> LogFrame:
    attributes = key_values(record.get("attributes"))
    event_name = _get(record, "eventName", "event_name") or attributes.get("event.name")
    time_ns = check_time(_int(_get(record, "timeUnixNano", "time_unix_nano")), "timeUnixNano")
    observed = check_time(
        _int(_get(record, "observedTimeUnixNano", "observed_time_unix_nano")),
        "observedTimeUnixNano",
    )
    time_ns, observed = time_ns or None, observed or None
    return LogFrame(
        trace_id=read_id(_get(record, "traceId", "trace_id"), 16),
        span_id=read_id(_get(record, "spanId", "span_id"), 8),
        time_ns=time_ns,
        observed_time_ns=observed,
        event_name=event_name if isinstance(event_name, str) and event_name else None,
        body=any_value(record.get("body")),
        attributes=attributes,
        severity_number=_severity(_get(record, "severityNumber", "severity_number")),
        severity_text=_text(_get(record, "severityText", "severity_text"), "severityText"),
        resource=resource,
        scope_name=_text(scope.get("name"), "scope.name"),
    )
