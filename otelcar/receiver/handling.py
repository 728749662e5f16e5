"""What both transports do with one export body: check it, write it durably, count it.

Transport-neutral: the gRPC and HTTP services translate :class:`Outcome` into their own
status codes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from otelcar.ingest.raw import failure_reason
from otelcar.receiver.intake import Intake, accept
from otelcar.receiver.stats import ReceiverStats
from otelcar.receiver.writer import Backpressure, DurableWriter, WriterClosed

log = logging.getLogger("otelcar.receiver")


@dataclass(frozen=True, slots=True)
class Outcome:
    """``kind``: ``ok`` | ``invalid`` | ``busy`` | ``unavailable``."""

    kind: str
    intake: Intake | None = None
    message: str = ""


def handle(
    payload: bytes,
    *,
    signal: str,
    encoding: str,
    peer: str,
    writer: DurableWriter,
    stats: ReceiverStats,
) -> Outcome:
    """Accept one export body; returns once it is durably stored (or why it was not)."""
    try:
        intake = accept(payload, signal=signal, encoding=encoding, source=f"otlp {peer}")
    except Exception as exc:  # a body no check caught still gets an answer (400 / INVALID)
        message = failure_reason(exc)
        stats.bad()
        log.warning("rejected %s %s body from %s: %s", signal, encoding, peer, message)
        return Outcome("invalid", message=message)
    try:
        ticket = writer.submit(intake.record)
    except Backpressure as exc:
        stats.refuse()
        log.warning("refused a %s batch from %s: %s", signal, peer, exc)
        return Outcome("busy", message=f"otelcar is behind ({exc}); retry later")
    except WriterClosed as exc:
        return Outcome("unavailable", message=str(exc))
    try:
        ticket.wait(writer.ack_timeout_s)
    except Exception as exc:
        log.error("could not store a %s batch from %s: %s", signal, peer, exc)
        return Outcome("unavailable", message=f"could not store the batch: {exc}")
    stats.accepted(signal, intake.items, intake.rejected, intake.trace_ids)
    if intake.rejected:
        log.warning("partially accepted a %s batch from %s: %s", signal, peer, intake.message)
    return Outcome("ok", intake=intake)
