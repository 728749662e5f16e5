"""One raw record decoded and counted: what every sink does with a record it derives.

The store (:meth:`otelcar.store.Store.import_records`, ``catch_up``, ``reindex``) and the
in-memory sink (:class:`otelcar.store.sink.InMemorySink`) derive records the same way: a
record that does not decode is kept apart with why (``unparsed``); one that decodes with
some items rejected is ``partial`` with the first reasons; the rest is ``imported``.
"""

from __future__ import annotations

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
