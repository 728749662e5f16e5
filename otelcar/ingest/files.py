"""Split OTLP dump files into raw records, sniffing the format.

Supported (each optionally gzip-compressed, detected by its magic bytes):

| ``--format`` | file |
|---|---|
| ``otlp-json`` | one ``ExportTraceServiceRequest``/``ExportLogsServiceRequest`` as OTLP/JSON |
| ``otlp-jsonl`` | one OTLP/JSON object per line (Collector ``file`` exporter, |
|   | Python ``FileSpanExporter``) |
| ``otlp-proto`` | one binary export request (an OTLP/HTTP body) |
| ``otlp-proto-stream`` | binary messages, each after a 4-byte big-endian length |
|   | (Collector ``file`` exporter with ``format: proto``) |

``auto`` (the default) sniffs: JSON starts with ``{``; a JSON file whose first line is a whole
object is JSON lines; a protobuf request starts with ``0x0a``; a stream starts with a length.
Records stream out one at a time, so a file is never held twice in memory. A JSON value the
sniffer had to parse (a first line, or a whole document to see which export format it is)
goes with its record (:attr:`RawRecord.parsed`), so the decoder does not parse it again.
"""

from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, BinaryIO

from otelcar.errors import FormatError
from otelcar.ingest import jsontext
from otelcar.ingest.formats import detect_json, detect_magic, export_formats
from otelcar.ingest.raw import FORMAT_JSON, FORMAT_PROTO, FORMAT_UNKNOWN, RawRecord

FILE_FORMATS = ("auto", "otlp-json", "otlp-jsonl", "otlp-proto", "otlp-proto-stream")
_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_MAX_FRAME = 1 << 30

Progress = Callable[[int], None]


def _open(path: Path) -> tuple[BinaryIO, Callable[[], int]]:
    """Open ``path``, transparently un-gzipping; returns the stream and a position probe."""
    raw = path.open("rb")
    if raw.read(2) == _GZIP_MAGIC:
        raw.seek(0)
        return io.BufferedReader(TolerantGzip(raw)), raw.tell  # type: ignore[return-value]
    raw.seek(0)
    return raw, raw.tell


class TolerantGzip(io.RawIOBase):
    """A gzip stream (all members) that, when the file is cut short, returns everything up
    to the cut and then ends, instead of raising and losing what was whole before it.

    After the end, :attr:`truncated` says whether the input ended inside a member;
    :func:`read_records` then adds a record that says where the file was cut. Corrupt data
    (not a cut) still raises ``gzip.BadGzipFile`` / ``zlib.error``.
    """

    def __init__(self, raw: BinaryIO, chunk: int = 1 << 16) -> None:
        self._raw = raw
        self._chunk = chunk
        self._inflate = zlib.decompressobj(wbits=31)
        self._fed = False  # has the current member had any input?
        self._pending = b""
        self._done = False
        self.truncated = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending and not self._done:
            if self._inflate.eof:  # a member ended: the next one starts with what is left
                data = self._inflate.unused_data or self._raw.read(self._chunk)
                self._inflate, self._fed = zlib.decompressobj(wbits=31), False
                if not data:
                    self._done = True
                    break
            else:
                data = self._inflate.unconsumed_tail or self._raw.read(self._chunk)
                if not data:
                    self._done = True
                    self.truncated = self._fed  # the input ended inside a member
                    break
            self._fed = True
            try:
                self._pending = self._inflate.decompress(data, self._chunk)
            except zlib.error as exc:
                raise gzip.BadGzipFile(f"corrupt gzip data: {exc}") from None
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size

    def close(self) -> None:
        self._raw.close()
        super().close()


class SniffedValues:
    """The JSON values parsed while sniffing one file, by the position of the record they
    are (``file``, ``line 1``): each goes, once, to the record read at that position
    (:meth:`attach`), so that its decoder does not parse the same bytes again."""

    def __init__(self) -> None:
        self._values: dict[str, tuple[bytes, tuple[Any, int]]] = {}

    def parse(self, position: str, text: bytes) -> tuple[Any, int]:
        """:func:`jsontext.loads` of ``text``, the record at ``position``, parsed once: kept
        for that record. Raises like it (:class:`~otelcar.ingest.jsontext.NestedTooDeep`
        for JSON too deep to read)."""
        kept = self._values.get(position)
        if kept is not None and kept[0] == text:
            return kept[1]
        value = jsontext.loads(text)
        self._values[position] = (text, value)
        return value

    def attach(self, record: RawRecord) -> RawRecord:
        """``record`` with the value parsed from its very bytes, when the sniffer parsed
        them (handed out once)."""
        kept = self._values.pop(record.position, None)
        if kept is None or kept[0] != record.payload:
            return record
        return replace(record, parsed=kept[1])

    def __bool__(self) -> bool:
        return bool(self._values)


