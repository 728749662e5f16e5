"""A trace's steps in bounded pages, as the MCP tools ``show_trace``, ``show_steps``,
``show_step`` and ``read_text`` return them.

A page holds steps in order from a step number on, at most ``limit`` of them and at most
``budget`` bytes, each text clipped at ``clip`` characters with a marker naming where to read
it whole (:func:`otelcar.mcp.bounded.clip_text`). With ``context="new"`` an LLM step's input
messages are only those its previous LLM step's input did not already start with (an
instrumented agent records the whole conversation on every chat span, so a 250-turn run
would otherwise repeat it 250 times); ``input_messages_omitted`` says how many were left out
and which step's input opens with them. A step too big for a page alone has its texts
clipped, then its first input messages left out (counted there too). Only the rows of the
page (and of the LLM steps before them) are turned into JSON, one at a time, so a page costs
what it shows, not what the trace holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

import polars as pl

from otelcar.errors import TraceNotFound
from otelcar.mcp.bounded import (
    clip_strings,
    clip_to_fit,
    decode_cursor,
    encode_cursor,
    fit_items,
    size,
    text_chunk,
)
from otelcar.sources import TraceSource
from otelcar.views import fold_contexts, step_view, trace_view

Context = Literal["new", "all"]
#: Clip limits tried on a step too big for a page alone before its messages are left out.
SOFT = (65536, 16384, 4096, 1024, 256)
#: Room kept for the page fields and the cursor beside the steps.
PAGE_FIELDS_BYTES = 1024


def _where(step: int, shift: int = 0) -> Any:
    """How a clip marker names a text of ``step`` for read_text: ``(step=N, path=P)``, an
    input message's index moved up by ``shift`` (the messages left out before the page's
    first one), so the path is that of the step's whole view."""

    def where(path: str) -> str:
        head, _, rest = path.partition(".")
        index, _, tail = rest.partition(".")
        if shift and head == "input_messages" and index.isdigit():
            path = f"input_messages.{int(index) + shift}" + (f".{tail}" if tail else "")
        return f"(step={step}, path={path})"

    return where


def _omitted(view: dict[str, Any]) -> int:
    return (view.get("input_messages_omitted") or {}).get("count", 0)


def _step_views(
    steps: pl.DataFrame, page: pl.DataFrame, context: Context
) -> Iterator[dict[str, Any]]:
    """The page's rows as step views, one at a time (a page stops at the byte cap long
    before its last row); with ``context="new"`` each LLM step without the input messages
    the same agent's previous LLM step (in the whole trace) began with
    (:func:`otelcar.views.fold_contexts`, as the console's trace page shows them)."""
    if context == "new":
        page = fold_contexts(page, steps)
    rows = (page.row(i, named=True) for i in range(page.height))  # iter_rows buffers 512
    for row in rows:
        shared = row.pop("folded", 0) or 0
        before = row.pop("folded_from", None)
        row.pop("context_len", None)
        view = step_view(row)
        view["input_messages_omitted"] = (
            {"count": shared, "same_as_step": before} if shared else None
        )
        yield view


def _fit_step(view: dict[str, Any], room: int, counter: list[int]) -> dict[str, Any]:
    """A step alone too big for ``room`` bytes: its texts clipped (down to 256 chars), then
    its first input messages left out (``input_messages_omitted`` counts them; show_step
    lists them), then its texts clipped harder."""
    clipped = clip_to_fit(view, room, _where(view["step"], _omitted(view)), counter, SOFT)
    messages = clipped.get("input_messages") or []
    if size(clipped) <= room or not messages:
        return clipped
    rest = size({**clipped, "input_messages": []})
    keep = fit_items(messages[::-1], max(room - rest, 0), at_least_one=False)
    omitted = view.get("input_messages_omitted") or {"count": 0, "same_as_step": None}
    dropped = len(messages) - keep
    cut = {
        **clipped,
        "input_messages": messages[dropped:],
        "input_messages_omitted": {**omitted, "count": omitted["count"] + dropped},
    }
    return clip_to_fit(cut, room, _where(view["step"], _omitted(cut)), counter)


