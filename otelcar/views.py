"""Machine-readable views of the store's tables (what ``--json`` prints).

The shapes are documented as JSON Schemas in ``schemas/`` (``traces-list.schema.json``,
``show.schema.json``), generated from :mod:`otelcar.schema`.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from otelcar.messages import decode_arguments
from otelcar.schema import TRACES_SCHEMA


def trace_view(row: dict[str, Any]) -> dict[str, Any]:
    """One trace-index row as JSON (``build_id`` is internal and left out)."""
    out = {k: v for k, v in row.items() if k != "build_id"}
    start, end = row.get("start_ns"), row.get("end_ns")
    out["duration_ms"] = (end - start) / 1e6 if start is not None and end is not None else None
    return out


def own_trace_summary(steps: pl.DataFrame, label: str) -> dict[str, Any]:
    """A trace-index row for a rollout's own trace, which is in no store's index: what its
    steps tell (counts, times); the rest (spans, logs, dialects) unknown."""
    ids = sorted(set(steps["trace_id"]))
    starts = [s for s in steps["start_ns"] if s is not None]
    ends = [e for e in steps["end_ns"] if e is not None]
    kinds = steps["kind"].to_list()
    row: dict[str, Any] = dict.fromkeys(TRACES_SCHEMA)
    row.update(
        trace_id=ids[0] if len(ids) == 1 else f"{ids[0]} (+{len(ids) - 1})",
        service=f"rollout {label}",
        start_ns=min(starts) if starts else None,
        end_ns=max(ends) if ends else None,
        n_steps=steps.height,
        n_llm=kinds.count("llm"),
        n_tool=kinds.count("tool"),
        n_agent=kinds.count("agent"),
        n_errors=sum(1 for s in steps["status"] if s == "ERROR"),
        n_issues=int(steps["issues"].list.len().fill_null(0).sum()),
    )
    return row


def traces_view(traces: pl.DataFrame) -> list[dict[str, Any]]:
    return [trace_view(row) for row in traces.iter_rows(named=True)]


def _message_view(message: dict[str, Any] | None) -> dict[str, Any] | None:
    if message is None:
        return None
    return {
        **message,
        "tool_calls": [
            {**call, "arguments": decode_arguments(call["arguments"])}
            for call in message.get("tool_calls") or ()
        ],
    }


def step_view(row: dict[str, Any]) -> dict[str, Any]:
    """One step row as JSON: JSON-text cells decoded (arguments, attributes, parameters)."""
    out = dict(row)
    out["input_messages"] = (
        None if row["input_messages"] is None else [_message_view(m) for m in row["input_messages"]]
    )
    out["output"] = _message_view(row["output"])
    out["alternates"] = (
        None if row["alternates"] is None else [_message_view(m) for m in row["alternates"]]
    )
    out["tool_args"] = decode_arguments(row["tool_args"])
    out["attributes"] = json.loads(row["attributes"]) if row["attributes"] else {}
    if row["tools_available"] is not None:
        out["tools_available"] = [
            {
                **tool,
                "parameters": None
                if tool["parameters"] is None
                else json.loads(tool["parameters"]),
            }
            for tool in row["tools_available"]
        ]
    return out


def steps_view(steps: pl.DataFrame) -> list[dict[str, Any]]:
    return [step_view(row) for row in steps.iter_rows(named=True)]


def records_view(records: pl.DataFrame) -> list[dict[str, Any]]:
    return list(records.iter_rows(named=True))
