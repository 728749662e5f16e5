"""When a trace is complete: its root span has arrived (a span without a parent; an SDK
exports a span when it ends, and a root ends last) or no new span arrived for ``quiet_s``
seconds (a root never sent, or lost)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field


@dataclass
class CompletionWatcher:
    """Remembers, per trace not yet complete, its span count and when it last grew.

    :meth:`complete` takes the trace index rows seen now (``trace_id → n_spans``) and the ids
    among them with a root span, and returns the traces complete now, each with how it was
    decided (``"root"`` or ``"quiet"``); a trace is returned once, then forgotten (the
    caller records it)."""

    quiet_s: float
    clock: Callable[[], float] = time.monotonic
    _seen: dict[str, tuple[int, float]] = field(default_factory=dict)

    def complete(self, spans: dict[str, int], rooted: Iterable[str]) -> list[tuple[str, str]]:
        now = self.clock()
        roots = set(rooted)
        done: list[tuple[str, str]] = []
        for trace_id, count in spans.items():
            if trace_id in roots:
                done.append((trace_id, "root"))
                self._seen.pop(trace_id, None)
                continue
            before = self._seen.get(trace_id)
            if before is None or before[0] != count:
                self._seen[trace_id] = (count, now)
            elif now - before[1] >= self.quiet_s:
                done.append((trace_id, "quiet"))
                self._seen.pop(trace_id, None)
        return done

    @property
    def waiting(self) -> int:
        """Traces seen that are not complete yet."""
        return len(self._seen)
