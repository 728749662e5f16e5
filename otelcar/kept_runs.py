"""Finished analyses, kept as JSON files in ``<store>/runs/``: one folder and one record shape
for every run the web console (:mod:`otelcar.ui`) or the MCP server (:mod:`otelcar.mcp`)
ended, so a run started from one is listed and read back by the other.

A record is ``{"id", "kind", "trace_id", "options", "status", "started", "finished",
"progress", "cost", "headline", "error", "result"}``: ``kind`` ``attribute`` | ``why`` |
``fix``; ``status`` ``done`` | ``failed`` | ``cancelled``; ``started``/``finished`` Unix
seconds; ``result`` the analysis' ``to_dict()`` (``schemas/<kind>.schema.json``) when done.
Ids are made here (``<kind>-<UTC time>-<random hex>``) and checked on every read, so no id
can name a file outside the folder. Files are written whole (a temporary file renamed).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from pathlib import Path
from typing import Any

from otelcar.errors import OtelcarError

KINDS = ("attribute", "why", "fix")
RUN_ID = re.compile(r"^(attribute|why|fix)-\d{8}T\d{6}Z-[0-9a-f]{8}$")


class RunNotFound(OtelcarError):
    """No kept run has this id (or the id is not one otelcar makes)."""


def runs_dir(store_root: str | Path) -> Path:
    """Where the runs of the store at ``store_root`` are kept."""
    return Path(store_root) / "runs"


def new_run_id(kind: str) -> str:
    """A fresh id for a run of ``kind``."""
    if kind not in KINDS:
        raise ValueError(f"unknown run kind {kind!r}; known: {', '.join(KINDS)}")
    return f"{kind}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{secrets.token_hex(4)}"


def headline_of(kind: str, status: str, result: dict[str, Any] | None, error: str | None) -> str:
    """One line on how a run ended: the verdict (and culprit) when done, else why not."""
    if status != "done" or result is None:
        return error or status
    if kind == "attribute":
        if result.get("culprit") is not None:
            return (
                f"{result.get('verdict')}: step {result['culprit']} caused the "
                f"{result.get('question')}"
            )
        return str(result.get("verdict"))
    return str(result.get("headline") or result.get("verdict") or "done")


def save_run(folder: str | Path, record: dict[str, Any]) -> Path:
    """Write ``record`` (its ``id`` made by :func:`new_run_id`) whole; return the file."""
    if not RUN_ID.match(str(record.get("id", ""))):
        raise ValueError(f"{record.get('id')!r} is not a run id made by new_run_id")
    directory = Path(folder)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{record['id']}.json"
    partial = path.with_suffix(".json.partial")
    partial.write_text(
        json.dumps(record, indent=2, ensure_ascii=False, default=str), encoding="utf-8"
    )
    os.replace(partial, path)
    return path


def read_run(folder: str | Path, run_id: str) -> dict[str, Any]:
    """The record of ``run_id``; :class:`RunNotFound` when the id is not one otelcar makes
    or no such run is kept."""
    if not RUN_ID.match(run_id):
        raise RunNotFound(f"{run_id!r} is not a run id (kind-time-hex, as listed)")
    path = Path(folder) / f"{run_id}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunNotFound(f"no run {run_id!r} in {folder}") from None


def kept_runs(folder: str | Path) -> list[dict[str, Any]]:
    """Every kept run's record, newest first (files that are not runs, or are damaged,
    are left out)."""
    directory = Path(folder)
    out = []
    for path in directory.glob("*.json") if directory.is_dir() else []:
        if not RUN_ID.match(path.stem):
            continue
        try:
            out.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return sorted(out, key=lambda r: (r.get("started") or 0, r.get("id", "")), reverse=True)
