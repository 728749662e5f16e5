"""Machine-readable views of the store's tables (what ``--json`` prints).

The shapes are documented as JSON Schemas in ``schemas/`` (``traces-list.schema.json``,
``show.schema.json``), generated from :mod:`otelcar.schema`.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from otelcar.messages import decode_arguments


def trace_view(row: dict[str, Any]) -> dict[str, Any]:
    """One trace-index row as JSON (``build_id`` is internal and left out)."""
    out = {k: v for k, v in row.items() if k != "build_id"}
    start, end = row.get("start_ns"), row.get("end_ns")
    out["duration_ms"] = (end - start) / 1e6 if start is not None and end is not None else None
    return out


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
