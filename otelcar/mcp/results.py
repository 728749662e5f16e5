"""Finished runs of the MCP server, kept as JSON files in ``<store>/results/``.

Each file is ``{"id", "kind", "trace_id", "created", "arguments", "result"}`` with ``result``
the document of ``schemas/<kind>.schema.json``. Ids are made here (``<kind>-<time>-<random>``)
and checked on read, so a caller cannot name a path outside the folder.
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

RESULT_ID = re.compile(r"^(attribute|why|fix)-\d{8}T\d{6}Z-[0-9a-f]{8}$")


class ResultNotFound(OtelcarError):
    """No kept result has this id (or the id is not one this server makes)."""


def results_dir(store_root: Path) -> Path:
    """Where the results of a store are kept."""
    return Path(store_root) / "results"


def save_result(
    store_root: Path, *, kind: str, trace_id: str, arguments: dict[str, Any], result: dict
) -> dict[str, Any]:
    """Write one finished run atomically (a temporary file renamed) and return its record."""
    folder = results_dir(store_root)
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    record = {
        "id": f"{kind}-{stamp}-{secrets.token_hex(4)}",
        "kind": kind,
        "trace_id": trace_id,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "arguments": arguments,
        "result": result,
    }
    path = folder / f"{record['id']}.json"
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(record, ensure_ascii=False, default=str), encoding="utf-8")
    os.replace(partial, path)
    return record


def read_result(store_root: Path, result_id: str) -> dict[str, Any]:
    """The record of ``result_id``; :class:`ResultNotFound` when there is none."""
    if not RESULT_ID.match(result_id):
        raise ResultNotFound(
            f"{result_id!r} is not a result id (list_results shows them: kind-time-hex)"
        )
    path = results_dir(store_root) / f"{result_id}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ResultNotFound(f"no result {result_id!r} in {results_dir(store_root)}") from None


def list_results(
    store_root: Path, *, trace_id: str | None = None, kind: str | None = None
) -> list[dict[str, Any]]:
    """Summaries of the kept results, newest first: id, kind, trace id, created, and the
    verdict fields every kind has (``verdict``, ``culprit``/``step``, ``headline``)."""
    folder = results_dir(store_root)
    out = []
    for path in folder.glob("*.json") if folder.exists() else []:
        if not RESULT_ID.match(path.stem):
            continue
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # a file being replaced or damaged: not a result
        if trace_id is not None and not record["trace_id"].startswith(trace_id.lower()):
            continue
        if kind is not None and record["kind"] != kind:
            continue
        result = record.get("result") or {}
        out.append(
            {
                "id": record["id"],
                "kind": record["kind"],
                "trace_id": record["trace_id"],
                "created": record["created"],
                "verdict": result.get("verdict"),
                "step": result.get("culprit", result.get("step")),
            }
        )
    return sorted(out, key=lambda r: (r["created"], r["id"]), reverse=True)
