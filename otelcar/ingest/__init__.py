"""Ingest: bytes in (files, receiver bodies) → raw records → decoded frames.

Decoding is pure (:mod:`otlp_json`, :mod:`otlp_proto`); :mod:`files` splits dump files into
records; nothing here knows about the store or the network.
"""

from otelcar.ingest.files import FILE_FORMATS, read_records, sniff
from otelcar.ingest.formats import ExportFormat, derived_id, register_format
from otelcar.ingest.frames import Decoded, LogFrame, SpanFrame
from otelcar.ingest.raw import RawRecord, decode_record

__all__ = [
    "FILE_FORMATS",
    "Decoded",
    "ExportFormat",
    "LogFrame",
    "RawRecord",
    "SpanFrame",
    "decode_record",
    "derived_id",
    "read_records",
    "register_format",
    "sniff",
]
