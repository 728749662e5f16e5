"""Raw records decoded and counted: what the store, the sink and the readers do with records
they derive (:func:`derive`).

The store (:meth:`otelcar.store.Store.import_records`, ``catch_up``, ``reindex``), the
in-memory sink (:class:`otelcar.store.sink.InMemorySink`) and the readers
(:mod:`otelcar.readers`) derive records the same way: a record that does not decode is kept
apart with why (``unparsed``); one that decodes with some items rejected is ``partial`` with
the first reasons; the rest is ``imported``. Its spans then logs are numbered on from the
frames derived before it, which orders the steps built from them
(:func:`otelcar.trajectory.build_traces`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from otelcar.ingest.frames import LogFrame, SpanFrame
from otelcar.ingest.raw import RawRecord, decode_record, failure_reason
from otelcar.store.report import ImportReport, RecordProblem

#: Reasons quoted per partially decoded record (the rest are counted).
MAX_PROBLEMS_PER_RECORD = 5


@dataclass(slots=True)
class DecodedRecord:
    """What one record gave: ``status`` ``imported`` | ``partial`` | ``unparsed``, why (for
    the last two), its signal, and its frames (numbered from the ``seq`` given)."""

    status: str
    reason: str | None = None
    signal: str | None = None
    spans: list[SpanFrame] = field(default_factory=list)
    logs: list[LogFrame] = field(default_factory=list)
    rejected: int = 0


def decode_counted(record: RawRecord, report: ImportReport, *, seq: int) -> DecodedRecord:
    """Decode ``record`` (never raises), number its spans then logs from ``seq`` and tag them
    with its record id, and count it in ``report`` (imported, unparsed or partial, spans,
    logs, rejected items)."""
    try:
        decoded, signal = decode_record(record)
    except Exception as exc:  # whatever one record does, it is kept apart with why
        reason = failure_reason(exc)
        report.unparsed.append(RecordProblem(record.source, record.position, reason))
        return DecodedRecord("unparsed", reason)
    record_id = record.record_id
    for item in [*decoded.spans, *decoded.logs]:
        item.seq = seq
        item.record_id = record_id
        seq += 1
    report.imported += 1
    report.spans += len(decoded.spans)
    report.logs += len(decoded.logs)
    report.rejected_items += len(decoded.problems)
    result = DecodedRecord(
        "imported", None, signal, decoded.spans, decoded.logs, len(decoded.problems)
    )
    if decoded.problems:
        shown = decoded.problems[:MAX_PROBLEMS_PER_RECORD]
        more = len(decoded.problems) - len(shown)
        result.status = "partial"
        result.reason = "; ".join(shown) + (f"; … {more} more" if more else "")
        report.partial.append(RecordProblem(record.source, record.position, result.reason))
    return result


@dataclass(slots=True)
class Derivation:
    """What :func:`derive` gave: for each record, in order, what it decoded to (``None``: a
    duplicate, not decoded), every frame decoded, and the next free frame number."""

    decoded: list[DecodedRecord | None]
    spans: list[SpanFrame]
    logs: list[LogFrame]
    seq: int


def derive(
    records: Iterable[RawRecord],
    report: ImportReport,
    *,
    seq: int = 0,
    known: set[str] | None = None,
) -> Derivation:
    """Decode ``records`` in order (:func:`decode_counted`: never raises for a record, each
    counted in ``report``), numbering their frames from ``seq`` on. With ``known`` (the ids of
    records derived before; updated here) a record whose id is in it, or that came earlier in
    ``records``, is a duplicate: counted in ``report.duplicates`` and not decoded. Sets
    ``report.traces`` (the traces these frames belong to) and ``report.logs_without_trace``;
    ``report.records`` and ``report.new_traces`` are the caller's, which knows what it
    counts as a record and which traces it had."""
    decoded: list[DecodedRecord | None] = []
    spans: list[SpanFrame] = []
    logs: list[LogFrame] = []
    for record in records:
        if known is not None:
            if record.record_id in known:
                report.duplicates += 1
                decoded.append(None)
                continue
            known.add(record.record_id)
        one = decode_counted(record, report, seq=seq)
        seq += len(one.spans) + len(one.logs)
        spans.extend(one.spans)
        logs.extend(one.logs)
        decoded.append(one)
    report.traces = {s.trace_id for s in spans} | {g.trace_id for g in logs if g.trace_id}
    report.logs_without_trace = sum(1 for g in logs if not g.trace_id)
    return Derivation(decoded, spans, logs, seq)
