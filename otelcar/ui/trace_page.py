"""What the console's trace page shows: one page of a trace's steps, costing what the reader
sees rather than what the trace holds (issue 39).

A chat span of the GenAI conventions carries the whole conversation so far, so a trace of n
decisions holds about n²/2 messages; drawn whole, a 500-step trace is a 24 MB page. Here:

- **Pages of steps.** The page shows ``per_page`` steps (:data:`PAGE_STEPS`); the summary,
  the time bars' axis and the token totals cover the whole trace.
- **Contexts as what they add.** An LLM step's context is shown as the messages that follow
  the part it shares with the context of the same agent's previous LLM step; the shared
  messages are folded into one line that links to the step's own page
  (:func:`step_page`), which shows the whole context.
- **Long text clipped.** A message, tool arguments, a tool result or the attributes longer
  than :data:`CLIP_CHARS` characters show their start and how much is left, with a link to
  the step's page, which shows all of it.
- **Calls and results linked both ways**: a tool step links the decision that called it
  (``call_step``), the decision's tool call links its result's step (on whichever page).
- **Errors marked** whatever case the producer wrote the status in (``ERROR``, ``error``).

Only the page's rows, less their folded messages, are turned into Python values: the fold is
found on the columns (a context whose start equals the previous context, compared in Polars),
(:func:`otelcar.views.fold_contexts`, which the MCP server's step pages use too), so a
page costs what it shows, not the square of the trace.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import polars as pl

from otelcar.messages import decode_arguments
from otelcar.report.view import pretty
from otelcar.views import fold_contexts

#: Steps per page of the trace page.
PAGE_STEPS = 100
#: Characters of one text shown before "show all".
CLIP_CHARS = 2000


@dataclass(frozen=True)
class Clipped:
    """A text as shown: its start, and how many characters are left out (0: all of it)."""

    text: str | None
    hidden: int = 0


def clip(text: str | None, limit: int | None = CLIP_CHARS) -> Clipped:
    """``text`` cut to ``limit`` characters (``None``: never cut)."""
    if text is None or limit is None or len(text) <= limit:
        return Clipped(text)
    return Clipped(text[:limit], len(text) - limit)


def is_error(status: str | None) -> bool:
    """Whether a step's status says it failed (producers write ``ERROR`` or ``error``)."""
    return (status or "").lower() == "error"


def _message(message: dict[str, Any] | None, limit: int | None, results: dict[str, int]):
    if message is None:
        return None
    return {
        "role": message.get("role"),
        "name": message.get("name"),
        "content": clip(message.get("content"), limit),
        "reasoning": clip(message.get("reasoning"), limit),
        "tool_call_id": message.get("tool_call_id"),
        "tool_calls": [
            {
                "id": call.get("id"),
                "name": call.get("name"),
                "arguments": clip(pretty(decode_arguments(call.get("arguments"))), limit),
                "result_step": results.get(call.get("id") or ""),
            }
            for call in message.get("tool_calls") or ()
        ],
    }


def result_steps(steps: pl.DataFrame) -> dict[str, int]:
    """By tool-call id: the tool step that ran the call."""
    tools = steps.filter((pl.col("kind") == "tool") & pl.col("tool_call_id").is_not_null())
    return dict(zip(tools["tool_call_id"].to_list(), tools["step"].to_list(), strict=True))


def totals(steps: pl.DataFrame) -> dict[str, int]:
    """The trace's token totals (steps without usage count as 0) and how many steps had any."""
    usage = steps["usage"].struct
    return {
        "input_tokens": int(usage.field("input_tokens").fill_null(0).sum()),
        "output_tokens": int(usage.field("output_tokens").fill_null(0).sum()),
        "with_usage": int(
            (
                usage.field("input_tokens").is_not_null()
                | usage.field("output_tokens").is_not_null()
            ).sum()
        ),
    }


def bars(steps: pl.DataFrame) -> dict[int, tuple[float, float]]:
    """Step → (left %, width %) of its bar on the whole trace's time axis."""
    timed = steps.filter(pl.col("start_ns").is_not_null()).select("step", "start_ns", "end_ns")
    if timed.is_empty():
        return {}
    ends = timed["end_ns"].fill_null(timed["start_ns"])
    t0, t1 = int(timed["start_ns"].min()), int(ends.max())  # type: ignore[arg-type]
    width = max(t1 - t0, 1)
    out = {}
    for step, start, end in zip(timed["step"], timed["start_ns"], ends, strict=True):
        left = (start - t0) / width * 100
        out[int(step)] = (round(left, 2), round(max((end - start) / width * 100, 0.4), 2))
    return out


