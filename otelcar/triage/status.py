"""What ``otelcar triage status`` says: the states of the queue, why each trace waits or was
skipped, the calls spent today against the limit, and whether an engine runs."""

from __future__ import annotations

import fcntl
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from otelcar.triage.files import read_json
from otelcar.triage.ledger import Ledger, today
from otelcar.triage.queue import STATES, TriageQueue

if TYPE_CHECKING:
    from otelcar.project_config import TriageSettings


def engine_running(store_root: str | Path) -> dict[str, Any] | None:
    """``{"pid", "since"}`` of the engine holding the store's triage lock, else ``None``."""
    folder = Path(store_root) / "triage"
    lock = folder / "engine.lock"
    if not lock.exists():
        return None
    with open(lock, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            found = read_json(folder / "engine.json")
            return found if isinstance(found, dict) else {"pid": None, "since": None}
        fcntl.flock(handle, fcntl.LOCK_UN)
    return None


def status_document(store_root: str | Path, settings: TriageSettings | None) -> dict[str, Any]:
    """``otelcar triage status --json``: ``counts`` (state → traces), ``today`` (``day``,
    ``calls`` counted, ``limit``: ``[triage] max_calls_per_day`` or ``None``), ``limits``
    (the ``[triage]`` settings in force), ``engine`` (:func:`engine_running`) and ``traces``
    (each state without its result documents, newest first)."""
    states = TriageQueue(store_root).all()
    counts = Counter(s.get("state") for s in states)
    short = [
        {k: v for k, v in s.items() if k not in ("attribution", "why")} for s in reversed(states)
    ]
    limits = None
    if settings is not None:
        limits = {
            "max_calls_per_trace": settings.max_calls_per_trace,
            "max_calls_per_day": settings.max_calls_per_day,
            "concurrency": settings.concurrency,
            "services": list(settings.services) if settings.services is not None else None,
            "quiet_s": settings.quiet_s,
            "why": settings.why,
        }
    return {
        "counts": {state: counts.get(state, 0) for state in STATES},
        "today": {
            "day": today(),
            "calls": Ledger(store_root).spent(),
            "limit": settings.max_calls_per_day if settings else None,
        },
        "limits": limits,
        "engine": engine_running(store_root),
        "traces": short,
    }


def status_lines(document: dict[str, Any], *, limit: int = 50) -> list[str]:
    """:func:`status_document` as plain lines for a terminal (the newest ``limit`` traces)."""
    counts = ", ".join(f"{n} {state}" for state, n in document["counts"].items())
    day = document["today"]
    cap = day["limit"] if day["limit"] is not None else "no limit set"
    engine = document["engine"]
    lines = [
        f"triage: {counts}",
        f"calls today ({day['day']} UTC): {day['calls']} of {cap}",
        "engine: " + (f"running (pid {engine.get('pid')})" if engine else "not running"),
    ]
    for state in document["traces"][:limit]:
        what = state["state"]
        culprit = state.get("culprit")
        if what == "done" and culprit:
            what += f": culprit step {culprit['step']} ({culprit['name']})"
        elif what == "done":
            what += f": {state.get('headline') or 'no culprit'}"
        if state.get("reason"):
            what += f" - {state['reason']}"
        service = state.get("service") or "?"
        lines.append(f"  {state['trace_id']}  {service}  {what}  [{state['calls']} calls]")
    hidden = len(document["traces"]) - limit
    if hidden > 0:
        lines.append(f"  … {hidden} more (--json lists all)")
    return lines
