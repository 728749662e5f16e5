"""Raw records: the verbatim unit the store keeps, and how one is decoded.

A :class:`RawRecord` is one OTLP export request as it arrived: one line of a JSON-lines
file, one frame of a length-prefixed protobuf stream, a whole single-message file, or the
body of one receiver request. It is stored byte-for-byte before anything is derived from
it, so :func:`decode_record` can be run again by a newer otelcar (``otelcar reindex``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from otelcar.errors import FormatError
from otelcar.ingest import jsontext, otlp_json, otlp_proto
from otelcar.ingest.formats import export_formats, get_format
from otelcar.ingest.frames import Decoded

FORMAT_JSON = "otlp-json"
FORMAT_PROTO = "otlp-proto"
FORMAT_UNKNOWN = "unknown"


@dataclass(frozen=True)
class RawRecord:
    """One verbatim record and where it came from.

    ``note`` is set when the record could not even be framed (e.g. a truncated stream
    frame): it is then kept unparsed with that reason.
    """

    payload: bytes
    format: str
    source: str
    position: str
    signal: str | None = None
    note: str | None = None
    #: The payload's JSON as the file sniffer already parsed it (:func:`jsontext.loads`:
    #: ``(value, surrogates replaced)``), for the decoder to take once
    #: (:meth:`take_parsed`) instead of parsing the same bytes again; never stored.
    parsed: tuple[Any, int] | None = field(default=None, compare=False, repr=False)

    @cached_property
    def record_id(self) -> str:
        """Content hash (sha256 hex) used to recognise a record imported before."""
        return hashlib.sha256(self.payload).hexdigest()

    def take_parsed(self) -> tuple[Any, int] | None:
        """:attr:`parsed`, handed out once (a decoder may change the value in place, so a
        second decoding parses the payload again)."""
        parsed = self.parsed
        object.__setattr__(self, "parsed", None)  # frozen: the verbatim fields never change
        return parsed


def decode_record(record: RawRecord) -> tuple[Decoded, str | None]:
    """Decode a record into frames; returns ``(decoded, signal)``.

    Raises :class:`FormatError` with a reason when the record is not decodable at all.
    Problems inside a decodable record (one bad span) are in ``decoded.problems``.
    """
    if record.note:
        raise FormatError(record.note)
    parsed = record.take_parsed()
    if record.format == FORMAT_JSON:
        return _decode_json(record.payload, parsed)
    if record.format == FORMAT_PROTO:
        signal = record.signal or otlp_proto.detect_signal(record.payload) or "traces"
        if signal == "logs":
            return otlp_proto.decode_logs(record.payload), "logs"
        return otlp_proto.decode_traces(record.payload), "traces"
    if record.format != FORMAT_UNKNOWN:
        fmt = get_format(record.format)
        if parsed is not None and fmt.decode_value is not None:
            return fmt.decode_value(*parsed), "traces"
        return fmt.decode(record.payload), "traces"
    raise FormatError(f"unrecognised format ({_describe(record.payload)})")


def failure_reason(exc: BaseException) -> str:
    """Why a record could not be decoded, for any exception its decoder raised: a
    :class:`FormatError`'s own message, else what went wrong where no check caught it (the
    store keeps the record with this reason; the receiver answers 400 with it)."""
    if isinstance(exc, FormatError):
        return str(exc)
    if isinstance(exc, RecursionError):
        return "nested too deeply to decode"
    return f"could not be decoded ({type(exc).__name__}: {exc})"


def _decode_json(payload: bytes, parsed: tuple[Any, int] | None) -> tuple[Decoded, str | None]:
    obj, replaced = parsed if parsed is not None else jsontext.loads(payload)
    if not isinstance(obj, dict):
        raise FormatError(f"JSON is a {type(obj).__name__}, not an OTLP export object")
    if "resourceSpans" in obj or "resource_spans" in obj:
        decoded, signal = otlp_json.decode_traces(obj), "traces"
    elif "resourceLogs" in obj or "resource_logs" in obj:
        decoded, signal = otlp_json.decode_logs(obj), "logs"
    else:
        decoded = None
    if decoded is not None:
        if replaced:
            decoded.problems.append(jsontext.surrogate_note(replaced))
        return decoded, signal
    if "resourceMetrics" in obj or "resource_metrics" in obj:
        raise FormatError("OTLP metrics are not traces or logs; kept, not mapped")
    keys = ", ".join(sorted(obj)[:5]) or "none"
    known = ", ".join(f.name for f in export_formats()) or "none registered"
    raise FormatError(
        f"JSON object has no resourceSpans or resourceLogs (keys: {keys}); not OTLP/JSON "
        f"nor a known export format ({known}); console, Jaeger and Zipkin dumps are not OTLP"
    )


def _describe(payload: bytes) -> str:
    head = payload[:16]
    return f"{len(payload)} bytes starting {head.hex(' ')}" if payload else "empty"
