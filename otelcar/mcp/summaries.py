"""The short text an MCP tool result carries beside its structured content.

A result is sent once: the structured content is the data, and the text block (what a
client without structured output shows the model) is a few lines saying what the data
holds, what was left out and how to get the rest. Never the data itself, never over
:data:`MAX_CHARS` characters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: Most characters of a summary.
MAX_CHARS = 1000


def _traces(document: dict[str, Any]) -> str:
    traces = document["traces"]
    pending = f". {document['pending']}" if document.get("pending") else ""
    if not traces:
        return f"no trace matches{pending}"
    ids = ", ".join(t["trace_id"][:12] for t in traces[-5:])
    return f"{len(traces)} trace(s) (oldest first; the newest: {ids}){pending}"


def _search(document: dict[str, Any]) -> str:
    traces = document["traces"]
    if not traces:
        return f"no trace mentions {document['query']!r}"
    ids = ", ".join(f"{t['trace_id'][:12]} ({len(t['matched_steps'])} steps)" for t in traces[:5])
    return f"{len(traces)} trace(s) mention {document['query']!r}, newest first: {ids}"


def _page(document: dict[str, Any]) -> str:
    page = document["page"]
    if not page["shown"]:
        return f"trace {document['trace_id']}: no step in that range"
    clip = page["clip"]
    parts = [
        f"steps {page['first_step']}–{page['last_step']} ({page['shown']} shown, "
        f"{page['left']} more in the range)",
        f"texts clipped at {clip} chars ({page['clipped_texts']} clipped; read_text reads one "
        "whole)"
        if clip
        else "texts whole",
    ]
    if page["context"] == "new":
        parts.append("an LLM step lists only the input messages its previous LLM step lacked")
    head = ""
    if "trace" in document:
        t = document["trace"]
        head = (
            f"trace {t['trace_id']} ({t['service']}): {t['n_steps']} steps, {t['n_llm']} llm, "
            f"{t['n_tool']} tool, {t['n_errors']} errors. "
        )
    return head + "; ".join(parts)


def _step(document: dict[str, Any]) -> str:
    step = document["step"]
    shown = len(step["input_messages"] or [])
    start = document["input_messages_from"]
    return (
        f"step {step['step']} ({step['kind']} {step['name']}) of trace {document['trace_id']}; "
        f"input messages {start}–{start + shown} of {document['input_messages_total']}"
    )


def _text(document: dict[str, Any]) -> str:
    end = document["next_offset"] or document["total_chars"]
    return (
        f"step {document['step']} {document['path']}: chars {document['offset']}–{end} of "
        f"{document['total_chars']}"
    )


def _run(document: dict[str, Any]) -> str:
    result = document["result"]
    return (
        f"{document['kind']} on trace {document['trace_id']}, kept as {document['result_id']}: "
        f"{result.get('headline') or result.get('verdict')}"
    )


SUMMARIES: dict[str, Callable[[dict[str, Any]], str]] = {
    "list_traces": _traces,
    "search_traces": _search,
    "show_trace": _page,
    "show_steps": _page,
    "show_step": _step,
    "read_text": _text,
    "attribute": _run,
    "why": _run,
    "fix": _run,
    "list_results": lambda d: f"{len(d['results'])} kept runs, newest first",
    "read_result": lambda d: (
        f"kept {d['kind']} run {d['id']} on trace {d['trace_id']} ({d['status']}): "
        f"{d.get('headline') or d.get('error') or ''}"
    ),
    "list_timelines": lambda d: f"{len(d['timelines'])} kept timelines of {d['trace_id']}",
    "diff_timelines": lambda d: f"{d['a']} against {d['b']}: {d.get('headline') or ''}",
    "list_failures": lambda d: (
        f"{len(d['failures'])} triaged trace(s), most recent first; by state: "
        + ", ".join(f"{n} {s}" for s, n in d["counts"].items())
    ),
    "read_failure": lambda d: (
        f"triage of trace {d['trace_id']} ({d['state']}): "
        f"{d.get('headline') or d.get('reason') or ''}"
    ),
}


def summary(tool: str, document: dict[str, Any]) -> str:
    """What ``document`` (the structured result of ``tool``) holds, what was left out
    (``left_out``) and how to continue (``next_cursor``), in at most :data:`MAX_CHARS`."""
    text = SUMMARIES[tool](document)
    for cut in document.get("left_out") or ():
        first, end = cut["shown"]
        text += f"; {cut['path']}: items {first}–{end} of {cut['total']} shown (byte cap)"
    if document.get("next_cursor"):
        again = "show_steps" if tool == "show_trace" else tool
        if tool in ("attribute", "why", "fix"):
            again = "read_result"
        text += f". More: call {again} with cursor=next_cursor"
    text += ". The structured content has the data."
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 1] + "…"
