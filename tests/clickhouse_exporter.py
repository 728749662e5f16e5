"""A stand-in for the OpenTelemetry Collector's ``clickhouse`` exporter, for tests.

It creates the exporter's tables with the exporter's DDL (``exporter/clickhouseexporter/
internal/sqltemplates/{traces_table,traces_id_ts_lookup_table,traces_id_ts_lookup_mv,
logs_table}.sql`` of opentelemetry-collector-contrib, rendered for the default database with a
plain ``MergeTree`` engine and no TTL) and writes decoded OTLP frames as the exporter writes
them: every attribute value through ``pcommon.Value.AsString()`` (emulated by
:func:`as_string`), span kind and status code as ``ptrace``'s ``String()`` names them
(``Client``, ``Error``), the span start as ``Timestamp`` and ``end - start`` as ``Duration``,
a log's event time (else its observed time) as ``Timestamp``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from otelcar.ingest.frames import LogFrame, SpanFrame
from otelcar.sources.exporter_rows import go_float_text

TRACES_DDL = """
CREATE TABLE IF NOT EXISTS {db}.otel_traces (
    Timestamp DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    ParentSpanId String CODEC(ZSTD(1)),
    TraceState String CODEC(ZSTD(1)),
    SpanName LowCardinality(String) CODEC(ZSTD(1)),
    SpanKind LowCardinality(String) CODEC(ZSTD(1)),
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    ResourceAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    ScopeName String CODEC(ZSTD(1)),
    ScopeVersion String CODEC(ZSTD(1)),
    SpanAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    Duration UInt64 CODEC(T64, ZSTD(1)),
    StatusCode LowCardinality(String) CODEC(ZSTD(1)),
    StatusMessage String CODEC(ZSTD(1)),
    Events Nested (
        Timestamp DateTime64(9),
        Name LowCardinality(String),
        Attributes Map(LowCardinality(String), String)
    ) CODEC(ZSTD(1)),
    Links Nested (
        TraceId String,
        SpanId String,
        TraceState String,
        Attributes Map(LowCardinality(String), String)
    ) CODEC(ZSTD(1)),
    ResourceAttributeItems Array(String) ALIAS arrayMap(kv -> concat(kv.1, '=', kv.2),
        CAST(ResourceAttributes, 'Array(Tuple(String, String))')),
    SpanAttributeItems Array(String) ALIAS arrayMap(kv -> concat(kv.1, '=', kv.2),
        CAST(SpanAttributes, 'Array(Tuple(String, String))')),
    INDEX idx_trace_id TraceId TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX idx_res_attr_key mapKeys(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_res_attr_value mapValues(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_key mapKeys(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_value mapValues(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_duration Duration TYPE minmax GRANULARITY 1,
    INDEX idx_lower_span_name lower(SpanName) TYPE tokenbf_v1(32768, 3, 0) GRANULARITY 8
) ENGINE = MergeTree()
PARTITION BY toDate(Timestamp)
PRIMARY KEY (ServiceName, SpanName, toDateTime(Timestamp))
ORDER BY (ServiceName, SpanName, toDateTime(Timestamp), Timestamp)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1
"""

LOOKUP_DDL = """
CREATE TABLE IF NOT EXISTS {db}.otel_traces_trace_id_ts (
    TraceId String CODEC(ZSTD(1)),
    Start SimpleAggregateFunction(min, DateTime) CODEC(ZSTD(1)),
    End SimpleAggregateFunction(max, DateTime) CODEC(ZSTD(1))
) ENGINE = AggregatingMergeTree()
PARTITION BY toStartOfWeek(Start)
ORDER BY (TraceId)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1
"""

LOOKUP_MV_DDL = """
CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.otel_traces_trace_id_ts_mv
TO {db}.otel_traces_trace_id_ts
AS SELECT TraceId, min(Timestamp) as Start, max(Timestamp) as End
FROM {db}.otel_traces
WHERE TraceId != ''
GROUP BY TraceId
"""

LOGS_DDL = """
CREATE TABLE IF NOT EXISTS {db}.otel_logs (
    Timestamp DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    TimestampTime DateTime DEFAULT toDateTime(Timestamp),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    TraceFlags UInt8,
    SeverityText LowCardinality(String) CODEC(ZSTD(1)),
    SeverityNumber UInt8,
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    Body String CODEC(ZSTD(1)),
    ResourceSchemaUrl LowCardinality(String) CODEC(ZSTD(1)),
    ResourceAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    ScopeSchemaUrl LowCardinality(String) CODEC(ZSTD(1)),
    ScopeName String CODEC(ZSTD(1)),
    ScopeVersion LowCardinality(String) CODEC(ZSTD(1)),
    ScopeAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    LogAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    EventName String CODEC(ZSTD(1)),
    INDEX idx_trace_id TraceId TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX idx_res_attr_key mapKeys(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_res_attr_value mapValues(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_scope_attr_key mapKeys(ScopeAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_scope_attr_value mapValues(ScopeAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_log_attr_key mapKeys(LogAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_log_attr_value mapValues(LogAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_body Body TYPE tokenbf_v1(32768, 3, 0) GRANULARITY 8
) ENGINE = MergeTree()
PARTITION BY toDate(TimestampTime)
PRIMARY KEY (ServiceName, TimestampTime)
ORDER BY (ServiceName, TimestampTime, Timestamp)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1
"""

SPAN_INSERT_COLUMNS = [
    "Timestamp",
    "TraceId",
    "SpanId",
    "ParentSpanId",
    "TraceState",
    "SpanName",
    "SpanKind",
    "ServiceName",
    "ResourceAttributes",
    "ScopeName",
    "ScopeVersion",
    "SpanAttributes",
    "Duration",
    "StatusCode",
    "StatusMessage",
    "Events.Timestamp",
    "Events.Name",
    "Events.Attributes",
    "Links.TraceId",
    "Links.SpanId",
    "Links.TraceState",
    "Links.Attributes",
]
LOG_INSERT_COLUMNS = [
    "Timestamp",
    "TraceId",
    "SpanId",
    "TraceFlags",
    "SeverityText",
    "SeverityNumber",
    "ServiceName",
    "Body",
    "ResourceSchemaUrl",
    "ResourceAttributes",
    "ScopeSchemaUrl",
    "ScopeName",
    "ScopeVersion",
    "ScopeAttributes",
    "LogAttributes",
    "EventName",
]
# ptrace.SpanKind.String() / ptrace.StatusCode.String()
KIND_NAMES = {
    "UNSPECIFIED": "Unspecified",
    "INTERNAL": "Internal",
    "SERVER": "Server",
    "CLIENT": "Client",
    "PRODUCER": "Producer",
    "CONSUMER": "Consumer",
}
STATUS_NAMES = {"UNSET": "Unset", "OK": "Ok", "ERROR": "Error"}


def _go_json(value: Any) -> str:
    """``json.Marshal`` of a ``pcommon`` value's ``AsRaw()``: compact, map keys sorted."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float_text(value)  # checked against literals in the tests
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ",".join(_go_json(item) for item in value) + "]"
    if isinstance(value, dict):
        items = sorted(value.items())
        return "{" + ",".join(f"{_go_json(str(k))}:{_go_json(v)}" for k, v in items) + "}"
    raise TypeError(f"not an OTLP value: {type(value).__name__}")


def as_string(value: Any) -> str:
    """``pcommon.Value.AsString()`` of a decoded OTLP value (bytes are base64 text already)."""
    if value is None:
        return ""
    return value if isinstance(value, str) else _go_json(value)


def _map(attributes: dict[str, Any]) -> dict[str, str]:
    return {key: as_string(value) for key, value in attributes.items()}


def span_row(span: SpanFrame) -> list[Any]:
    """The exporter's ``otel_traces`` row for one span (:data:`SPAN_INSERT_COLUMNS` order)."""
    service = span.resource.get("service.name")
    return [
        span.start_ns,
        span.trace_id,
        span.span_id,
        span.parent_span_id or "",
        "",
        span.name,
        KIND_NAMES.get(span.kind, span.kind),
        as_string(service) if service is not None else "",
        _map(span.resource),
        span.scope_name or "",
        span.scope_version or "",
        _map(span.attributes),
        span.end_ns - span.start_ns,
        STATUS_NAMES.get(span.status_code, span.status_code),
        span.status_message or "",
        [event["time_ns"] for event in span.events],
        [event["name"] for event in span.events],
        [_map(event["attributes"]) for event in span.events],
        [link["trace_id"] or "" for link in span.links],
        [link["span_id"] or "" for link in span.links],
        ["" for _ in span.links],
        [_map(link["attributes"]) for link in span.links],
    ]


def log_row(log: LogFrame) -> list[Any]:
    """The exporter's ``otel_logs`` row for one log record (:data:`LOG_INSERT_COLUMNS`)."""
    service = log.resource.get("service.name")
    return [
        log.time_ns or log.observed_time_ns or 0,
        log.trace_id or "",
        log.span_id or "",
        0,
        log.severity_text or "",
        log.severity_number,
        as_string(service) if service is not None else "",
        as_string(log.body),
        "",
        _map(log.resource),
        "",
        log.scope_name or "",
        "",
        {},
        _map(log.attributes),
        log.event_name or "",
    ]


def create_tables(client: Any, db: str = "default") -> None:
    """Create the exporter's tables (and the trace-id lookup view) in ``db``."""
    for ddl in (TRACES_DDL, LOOKUP_DDL, LOOKUP_MV_DDL, LOGS_DDL):
        client.command(ddl.format(db=db))


def insert_frames(
    client: Any, spans: Iterable[SpanFrame], logs: Iterable[LogFrame] = (), db: str = "default"
) -> None:
    """Write frames as the exporter does (one INSERT per signal, like one export batch)."""
    span_rows = [span_row(span) for span in spans]
    if span_rows:
        client.insert(f"{db}.otel_traces", span_rows, column_names=SPAN_INSERT_COLUMNS)
    log_rows = [log_row(log) for log in logs]
    if log_rows:
        client.insert(f"{db}.otel_logs", log_rows, column_names=LOG_INSERT_COLUMNS)