def sniff(head: bytes, first_line: bytes | None = None, values: SniffedValues | None = None) -> str:
    """The file format of a (decompressed) file from its first bytes.

    ``first_line`` is the file's whole first line when the caller read it (a JSON-lines
    batch can be far longer than ``head``); by default it is taken from ``head``. With
    ``values``, the first line's JSON value, if it had to be parsed, is kept there.
    """
    stripped = head.lstrip()
    if not stripped:
        raise FormatError("file is empty")
    if head.startswith(_ZSTD_MAGIC):
        raise FormatError("zstd-compressed; decompress it first (zstd -d FILE)")
    if stripped[:1] in (b"{", b"["):
        line = (first_line if first_line is not None else stripped.split(b"\n", 1)[0]).strip()
        if line in (b"{", b"["):
            return "otlp-json"
        rest = stripped[len(line) :].strip()
        if not rest:
            return "otlp-json"
        whole = values if first_line is not None else None  # line 1 only when read whole
        if _is_json(line, whole, "line 1"):
            return "otlp-jsonl"
        # A broken first line: JSON lines if the next line stands on its own, else one
        # (pretty-printed or broken) document.
        second = rest.split(b"\n", 1)[0].strip()
        return "otlp-jsonl" if b"\n" in rest and _is_json(second) else "otlp-json"
    # Binary OTLP requests open with field 1 (resource_spans / resource_logs), tag 0x0a;
    # a length-prefixed stream opens with a 4-byte length and then that same tag.
    if head[:1] == b"\x0a":
        return "otlp-proto"
    if len(head) >= 5 and head[4:5] == b"\x0a" and 0 < int.from_bytes(head[:4], "big") < _MAX_FRAME:
        return "otlp-proto-stream"
    if _text_with_json_lines(head) and detect_magic(head) is None:  # not a claimed text format
        return "otlp-jsonl"
    return "unknown"


def _text_with_json_lines(head: bytes) -> bool:
    """Text whose lines include a JSON object line: JSON lines with damaged lines in front."""
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # only a character cut at the end of head is fine
            return False
        text = head[: exc.start].decode("utf-8")
    return any(line.lstrip().startswith('{"') for line in text.splitlines())


def _is_json(text: bytes, values: SniffedValues | None = None, position: str = "") -> bool:
    """Whether ``text`` is JSON (kept in ``values`` as the record at ``position`` if so)."""
    try:
        if values is not None:
            values.parse(position, text)
        else:
            jsontext.loads(text)
    except jsontext.NestedTooDeep:  # JSON, nested too deeply to decode (the record says so)
        return True
    except FormatError:
        return False
    return True


def _sniff_file(path: Path, values: SniffedValues) -> tuple[str, bytes]:
    """Sniff a file's container; also returns its head (with the whole first line if JSON).
    The JSON values parsed on the way are kept in ``values``."""
    stream, _ = _open(path)
    with stream:
        head = stream.read(65536)
    first_line = None
    if head.lstrip()[:1] in (b"{", b"["):
        stream, _ = _open(path)  # from the start again (a gzip stream does not seek)
        with stream:
            first_line = stream.readline(_MAX_FRAME)
            head = first_line + stream.read(65536)
            first_line = first_line.strip()  # the record of line 1, as the reader takes it
    return sniff(head, first_line, values), head


_OTLP_KEYS = (b'"resourceSpans"', b'"resourceLogs"', b'"resource_spans"', b'"resource_logs"')


def _is_otlp(value: Any) -> bool:
    return isinstance(value, dict) and any(k.decode().strip('"') in value for k in _OTLP_KEYS)


def _json_record_format(path: Path, container: str, head: bytes, values: SniffedValues) -> str:
    """Which record format a JSON file holds: OTLP, else the export format that claims it.
    The value it parses (the whole document, or the first line that is JSON) is kept in
    ``values`` for its record."""
    if container == "otlp-json":
        if any(key in head for key in _OTLP_KEYS):
            return FORMAT_JSON
        stream, _ = _open(path)
        with stream:
            try:
                value, _ = values.parse("file", stream.read())
            except FormatError:
                return FORMAT_JSON  # undecodable: kept with the JSON error as its reason
        return FORMAT_JSON if _is_otlp(value) else detect_json(value) or FORMAT_JSON
    stream, _ = _open(path)
    with stream:
        for number, line in enumerate(stream, start=1):
            if number > 64:
                break
            try:
                value, _ = values.parse(f"line {number}", line.strip())
            except FormatError:
                continue
            return FORMAT_JSON if _is_otlp(value) else detect_json(value) or FORMAT_JSON
    return FORMAT_JSON


def _plan(path: Path, format: str, values: SniffedValues) -> tuple[str, str]:
    """``(container, record format)`` of a file, from ``--format`` or by sniffing (the JSON
    values parsed on the way kept in ``values``)."""
    if format in _CONTAINERS:
        return format, _CONTAINERS[format]
    container, head = _sniff_file(path, values)
    if container == "unknown":
        magic = detect_magic(head)
        if format != "auto":
            return "unknown", format
        return "unknown", magic or FORMAT_UNKNOWN
    if format != "auto":  # an export format: its records, in the container sniffed
        if container not in ("otlp-json", "otlp-jsonl"):
            raise FormatError(f"{format} files are JSON; this file is {container}")
        return container, format
    if container in ("otlp-json", "otlp-jsonl"):
        return container, _json_record_format(path, container, head, values)
    return container, FORMAT_PROTO


