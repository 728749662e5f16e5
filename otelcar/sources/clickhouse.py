"""Read traces from the OpenTelemetry Collector ``clickhouse`` exporter's tables.

Tables (names configurable): ``otel_traces`` (one row per span), ``otel_logs`` (GenAI content
events, joined to spans by ``TraceId``/``SpanId``) and, when present, the exporter's lookup
table ``otel_traces_trace_id_ts`` (``TraceId`` → first and last span start, ordered by
``TraceId``). What each operation reads:

- :meth:`ClickHouseSource.traces`: one ``GROUP BY TraceId`` over the rows matching the filters
  (service = the table's leading key, time = its partition key, ids = its bloom-filter index),
  newest first, ``LIMIT`` N; then the N traces' rows (``TraceId IN``) to build their summaries
  with the same builder as the store;
- :meth:`ClickHouseSource.resolve`: a prefix is looked up in the lookup table (its primary key)
  when present, else in the spans' ``TraceId`` column (a scan of that column);
- :meth:`ClickHouseSource.load`: the trace's time range from the lookup table (when present),
  then its spans (``TraceId =`` and that range: partition pruning plus the bloom filter), then
  its log records (``TraceId =`` and the spans' time range widened by
  :data:`LOG_SLACK_NS`).

Rows become :class:`~otelcar.ingest.frames.SpanFrame`/``LogFrame`` records
(:mod:`otelcar.sources.exporter_rows`, which documents how stringified attribute values are
typed again) and steps come from :func:`otelcar.trajectory.build_traces`, as for a file.
Input order, which breaks ties between spans starting and ending at once, is taken as the
order spans ended (the order SDKs export them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import polars as pl

from otelcar.errors import SourceError, TraceNotFound
from otelcar.ingest.frames import LogFrame, SpanFrame
from otelcar.schema import STEPS_SCHEMA, TRACES_SCHEMA
from otelcar.sources import (
    DEFAULT_LIST_LIMIT,
    LoadedTrace,
    SourceSettings,
    TraceFilter,
)
from otelcar.sources.clickhouse_client import ClickHouseConnection, ClickHouseURL
from otelcar.sources.exporter_rows import log_from_row, span_from_row
from otelcar.trajectory import TraceBuild, build_traces

Frame = TypeVar("Frame", SpanFrame, LogFrame)

LOOKUP_SUFFIX = "_trace_id_ts"
LOG_SLACK_NS = 300 * 10**9
LOOKUP_SLACK_NS = 10**9  # the lookup table keeps whole seconds
MAX_AMBIGUOUS = 5
_HEX = frozenset("0123456789abcdef")

SPAN_COLUMNS = {
    "trace_id": "TraceId",
    "span_id": "SpanId",
    "parent_span_id": "ParentSpanId",
    "name": "SpanName",
    "kind": "SpanKind",
    "start_ns": "toUnixTimestamp64Nano(Timestamp)",
    "duration_ns": "Duration",
    "status_code": "StatusCode",
    "status_message": "StatusMessage",
    "attributes": "SpanAttributes",
    "resource": "ResourceAttributes",
    "event_times": "arrayMap(t -> toUnixTimestamp64Nano(t), `Events.Timestamp`)",
    "event_names": "`Events.Name`",
    "event_attributes": "`Events.Attributes`",
    "link_trace_ids": "`Links.TraceId`",
    "link_span_ids": "`Links.SpanId`",
    "link_attributes": "`Links.Attributes`",
}
OPTIONAL_SPAN_COLUMNS = {"scope_name": "ScopeName", "scope_version": "ScopeVersion"}
LOG_COLUMNS = {
    "trace_id": "TraceId",
    "span_id": "SpanId",
    "time_ns": "toUnixTimestamp64Nano(Timestamp)",
    "severity_text": "SeverityText",
    "severity_number": "SeverityNumber",
    "body": "Body",
    "attributes": "LogAttributes",
    "resource": "ResourceAttributes",
}
OPTIONAL_LOG_COLUMNS = {"scope_name": "ScopeName", "event_name": "EventName"}
_REQUIRED_SPAN = {
    "Timestamp",
    "TraceId",
    "SpanId",
    "ParentSpanId",
    "SpanName",
    "SpanKind",
    "ServiceName",
    "ResourceAttributes",
    "SpanAttributes",
    "Duration",
    "StatusCode",
    "StatusMessage",
    "Events.Timestamp",
    "Events.Name",
    "Events.Attributes",
    "Links.TraceId",
    "Links.SpanId",
    "Links.Attributes",
}
_REQUIRED_LOG = {
    "Timestamp",
    "TraceId",
    "SpanId",
    "SeverityText",
    "SeverityNumber",
    "Body",
    "ResourceAttributes",
    "LogAttributes",
}


class ClickHouseSource:
    """Traces in the Collector ``clickhouse`` exporter's tables (module doc: what is read).

    Opening checks that the tables exist with the exporter's columns. ``rows_read`` adds up
    the rows ClickHouse reported reading for every query so far.
    """

    def __init__(self, settings: SourceSettings) -> None:
        url = ClickHouseURL.parse(settings.url)
        self.database = settings.database or url.database or "default"
        self.table = settings.table
        self.rows_read = 0
        self._connection = ClickHouseConnection(url)
        self.where = f"{url.describe()} (table {self.database}.{self.table})"
        try:
            self._span_select = self._select(
                self.table, SPAN_COLUMNS, OPTIONAL_SPAN_COLUMNS, _REQUIRED_SPAN
            )
            self.logs_table = settings.logs_table
            self._log_columns: set[str] = set()
            self._log_select: str | None = None
            if settings.logs_table:
                self._log_columns = self._columns(settings.logs_table)
                if self._log_columns:
                    self._log_select = self._select(
                        settings.logs_table, LOG_COLUMNS, OPTIONAL_LOG_COLUMNS, _REQUIRED_LOG
                    )
            self.lookup_table: str | None = self.table + LOOKUP_SUFFIX
            if not self._columns(self.lookup_table) >= {"TraceId", "Start", "End"}:
                self.lookup_table = None
        except BaseException:
            self._connection.close()
            raise

    # -- plumbing ----------------------------------------------------------------------------
    def _query(self, sql: str, **parameters: Any) -> list[dict[str, Any]]:
        result = self._connection.query(sql, {"db": self.database, **parameters})
        self.rows_read += result.read_rows
        return result.rows

    def _columns(self, table: str) -> set[str]:
        rows = self._query(
            "SELECT name FROM system.columns WHERE database = {db:String} AND table = {t:String}",
            t=table,
        )
        return {row["name"] for row in rows}

    def _select(
        self,
        table: str,
        columns: Mapping[str, str],
        optional: Mapping[str, str],
        required: set[str],
    ) -> str:
        """The SELECT list for ``table`` (aliases as the row readers expect); raises
        :class:`SourceError` naming the table, or its missing columns."""
        present = self._columns(table)
        if not present:
            known = self._query(
                "SELECT name FROM system.tables WHERE database = {db:String} ORDER BY name"
            )
            names = ", ".join(row["name"] for row in known[:20]) or "none"
            raise SourceError(
                f"no table {self.database}.{table} at {self._connection.where} "
                f"(tables in {self.database}: {names})"
            )
        missing = sorted(required - present)
        if missing:
            raise SourceError(
                f"{self.database}.{table} at {self._connection.where} lacks column(s) "
                f"{', '.join(missing)}: not a table of the Collector's clickhouse exporter?"
            )
        chosen = {**columns, **{k: v for k, v in optional.items() if v in present}}
        return ", ".join(f"{expr} AS {alias}" for alias, expr in chosen.items())

    # -- listing -----------------------------------------------------------------------------
    def traces(self, filter: TraceFilter | None = None) -> pl.DataFrame:
        """Summaries of the newest ``filter.limit`` matching traces, oldest first."""
        filter = filter or TraceFilter()
        conditions, parameters = _conditions(filter)
        limit = filter.limit if filter.limit is not None else DEFAULT_LIST_LIMIT
        page = self._query(
            f"SELECT TraceId AS trace_id, min(Timestamp) AS first_start "
            f"FROM {{db:Identifier}}.{{spans:Identifier}} WHERE {' AND '.join(conditions)} "
            "GROUP BY TraceId ORDER BY first_start DESC, trace_id LIMIT {limit:UInt64}",
            spans=self.table,
            limit=max(limit, 0),
            **parameters,
        )
        ids = [row["trace_id"] for row in page]
        summaries = [built.summary for built in self._build(ids)]
        frame = pl.DataFrame(
            [{**s, "build_id": None} for s in summaries], schema=TRACES_SCHEMA, orient="row"
        )
        return frame.sort("start_ns", "trace_id")

    # -- one trace ---------------------------------------------------------------------------
    def resolve(self, prefix: str) -> str:
        """The full id of the one trace whose id starts with ``prefix`` (case-insensitive)."""
        text = prefix.strip().lower()
        if not text:
            raise TraceNotFound("empty trace id")
        if not set(text) <= _HEX or len(text) > 32:
            raise TraceNotFound(f"{prefix!r} is not a trace id (up to 32 hex digits)")
        if len(text) == 32:
            return text
        ids: list[str] = []
        # The lookup table first (its key is the trace id); the spans when it has no match
        # (it only knows the traces inserted after it was created).
        for table in dict.fromkeys(t for t in (self.lookup_table, self.table) if t):
            rows = self._query(
                "SELECT DISTINCT TraceId AS trace_id FROM {db:Identifier}.{t:Identifier} "
                "WHERE startsWith(TraceId, {prefix:String}) ORDER BY trace_id LIMIT {n:UInt64}",
                t=table,
                prefix=text,
                n=MAX_AMBIGUOUS + 1,
            )
            ids = [row["trace_id"] for row in rows]
            if ids:
                break
        if not ids:
            raise TraceNotFound(f"no trace id starts with {prefix!r} in {self.where}")
        if len(ids) > 1:
            shown = ", ".join(ids[:MAX_AMBIGUOUS]) + (" …" if len(ids) > MAX_AMBIGUOUS else "")
            more = "more than " if len(ids) > MAX_AMBIGUOUS else ""
            raise TraceNotFound(
                f"{prefix!r} matches {more}{min(len(ids), MAX_AMBIGUOUS)} traces in "
                f"{self.where}: {shown}; give more of the id"
            )
        return ids[0]

    def load(self, trace_id: str) -> LoadedTrace:
        """One trace (a full id, or a unique prefix) built into steps."""
        full_id = self.resolve(trace_id)
        before = self.rows_read
        built = self._build([full_id])
        if not built:
            raise TraceNotFound(f"trace {full_id} has no spans in {self.where}")
        steps = pl.DataFrame(built[0].steps, schema=STEPS_SCHEMA, orient="row")
        summary = {**built[0].summary, "build_id": None}
        return LoadedTrace(full_id, steps, summary, self.rows_read - before)

    def _build(self, trace_ids: list[str]) -> list[TraceBuild]:
        """Frames of these traces → :class:`~otelcar.trajectory.TraceBuild` (traces with no
        span are left out)."""
        if not trace_ids:
            return []
        spans = self._spans(trace_ids)
        if not spans:
            return []
        logs = self._logs(
            trace_ids,
            min(s.start_ns for s in spans) - LOG_SLACK_NS,
            max(s.end_ns for s in spans) + LOG_SLACK_NS,
        )
        present = sorted({s.trace_id for s in spans})
        return build_traces(spans, logs, present)

    def _time_range(self, trace_ids: list[str]) -> tuple[int, int] | None:
        """The traces' span-start range from the lookup table, widened to whole seconds."""
        if self.lookup_table is None:
            return None
        rows = self._query(
            "SELECT toUnixTimestamp64Nano(toDateTime64(min(Start), 9)) AS lo, "
            "toUnixTimestamp64Nano(toDateTime64(max(End), 9)) AS hi, count() AS n "
            "FROM {db:Identifier}.{t:Identifier} WHERE TraceId IN {ids:Array(String)}",
            t=self.lookup_table,
            ids=trace_ids,
        )
        if not rows or not rows[0]["n"]:
            return None
        return rows[0]["lo"] - LOOKUP_SLACK_NS, rows[0]["hi"] + LOOKUP_SLACK_NS

    def _spans(self, trace_ids: list[str]) -> list[SpanFrame]:
        conditions = ["TraceId IN {ids:Array(String)}"]
        parameters: dict[str, Any] = {"ids": trace_ids}
        bounds = self._time_range(trace_ids)
        if bounds is not None:
            conditions.append(
                "Timestamp BETWEEN fromUnixTimestamp64Nano({lo:Int64}) "
                "AND fromUnixTimestamp64Nano({hi:Int64})"
            )
            parameters.update(lo=bounds[0], hi=bounds[1])
        rows = self._query(
            f"SELECT {self._span_select} FROM {{db:Identifier}}.{{spans:Identifier}} "
            f"WHERE {' AND '.join(conditions)} "
            "ORDER BY Timestamp + toIntervalNanosecond(Duration), Timestamp, SpanId",
            spans=self.table,
            **parameters,
        )
        return _frames(rows, span_from_row, self.where)

    def _logs(self, trace_ids: list[str], lo_ns: int, hi_ns: int) -> list[LogFrame]:
        if self._log_select is None:
            return []
        conditions = [
            "TraceId IN {ids:Array(String)}",
            "Timestamp BETWEEN fromUnixTimestamp64Nano({lo:Int64}) "
            "AND fromUnixTimestamp64Nano({hi:Int64})",
        ]
        if "TimestampTime" in self._log_columns:  # the logs table's key and partition column
            conditions.append(
                "TimestampTime BETWEEN toDateTime({lo_s:Int64}) AND toDateTime({hi_s:Int64})"
            )
        rows = self._query(
            f"SELECT {self._log_select} FROM {{db:Identifier}}.{{logs:Identifier}} "
            f"WHERE {' AND '.join(conditions)} ORDER BY Timestamp",
            logs=self.logs_table,
            ids=trace_ids,
            lo=lo_ns,
            hi=hi_ns,
            lo_s=lo_ns // 10**9,
            hi_s=hi_ns // 10**9 + 1,
        )
        return _frames(rows, log_from_row, self.where)

    # -- lifetime ----------------------------------------------------------------------------
    def close(self) -> None:
        self._connection.close()

    def __enter__(self) -> ClickHouseSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _frames(
    rows: Iterable[Mapping[str, Any]],
    convert: Callable[[Mapping[str, Any], int], Frame],
    where: str,
) -> list[Frame]:
    """Rows → frames numbered in row order; a row that cannot be read is an error naming it."""
    out: list[Frame] = []
    for seq, row in enumerate(rows):
        try:
            out.append(convert(row, seq))
        except (ValueError, TypeError, KeyError) as exc:
            raise SourceError(f"{where}: unreadable row {seq} ({exc})") from exc
    return out


def _conditions(filter: TraceFilter) -> tuple[list[str], dict[str, Any]]:
    """The WHERE conditions (and their parameters) a filter pushes down."""
    conditions = ["TraceId != ''"]
    parameters: dict[str, Any] = {}
    if filter.service:
        conditions.append("ServiceName = {service:String}")
        parameters["service"] = filter.service
    if filter.since_ns is not None:
        conditions.append("Timestamp >= fromUnixTimestamp64Nano({since:Int64})")
        parameters["since"] = filter.since_ns
    if filter.until_ns is not None:
        conditions.append("Timestamp < fromUnixTimestamp64Nano({until:Int64})")
        parameters["until"] = filter.until_ns
    if filter.trace_ids:
        conditions.append("TraceId IN {trace_ids:Array(String)}")
        parameters["trace_ids"] = [t.lower() for t in filter.trace_ids]
    if filter.prefix:
        conditions.append("startsWith(TraceId, {prefix:String})")
        parameters["prefix"] = filter.prefix.lower()
    return conditions, parameters
