"""Append-only raw segments: every record byte-for-byte, framed and checksummed.

A segment (``raw/segment-NNNNNN.ocr``) is a sequence of frames::

    b"OCR1" | header length (u32 BE) | payload length (u64 BE) | crc32(header + payload) (u32 BE)
    | header (UTF-8 JSON: record id, format, signal, source, position, note, received_ns)
    | payload (the record's bytes, verbatim)

Frames are only ever appended. :meth:`SegmentLog.append` returns after the bytes are flushed
and ``fsync``-ed, so a caller may acknowledge them. A frame cut short by a crash, or one whose
checksum fails, is found by :meth:`SegmentLog.recover`: the bad tail is copied to
``raw/quarantine/`` (never deleted) and the segment is truncated to its last good frame.

Several processes append to one store (``collect`` while an ``import`` runs), one at a time
under the store's raw lock. So that a writer killed mid-append cannot leave a torn tail for
another, still-running writer to append good frames after (frames past a bad one are
unreadable), every append first leaves ``raw/appending.json`` naming the segment and the
offset it starts at, and removes it once the frames are fsync-ed. The next append that finds
the marker (its writer died: the lock is free) quarantines that segment's tail from the named
offset before writing. The marker is not fsync-ed: it has to outlive a killed process, not a
power cut, after which every writer starts with a full :meth:`SegmentLog.recover`.
"""

from __future__ import annotations

import json
import os
import struct
import time
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from otelcar.ingest.raw import RawRecord

MAGIC = b"OCR1"
_PREFIX = struct.Struct(">4sIQI")
SEGMENT_LIMIT_BYTES = 256 * 1024 * 1024
APPENDING = "appending.json"
INTERRUPTED = "incomplete or corrupt frame (interrupted write)"


@dataclass(frozen=True, slots=True)
class StoredFrame:
    """A frame read back from a segment."""

    record: RawRecord
    segment: str
    offset: int
    length: int
    received_ns: int


@dataclass(frozen=True, slots=True)
class Quarantined:
    """A bad segment tail moved aside by :meth:`SegmentLog.recover`."""

    segment: str
    offset: int
    length: int
    path: Path
    reason: str