def read_records(
    path: str | Path, *, format: str = "auto", progress: Progress | None = None
) -> Iterator[RawRecord]:
    """Yield the raw records of one file.

    ``progress`` is called with the number of (on-disk) bytes consumed so far. A file whose
    bytes fit no format yields one record of format ``unknown`` (kept with its reason).
    """
    valid = [*FILE_FORMATS, *(f.name for f in export_formats())]
    if format not in valid:
        raise FormatError(f"unknown format {format!r}; valid: {', '.join(valid)}")
    path = Path(path)
    if path.stat().st_size == 0:
        return  # an empty file holds no record (exporters create them when idle)
    values = SniffedValues()
    try:
        container, record_format = _plan(path, format, values)
    except FormatError as exc:
        with path.open("rb") as handle:
            data = handle.read()
        yield RawRecord(data, FORMAT_UNKNOWN, str(path), "file", note=str(exc))
        return
    except (OSError, EOFError) as exc:
        yield RawRecord(
            b"", FORMAT_UNKNOWN, str(path), "file", note=f"unreadable or corrupt: {exc}"
        )
        return
    reader = _READERS[container](record_format)
    stream, position = _open(path)
    with stream:
        records = _guard(reader(stream, str(path), position, progress), str(path))
        for record in records:
            yield values.attach(record) if values else record
        if getattr(getattr(stream, "raw", None), "truncated", False):
            yield RawRecord(
                b"",
                FORMAT_UNKNOWN,
                str(path),
                "end of file",
                note="gzip data ends early (the file was cut): every record before the cut "
                "was read, what followed it is lost",
            )


def _guard(records: Iterator[RawRecord], source: str) -> Iterator[RawRecord]:
    """Turn a read error mid-file (e.g. a truncated gzip) into a kept, explained record."""
    try:
        yield from records
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        yield RawRecord(
            b"", FORMAT_UNKNOWN, source, "end of file", note=f"file ends early or is corrupt: {exc}"
        )


def _whole_file(record_format: str) -> Callable[..., Iterator[RawRecord]]:
    """A reader that takes the whole file as one record of ``record_format``."""

    def read(
        stream: BinaryIO, source: str, position: Callable[[], int], progress: Progress | None
    ) -> Iterator[RawRecord]:
        data = stream.read()
        if progress:
            progress(position())
        yield RawRecord(data, record_format, source, "file")

    return read


def _json_lines(record_format: str) -> Callable[..., Iterator[RawRecord]]:
    """A reader that takes each non-blank line as one record of ``record_format``."""

    def read(
        stream: BinaryIO, source: str, position: Callable[[], int], progress: Progress | None
    ) -> Iterator[RawRecord]:
        for number, line in enumerate(stream, start=1):
            line = line.strip()
            if line:
                yield RawRecord(line, record_format, source, f"line {number}")
            if progress and number % 64 == 0:
                progress(position())
        if progress:
            progress(position())

    return read


def _proto_stream(record_format: str) -> Callable[..., Iterator[RawRecord]]:
    """Length-prefixed binary records (the record format is always OTLP protobuf)."""
    return _read_proto_stream


def _read_proto_stream(
    stream: BinaryIO, source: str, position: Callable[[], int], progress: Progress | None
) -> Iterator[RawRecord]:
    offset = 0
    frame = 0
    while True:
        prefix = stream.read(4)
        if not prefix:
            break
        frame += 1
        where = f"frame {frame} at byte {offset}"
        if len(prefix) < 4:
            yield RawRecord(
                prefix,
                FORMAT_PROTO,
                source,
                where,
                note=f"truncated length prefix ({len(prefix)} of 4 bytes)",
            )
            break
        length = int.from_bytes(prefix, "big")
        if length >= _MAX_FRAME:
            rest = prefix + stream.read()
            yield RawRecord(
                rest,
                FORMAT_PROTO,
                source,
                where,
                note=f"length prefix {length} is implausible; rest of file kept",
            )
            break
        payload = stream.read(length)
        if len(payload) < length:
            yield RawRecord(
                prefix + payload,
                FORMAT_PROTO,
                source,
                where,
                note=f"truncated frame: length prefix says {length} bytes, {len(payload)} remain",
            )
            break
        yield RawRecord(payload, FORMAT_PROTO, source, where)
        offset += 4 + length
        if progress:
            progress(position())
    if progress:
        progress(position())


_READERS: dict[str, Callable[[str], Callable[..., Iterator[RawRecord]]]] = {
    "otlp-json": _whole_file,
    "otlp-jsonl": _json_lines,
    "otlp-proto": _whole_file,
    "otlp-proto-stream": _proto_stream,
    "unknown": _whole_file,
}
_CONTAINERS = {
    "otlp-json": FORMAT_JSON,
    "otlp-jsonl": FORMAT_JSON,
    "otlp-proto": FORMAT_PROTO,
    "otlp-proto-stream": FORMAT_PROTO,
}
