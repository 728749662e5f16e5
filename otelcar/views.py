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


def pending_text(pending_bytes: int) -> str:
    """What every list of traces says while received batches wait to be derived (a
    receiver's backlog: :meth:`otelcar.store.Store.pending_bytes`); plain text."""
    return (
        f"{pending_bytes / 1e6:.1f} MB of received batches are not derived yet: their traces "
        "are missing here or lack those spans. A running `otelcar collect` derives them; "
        "otherwise the next `otelcar import` (or `otelcar reindex`) does."
    )


def pending_bytes(source: object) -> int:
    """Bytes ``source`` holds received but not derived (0 for a source without a backlog:
    one that is not the local store)."""
    pending = getattr(source, "pending_bytes", None)
    return int(pending()) if callable(pending) else 0


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


def _shared_prefix(previous: list[dict[str, Any]] | None, current: list[dict[str, Any]]) -> int:
    """How many leading messages of ``current`` equal ``previous``'s."""
    if not previous:
        return 0
    shared = 0
    for before, now in zip(previous, current, strict=False):
        if before != now:
            break
        shared += 1
    return shared


def fold_contexts(rows: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """``rows`` (some steps of ``steps``, a steps table) with ``folded_from`` (the same
    agent's previous LLM step in ``steps``), ``folded`` (how many leading messages of the
    context are that step's context too) and ``context_len``, and ``input_messages`` cut to
    the messages after the fold: an LLM step's context as what it adds to the previous
    decision's, which a chat span repeats whole (what the console's trace page and the MCP
    server's step pages show). A context that starts with the whole previous context (the
    usual case) is told on the columns; any other is compared message by message,
    materialising only those two contexts."""
    previous = previous_llm_steps(steps)
    references = steps.select(
        pl.col("step").alias("folded_from"), pl.col("input_messages").alias("_previous")
    )
    marked = rows.with_columns(
        pl.col("step")
        .replace_strict(previous, default=None, return_dtype=pl.Int64)
        .alias("folded_from")
    ).join(references, on="folded_from", how="left", maintain_order="left")
    marked = marked.with_columns(
        pl.col("input_messages").list.len().alias("context_len"),
        pl.col("_previous").list.len().alias("_n"),
    ).with_columns(
        pl.when(pl.col("input_messages").list.head(pl.col("_n")) == pl.col("_previous"))
        .then(pl.col("_n"))
        .otherwise(None)
        .cast(pl.Int64)
        .alias("folded")
    )
    partial = marked.filter(pl.col("folded").is_null() & pl.col("_previous").is_not_null())
    shared = {
        row["step"]: _shared_prefix(row["_previous"], row["input_messages"] or [])
        for row in partial.select("step", "_previous", "input_messages").iter_rows(named=True)
    }
    if shared:
        marked = marked.with_columns(
            pl.coalesce(
                "folded",
                pl.col("step").replace_strict(shared, default=None, return_dtype=pl.Int64),
            ).alias("folded")
        )
    return marked.with_columns(
        pl.col("folded").fill_null(0),
        pl.col("input_messages").list.slice(pl.col("folded").fill_null(0)),
    ).drop("_previous", "_n")


def previous_llm_steps(steps: pl.DataFrame) -> dict[int, int]:
    """By LLM step: the previous LLM step of the same agent (the fold's reference)."""
    last: dict[str | None, int] = {}
    previous: dict[int, int] = {}
    llm = steps.filter(pl.col("kind") == "llm").sort("step")
    for step, agent in zip(llm["step"].to_list(), llm["agent_name"].to_list(), strict=True):
        if agent in last:
            previous[step] = last[agent]
        last[agent] = step
    return previous