class SegmentLog:
    """The raw segments of one store."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self.recovered: list[Quarantined] = []  # what the last append had to quarantine

    def segments(self) -> list[str]:
        """Segment file names in append order."""
        return sorted(p.name for p in self.directory.glob("segment-*.ocr"))

    def _current(self) -> Path:
        names = self.segments()
        if names:
            path = self.directory / names[-1]
            if path.stat().st_size < SEGMENT_LIMIT_BYTES:
                return path
            number = int(names[-1][len("segment-") : -len(".ocr")]) + 1
        else:
            number = 1
        return self.directory / f"segment-{number:06d}.ocr"

    def append(self, records: Iterable[RawRecord]) -> list[tuple[str, int, int]]:
        """Append records durably; returns ``(segment, offset, frame length)`` per record.

        The caller holds the store's raw lock. A tail torn by a writer that died mid-append
        is quarantined first (see the module docstring); :attr:`recovered` lists it.
        """
        self.recovered = self._recover_interrupted()
        placed: list[tuple[str, int, int]] = []
        handle = None
        path: Path | None = None
        marker = self.directory / APPENDING
        try:
            for record in records:
                if handle is None or handle.tell() >= SEGMENT_LIMIT_BYTES:
                    if handle is not None:
                        _sync(handle)
                        handle.close()
                    path = self._current()
                    handle = path.open("ab")
                    marker.write_text(
                        json.dumps({"segment": path.name, "offset": handle.tell()}),
                        encoding="utf-8",
                    )
                frame = encode_frame(record, time.time_ns())
                offset = handle.tell()
                handle.write(frame)
                placed.append((path.name, offset, len(frame)))  # type: ignore[union-attr]
            if handle is not None:
                _sync(handle)
        finally:
            if handle is not None:
                handle.close()
        if placed:
            _sync_directory(self.directory)
        marker.unlink(missing_ok=True)  # kept when the write failed: the next append checks
        return placed

    def _recover_interrupted(self) -> list[Quarantined]:
        """Quarantine the tail left by an append that never finished (its marker remains)."""
        marker = self.directory / APPENDING
        try:
            left = json.loads(marker.read_text(encoding="utf-8"))
            segment, offset = str(left["segment"]), int(left["offset"])
        except FileNotFoundError:
            return []
        except (OSError, ValueError, KeyError, TypeError):
            # An unreadable marker: check every segment from its start instead.
            found = self.recover()
            marker.unlink(missing_ok=True)
            return found
        found = []
        if (self.directory / segment).exists() and "/" not in segment:
            item = self._recover_segment(segment, offset)
            if item is not None:
                found.append(item)
        marker.unlink(missing_ok=True)
        return found

    def read(self, segment: str, start: int = 0) -> Iterator[StoredFrame]:
        """Frames of ``segment`` from byte ``start`` up to its last complete, valid frame."""
        path = self.directory / segment
        with path.open("rb") as handle:
            handle.seek(start)
            offset = start
            while True:
                frame = _read_frame(handle, segment, offset)
                if frame is None:
                    return
                yield frame
                offset += frame.length

    def size(self, segment: str) -> int:
        return (self.directory / segment).stat().st_size

    def recover(self, starts: dict[str, int] | None = None) -> list[Quarantined]:
        """Quarantine and cut off any incomplete or corrupt tail of every segment.

        ``starts`` gives, per segment, an offset known to end a good frame (how far it was
        materialized), so the scan need not re-read what was already verified.
        """
        found = [
            item
            for segment in self.segments()
            if (item := self._recover_segment(segment, (starts or {}).get(segment, 0)))
        ]
        (self.directory / APPENDING).unlink(missing_ok=True)  # every tail was just checked
        return found

    def _recover_segment(self, segment: str, good: int) -> Quarantined | None:
        """Cut ``segment`` after its last valid frame past offset ``good`` (which ends a good
        frame), keeping what is cut in ``raw/quarantine/``."""
        path = self.directory / segment
        for frame in self.read(segment, good):
            good = frame.offset + frame.length
        size = path.stat().st_size
        if good >= size:
            return None
        quarantine = self.directory / "quarantine"
        quarantine.mkdir(exist_ok=True)
        target = quarantine / f"{segment}.at-{good}.bad"
        tries = 1
        while target.exists():  # never overwrite what an earlier recovery kept
            tries += 1
            target = quarantine / f"{segment}.at-{good}.{tries}.bad"
        with path.open("rb") as source:
            source.seek(good)
            target.write_bytes(source.read())
        with path.open("r+b") as handle:
            handle.truncate(good)
            _sync(handle)
        return Quarantined(segment, good, size - good, target, INTERRUPTED)


def encode_frame(record: RawRecord, received_ns: int) -> bytes:
    """One frame holding ``record`` (see the module docstring)."""
    header = json.dumps(
        {
            "record_id": record.record_id,
            "format": record.format,
            "signal": record.signal,
            "source": record.source,
            "position": record.position,
            "note": record.note,
            "received_ns": received_ns,
        },
        ensure_ascii=False,
        separators=(",", ":"),
    ).encode("utf-8")
    checksum = zlib.crc32(record.payload, zlib.crc32(header))
    return _PREFIX.pack(MAGIC, len(header), len(record.payload), checksum) + header + record.payload


def _read_frame(handle, segment: str, offset: int) -> StoredFrame | None:  # type: ignore[no-untyped-def]
    prefix = handle.read(_PREFIX.size)
    if len(prefix) < _PREFIX.size:
        return None
    magic, header_len, payload_len, checksum = _PREFIX.unpack(prefix)
    if magic != MAGIC:
        return None
    end = offset + _PREFIX.size + header_len + payload_len
    if end > os.fstat(handle.fileno()).st_size:  # cut short (or a corrupt length): never
        return None  # allocate what a torn prefix claims
    header = handle.read(header_len)
    payload = handle.read(payload_len)
    if len(header) < header_len or len(payload) < payload_len:
        return None
    if zlib.crc32(payload, zlib.crc32(header)) != checksum:
        return None
    meta = json.loads(header)
    record = RawRecord(
        payload=payload,
        format=meta["format"],
        source=meta["source"],
        position=meta["position"],
        signal=meta.get("signal"),
        note=meta.get("note"),
    )
    return StoredFrame(
        record,
        segment,
        offset,
        _PREFIX.size + header_len + payload_len,
        int(meta.get("received_ns") or 0),
    )


def _sync(handle) -> None:  # type: ignore[no-untyped-def]
    handle.flush()
    os.fsync(handle.fileno())


def _sync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