def steps_page(
    source: TraceSource,
    trace_id: str,
    *,
    budget: int,
    first: int | None = None,
    last: int | None = None,
    kinds: list[str] | None = None,
    limit: int = 50,
    clip: int | None = 500,
    context: Context = "new",
    cursor: str | None = None,
    with_summary: bool = True,
) -> dict[str, Any]:
    """One page of the steps of ``trace_id`` numbered ``first``..``last`` (inclusive; of
    ``kinds`` only), at most ``limit`` steps and ``budget`` bytes in all: ``{"trace"`` (the
    summary, when ``with_summary``), ``"trace_id", "steps", "page", "next_cursor"}``.
    ``cursor`` (a ``next_cursor``) continues a page with the options it was made with.
    ``page`` says which steps are shown, how many of the range are left, why the page
    stopped and how many texts were clipped."""
    if cursor is not None:
        state = decode_cursor(cursor, "show_steps")
        trace_id, first, last = state["trace"], state["from"], state["last"]
        kinds, limit, clip, context = state["kinds"], state["limit"], state["clip"], state["ctx"]
    loaded = source.load(trace_id)
    steps = loaded.steps
    chosen = steps.filter(pl.col("kind").is_in(kinds)) if kinds else steps
    if first is not None:
        chosen = chosen.filter(pl.col("step") >= first)
    if last is not None:
        chosen = chosen.filter(pl.col("step") <= last)
    rows = chosen.head(limit)
    clips = [0]
    head: dict[str, Any] = {"trace": trace_view(loaded.summary)} if with_summary else {}
    room = budget - size(head) - PAGE_FIELDS_BYTES
    shown: list[dict[str, Any]] = []
    used, full = 2, False
    for view in _step_views(steps, rows, context):
        where = _where(view["step"], _omitted(view))
        view = clip_strings(view, clip, where, counter=clips)
        if not shown and size(view) > room:
            view = _fit_step(view, room, clips)
        used += size(view) + 1
        if shown and used > room:
            full = True
            break
        shown.append(view)
    kept = len(shown)
    left = chosen.height - kept
    stopped = None
    if left:
        stopped = "byte cap" if full else "limit"
    next_cursor = None
    if left:
        state = {
            "trace": loaded.trace_id,
            "from": int(chosen["step"][kept]),
            "last": last,
            "kinds": kinds,
            "limit": limit,
            "clip": clip,
            "ctx": context,
        }
        next_cursor = encode_cursor("show_steps", state)
    return {
        **head,
        "trace_id": loaded.trace_id,
        "steps": shown,
        "page": {
            "first_step": shown[0]["step"] if shown else None,
            "last_step": shown[-1]["step"] if shown else None,
            "shown": len(shown),
            "left": left,
            "stopped_by": stopped,
            "clip": clip,
            "clipped_texts": clips[0],
            "context": context,
        },
        "next_cursor": next_cursor,
    }


def _step_row(source: TraceSource, trace_id: str, step: int) -> tuple[str, dict[str, Any]]:
    loaded = source.load(trace_id)
    rows = loaded.steps.filter(pl.col("step") == step)
    if rows.is_empty():
        known = loaded.steps["step"].to_list()
        shown = ", ".join(map(str, known[:40])) + (" …" if len(known) > 40 else "")
        raise TraceNotFound(f"trace {loaded.trace_id} has no step {step} (steps: {shown})")
    return loaded.trace_id, rows.row(0, named=True)


def show_step(
    source: TraceSource,
    trace_id: str,
    step: int,
    *,
    budget: int,
    cursor: str | None = None,
) -> dict[str, Any]:
    """One whole step (every input message, unclipped) within ``budget`` bytes:
    ``{"trace_id", "step", "input_messages_from", "input_messages_total", "next_cursor"}``.
    Input messages that do not fit are left for the next page (``next_cursor``: the same
    step from the first one left out); a text that alone does not fit is clipped with a
    marker naming its path for ``read_text``."""
    start = 0
    if cursor is not None:
        state = decode_cursor(cursor, "show_step")
        trace_id, step, start = state["trace"], state["step"], state["from"]
    full_id, row = _step_row(source, trace_id, step)
    view = step_view(row)
    messages = view["input_messages"] or []
    where = _where(step)
    base = clip_to_fit({**view, "input_messages": []}, budget // 2, where)
    room = budget - size(base) - PAGE_FIELDS_BYTES
    rest = messages[start:]
    kept = fit_items(rest, room)
    shown = rest[:kept]
    if kept == 1 and size(shown[0]) > room:
        shown = [clip_to_fit(shown[0], room, lambda p: where(f"input_messages.{start}.{p}"))]
    end = start + kept
    return {
        "trace_id": full_id,
        "step": {**base, "input_messages": shown if view["input_messages"] is not None else None},
        "input_messages_from": start,
        "input_messages_total": len(messages),
        "next_cursor": (
            encode_cursor("show_step", {"trace": full_id, "step": step, "from": end})
            if end < len(messages)
            else None
        ),
    }


def _at(value: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            raise TraceNotFound(f"path {path!r}: no {part!r} there")
    return value


def read_text(
    source: TraceSource, trace_id: str, step: int, path: str, *, offset: int, budget: int
) -> dict[str, Any]:
    """The text at ``path`` of one step's view (dotted: ``input_messages.3.content``,
    ``tool_result``; a non-text value as its JSON) from ``offset``, as much as fits
    ``budget`` bytes: ``{"trace_id", "step", "path", "offset", "text", "total_chars",
    "next_offset"}`` (``next_offset`` ``None`` at the end)."""
    import json

    full_id, row = _step_row(source, trace_id, step)
    value = _at(step_view(row), path)
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if not 0 <= offset <= len(text):
        raise TraceNotFound(f"offset {offset} is outside the text ({len(text)} chars)")
    chunk = text_chunk(text, offset, budget - PAGE_FIELDS_BYTES) if text else ""
    end = offset + len(chunk)
    return {
        "trace_id": full_id,
        "step": step,
        "path": path,
        "offset": offset,
        "text": chunk,
        "total_chars": len(text),
        "next_offset": end if end < len(text) else None,
    }