def span_tree(steps: pl.DataFrame) -> list[dict[str, Any]]:
    """The steps nested by their spans (a step's parent is the step whose span is its span's
    parent): the roots, each ``{"step", "name", "kind", "error", "children"}``, in step
    order. A step whose parent span is no earlier step's (not recorded, not a step, or —
    spans that name each other as parents, in a hostile trace — a later one) is a root, so
    the tree has no cycle."""
    table = steps.sort("step").select("step", "name", "kind", "status", "span_id", "parent_span_id")
    nodes: dict[int, dict[str, Any]] = {}
    by_span: dict[str, int] = {}
    for step, name, kind, status, span, _parent in table.iter_rows():
        nodes[step] = {
            "step": step, "name": name, "kind": kind, "error": is_error(status), "children": []
        }  # fmt: skip
        if span is not None:
            by_span.setdefault(span, step)  # merged spans: the first step holds the span
    roots = []
    for step, _name, _kind, _status, _span, parent in table.iter_rows():
        owner = by_span.get(parent) if parent is not None else None
        if owner is None or owner >= step:
            roots.append(nodes[step])
        else:
            nodes[owner]["children"].append(nodes[step])
    return roots


def step_view(
    row: dict[str, Any], *, results: dict[str, int], limit: int | None = CLIP_CHARS
) -> dict[str, Any]:
    """One step as the page shows it. A row folded by :func:`otelcar.views.fold_contexts`
    carries ``folded`` (leading context messages left out), ``folded_from`` and
    ``context_len``; any other row shows its whole context. ``limit`` clips every text
    (``None``: the step's own page, everything)."""
    context = row["input_messages"]
    shared = row.get("folded") or 0
    shown = context or []
    usage = row["usage"] or {}
    attributes = json.loads(row["attributes"]) if row["attributes"] else {}
    return {
        "step": row["step"],
        "kind": row["kind"],
        "name": row["name"],
        "agent_name": row["agent_name"],
        "tool_name": row["tool_name"],
        "model": row["response_model"] or row["request_model"],
        "error": is_error(row["status"]),
        "error_text": row["error"],
        "content_captured": row["content_captured"],
        "content_truncated": row["content_truncated"],
        "link_inferred": row["link_inferred"],
        "synthesized": row["synthesized"],
        "issues": row["issues"] or [],
        "usage": usage
        if usage.get("input_tokens") is not None or usage.get("output_tokens") is not None
        else None,
        "context_len": row.get("context_len", None if context is None else len(context)),
        "folded": shared,
        "folded_from": row.get("folded_from") if shared else None,
        "context": [_message(m, limit, results) for m in shown],
        "output": _message(row["output"], limit, results),
        "tool_args": clip(pretty(decode_arguments(row["tool_args"])), limit)
        if row["tool_args"] is not None
        else None,
        "tool_result": clip(row["tool_result"], limit),
        "call_step": row["call_step"],
        "tool_call_id": row["tool_call_id"],
        "attributes": clip(pretty(attributes), limit) if attributes else None,
    }


def pages_of(numbers: list[int], per_page: int) -> dict[int, int]:
    """Step number → the page (from 1) it is on, ``numbers`` in step order."""
    return {step: i // per_page + 1 for i, step in enumerate(numbers)}


def trace_page(steps: pl.DataFrame, page: int = 1, per_page: int = PAGE_STEPS) -> dict[str, Any]:
    """Page ``page`` (from 1; clamped to the pages there are) of ``steps``: ``steps`` (the
    page's step views), ``page``, ``pages``, ``per_page``, ``first``/``last`` step numbers
    shown, ``page_of`` (step → its page, for links), ``bars`` and ``totals`` of the trace."""
    steps = steps.sort("step")
    per_page = max(1, per_page)
    pages = max(1, -(-steps.height // per_page))
    page = min(max(1, page), pages)
    rows = fold_contexts(steps.slice((page - 1) * per_page, per_page), steps)
    numbers = steps["step"].to_list()
    results = result_steps(steps)
    views = [step_view(row, results=results) for row in rows.iter_rows(named=True)]
    return {
        "steps": views,
        "page": page,
        "pages": pages,
        "per_page": per_page,
        "first": views[0]["step"] if views else None,
        "last": views[-1]["step"] if views else None,
        "page_of": pages_of(numbers, per_page),
        "bars": bars(steps),
        "totals": totals(steps),
        "tree": span_tree(steps),
    }


def step_page(steps: pl.DataFrame, step: int) -> dict[str, Any] | None:
    """One step in full (no fold, no clip), with the page it is on; ``None`` when the trace
    has no such step."""
    steps = steps.sort("step")
    numbers = steps["step"].to_list()
    if step not in numbers:
        return None
    (row,) = steps.filter(pl.col("step") == step).iter_rows(named=True)
    return {
        "step": step_view(row, results=result_steps(steps), limit=None),
        "page_of": (page_of := pages_of(numbers, PAGE_STEPS)),
        "page": page_of[step],
    }
