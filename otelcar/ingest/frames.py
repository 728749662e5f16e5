"""Decoded OTLP records in one neutral shape, whatever the wire format was.

Decoders (:mod:`otelcar.ingest.otlp_json`, :mod:`otelcar.ingest.otlp_proto`) turn bytes into
:class:`SpanFrame` and :class:`LogFrame` objects; everything downstream (the store, the
dialect mappers, the trajectory builder) sees only these. Ids are lower-case hex; times
are integer nanoseconds since the epoch; attribute values are plain Python values
(str, bool, int, float, list, dict; bytes as base64 text).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

SPAN_KINDS = ("UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER")
#: Times are stored as signed 64-bit nanoseconds (the year 2262): a larger value cannot be
#: stored, and would stop every later build of the store.
MAX_TIME_NS = 2**63 - 1
STATUS_CODES = ("UNSET", "OK", "ERROR")
_HEX = re.compile("[0-9a-f]+")


def check_time(value: int, field_name: str) -> int:
    """``value`` when it is a time the store can hold (0 … 2^63−1 ns), else ``ValueError``
    naming ``field_name`` and the value (the span or log record is then rejected with it)."""
    if not 0 <= value <= MAX_TIME_NS:
        raise ValueError(f"{field_name} {value} is out of range (0 … 2^63-1 ns since the epoch)")
    return value


@dataclass(slots=True)
class SpanFrame:
    """One span. ``seq`` is its input order within the store (assigned on ingest)."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    kind: str
    start_ns: int
    end_ns: int
    status_code: str = "UNSET"
    status_message: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    links: list[dict[str, Any]] = field(default_factory=list)
    resource: dict[str, Any] = field(default_factory=dict)
    scope_name: str | None = None
    scope_version: str | None = None
    dropped_attributes_count: int = 0
    seq: int = 0
    record_id: str | None = None

    @property
    def service_name(self) -> str | None:
        value = self.resource.get("service.name")
        return value if isinstance(value, str) else None


@dataclass(slots=True)
class LogFrame:
    """One log record (GenAI content events travel as these)."""

    trace_id: str | None
    span_id: str | None
    time_ns: int | None
    observed_time_ns: int | None
    event_name: str | None
    body: Any
    attributes: dict[str, Any] = field(default_factory=dict)
    severity_number: int = 0
    severity_text: str | None = None
    resource: dict[str, Any] = field(default_factory=dict)
    scope_name: str | None = None
    seq: int = 0
    record_id: str | None = None


@dataclass(slots=True)
class Decoded:
    """What one record decoded into, and what inside it could not be decoded."""

    spans: list[SpanFrame] = field(default_factory=list)
    logs: list[LogFrame] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def normalize_id(value: str | bytes | None, *, size: int) -> str | None:
    """Hex id of ``size`` bytes, lower-case; ``None`` for empty or all-zero ids.

    Raises ``ValueError`` when the id is not ``2*size`` hex digits (or ``size`` bytes).
    """
    if value is None:
        return None
    if isinstance(value, bytes | bytearray):
        if not value:
            return None
        if len(value) != size:
            raise ValueError(f"id has {len(value)} bytes, expected {size}")
        text = bytes(value).hex()
    else:
        if not value:
            return None
        text = value.lower()
        if len(text) != 2 * size:
            raise ValueError(f"id {value!r} is not {2 * size} hex digits")
        if not _HEX.fullmatch(text):  # int(text, 16) would also take "0x", "_", "+" and spaces
            raise ValueError(f"id {value!r} is not hexadecimal")
    if text.count("0") == len(text):
        return None
    return text
