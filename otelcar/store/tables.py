"""Frames ↔ table rows, and atomic Parquet writes.

Spans and log records are stored with their attribute maps as JSON text, so the tables keep
every value exactly (types included) whatever the attributes are.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import polars as pl

from otelcar.ingest.frames import LogFrame, SpanFrame


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def span_row(span: SpanFrame) -> dict[str, Any]:
    return {
        "trace_id": span.trace_id,
        "span_id": span.span_id,
        "parent_span_id": span.parent_span_id,
        "name": span.name,
        "kind": span.kind,
        "start_ns": span.start_ns,
        "end_ns": span.end_ns,
        "status_code": span.status_code,
        "status_message": span.status_message,
        "attributes": _dumps(span.attributes),
        "events": _dumps(span.events),
        "links": _dumps(span.links),
        "resource": _dumps(span.resource),
        "service_name": span.service_name,
        "scope_name": span.scope_name,
        "scope_version": span.scope_version,
        "dropped_attributes_count": span.dropped_attributes_count,
        "seq": span.seq,
        "record_id": span.record_id,
    }


def span_from_row(row: dict[str, Any]) -> SpanFrame:
    return SpanFrame(
        trace_id=row["trace_id"],
        span_id=row["span_id"],
        parent_span_id=row["parent_span_id"],
        name=row["name"],
        kind=row["kind"],
        start_ns=row["start_ns"],
        end_ns=row["end_ns"],
        status_code=row["status_code"],
        status_message=row["status_message"],
        attributes=json.loads(row["attributes"]),
        events=json.loads(row["events"]),
        links=json.loads(row["links"]),
        resource=json.loads(row["resource"]),
        scope_name=row["scope_name"],
        scope_version=row["scope_version"],
        dropped_attributes_count=row["dropped_attributes_count"],
        seq=row["seq"],
        record_id=row["record_id"],
    )


def log_row(log: LogFrame) -> dict[str, Any]:
    return {
        "trace_id": log.trace_id,
        "span_id": log.span_id,
        "time_ns": log.time_ns,
        "observed_time_ns": log.observed_time_ns,
        "event_name": log.event_name,
        "body": _dumps(log.body),
        "attributes": _dumps(log.attributes),
        "severity_number": log.severity_number,
        "severity_text": log.severity_text,
        "resource": _dumps(log.resource),
        "scope_name": log.scope_name,
        "seq": log.seq,
        "record_id": log.record_id,
    }


def log_from_row(row: dict[str, Any]) -> LogFrame:
    return LogFrame(
        trace_id=row["trace_id"],
        span_id=row["span_id"],
        time_ns=row["time_ns"],
        observed_time_ns=row["observed_time_ns"],
        event_name=row["event_name"],
        body=json.loads(row["body"]),
        attributes=json.loads(row["attributes"]),
        severity_number=row["severity_number"],
        severity_text=row["severity_text"],
        resource=json.loads(row["resource"]),
        scope_name=row["scope_name"],
        seq=row["seq"],
        record_id=row["record_id"],
    )


def write_parquet_atomic(df: pl.DataFrame, path: Path) -> None:
    """Write ``df`` to ``path`` so that readers see the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    df.write_parquet(tmp)
    os.replace(tmp, path)


def write_json_atomic(value: Any, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with tmp.open("w", encoding="utf-8") as handle:
        json.dump(value, handle, indent=2, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
