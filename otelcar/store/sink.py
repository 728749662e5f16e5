"""Where a receiver puts what it accepts: the :class:`TraceSink` interface, and a sink in memory.

Like the OpenTelemetry SDK's exporters, the interface is small: the receiver asks a sink to
:meth:`~TraceSink.recover` once before its first write, to :meth:`~TraceSink.append` accepted
batches (durably, before they are acknowledged), how many bytes wait to be derived
(:meth:`~TraceSink.pending_bytes`, for backpressure), and to derive them
(:meth:`~TraceSink.catch_up`). :class:`otelcar.store.Store` is the durable sink;
:class:`InMemorySink` keeps the records in this process (for tests, notebooks and
embedding: what was received reads back as a steps table, nothing touches the disk).
"""

from __future__ import annotations

import threading
from typing import Protocol, runtime_checkable

import polars as pl

from otelcar.ingest.frames import LogFrame, SpanFrame
from otelcar.ingest.raw import RawRecord
from otelcar.store.decoding import derive
from otelcar.store.report import ImportReport
from otelcar.store.tables import steps_frame
from otelcar.trajectory import TraceBuild, build_traces


@runtime_checkable
class TraceSink(Protocol):
    """What a receiver writes into (see the module docstring). Every method may be called
    from several threads at once."""

    def recover(self) -> list[str]:
        """Make the sink whole after an interrupted run (before the first :meth:`append`);
        describe what was set aside."""
        ...

    def append(self, records: list[RawRecord]) -> None:
        """Keep ``records`` (verbatim); when this returns they survive what the sink
        promises to survive, and the receiver acknowledges them."""
        ...

    def pending_bytes(self) -> int:
        """Bytes of records kept but not yet derived (cheap: called often)."""
        ...

    def catch_up(self, *, lock_timeout_s: float | None = ...) -> ImportReport:
        """Derive what is pending; report what it was."""
        ...


class InMemorySink:
    """A :class:`TraceSink` in this process's memory. Records are deduplicated by record id
    (exporters retry), derived as the store derives them
    (:func:`~otelcar.store.decoding.derive`), and read back with :meth:`steps`; nothing
    survives the process, and nothing is ever dropped or cut."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: list[RawRecord] = []
        self._derived = 0  # records[:derived] are derived
        self._known: set[str] = set()
        self._spans: list[SpanFrame] = []
        self._logs: list[LogFrame] = []
        self.report = ImportReport()  # everything derived so far

    def recover(self) -> list[str]:
        return []  # memory is never left half-written

    def append(self, records: list[RawRecord]) -> None:
        with self._lock:
            self._records.extend(records)
            self.report.records += len(records)

    def pending_bytes(self) -> int:
        with self._lock:
            return sum(len(r.payload) for r in self._records[self._derived :])

    def catch_up(self, *, lock_timeout_s: float | None = None) -> ImportReport:
        report = ImportReport()
        with self._lock:
            pending = self._records[self._derived :]
            self._derived = len(self._records)
            seq = len(self._spans) + len(self._logs)
            seen = {s.trace_id for s in self._spans} | {g.trace_id for g in self._logs}
            done = derive(pending, report, seq=seq, known=self._known)
            self._spans.extend(done.spans)
            self._logs.extend(done.logs)
            report.new_traces = len(report.traces - seen)
            self.report.merge(report)
        return report

    def records(self) -> list[RawRecord]:
        """Every record appended, in order (duplicates included), verbatim."""
        with self._lock:
            return list(self._records)

    def steps(self) -> pl.DataFrame:
        """The steps table of everything derived so far (:data:`otelcar.STEPS_SCHEMA`)."""
        return steps_frame(self.traces())

    def traces(self) -> list[TraceBuild]:
        """Every trace derived so far, built (steps and summary)."""
        with self._lock:
            spans, logs = list(self._spans), list(self._logs)
        return build_traces(spans, logs)
