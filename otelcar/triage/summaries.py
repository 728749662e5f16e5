"""Triage results as the front ends list them (the console's failures page, the MCP server's
``list_failures``): each triaged trace's summary — state, reason, culprit step, headline and
the cause sentence ``why`` named — read from the triage state files in the store
(:class:`~otelcar.triage.queue.TriageQueue`'s format 1, docs/triage.md).

A state file holds a whole attribution (and ``why``) result, so the index keeps a summary of
each file and reads a file again only when it changed (its modification time or size): a
list, and the console's live-updates stream that looks once a second, cost what changed.
"""

from __future__ import annotations

import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from otelcar.triage.files import read_json
from otelcar.triage.queue import STATES, TriageQueue

#: States that end a trace's triage with a result to show (an analysis, or why there is none).
FINISHED = ("done", "skipped")


@dataclass(frozen=True)
class Failure:
    """One triaged trace as a list shows it (:meth:`to_dict`: its JSON)."""

    trace_id: str
    service: str | None
    state: str
    reason: str | None
    verdict: str | None
    culprit: dict[str, Any] | None
    headline: str | None
    cause: str | None  # why's cause sentence on the culprit, when it ran and found one
    calls: int
    updated_at: str | None
    finished_at: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def cause_of(why: Any) -> str | None:
    """The text ``why`` named as the cause (its ``cause`` piece), if it found one."""
    cause = why.get("cause") if isinstance(why, dict) else None
    text = cause.get("text") if isinstance(cause, dict) else None
    return text if isinstance(text, str) else None


def _failure(state: dict[str, Any]) -> Failure:
    return Failure(
        trace_id=state["trace_id"],
        service=state.get("service"),
        state=state.get("state", "?"),
        reason=state.get("reason"),
        verdict=state.get("verdict"),
        culprit=state.get("culprit") if isinstance(state.get("culprit"), dict) else None,
        headline=state.get("headline"),
        cause=cause_of(state.get("why")),
        calls=int(state.get("calls") or 0),
        updated_at=state.get("updated_at"),
        finished_at=state.get("finished_at"),
    )


class FailureIndex:
    """Summaries of the triage states of one store, read again only where a file changed."""

    def __init__(self, store_root: str | Path) -> None:
        self.queue = TriageQueue(store_root)
        self._seen: dict[str, tuple[int, int, Failure | None]] = {}
        self._lock = threading.Lock()

    def all(self) -> list[Failure]:
        """Every triaged trace, most recently updated first."""
        folder = self.queue.folder
        entries = list(os.scandir(folder)) if folder.is_dir() else []
        with self._lock:
            current: dict[str, tuple[int, int, Failure | None]] = {}
            for entry in entries:
                if not entry.name.endswith(".json"):
                    continue
                stat = entry.stat()
                key = (stat.st_mtime_ns, stat.st_size)
                known = self._seen.get(entry.name)
                if known is not None and known[:2] == key:
                    current[entry.name] = known
                    continue
                state = read_json(Path(entry.path))
                ok = isinstance(state, dict) and isinstance(state.get("trace_id"), str)
                current[entry.name] = (*key, _failure(state) if ok else None)  # type: ignore[arg-type]
            self._seen = current
            found = [f for _, _, f in current.values() if f is not None]
        return sorted(found, key=lambda f: (f.updated_at or "", f.trace_id), reverse=True)

    def finished(self) -> int:
        """How many traces have a result to show (:data:`FINISHED`)."""
        return sum(1 for f in self.all() if f.state in FINISHED)

    def counts(self, failures: list[Failure]) -> dict[str, int]:
        return {state: sum(1 for f in failures if f.state == state) for state in STATES}

    def state(self, trace_id: str) -> dict[str, Any] | None:
        """The whole state of one trace (its attribution and why results), or ``None``."""
        try:
            return self.queue.get(trace_id)
        except ValueError:  # not a trace id
            return None
