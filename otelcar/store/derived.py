"""Derived tables of a store: records, spans, logs, steps (Parquet parts) and the trace index.

Everything here can be rebuilt from the raw segments (``otelcar reindex``). Each
materialization is one *build* that writes ``{records,spans,logs,steps}/build-NNNNNN.parquet``,
``messages/build-NNNNNN.parquet`` (the distinct messages its steps part refers to:
:mod:`otelcar.store.refs`) and ``traces/build-NNNNNN.parquet``: the index rows of the traces
it touched, each naming the build that holds its current steps. ``state.json`` records
how far each raw segment has been materialized, and the layout of the derived tables
(:data:`LAYOUT_VERSION`): tables of another layout are refused with "run ``otelcar
reindex``", which rebuilds them from raw. ``state.json`` is written last, so a build
interrupted by a crash is simply redone (its part files are overwritten), and its parts
are invisible until then.

The trace index is ``traces.parquet`` (the index as of some build) plus the committed
``traces/`` parts after it, a trace's latest row winning. A build writes only its own rows,
never the whole index again: once :data:`TRACES_COMPACT_PARTS` parts have gathered, the merged
index is written to ``traces.parquet`` (whole, renamed into place) and the parts it covers are
removed. A crash between the two leaves parts that repeat what the base holds: harmless, as
the latest row of a trace is the same either way.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from otelcar.errors import StoreError
from otelcar.ingest.frames import LogFrame, SpanFrame
from otelcar.schema import LOGS_SCHEMA, RECORDS_SCHEMA, SPANS_SCHEMA, STEPS_SCHEMA, TRACES_SCHEMA
from otelcar.store.raw_spans import (
    SPANS_FILE_SCHEMA,
    raw_attributes,
    span_file_rows,
    with_raw_attributes,
)
from otelcar.store.refs import (
    MESSAGES_SCHEMA,
    STEPS_FILE_SCHEMA,
    STEPS_PART_SCHEMA,
    encode_steps,
    resolve_messages,
)
from otelcar.store.tables import (
    frame_of,
    log_from_row,
    span_from_row,
    write_json_atomic,
    write_parquet_atomic,
)

#: 2: the steps table has tool_choice; 3: steps parts hold messages as references into
#: a messages part per build (:mod:`otelcar.store.refs`), spans parts leave big attributes
#: in the raw records (:mod:`otelcar.store.raw_spans`).
LAYOUT_VERSION = 3
__all__ = ["FILES", "LAYOUT_VERSION", "STEPS_PART_SCHEMA", "TABLES", "BuildState", "DerivedTables"]
#: Committed trace-index parts that make :meth:`DerivedTables.compact_traces` merge them.
TRACES_COMPACT_PARTS = 32
#: Messages parts a :class:`DerivedTables` keeps in memory once read.
MESSAGES_KEPT = 4
#: Each table as the store serves it (the steps with the build that holds them).
TABLES = {
    "records": RECORDS_SCHEMA,
    "spans": SPANS_SCHEMA,
    "logs": LOGS_SCHEMA,
    "steps": STEPS_PART_SCHEMA,
    "traces": TRACES_SCHEMA,
}
#: Each table's parts as written on disk (:meth:`DerivedTables.scan` reads these).
FILES = {
    **TABLES,
    "spans": SPANS_FILE_SCHEMA,
    "steps": STEPS_FILE_SCHEMA,
    "messages": MESSAGES_SCHEMA,
}


@dataclass(slots=True)
class BuildState:
    """Progress of materialization (``state.json``)."""

    materialized: dict[str, int] = field(default_factory=dict)
    next_build: int = 1
    next_seq: int = 0


class DerivedTables:
    """The derived tables under one directory. Tables of another layout (or a corrupt
    ``state.json``) open, but every use of :attr:`state` raises :class:`StoreError` saying to
    run ``otelcar reindex`` (which builds new tables beside them, never reading them)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self._unusable: str | None = None
        self._kept: OrderedDict[int, pl.Series] = OrderedDict()  # messages parts read
        self._kept_lock = threading.Lock()
        self._state = self._load_state()

    # -- state -------------------------------------------------------------------------
    @property
    def state(self) -> BuildState:
        """How far the tables are built; raises :class:`StoreError` when they are unusable."""
        if self._unusable is not None:
            raise StoreError(self._unusable)
        return self._state

    @property
    def usable(self) -> bool:
        """Whether the tables are of this otelcar's layout (else: ``otelcar reindex``)."""
        return self._unusable is None

    def _load_state(self) -> BuildState:
        path = self.directory / "state.json"
        if not path.exists():
            return BuildState()
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            self._unusable = f"{path} is corrupt ({exc}); run `otelcar reindex`"
            return BuildState()
        if data.get("layout") != LAYOUT_VERSION:
            self._unusable = (
                f"{path}: store layout {data.get('layout')!r} is not "
                f"{LAYOUT_VERSION}; run `otelcar reindex` with this otelcar"
            )
            return BuildState()
        return BuildState(
            dict(data["materialized"]), int(data["next_build"]), int(data["next_seq"])
        )

    def save_state(self) -> None:
        write_json_atomic(
            {
                "layout": LAYOUT_VERSION,
                "materialized": self.state.materialized,
                "next_build": self.state.next_build,
                "next_seq": self.state.next_seq,
            },
            self.directory / "state.json",
        )

    # -- parts -------------------------------------------------------------------------
    def part_path(self, table: str, build_id: int) -> Path:
        return self.directory / table / f"build-{build_id:06d}.parquet"

    def parts(self, table: str, *, before: int | None = None) -> list[Path]:
        """Part files of committed builds (``before``: only builds below it). A build whose
        ``state.json`` was never written (interrupted) is invisible until it is redone."""
        folder = self.directory / table
        paths = sorted(folder.glob("build-*.parquet")) if folder.exists() else []
        next_build = self.state.next_build
        limit = next_build if before is None else min(before, next_build)
        return [p for p in paths if int(p.stem[len("build-") :]) < limit]

    def write_part(self, table: str, build_id: int, rows: list[dict[str, Any]]) -> None:
        """Write (or, with no rows, remove a stale leftover of) one build's part."""
        path = self.part_path(table, build_id)
        if rows:
            frame = frame_of(rows, FILES[table])
            write_parquet_atomic(frame, path)
        else:
            path.unlink(missing_ok=True)

    def write_spans(self, build_id: int, spans: list[SpanFrame]) -> None:
        """Write one build's spans part (big attributes left in raw: :mod:`.raw_spans`)."""
        self.write_part("spans", build_id, span_file_rows(spans))

    def spans_table(self, rows: pl.DataFrame) -> pl.DataFrame:
        """Rows of spans parts (:data:`SPANS_FILE_SCHEMA`, of committed builds) as the spans
        table (:data:`SPANS_SCHEMA`), attributes left in raw decoded again."""
        return with_raw_attributes(self, rows)

    def write_steps(self, build_id: int, rows: list[dict[str, Any]]) -> None:
        """Write one build's steps part (rows of :data:`STEPS_PART_SCHEMA`) and the messages
        part it refers to, messages first; with no rows, remove stale leftovers of both."""
        if not rows:
            self.write_part("steps", build_id, [])
            self.part_path("messages", build_id).unlink(missing_ok=True)
            return
        encoded = encode_steps(rows)
        write_parquet_atomic(encoded.messages, self.part_path("messages", build_id))
        write_parquet_atomic(encoded.steps, self.part_path("steps", build_id))

    def _messages_of(self, builds: list[int]) -> tuple[pl.Series, dict[int, int]]:
        """The messages parts of ``builds``, concatenated, and where each build's start."""
        parts, starts, start = [], {}, 0
        for build in builds:
            part = self._messages_part(build)
            parts.append(part)
            starts[build] = start
            start += part.len()
        return pl.concat(parts), starts

    def _messages_part(self, build: int) -> pl.Series:
        """One committed build's messages (kept for the next reads: a committed build's parts
        never change; the last :data:`MESSAGES_KEPT` parts read are kept)."""
        with self._kept_lock:
            if build in self._kept:
                self._kept.move_to_end(build)
                return self._kept[build]
        path = self.part_path("messages", build)
        if not path.exists():
            raise StoreError(f"messages part {path} is missing; run `otelcar reindex`")
        part = pl.read_parquet(path, schema=MESSAGES_SCHEMA)["message"]
        with self._kept_lock:
            self._kept[build] = part
            while len(self._kept) > MESSAGES_KEPT:
                self._kept.popitem(last=False)
        return part

    def scan(self, table: str, *, before: int | None = None) -> pl.LazyFrame:
        paths = self.parts(table, before=before)
        if not paths:
            return pl.LazyFrame(schema=FILES[table])
        return pl.scan_parquet(paths, schema=FILES[table])

    # -- the trace index ---------------------------------------------------------------
    def _index_sources(self) -> list[Path]:
        base = self.directory / "traces.parquet"
        return ([base] if base.exists() else []) + self.parts("traces")

    def _scan_index(self, sources: list[Path]) -> pl.LazyFrame:
        """Every trace's latest index row from ``sources`` (the base, then parts)."""
        if not sources:
            return pl.LazyFrame(schema=TRACES_SCHEMA)
        rows = pl.scan_parquet(sources, schema=TRACES_SCHEMA)
        if len(sources) == 1:
            return rows
        return rows.sort("build_id", maintain_order=True).unique(
            "trace_id", keep="last", maintain_order=True
        )

    def traces(self) -> pl.DataFrame:
        """The trace index (:data:`TRACES_SCHEMA`), oldest first."""
        for attempt in range(3):
            try:
                index = self._scan_index(self._index_sources()).collect()
                break
            except FileNotFoundError:  # parts merged and removed meanwhile: list them again
                if attempt == 2:
                    raise
        return index.sort("start_ns", "trace_id", nulls_last=True)

    def known_traces(self, trace_ids: Iterable[str]) -> set[str]:
        """Which of ``trace_ids`` the index already holds (reads only its ``trace_id``s)."""
        ids = list(trace_ids)
        sources = self._index_sources()
        if not ids or not sources:
            return set()
        found = (
            pl.scan_parquet(sources, schema=TRACES_SCHEMA)
            .select("trace_id")
            .filter(pl.col("trace_id").is_in(ids))
            .unique()
            .collect()
        )
        return set(found["trace_id"].to_list())

    def write_traces(self, build_id: int, summaries: list[dict[str, Any]]) -> None:
        """Build ``build_id``'s index rows (the traces it touched), as a part."""
        self.write_part("traces", build_id, summaries)

    def compact_traces(self, *, at_least: int | None = None) -> bool:
        """Merge the committed index parts into ``traces.parquet`` once there are
        ``at_least`` (default :data:`TRACES_COMPACT_PARTS`) of them; call after
        ``state.json`` is written. Whether it merged."""
        parts = self.parts("traces")
        if len(parts) < (TRACES_COMPACT_PARTS if at_least is None else at_least):
            return False
        base = self.directory / "traces.parquet"
        merged = self._scan_index(([base] if base.exists() else []) + parts).collect()
        write_parquet_atomic(merged.sort("start_ns", "trace_id", nulls_last=True), base)
        for part in parts:
            part.unlink(missing_ok=True)
        return True

    def record_ids(self) -> set[str]:
        return set(self.scan("records").select("record_id").collect()["record_id"].to_list())

    # -- loading frames back -------------------------------------------------------------
    def load_spans(self, trace_ids: Iterable[str], *, before: int) -> list[SpanFrame]:
        ids = list(trace_ids)
        if not ids:
            return []
        rows = self.scan("spans", before=before).filter(pl.col("trace_id").is_in(ids)).collect()
        found = raw_attributes(self, rows.filter(pl.col("attributes_in_raw")))
        spans = []
        for row in rows.iter_rows(named=True):
            if row["attributes_in_raw"]:
                span = span_from_row({**row, "attributes": "{}"})
                span.attributes = found[(row["record_id"], row["seq"])]
            else:
                span = span_from_row(row)
            spans.append(span)
        return spans

    def load_logs(self, trace_ids: Iterable[str], *, before: int) -> list[LogFrame]:
        ids = list(trace_ids)
        if not ids:
            return []
        rows = self.scan("logs", before=before).filter(pl.col("trace_id").is_in(ids)).collect()
        return [log_from_row(row) for row in rows.iter_rows(named=True)]

    # -- steps ---------------------------------------------------------------------------
    def scan_steps(self, trace_ids: list[str] | None = None) -> pl.LazyFrame:
        """Current steps of the given traces (all when ``None``), ordered by trace and step,
        as a lazy query over the steps parts (nothing is read until it is collected)."""
        index = self.traces().filter(pl.col("n_steps") > 0).select("trace_id", "build_id")
        if trace_ids is not None:
            index = index.filter(pl.col("trace_id").is_in(trace_ids))
        if index.is_empty():
            return pl.LazyFrame(schema=STEPS_SCHEMA)
        builds = sorted(set(index["build_id"].to_list()))
        paths = [self.part_path("steps", b) for b in builds]
        missing = [str(p) for p in paths if not p.exists()]
        if missing:
            raise StoreError(f"steps part {missing[0]} is missing; run `otelcar reindex`")
        rows = (
            pl.scan_parquet(paths, schema=STEPS_FILE_SCHEMA)
            .join(index.lazy(), on=["trace_id", "build_id"], how="semi")
            .sort("trace_id", "step")
        )
        return resolve_messages(rows, self._messages_of).drop("build_id")

    def steps(self, trace_ids: list[str] | None = None) -> pl.DataFrame:
        """:meth:`scan_steps`, collected."""
        return self.scan_steps(trace_ids).collect()
