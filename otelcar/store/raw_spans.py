"""Spans parts on disk: a span's big attributes are not copied, they stay in its raw record.

A chat span of the GenAI conventions carries the whole conversation so far in its attributes
(``gen_ai.input.messages``), so a spans part that kept every span's attributes as JSON text
would grow with the square of a trace's length, and hold again what the raw records already
keep verbatim. A span whose string attribute values reach :data:`RAW_ATTRIBUTES_MIN`
characters is stored with ``attributes`` null and ``attributes_in_raw`` true
(:data:`SPANS_FILE_SCHEMA`): its row's ``record_id`` and ``seq`` are the reference (the
record holds its spans in order, numbered from the record's first span's ``seq``). Reading
such a span decodes its record again (:func:`raw_attributes`), which gives the same
attributes as when it was imported (what ``otelcar reindex`` relies on too), so the spans
table a reader gets (:data:`otelcar.schema.SPANS_SCHEMA`) is the same, byte for byte.

A build that rebuilds a trace from its earlier spans (a receiver's trace arriving over many
builds) would decode their records again each time: :data:`RECENT` keeps the attributes of
the spans left in raw that this process decoded last (up to :data:`RECENT_CHARS` characters
of them), by record id and position in the record. A record id is the hash of its bytes,
so what is kept under it never goes stale.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from otelcar.errors import StoreError
from otelcar.ingest.frames import SpanFrame
from otelcar.ingest.raw import decode_record
from otelcar.schema import SPANS_SCHEMA
from otelcar.store.segments import SegmentLog
from otelcar.store.tables import _SharedJSON, dumps, span_row

if TYPE_CHECKING:
    from otelcar.store.derived import DerivedTables

#: Characters of string attribute values from which a span's attributes stay in raw only.
RAW_ATTRIBUTES_MIN = 2048
#: A build's spans part on disk.
SPANS_FILE_SCHEMA = pl.Schema({**SPANS_SCHEMA, "attributes_in_raw": pl.Boolean})

#: Characters of attribute text :data:`RECENT` keeps at most.
RECENT_CHARS = 32 * 1024 * 1024

#: ``(record id, seq)`` of a span.
SpanKey = tuple[str, int]


def _text_size(span: SpanFrame) -> int:
    """Characters of ``span``'s string attribute values."""
    return sum(map(len, filter(_is_str, span.attributes.values())))


_is_str = str.__instancecheck__


def in_raw(span: SpanFrame) -> bool:
    """Whether ``span``'s attributes are left in its raw record (not copied)."""
    return _text_size(span) >= RAW_ATTRIBUTES_MIN


