"""Counters of a running receiver (thread-safe), for the live line and the tests."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass
class ReceiverStats:
    requests: int = 0
    spans: int = 0
    logs: int = 0
    rejected_items: int = 0
    bad_requests: int = 0
    refused: int = 0
    trace_ids: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def accepted(self, signal: str, items: int, rejected: int, trace_ids: set[str]) -> None:
        with self._lock:
            self.requests += 1
            if signal == "traces":
                self.spans += items
            else:
                self.logs += items
            self.rejected_items += rejected
            self.trace_ids |= trace_ids

    def bad(self) -> None:
        with self._lock:
            self.bad_requests += 1

    def refuse(self) -> None:
        with self._lock:
            self.refused += 1

    def line(self) -> str:
        with self._lock:
            return (
                f"{self.spans} spans, {self.logs} log records in {len(self.trace_ids)} "
                f"traces ({self.requests} batches; {self.rejected_items} rejected items, "
                f"{self.bad_requests} bad requests, {self.refused} refused for backpressure)"
            )
