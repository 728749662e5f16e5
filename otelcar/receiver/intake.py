"""Check one OTLP export body before it is accepted: pure functions, no I/O.

A body is accepted when it decodes; spans or log records inside it that do not (a bad id)
are *rejected* and reported back through OTLP ``partial_success``, while the body itself is
kept verbatim like every accepted batch. A body that does not decode at all is refused with
the reason (HTTP 400 / gRPC INVALID_ARGUMENT) and nothing is stored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsPartialSuccess,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceResponse,
)

from otelcar.errors import FormatError
from otelcar.ingest import otlp_proto
from otelcar.ingest.raw import FORMAT_JSON, FORMAT_PROTO, RawRecord, decode_record

SIGNALS = ("traces", "logs")
MAX_MESSAGE_CHARS = 1000


@dataclass(slots=True)
class Intake:
    """An accepted body: the record to store and what to answer."""

    record: RawRecord
    signal: str
    items: int
    rejected: int
    problems: list[str] = field(default_factory=list)
    trace_ids: set[str] = field(default_factory=set)

    @property
    def message(self) -> str:
        text = "; ".join(self.problems)
        return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 1] + "…"

    def response_proto(self) -> bytes:
        """The OTLP ``Export*ServiceResponse`` (with ``partial_success`` when needed)."""
        if self.signal == "traces":
            response = ExportTraceServiceResponse()
            if self.rejected:
                response.partial_success.CopyFrom(
                    ExportTracePartialSuccess(
                        rejected_spans=self.rejected, error_message=self.message
                    )
                )
        else:
            response = ExportLogsServiceResponse()
            if self.rejected:
                response.partial_success.CopyFrom(
                    ExportLogsPartialSuccess(
                        rejected_log_records=self.rejected, error_message=self.message
                    )
                )
        return response.SerializeToString()

    def response_json(self) -> bytes:
        """The same response in OTLP/JSON (64-bit counts as strings)."""
        if not self.rejected:
            return b"{}"
        key = "rejectedSpans" if self.signal == "traces" else "rejectedLogRecords"
        body = {"partialSuccess": {key: str(self.rejected), "errorMessage": self.message}}
        return json.dumps(body).encode("utf-8")


def accept(payload: bytes, *, signal: str, encoding: str, source: str) -> Intake:
    """Decode ``payload`` (``encoding``: ``proto`` or ``json``) as a ``signal`` request.

    Raises :class:`FormatError` when it is not one.
    """
    if signal not in SIGNALS:
        raise FormatError(f"unknown signal {signal!r}")
    record_format = FORMAT_PROTO if encoding == "proto" else FORMAT_JSON
    record = RawRecord(payload, record_format, source, "request", signal=signal)
    if encoding == "proto":  # cheap: ids checked, attributes left for derivation
        items, problems, trace_ids = otlp_proto.survey(payload, signal)
        return Intake(record, signal, items, len(problems), problems, trace_ids)
    decoded, decoded_signal = decode_record(record)
    if encoding == "json" and decoded_signal != signal:
        raise FormatError(f"body is OTLP {decoded_signal}, sent to the {signal} endpoint")
    items = len(decoded.spans) if signal == "traces" else len(decoded.logs)
    trace_ids = {s.trace_id for s in decoded.spans} | {
        log.trace_id for log in decoded.logs if log.trace_id
    }
    return Intake(record, signal, items, len(decoded.problems), decoded.problems, trace_ids)


def status_body(code: int, message: str, *, encoding: str) -> bytes:
    """A ``google.rpc.Status`` error body (``code``: gRPC code number) in the request's
    encoding, as OTLP/HTTP asks for failed requests."""
    if encoding == "json":
        return json.dumps({"code": code, "message": message}).encode("utf-8")
    text = message.encode("utf-8")
    return b"\x08" + _varint(code) + b"\x12" + _varint(len(text)) + text


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)
