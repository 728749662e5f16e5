"""Ingest: bytes in (files, receiver bodies) → raw records → decoded frames.

Decoding is pure (:mod:`otlp_json`, :mod:`otlp_proto`); :mod:`files` splits dump files into
records; nothing here knows about the store or the network.
"""

from otelcar.ingest.files import FILE_FORMATS, read_records, sniff
from otelcar.ingest.frames import Decoded, LogFrame, SpanFrame
from otelcar.ingest.raw import RawRecord, decode_record

__all__ = [
    "FILE_FORMATS",
    "Decoded",
    "LogFrame",
    "RawRecord",
    "SpanFrame",
    "decode_record",
    "read_records",
    "sniff",
]
