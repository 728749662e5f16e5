"""The embedded store: raw records kept verbatim, spans and steps as Parquet, a trace index.

Layout (``$OTELCAR_HOME`` or ``./.otelcar``)::

    STORE                   {"layout": 1}
    raw.lock, derived.lock  flocks: appending to raw / deriving tables (derived before raw)
    raw/segment-*.ocr       append-only framed records (see segments.py); raw/quarantine/
    derived/                rebuildable tables (see derived.py; steps hold messages as
                            references, refs.py; spans leave big attributes in raw,
                            raw_spans.py)

Writers (``import``, the receiver, ``reindex``) take the lock; readers never block: every
derived file is replaced atomically. Raw records are deduplicated by content hash, so
importing the same file twice changes nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl

from otelcar.config import default_store_path
from otelcar.errors import StoreBusy, StoreError, TraceNotFound
from otelcar.ingest.raw import RawRecord
from otelcar.sources import LoadedTrace, TraceFilter, filter_index
from otelcar.store.decoding import derive
from otelcar.store.derived import STEPS_PART_SCHEMA, DerivedTables
from otelcar.store.report import ImportReport
from otelcar.store.segments import Quarantined, SegmentLog, StoredFrame
from otelcar.store.tables import log_rows
from otelcar.trajectory import build_traces

log = logging.getLogger("otelcar.store")
LAYOUT = 1
BUILD_LIMIT_BYTES = 64 * 1024 * 1024
LOCK_TIMEOUT_S = 30.0

Progress = Callable[[int], None]


class Store:
    """A local otelcar store. ``Store()`` opens (creating if needed) the default one."""

    def __init__(self, root: str | Path | None = None, *, create: bool = True) -> None:
        self.root = Path(root) if root is not None else default_store_path()
        marker = self.root / "STORE"
        if not marker.exists():
            if not create:
                raise StoreError(f"no otelcar store at {self.root} (import something first)")
            self.root.mkdir(parents=True, exist_ok=True)
            marker.write_text(json.dumps({"layout": LAYOUT}) + "\n", encoding="utf-8")
        else:
            try:
                layout = json.loads(marker.read_text(encoding="utf-8")).get("layout")
            except ValueError:
                layout = None
            if layout != LAYOUT:
                raise StoreError(f"{marker}: unknown store layout {layout!r}")
        self.raw = SegmentLog(self.root / "raw")
        self.derived = DerivedTables(self.root / "derived")
        self._derived_seen: tuple[int, int, int] | None = None  # state.json when last read

    # -- locking -----------------------------------------------------------------------------
    @contextlib.contextmanager
    def lock(
        self, name: str = "derived", timeout_s: float | None = LOCK_TIMEOUT_S
    ) -> Iterator[None]:
        """Exclusive lock ``name`` (``raw``: appending to segments; ``derived``: deriving
        tables), across threads and processes; waits up to ``timeout_s``. Always take
        ``derived`` before ``raw``, never the other way round."""
        path = self.root / f"{name}.lock"
        with path.open("a+") as handle:
            deadline = time.monotonic() + timeout_s if timeout_s is not None else float("inf")
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        handle.seek(0)
                        holder = handle.read().strip() or "another process"
                        raise StoreBusy(
                            f"store {self.root} ({name}) is locked by {holder}"
                        ) from None
                    time.sleep(0.01)
            handle.seek(0)
            handle.truncate()
            handle.write(f"pid {os.getpid()}\n")
            handle.flush()
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    # -- writing -----------------------------------------------------------------------------
    def append(self, records: list[RawRecord]) -> None:
        """Append records to the raw segments durably (fsync-ed when this returns).

        Nothing is derived here: :meth:`catch_up` (or the next import) does that.
        """
        with self.lock("raw"):
            self.raw.append(records)
            for line in _describe(self.raw.recovered):
                log.warning("quarantined %s", line)

    def recover(self) -> list[str]:
        """Quarantine incomplete or corrupt segment tails (interrupted writes); describe them.
        Raises :class:`StoreError` when the derived tables are of another layout (run
        ``otelcar reindex``), so a receiver or an import refuses to start on them.

        Safe while other processes write: appends happen under the same raw lock."""
        return self._recover(rebuilding=False)

    def _recover(self, *, rebuilding: bool) -> list[str]:
        """:meth:`recover`; ``rebuilding`` (a reindex, which never reads the derived tables)
        checks every segment whole when the tables are of another layout instead."""
        with self.lock("raw"):
            derived = DerivedTables(self.root / "derived")
            if rebuilding and not derived.usable:
                starts: dict[str, int] = {}  # nothing known good: check every frame
            else:
                starts = derived.state.materialized
            return _describe(self.raw.recover(starts))

    def import_records(
        self, records: Iterable[RawRecord], *, progress: Progress | None = None
    ) -> ImportReport:
        """Store records durably (skipping ones already stored) and derive their steps.

        ``progress`` is called with the number of records handled so far. A record's JSON that
        the file sniffer parsed (:attr:`RawRecord.parsed`) is decoded as parsed, not parsed
        again from the stored bytes.
        """
        report = ImportReport()
        with self.lock("derived"):
            report.quarantined.extend(self.recover())
            report.merge(self._catch_up_locked())
            known = self.derived.record_ids()
            batch: list[RawRecord] = []
            parsed: dict[str, tuple[Any, int]] = {}  # record id → the sniffer's JSON value
            size = 0
            for seen, record in enumerate(records, start=1):
                if record.record_id in known:
                    report.records += 1  # the builds count every other record
                    report.duplicates += 1
                else:
                    known.add(record.record_id)
                    batch.append(record)
                    size += len(record.payload)
                    if (value := record.take_parsed()) is not None:
                        parsed[record.record_id] = value
                if size >= BUILD_LIMIT_BYTES:
                    self.append(batch)
                    batch, size = [], 0  # release the payloads: derivation reads them back
                    report.merge(self._materialize(self.derived, known=set(), parsed=parsed))
                    parsed = {}
                if progress:
                    progress(seen)
            if batch:
                self.append(batch)
                batch = []
                report.merge(self._materialize(self.derived, known=set(), parsed=parsed))
        return report

    def catch_up(
        self, *, recover: bool = False, lock_timeout_s: float | None = LOCK_TIMEOUT_S
    ) -> ImportReport:
        """Derive tables for raw records not yet derived (the receiver's, or after a crash);
        with ``recover``, first quarantine interrupted writes. ``lock_timeout_s=None`` waits
        as long as another derivation holds the store."""
        with self.lock("derived", lock_timeout_s):
            report = ImportReport()
            if recover:
                report.quarantined.extend(self.recover())
            report.merge(self._catch_up_locked())
            return report

    def _catch_up_locked(self) -> ImportReport:
        self.derived = DerivedTables(self.root / "derived")  # another process may have built
        pending = self._materialize(self.derived, known=self.derived.record_ids())
        pending.records = 0  # caught-up records were counted when they arrived
        return pending

    def reindex(self, *, progress: Progress | None = None) -> ImportReport:
        """Rebuild every derived table from the raw records (with the current mappers)."""
        with self.lock("derived"):
            report = ImportReport()
            report.quarantined.extend(self._recover(rebuilding=True))
            target = self.root / "derived.new"
            shutil.rmtree(target, ignore_errors=True)
            fresh = DerivedTables(target)
            report.merge(self._materialize(fresh, known=set(), progress=progress))
            report.records = report.imported + report.duplicates + len(report.unparsed)
            old = self.root / "derived.old"
            shutil.rmtree(old, ignore_errors=True)
            if (self.root / "derived").exists():
                os.replace(self.root / "derived", old)
            os.replace(target, self.root / "derived")
            shutil.rmtree(old, ignore_errors=True)
            self.derived = DerivedTables(self.root / "derived")
            return report

    def _pending(self, derived: DerivedTables) -> Iterator[StoredFrame]:
        for segment in self.raw.segments():
            start = derived.state.materialized.get(segment, 0)
            if start < self.raw.size(segment):
                yield from self.raw.read(segment, start)

    def _materialize(
        self,
        derived: DerivedTables,
        *,
        known: set[str],
        progress: Progress | None = None,
        parsed: dict[str, tuple[Any, int]] | None = None,
    ) -> ImportReport:
        """Derive tables for every raw frame past ``derived``'s state, in bounded builds.

        ``known`` holds record ids already derived (a frame with one is a duplicate);
        ``parsed`` the JSON values of records just appended, by record id, each handed to
        the frame read back with that id (and removed).
        """
        report = ImportReport()
        batch: list[StoredFrame] = []
        size = 0
        done = 0
        for frame in self._pending(derived):
            batch.append(frame)
            size += frame.length
            if size >= BUILD_LIMIT_BYTES:
                report.merge(self._build(derived, batch, known, parsed))
                done += len(batch)
                batch, size = [], 0
                if progress:
                    progress(done)
        if batch:
            report.merge(self._build(derived, batch, known, parsed))
            if progress:
                progress(done + len(batch))
        return report

    def _build(
        self,
        derived: DerivedTables,
        frames: list[StoredFrame],
        known: set[str],
        parsed: dict[str, tuple[Any, int]] | None = None,
    ) -> ImportReport:
        report = ImportReport(records=len(frames))
        state = derived.state
        build_id = state.next_build
        records = (_with_parsed(f.record, parsed) for f in frames)
        done = derive(records, report, seq=state.next_seq, known=known)
        spans, logs, seq = done.spans, done.logs, done.seq
        record_rows: list[dict] = []
        for frame, decoded in zip(frames, done.decoded, strict=True):
            record = frame.record
            row = {
                "record_id": record.record_id,
                "segment": frame.segment,
                "offset": frame.offset,
                "length": frame.length,
                "format": record.format,
                "signal": record.signal,
                "source": record.source,
                "position": record.position,
                "status": "duplicate" if decoded is None else decoded.status,
                "reason": None if decoded is None else decoded.reason,
                "n_spans": 0,
                "n_logs": 0,
                "n_rejected": 0,
                "received_ns": frame.received_ns,
                "build_id": build_id,
            }
            if decoded is not None and decoded.status != "unparsed":
                row.update(
                    signal=decoded.signal,
                    n_spans=len(decoded.spans),
                    n_logs=len(decoded.logs),
                    n_rejected=decoded.rejected,
                )
            record_rows.append(row)

        affected = report.traces
        earlier = derived.known_traces(affected)
        report.new_traces = len(affected - earlier)
        all_spans = derived.load_spans(earlier, before=build_id) + spans
        all_logs = derived.load_logs(earlier, before=build_id) + logs

        derived.write_part("records", build_id, record_rows)
        derived.write_spans(build_id, spans)
        derived.write_part("logs", build_id, log_rows(logs))

        step_rows: list[dict] = []
        summaries: list[dict] = []
        for built in build_traces(all_spans, all_logs, affected):
            for step in built.steps:
                step["build_id"] = build_id
            step_rows.extend(built.steps)
            summaries.append({**built.summary, "build_id": build_id})
        derived.write_steps(build_id, step_rows)
        derived.write_traces(build_id, summaries)
        for frame in frames:
            end = frame.offset + frame.length
            if end > state.materialized.get(frame.segment, 0):
                state.materialized[frame.segment] = end
        state.next_build = build_id + 1
        state.next_seq = seq
        derived.save_state()
        derived.compact_traces()
        return report

    # -- reading -----------------------------------------------------------------------------
    def pending_bytes(self) -> int:
        """Bytes of raw records stored but not yet derived (a receiver's backlog, or what a
        crash left): their traces are missing from :meth:`traces` or lack those spans.
        Cheap (file sizes and the derived state), safe while others write."""
        materialized = DerivedTables(self.root / "derived").state.materialized
        pending = 0
        for segment in self.raw.segments():
            try:
                size = self.raw.size(segment)
            except FileNotFoundError:  # removed meanwhile (a reindex)
                continue
            pending += max(0, size - materialized.get(segment, 0))
        return pending

    def _current(self) -> DerivedTables:
        """The derived tables as last committed, by this process or another (a receiver's
        derivation child, a concurrent import): reloaded when ``state.json`` changed."""
        try:
            stat = (self.root / "derived" / "state.json").stat()
            seen = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        except FileNotFoundError:
            seen = None
        if seen != self._derived_seen:
            self.derived = DerivedTables(self.root / "derived")
            self._derived_seen = seen
        return self.derived

    # -- the trace-source interface (otelcar.sources.TraceSource) ---------------------------
    @property
    def where(self) -> str:
        """Where the traces are, for messages (``store PATH``)."""
        return f"store {self.root}"

    def traces(self, filter: TraceFilter | None = None) -> pl.DataFrame:
        """The trace index (:data:`otelcar.schema.TRACES_SCHEMA`), oldest first: every trace,
        or those ``filter`` selects (:class:`~otelcar.sources.TraceFilter`: ``service`` is
        the trace's service, ``since_ns``/``until_ns`` bound its start, ``limit`` keeps the
        newest N; a local store lists all matches when ``limit`` is ``None``)."""
        index = self._current().traces()
        return index if filter is None else filter_index(index, filter)

    def load(self, trace_id: str) -> LoadedTrace:
        """One trace (a full id or a unique prefix): its steps and its index row;
        ``rows_read`` counts the steps read."""
        full = self.resolve(trace_id)
        summary = self.traces().filter(pl.col("trace_id") == full).row(0, named=True)
        steps = self.steps(full)
        return LoadedTrace(full, steps, summary, steps.height)

    def close(self) -> None:
        """Nothing to release (files are opened per read); for the context-manager form."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def resolve(self, prefix: str) -> str:
        """The full trace id matching a unique (case-insensitive) prefix."""
        text = prefix.strip().lower()
        if not text:
            raise TraceNotFound("empty trace id")
        ids = self.traces()["trace_id"]
        matches = ids.filter(ids.str.starts_with(text)).to_list()
        if not matches:
            raise TraceNotFound(f"no trace id starts with {prefix!r} in {self.root}")
        if len(matches) > 1:
            shown = ", ".join(matches[:5]) + (" …" if len(matches) > 5 else "")
            raise TraceNotFound(f"{prefix!r} matches {len(matches)} traces: {shown}")
        return matches[0]

    def scan_steps(self, trace_id: str | None = None) -> pl.LazyFrame:
        """Steps of one trace (id or unique prefix), or of every trace when ``None``, as a
        lazy query (:data:`otelcar.schema.STEPS_SCHEMA`, ordered by trace and step) over the
        store as it is now: filter and select before collecting, and only that is read."""
        if trace_id is None:
            return self._current().scan_steps()
        return self._current().scan_steps([self.resolve(trace_id)])

    def steps(self, trace_id: str | None = None) -> pl.DataFrame:
        """:meth:`scan_steps`, collected."""
        return self.scan_steps(trace_id).collect()

    def spans(self, trace_id: str) -> pl.DataFrame:
        """Every stored span occurrence of one trace (duplicates included), as the spans
        table (:data:`otelcar.schema.SPANS_SCHEMA`: attributes the store left in the raw
        records are decoded from them again)."""
        full = self.resolve(trace_id)
        derived = self._current()
        rows = derived.scan("spans").filter(pl.col("trace_id") == full).sort("seq").collect()
        return derived.spans_table(rows)

    def rooted(self, trace_ids: Iterable[str]) -> set[str]:
        """Those of ``trace_ids`` (full ids) with a root span stored: a span without a parent.
        An SDK exports a span when it ends and a root ends last, so a trace's root marks it
        complete (what triage waits for, :mod:`otelcar.triage.completion`)."""
        wanted = list(trace_ids)
        if not wanted:
            return set()
        spans = self._current().scan("spans")
        roots = spans.filter(
            pl.col("trace_id").is_in(wanted)
            & (pl.col("parent_span_id").is_null() | (pl.col("parent_span_id") == ""))
        )
        return set(roots.select("trace_id").unique().collect()["trace_id"].to_list())

    def logs(self, trace_id: str) -> pl.DataFrame:
        """Every stored log record of one trace."""
        full = self.resolve(trace_id)
        logs = self._current().scan("logs")
        return logs.filter(pl.col("trace_id") == full).sort("seq").collect()

    def records(self) -> pl.DataFrame:
        """One row per raw record: where it came from, its status and reason."""
        records = self._current().scan("records")
        return records.sort("build_id", "segment", "offset").collect()


def _with_parsed(record: RawRecord, parsed: dict[str, tuple[Any, int]] | None) -> RawRecord:
    """``record`` (read back from a segment) with the JSON value parsed from the same bytes
    before it was stored, if ``parsed`` has one (taken from it)."""
    value = parsed.pop(record.record_id, None) if parsed else None
    return record if value is None else replace(record, parsed=value)


def _describe(found: list[Quarantined]) -> list[str]:
    return [
        f"{item.length} bytes of {item.segment} at offset {item.offset} "
        f"({item.reason}) → {item.path}"
        for item in found
    ]


__all__ = ["STEPS_PART_SCHEMA", "ImportReport", "Store"]


def scan_store(path: str | Path | None = None) -> pl.LazyFrame:
    """The steps of every trace in the store at ``path`` (default: ``./.otelcar`` or
    ``$OTELCAR_HOME``) as a lazy query, like :func:`polars.scan_parquet`: nothing is read
    until it is collected, and filters and selections are pushed into the read. Raises
    :class:`~otelcar.errors.StoreError` when there is no store there (it is never created)."""
    return Store(path, create=False).scan_steps()
