"""Durable, bounded intake queue: a batch is acknowledged only once fsync-ed to raw segments.

Request threads :meth:`DurableWriter.submit` records and wait on the returned
:class:`Ticket`; one writer thread appends everything pending in one go (group commit: one
``fsync`` for many requests) and then releases the tickets. When more than ``max_pending``
records or ``max_pending_bytes`` wait, or while the owner's ``refuse`` check gives a reason
(derivation too far behind), :meth:`submit` raises :class:`Backpressure` at once, so memory
and lag stay bounded and the client is told to retry (OTLP UNAVAILABLE / HTTP 503).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from otelcar.ingest.raw import RawRecord
from otelcar.store.sink import TraceSink

log = logging.getLogger("otelcar.receiver")


class Backpressure(Exception):
    """The writer is behind: retry later."""


class WriterClosed(Exception):
    """The receiver is shutting down."""


@dataclass(slots=True)
class Ticket:
    """Completion of one submitted record."""

    record: RawRecord
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None

    def wait(self, timeout_s: float) -> None:
        """Block until durably written; raise the write error, or ``TimeoutError``."""
        if not self.done.wait(timeout_s):
            raise TimeoutError("the raw write did not complete in time")
        if self.error is not None:
            raise self.error


class DurableWriter:
    """The single writer thread of a receiver."""

    def __init__(
        self,
        store: TraceSink,
        *,
        max_pending: int = 4096,
        max_pending_bytes: int = 256 * 1024 * 1024,
        ack_timeout_s: float = 30.0,
        before_first_write: Callable[[], None] | None = None,
        refuse: Callable[[], str | None] | None = None,
    ) -> None:
        """``before_first_write`` runs on the writer thread before anything is appended
        (the receiver's recovery: requests queue meanwhile instead of waiting to connect).
        ``refuse`` is asked before each batch is queued; a reason it returns is raised as
        :class:`Backpressure` (the receiver's bound on the derivation backlog)."""
        self._refuse = refuse
        self.sink = store
        self._before_first_write = before_first_write
        self.ack_timeout_s = ack_timeout_s  # how long a request waits for its fsync
        self.max_pending = max_pending
        self.max_pending_bytes = max_pending_bytes
        self._queue: deque[Ticket] = deque()
        self._bytes = 0
        self._cond = threading.Condition()
        self._closed = False
        self.appended = 0  # records durably written so far
        self.batches = 0
        self._thread = threading.Thread(target=self._run, name="otelcar-writer", daemon=True)
        self._thread.start()

    def submit(self, record: RawRecord) -> Ticket:
        reason = self._refuse() if self._refuse is not None else None
        if reason is not None:
            raise Backpressure(reason)
        ticket = Ticket(record)
        with self._cond:
            if self._closed:
                raise WriterClosed("receiver is shutting down")
            size = len(record.payload)
            if self._queue and (
                len(self._queue) >= self.max_pending or self._bytes + size > self.max_pending_bytes
            ):
                raise Backpressure(
                    f"{len(self._queue)} batches ({self._bytes} bytes) are waiting to be written"
                )
            self._queue.append(ticket)
            self._bytes += size
            self._cond.notify()
        return ticket

    def pending(self) -> int:
        with self._cond:
            return len(self._queue)

    def close(self, timeout_s: float = 60.0) -> None:
        """Stop accepting, write everything already accepted, stop the thread."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(timeout_s)

    def _run(self) -> None:
        if self._before_first_write is not None:
            try:
                self._before_first_write()
            except BaseException as exc:  # its own errors are reported; writes go on
                log.error("before the first write: %s", exc)
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue and self._closed:
                    return
                batch = list(self._queue)
                self._queue.clear()
                self._bytes = 0
            try:
                self.sink.append([ticket.record for ticket in batch])
            except BaseException as exc:
                log.error("raw write of %d batches failed: %s", len(batch), exc)
                for ticket in batch:
                    ticket.error = exc
                    ticket.done.set()
                continue
            self.appended += len(batch)
            self.batches += 1
            for ticket in batch:
                ticket.done.set()
