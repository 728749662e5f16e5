"""What both transports do with one export body: check it, write it durably, count it.

Transport-neutral: the gRPC and HTTP services translate :class:`IntakeResult` into their
own status codes (``OK`` → 200 / OK, ``INVALID`` → 400 / INVALID_ARGUMENT, ``BUSY`` and
``UNAVAILABLE`` → 503 / UNAVAILABLE, which the exporters retry).
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

from otelcar.ingest.raw import failure_reason
from otelcar.receiver.intake import Intake, accept
from otelcar.receiver.stats import ReceiverStats
from otelcar.receiver.writer import Backpressure, DurableWriter, WriterClosed

log = logging.getLogger("otelcar.receiver")


class IntakeResult(enum.Enum):
    """What became of one export body."""

    OK = "ok"  #: durably stored (some items may have been rejected: see the intake)
    INVALID = "invalid"  #: not an export body; retrying it cannot help
    BUSY = "busy"  #: refused for now (derivation is behind): retry later
    UNAVAILABLE = "unavailable"  #: not stored (closing, or the write failed): retry


@dataclass(frozen=True, slots=True)
class Handled:
    """The result for one body, with its intake (``OK``) or the reason (otherwise)."""

    result: IntakeResult
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
) -> Handled:
    """Accept one export body; returns once it is durably stored (or why it was not)."""
    try:
        intake = accept(payload, signal=signal, encoding=encoding, source=f"otlp {peer}")
    except Exception as exc:  # a body no check caught still gets an answer (400 / INVALID)
        message = failure_reason(exc)
        stats.bad()
        log.warning("rejected %s %s body from %s: %s", signal, encoding, peer, message)
        return Handled(IntakeResult.INVALID, message=message)
    try:
        ticket = writer.submit(intake.record)
    except Backpressure as exc:
        stats.refuse()
        log.warning("refused a %s batch from %s: %s", signal, peer, exc)
        return Handled(IntakeResult.BUSY, message=f"otelcar is behind ({exc}); retry later")
    except WriterClosed as exc:
        return Handled(IntakeResult.UNAVAILABLE, message=str(exc))
    try:
        ticket.wait(writer.ack_timeout_s)
    except Exception as exc:
        log.error("could not store a %s batch from %s: %s", signal, peer, exc)
        return Handled(IntakeResult.UNAVAILABLE, message=f"could not store the batch: {exc}")
    stats.accepted(signal, intake.items, intake.rejected, intake.trace_ids)
    if intake.rejected:
        log.warning("partially accepted a %s batch from %s: %s", signal, peer, intake.message)
    return Handled(IntakeResult.OK, intake=intake)
