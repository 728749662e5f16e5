"""Frames ↔ table rows, and atomic Parquet writes.

Spans and log records are stored with their attribute maps as JSON text, so the tables keep
every value exactly (types included) whatever the attributes are.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from otelcar.ingest.frames import LogFrame, SpanFrame
from otelcar.schema import STEPS_SCHEMA
from otelcar.trajectory import TraceBuild

#: Compact JSON text of a value (built once: ``json.dumps`` with options builds a new
#: encoder per call).
dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_dumps = dumps


class _SharedJSON:
    """JSON text of values many rows share (one resource dict per export batch), encoded
    once per object; empty lists and dicts without encoding."""

    def __init__(self) -> None:
        self._held: dict[int, tuple[Any, str]] = {}

    def __call__(self, value: Any) -> str:
        if not value and isinstance(value, list | dict):
            return "[]" if isinstance(value, list) else "{}"
        held = self._held.get(id(value))
        if held is None or held[0] is not value:
            held = self._held[id(value)] = (value, _dumps(value))
        return held[1]


def span_rows(spans: Sequence[SpanFrame]) -> list[dict[str, Any]]:
    """The spans table's rows of ``spans`` (:func:`span_row` of each)."""
    shared = _SharedJSON()
    return [span_row(span, shared) for span in spans]


def log_rows(logs: Sequence[LogFrame]) -> list[dict[str, Any]]:
    """The logs table's rows of ``logs`` (:func:`log_row` of each)."""
    shared = _SharedJSON()
    return [log_row(log, shared) for log in logs]


def span_row(
    span: SpanFrame, shared: Callable[[Any], str] = _dumps, *, attributes: bool = True
) -> dict[str, Any]:
    """One span as a row; ``shared`` encodes its events, links and resource. Without
    ``attributes`` the row's ``attributes`` is ``None`` (not encoded)."""
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
        "attributes": _dumps(span.attributes) if attributes else None,
        "events": shared(span.events),
        "links": shared(span.links),
        "resource": shared(span.resource),
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


def log_row(log: LogFrame, shared: Callable[[Any], str] = _dumps) -> dict[str, Any]:
    """One log record as a row; ``shared`` encodes its resource."""
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
        "resource": shared(log.resource),
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


#: Fewer list items than this in a column: built row by row (gathering has a fixed cost).
SHARED_ITEMS_MIN = 512


def steps_frame(builds: Iterable[TraceBuild]) -> pl.DataFrame:
    """The steps table (:data:`otelcar.schema.STEPS_SCHEMA`) of built traces, each distinct
    message converted once (:func:`frame_of`): what the readers and the in-memory sink give."""
    return frame_of([step for built in builds for step in built.steps], STEPS_SCHEMA)


def frame_of(rows: Sequence[dict[str, Any]], schema: pl.Schema | dict[str, Any]) -> pl.DataFrame:
    """``pl.DataFrame(rows, schema=schema)``, with lists of structs built from their distinct
    items where those are shared.

    The steps of a long agent run hold its conversation again in every step's
    ``input_messages``, as lists whose items are shared objects (one row dict per message:
    :mod:`otelcar.conventions.memo`). Each distinct item is converted once; the lists are
    gathered from those in Polars. The frame is equal to the one built row by row.
    """
    shared = {}
    for name, dtype in schema.items():
        if isinstance(dtype, pl.List) and isinstance(dtype.inner, pl.Struct):
            layout = _ListLayout.of(rows, name)
            if layout.total >= max(SHARED_ITEMS_MIN, 2 * len(layout.distinct)):
                shared[name] = layout.column(name, dtype)
    if not shared:
        return pl.DataFrame(rows, schema=schema)
    rest = {name: dtype for name, dtype in schema.items() if name not in shared}
    return pl.DataFrame(rows, schema=rest).with_columns(**shared).select(list(schema))


@dataclass
class _ListLayout:
    """Where one column's list items are: the distinct item objects, and for every item of
    every row its position among them (``gather``) and its row (``owner``)."""

    rows: int
    distinct: list[Any]
    gather: list[int]
    owner: list[int]
    empty: list[bool]  # the row's list is [] (kept apart from None)

    @property
    def total(self) -> int:
        return len(self.gather)

    @classmethod
    def of(cls, rows: Sequence[dict[str, Any]], name: str) -> _ListLayout:
        positions: dict[int, int] = {}
        layout = cls(len(rows), [], [], [], [])
        for index, row in enumerate(rows):
            items = row.get(name)
            layout.empty.append(items is not None and len(items) == 0)
            if not items:
                continue
            for item in items:
                position = positions.get(id(item))
                if position is None:
                    position = positions[id(item)] = len(layout.distinct)
                    layout.distinct.append(item)
                layout.gather.append(position)
            layout.owner.extend([index] * len(items))
        return layout

    def column(self, name: str, dtype: pl.List) -> pl.Series:
        """The column: distinct items converted once, gathered into each row's list."""
        values = pl.Series(name, self.distinct, dtype=dtype.inner).gather(self.gather)
        lists = (
            pl.DataFrame({"row": pl.Series(self.owner, dtype=pl.UInt32), name: values})
            .group_by("row", maintain_order=True)
            .agg(pl.col(name))
        )
        every_row = pl.DataFrame({"row": pl.Series(range(self.rows), dtype=pl.UInt32)})
        column = every_row.join(lists, on="row", how="left").sort("row")[name].cast(dtype)
        if any(self.empty):
            blank = pl.Series(name, [[]] * self.rows, dtype)
            column = column.zip_with(~pl.Series(self.empty), blank)
        return column.alias(name)


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