class RecentAttributes:
    """Attributes of spans left in raw, by ``(record id, position in the record)``, with the
    span's id; the least recently used go once they hold more than ``limit`` characters.
    Thread-safe. What :meth:`get` returns is a copy (the caller may change it)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._kept: OrderedDict[tuple[str, int], tuple[str, dict[str, Any], int]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def remember(self, record_id: str, spans: Sequence[SpanFrame]) -> None:
        """Keep the attributes of ``spans`` (a record's spans, in order) left in raw."""
        for index, span in enumerate(spans):
            size = _text_size(span)
            if size >= RAW_ATTRIBUTES_MIN:
                self.keep(record_id, index, span, size)

    def keep(self, record_id: str, index: int, span: SpanFrame, size: int) -> None:
        """Keep the attributes of ``span`` (``size`` characters of text), the ``index``-th
        span of its record."""
        key = (record_id, index)
        with self._lock:
            if size > self.limit or key in self._kept:
                return
            self._kept[key] = (span.span_id, dict(span.attributes), size)
            self._size += size
            while self._size > self.limit:
                self._size -= self._kept.popitem(last=False)[1][2]

    def get(self, record_id: str, index: int, span_id: str) -> dict[str, Any] | None:
        """The attributes kept for that span (``None``: not kept)."""
        with self._lock:
            held = self._kept.get((record_id, index))
            if held is None or held[0] != span_id:
                return None
            self._kept.move_to_end((record_id, index))
            return dict(held[1])

    def clear(self) -> None:
        """Forget everything kept."""
        with self._lock:
            self._kept.clear()
            self._size = 0


#: The attributes this process decoded last (module docstring).
RECENT = RecentAttributes(RECENT_CHARS)


def span_file_rows(spans: Sequence[SpanFrame]) -> list[dict[str, Any]]:
    """The spans part's rows of ``spans`` (:data:`SPANS_FILE_SCHEMA`: numbered, each record's
    spans in order); the attributes left in raw are kept in :data:`RECENT`."""
    shared = _SharedJSON()
    rows = []
    first: dict[str, int] = {}  # record id → its first span's seq
    for span in spans:
        size = _text_size(span)
        left = size >= RAW_ATTRIBUTES_MIN
        row = span_row(span, shared, attributes=not left)
        row["attributes_in_raw"] = left
        rows.append(row)
        if left and span.record_id:
            start = first.setdefault(span.record_id, span.seq)
            RECENT.keep(span.record_id, span.seq - start, span, size)
        else:
            first.setdefault(span.record_id, span.seq)
    return rows


def raw_attributes(derived: DerivedTables, wanted: pl.DataFrame) -> dict[SpanKey, dict[str, Any]]:
    """The attributes of the spans ``wanted`` names (columns ``record_id``, ``seq``,
    ``span_id``; spans of committed builds of ``derived``), by ``(record id, seq)``: each of
    their records read from the raw segments and decoded once. Raises :class:`StoreError`
    when a record cannot be read back or does not hold the span (run ``otelcar reindex``)."""
    if wanted.is_empty():
        return {}
    ids = wanted["record_id"].unique().to_list()
    where = (
        derived.scan("records")
        .filter(pl.col("record_id").is_in(ids) & pl.col("status").is_in(["imported", "partial"]))
        .select("record_id", "segment", "offset")
        .unique("record_id", keep="first")
        .collect()
    )
    first = (
        derived.scan("spans")
        .filter(pl.col("record_id").is_in(ids))
        .group_by("record_id")
        .agg(pl.col("seq").min())
        .collect()
    )
    starts = dict(zip(first["record_id"], first["seq"], strict=True))
    raw = SegmentLog(derived.directory.parent / "raw")
    found: dict[SpanKey, dict[str, Any]] = {}
    by_record = wanted.partition_by("record_id", as_dict=True)
    for record_id, segment, offset in where.iter_rows():
        spans: list[SpanFrame] | None = None
        for seq, span_id in by_record[(record_id,)].select("seq", "span_id").iter_rows():
            index = seq - starts[record_id]
            kept = RECENT.get(record_id, index, span_id)
            if kept is not None:
                found[(record_id, seq)] = kept
                continue
            if spans is None:
                spans = _decode(raw, record_id, segment, offset)
            if not 0 <= index < len(spans) or spans[index].span_id != span_id:
                raise StoreError(
                    f"raw record {record_id} does not hold span {span_id}; run `otelcar reindex`"
                )
            found[(record_id, seq)] = spans[index].attributes
    missing = wanted.height - len(found)
    if missing:
        raise StoreError(f"{missing} spans' raw records are missing; run `otelcar reindex`")
    return found


def _decode(raw: SegmentLog, record_id: str, segment: str, offset: int) -> list[SpanFrame]:
    """The spans of the record at ``offset`` of ``segment``, decoded again (and kept in
    :data:`RECENT`)."""
    frame = next(raw.read(segment, offset), None)
    if frame is None or frame.record.record_id != record_id:
        raise StoreError(f"raw record {record_id} is unreadable; run `otelcar reindex`")
    spans = decode_record(frame.record)[0].spans
    RECENT.remember(record_id, spans)
    return spans


def with_raw_attributes(derived: DerivedTables, spans: pl.DataFrame) -> pl.DataFrame:
    """``spans`` (rows of spans parts, :data:`SPANS_FILE_SCHEMA`) as the spans table
    (:data:`SPANS_SCHEMA`): attributes left in raw decoded again (:func:`raw_attributes`),
    as the JSON text they were imported as; the rows' order is kept."""
    wanted = spans.filter(pl.col("attributes_in_raw"))
    if wanted.is_empty():
        return spans.drop("attributes_in_raw")
    found = raw_attributes(derived, wanted)
    texts = pl.DataFrame(
        {
            "record_id": [key[0] for key in found],
            "seq": [key[1] for key in found],
            "raw_attributes": [dumps(value) for value in found.values()],
        },
        schema={"record_id": pl.String, "seq": pl.Int64, "raw_attributes": pl.String},
    )
    filled = spans.join(texts, on=["record_id", "seq"], how="left", maintain_order="left")
    return filled.with_columns(
        pl.coalesce("attributes", "raw_attributes").alias("attributes")
    ).select(list(SPANS_SCHEMA))
