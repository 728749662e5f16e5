"""The triage queue in the store: ``<store>/triage/traces/<trace_id>.json``, one state file
per trace, each replaced atomically (:func:`otelcar.triage.files.write_json`).

A state file is the contract other readers (the console, the MCP server, an exporter) rely
on (docs/triage.md, "What is stored where"):

``format`` (1), ``trace_id``, ``service``, ``state`` (one of :data:`STATES`), ``reason``
(why it waits, was skipped or passed; ``None`` when done), ``verdict`` (the recorded run
judged by ``[outcome]``: fail | pass | judge | agent | error), ``complete`` (root | quiet:
how completion was decided), ``attempts``, ``calls`` and ``tokens`` (policy calls and tokens
spent on it), ``seen_at`` / ``queued_at`` / ``started_at`` / ``finished_at`` / ``updated_at``
(ISO 8601 UTC), ``culprit`` (``{"step", "name", "kind", "delta"}`` or ``None``),
``headline`` (the attribution's one-line verdict), ``attribution`` (the result's JSON,
``schemas/attribution.schema.json``) and ``why`` (``why``'s JSON, or ``None``).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from otelcar.triage.files import read_json, write_json

#: The states of a trace: waiting for an analysis, being analysed, analysed, not analysed
#: (with the reason), judged passing (nothing to analyse).
STATES = ("queued", "running", "done", "skipped", "passed")
FORMAT = 1
_TRACE_ID = re.compile(r"^[0-9a-f]{32}$")


def now_iso() -> str:
    """The time now, ISO 8601 in UTC (seconds)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def new_state(trace_id: str, service: str | None, **fields: Any) -> dict[str, Any]:
    """A state document with every field present (``fields`` override the defaults)."""
    state: dict[str, Any] = {
        "format": FORMAT,
        "trace_id": trace_id,
        "service": service,
        "state": "queued",
        "reason": None,
        "verdict": None,
        "complete": None,
        "attempts": 0,
        "calls": 0,
        "tokens": 0,
        "seen_at": now_iso(),
        "queued_at": None,
        "started_at": None,
        "finished_at": None,
        "updated_at": None,
        "culprit": None,
        "headline": None,
        "attribution": None,
        "why": None,
    }
    state.update(fields)
    return state


class TriageQueue:
    """The state files of the store at ``store_root`` (module docstring). Written by one
    engine at a time (:class:`~otelcar.triage.engine.TriageEngine` holds a lock); read by
    anyone, without a lock."""

    def __init__(self, store_root: str | Path) -> None:
        self.root = Path(store_root) / "triage"
        self.folder = self.root / "traces"

    def path(self, trace_id: str) -> Path:
        if not _TRACE_ID.match(trace_id):
            raise ValueError(f"not a trace id: {trace_id!r}")
        return self.folder / f"{trace_id}.json"

    def get(self, trace_id: str) -> dict[str, Any] | None:
        """The state of ``trace_id``, ``None`` when triage has not seen it."""
        state = read_json(self.path(trace_id))
        return state if isinstance(state, dict) else None

    def put(self, state: dict[str, Any]) -> None:
        """Write ``state`` (``updated_at`` set to now) atomically."""
        if state.get("state") not in STATES:
            raise ValueError(f"unknown triage state {state.get('state')!r}")
        state["updated_at"] = now_iso()
        write_json(self.path(state["trace_id"]), state)

    def ids(self) -> set[str]:
        """The trace ids with a state file."""
        if not self.folder.is_dir():
            return set()
        return {p.stem for p in self.folder.glob("*.json") if _TRACE_ID.match(p.stem)}

    def all(self) -> list[dict[str, Any]]:
        """Every readable state, oldest ``seen_at`` first."""
        states = [s for t in self.ids() if (s := self.get(t)) is not None]
        return sorted(states, key=lambda s: (s.get("seen_at") or "", s["trace_id"]))

    def resume(self) -> list[str]:
        """Put every ``running`` state back to ``queued`` (an engine was stopped or killed
        mid-analysis; call it only while holding the engine lock); returns their ids."""
        back = []
        for state in self.all():
            if state["state"] == "running":
                state.update(state="queued", reason="interrupted; queued again", started_at=None)
                self.put(state)
                back.append(state["trace_id"])
        return back
