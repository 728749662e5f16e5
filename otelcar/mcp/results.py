"""The MCP server's view of the kept runs (:mod:`otelcar.kept_runs`, ``<store>/runs/``):
it keeps every run it ends there, and lists and reads back every kept run, those the web
console started included.

``read_result`` gives the whole record (``options`` are the run's arguments, ``result`` the
document of ``schemas/<kind>.schema.json``); ``list_results`` a summary per run.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from otelcar.kept_runs import (
    headline_of,
    kept_runs,
    new_run_id,
    read_run,
    runs_dir,
    save_run,
)


def save_result(
    store_root: Path,
    *,
    kind: str,
    trace_id: str,
    arguments: dict[str, Any],
    result: dict[str, Any],
    started: float,
) -> dict[str, Any]:
    """Keep one finished run (``started``: Unix seconds) and return its record."""
    cost = result.get("cost") or {}
    record = {
        "id": new_run_id(kind),
        "kind": kind,
        "trace_id": trace_id,
        "options": arguments,
        "status": "done",
        "started": started,
        "finished": time.time(),
        "progress": {},
        "cost": {"llm_calls": cost.get("llm_calls", 0), "tokens": cost.get("tokens", 0)},
        "headline": headline_of(kind, "done", result, None),
        "error": None,
        "result": result,
    }
    save_run(runs_dir(store_root), record)
    return record


def read_result(store_root: Path, result_id: str) -> dict[str, Any]:
    """The record of ``result_id``; :class:`~otelcar.kept_runs.RunNotFound` when the id is
    not one otelcar makes or no such run is kept."""
    return read_run(runs_dir(store_root), result_id)


def _created(record: dict[str, Any]) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.get("started") or 0))


def list_results(
    store_root: Path, *, trace_id: str | None = None, kind: str | None = None
) -> list[dict[str, Any]]:
    """Summaries of the kept runs, newest first: id, kind, trace id, status, created, the
    verdict and step (``culprit`` for an attribution) when done, and the headline."""
    out = []
    for record in kept_runs(runs_dir(store_root)):
        if trace_id is not None and not str(record.get("trace_id", "")).startswith(
            trace_id.lower()
        ):
            continue
        if kind is not None and record.get("kind") != kind:
            continue
        result = record.get("result") or {}
        out.append(
            {
                "id": record["id"],
                "kind": record["kind"],
                "trace_id": record["trace_id"],
                "status": record.get("status"),
                "created": _created(record),
                "verdict": result.get("verdict"),
                "step": result.get("culprit", result.get("step")),
                "headline": record.get("headline"),
            }
        )
    return out
