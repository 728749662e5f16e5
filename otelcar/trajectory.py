"""Trajectory builder: the spans (and log events) of one trace → its steps.

Contract (``reference/otel-genai.md`` §7–8.5, DESIGN.md §4):

1. duplicate span occurrences (same span id) collapse to the first received;
2. one tree per trace; a span whose parent is missing becomes a root (and says so);
3. every span is mapped by the dialect registry; log events join their span by span id;
4. stacked instrumentation of one call (an LLM span whose only LLM descendant lies inside
   its time, or LLM spans sharing a response id) merges into one row, keeping the innermost
   span and filling its gaps from the other;
5. rows are ordered depth-first, siblings by (start, end, input order); ``step`` counts rows;
6. ``episode_id`` is the nearest enclosing ``invoke_agent`` span, else the root; an agent
   span that only echoes its enclosing agent's output (an event recorded as a span) is an
   ``other`` step of that agent (:mod:`otelcar.conventions.agent_events`);
7. tool steps link to the assistant tool call they execute by call id, else by name and
   order (``link_inferred``); missing arguments and results are backfilled from that call
   and from the next LLM input; a call with no tool span becomes a ``synthesized`` tool step;
8. ``content_captured`` is false on LLM/tool rows with no messages, arguments or results.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from otelcar.conventions import PARAM_KEYS, UNREAD, USAGE_KEYS, MappedSpan, map_span
from otelcar.conventions.agent_events import fold_agent_events
from otelcar.conventions.dropped_calls import rebuild_dropped_calls
from otelcar.conventions.memo import derived_each, trace_memo
from otelcar.conventions.shapes import drop_notes_held_by_calls
from otelcar.ingest.frames import LogFrame, SpanFrame
from otelcar.messages import Message, ToolCall, encode_arguments

_UNSET = object()
#: A step's other attributes as sorted JSON (built once: ``json.dumps`` with options builds
#: a new encoder per call).
_ATTRIBUTES_JSON = json.JSONEncoder(ensure_ascii=False, sort_keys=True).encode


@dataclass(slots=True)
class _Row:
    """A step under construction."""

    mapped: MappedSpan
    span: SpanFrame | None
    parent_span_id: str | None
    start_ns: int
    end_ns: int
    episode_id: str | None = None
    agent_name: str | None = None
    synthesized: bool = False
    link_inferred: bool = False
    call_row: _Row | None = None
    merged: list[str] = field(default_factory=list)
    issues: list[str] = field(default_factory=list)
    step: int = -1


@dataclass(slots=True)
class TraceBuild:
    """The steps of one trace (rows matching :data:`otelcar.schema.STEPS_SCHEMA`) and
    its summary (a row of :data:`otelcar.schema.TRACES_SCHEMA`, less ``build_id``)."""

    steps: list[dict[str, Any]]
    summary: dict[str, Any]


def build_trace(
    trace_id: str, spans: Sequence[SpanFrame], logs: Sequence[LogFrame] = ()
) -> TraceBuild:
    """Build the steps of one trace from all its spans and log records (any order)."""
    unique: dict[str, SpanFrame] = {}
    for span in sorted(spans, key=lambda s: s.seq):
        unique.setdefault(span.span_id, span)
    logs_by_span: dict[str, list[LogFrame]] = defaultdict(list)
    unlinked_logs = 0
    for log in sorted(logs, key=lambda r: (r.time_ns or r.observed_time_ns or 0, r.seq)):
        if log.span_id in unique:
            logs_by_span[log.span_id].append(log)  # type: ignore[index]
        else:
            unlinked_logs += 1

    children: dict[str | None, list[SpanFrame]] = defaultdict(list)
    orphans: set[str] = set()
    for span in unique.values():
        parent = span.parent_span_id
        if parent is not None and parent not in unique:
            orphans.add(span.span_id)
            parent = None
        children[parent].append(span)
    for siblings in children.values():
        siblings.sort(key=lambda s: (s.start_ns, s.end_ns, s.seq))

    with trace_memo():  # histories repeat their messages: each is decoded once
        mapped = {sid: map_span(span, logs_by_span.get(sid, ())) for sid, span in unique.items()}
        drop_notes_held_by_calls(mapped, unique, logs_by_span)
        rebuild_dropped_calls(mapped, unique)
        fold_agent_events(mapped, unique, children)
        return _steps(trace_id, unique, children, orphans, mapped, logs, unlinked_logs)


def _steps(
    trace_id: str,
    unique: dict[str, SpanFrame],
    children: dict[str | None, list[SpanFrame]],
    orphans: set[str],
    mapped: dict[str, MappedSpan],
    logs: Sequence[LogFrame],
    unlinked_logs: int,
) -> TraceBuild:
    """The steps of a trace whose spans are mapped (the second half of :func:`build_trace`)."""
    absorbed = _merge_stacked(unique, children, mapped)
    merged_into: dict[str, list[str]] = defaultdict(list)
    for source_id, target_id in absorbed.items():
        merged_into[target_id].append(source_id)

    rows: list[_Row] = []
    visited: set[str] = set()

    def walk(top: SpanFrame) -> None:
        # Iterative depth-first walk (traces can nest deeper than Python's recursion limit).
        stack: list[tuple[SpanFrame, str, str | None]] = [(top, top.span_id, None)]
        while stack:
            span, episode, agent = stack.pop()
            if span.span_id in visited:
                continue
            visited.add(span.span_id)
            info = mapped[span.span_id]
            if info.episode_boundary:
                episode = span.span_id
            if info.kind == "agent":
                agent = info.name
            if span.span_id not in absorbed:
                row = _Row(
                    info,
                    span,
                    span.parent_span_id,
                    span.start_ns,
                    span.end_ns,
                    episode_id=episode,
                    agent_name=info.agent_name or agent,
                )
                row.merged = sorted(merged_into.get(span.span_id, ()))
                if span.span_id in orphans:
                    row.issues.append(
                        f"parent span {span.parent_span_id} is part of a parent cycle; "
                        "treated as a root"
                        if span.parent_span_id in unique
                        else f"parent span {span.parent_span_id} is not in the trace (lost, "
                        "sampled out or not yet received); treated as a root"
                    )
                rows.append(row)
            for child in reversed(children.get(span.span_id, ())):
                stack.append((child, episode, agent))

    for root in children.get(None, ()):
        walk(root)
    # Spans caught in a parent cycle are unreachable from any root: break the cycle at the
    # earliest span so that none is lost.
    while len(visited) < len(unique):
        loose = min(
            (s for sid, s in unique.items() if sid not in visited),
            key=lambda s: (s.start_ns, s.seq),
        )
        orphans.add(loose.span_id)
        walk(loose)

    parent_of = {sid: span.parent_span_id for sid, span in unique.items()}
    rows = _link_tools(rows, parent_of)
    for index, row in enumerate(rows):
        row.step = index
    steps = [_to_step(trace_id, row) for row in rows]
    return TraceBuild(steps, _summary(trace_id, unique, rows, logs, unlinked_logs))


def _merge_stacked(
    unique: dict[str, SpanFrame],
    children: dict[str | None, list[SpanFrame]],
    mapped: dict[str, MappedSpan],
) -> dict[str, str]:
    """Merge stacked copies of one LLM call; returns absorbed span id → kept span id."""
    absorbed: dict[str, str] = {}

    def nearest_llm_descendants(span_id: str) -> list[str]:
        found: list[str] = []
        stack, seen = [span_id], {span_id}
        while stack:
            for child in children.get(stack.pop(), ()):
                if child.span_id in seen:
                    continue
                seen.add(child.span_id)
                if mapped[child.span_id].kind == "llm":
                    found.append(child.span_id)
                else:
                    stack.append(child.span_id)
        return found

    for span_id, info in mapped.items():
        if info.kind != "llm":
            continue
        inner = nearest_llm_descendants(span_id)
        if len(inner) != 1:
            continue
        outer_span, inner_span = unique[span_id], unique[inner[0]]
        if inner_span.start_ns >= outer_span.start_ns and inner_span.end_ns <= outer_span.end_ns:
            absorbed[span_id] = inner[0]
    # Same response id on several LLM spans that ran at the same time: siblings from stacked
    # instrumentations. Calls that did not overlap are separate calls however their ids
    # read (mock servers, proxies and caches repeat ids): each stays a step, with an issue.
    by_response: dict[str, list[str]] = defaultdict(list)
    for span_id, info in mapped.items():
        if info.kind == "llm" and info.response_id and span_id not in absorbed:
            by_response[info.response_id].append(span_id)
    for response_id, ids in by_response.items():
        groups = _overlapping_groups(ids, unique)
        for group in groups:
            keep = max(group, key=lambda s: (mapped[s].has_content(), -unique[s].seq))
            for other in group:
                if other != keep:
                    absorbed[other] = keep
            if len(groups) > 1:
                mapped[keep].issues.append(
                    f"response id {response_id!r} is repeated on {len(groups)} calls that "
                    "did not overlap in time: kept as separate calls"
                )
    # Resolve chains (a absorbed into b absorbed into c) and fill the kept rows' gaps.
    for span_id in list(absorbed):
        target, hops = absorbed[span_id], 0
        while target in absorbed and hops < len(absorbed):
            target, hops = absorbed[target], hops + 1
        absorbed[span_id] = target
    for span_id, target in sorted(absorbed.items(), key=lambda kv: unique[kv[0]].seq):
        _fill_gaps(mapped[target], mapped[span_id])
    return absorbed


def _overlapping_groups(ids: list[str], unique: dict[str, SpanFrame]) -> list[list[str]]:
    """Spans of ``ids`` grouped so that each group's time intervals chain by overlap
    (nested or concurrent), in start order; spans without times overlap nothing."""
    timed = sorted(
        (s for s in ids if unique[s].start_ns and unique[s].end_ns),
        key=lambda s: (unique[s].start_ns, unique[s].seq),
    )
    groups: list[list[str]] = []
    group_end = -1
    for span_id in timed:
        span = unique[span_id]
        if groups and span.start_ns < group_end:
            groups[-1].append(span_id)
            group_end = max(group_end, span.end_ns)
        else:
            groups.append([span_id])
            group_end = span.end_ns
    untimed = [s for s in ids if s not in set(timed)]
    if untimed and not timed:
        return [untimed]  # nothing to tell them apart by: the stacked reading stands
    groups.extend([s] for s in untimed)
    return groups


def _fill_gaps(keep: MappedSpan, other: MappedSpan) -> None:
    """Copy into ``keep`` what only ``other`` recorded (content, models, params, usage)."""
    for name in (
        "provider",
        "request_model",
        "response_model",
        "input_messages",
        "tools_available",
        "tool_choice",
        "output",
        "n_choices",
        "finish_reason",
        "response_id",
        "conversation_id",
        "agent_name",
        "error",
    ):
        if getattr(keep, name) is None and getattr(other, name) is not None:
            setattr(keep, name, getattr(other, name))
    if not keep.alternates:
        keep.alternates = other.alternates
    for key, value in other.params.items():
        if keep.params.get(key) is None:
            keep.params[key] = value
    for key, value in other.usage.items():
        if keep.usage.get(key) is None:
            keep.usage[key] = value
    if other.source not in keep.source:
        keep.source = f"{keep.source} + {other.source}"
    keep.issues.extend(other.issues)


def _link_tools(rows: list[_Row], parent_of: dict[str, str | None]) -> list[_Row]:
    """Link tool rows to the calls that requested them; synthesize missing tool rows."""
    llm_rows = [row for row in rows if row.mapped.kind == "llm"]
    _backfill_call_ids(llm_rows)
    call_owner: dict[str, tuple[_Row, int]] = {}
    for row in llm_rows:
        for index, call in enumerate(_calls(row)):
            if call.id:
                call_owner.setdefault(call.id, (row, index))
    linked: set[tuple[int, int]] = set()
    position = {id(row): i for i, row in enumerate(rows)}

    for row in rows:
        if row.mapped.kind != "tool":
            continue
        owner = call_owner.get(row.mapped.tool_call_id or "")
        if owner is not None and (id(owner[0]), owner[1]) not in linked:
            row.call_row = owner[0]
            linked.add((id(owner[0]), owner[1]))
            _backfill_tool(row, owner[0], owner[1], rows)
            continue
        # By name and order: the first unlinked call of this name in the latest LLM row
        # before this tool row (same episode first).
        before = [r for r in llm_rows if position[id(r)] < position[id(row)]]
        before.sort(key=lambda r: (r.episode_id != row.episode_id, -position[id(r)]))
        for candidate in before:
            index = next(
                (
                    i
                    for i, call in enumerate(_calls(candidate))
                    if call.name == row.mapped.tool_name and (id(candidate), i) not in linked
                ),
                None,
            )
            if index is not None:
                row.call_row = candidate
                row.link_inferred = True
                linked.add((id(candidate), index))
                if row.mapped.tool_call_id is None:
                    row.mapped.tool_call_id = _calls(candidate)[index].id
                _backfill_tool(row, candidate, index, rows)
                break
        if row.call_row is None:
            _link_by_reply_text(row, before, linked)

    # Synthesized rows go after the LLM row, its descendants and its linked tool rows.
    pending: dict[int, list[_Row]] = {}
    for owner in llm_rows:
        missing = [(i, c) for i, c in enumerate(_calls(owner)) if (id(owner), i) not in linked]
        if not missing:
            continue
        synthesized = [_synthesize(owner, i, call, rows) for i, call in missing]
        anchor = max(
            index
            for index, row in enumerate(rows)
            if row is owner or row.call_row is owner or _descends(row, owner, parent_of)
        )
        pending.setdefault(anchor, []).extend(synthesized)
    out: list[_Row] = []
    for index, row in enumerate(rows):
        out.append(row)
        out.extend(pending.get(index, ()))
    return out


def _backfill_call_ids(llm_rows: list[_Row]) -> None:
    """Give an output tool call recorded without its id (LiteLLM's ``function_call`` form)
    the id the next LLM input shows for the same call (same name and arguments)."""
    for position, row in enumerate(llm_rows):
        output = row.mapped.output
        if output is None or all(call.id for call in output.tool_calls):
            continue
        later = next(
            (r for r in llm_rows[position + 1 :] if r.mapped.input_messages is not None), None
        )
        if later is None:
            continue
        seen = [
            call
            for message in later.mapped.input_messages or ()
            if message.role == "assistant"
            for call in message.tool_calls
            if call.id
        ]
        calls = list(output.tool_calls)
        for index, call in enumerate(calls):
            match = next(
                (c for c in seen if c.name == call.name and c.arguments == call.arguments), None
            )
            if call.id is None and match is not None:
                calls[index] = replace(call, id=match.id)
                seen.remove(match)
                row.issues.append(f"tool call {call.name!r}: id backfilled from the next LLM input")
        row.mapped.output = replace(output, tool_calls=tuple(calls))


def _descends(row: _Row, ancestor: _Row, parent_of: dict[str, str | None]) -> bool:
    """Whether ``row``'s span lies (at any depth) under ``ancestor``'s span."""
    if row.span is None or ancestor.span is None or row is ancestor:
        return False
    target = ancestor.span.span_id
    current = parent_of.get(row.span.span_id)
    seen: set[str] = set()
    while current is not None and current not in seen:
        if current == target:
            return True
        seen.add(current)
        current = parent_of.get(current)
    return False


# DSPy's ChatAdapter asks a model for a tool as text fields, not a tool call: ReAct's reply
# holds ``[[ ## next_tool_name ## ]]`` then the name on its own line (DSPy 2.5–3.x).
_DSPY_TOOL_FIELD = re.compile(r"\[\[ ## next_tool_name ## \]\]\s*\n\s*([^\s\[]+)")


def _link_by_reply_text(row: _Row, before: list[_Row], linked: set[tuple[int, int]]) -> None:
    """Link a tool row no structured call claims to the latest earlier LLM reply that names
    it in DSPy's ``next_tool_name`` field (each reply once; the link is inferred)."""
    for candidate in before:
        output = candidate.mapped.output
        text = output.content if output is not None else None
        if not isinstance(text, str) or (id(candidate), -1) in linked:
            continue
        names = _DSPY_TOOL_FIELD.findall(text)
        if row.mapped.tool_name in names:
            row.call_row = candidate
            row.link_inferred = True
            linked.add((id(candidate), -1))
            row.mapped.issues.append(
                "linked to the model reply that names this tool in DSPy's next_tool_name "
                "field (the request is text, with no call id)"
            )
            return


def _calls(row: _Row) -> tuple[ToolCall, ...]:
    return row.mapped.output.tool_calls if row.mapped.output is not None else ()


def _result_for(call_row: _Row, index: int, call: ToolCall, rows: list[_Row]) -> Any:
    """The result of a call as the next LLM input shows it (by id, else by position)."""
    start = rows.index(call_row)
    for later in rows[start + 1 :]:
        if later.mapped.kind != "llm" or later.mapped.input_messages is None:
            continue
        messages = later.mapped.input_messages
        if call.id:
            for message in messages:
                if message.role == "tool" and message.tool_call_id == call.id:
                    return message.content
            continue
        for m_index in range(len(messages) - 1, -1, -1):
            if messages[m_index].role == "assistant" and messages[m_index].tool_calls:
                replies = [m for m in messages[m_index + 1 :] if m.role == "tool"]
                if index < len(replies):
                    return replies[index].content
                break
    return _UNSET


def _backfill_tool(row: _Row, call_row: _Row, index: int, rows: list[_Row]) -> None:
    call = _calls(call_row)[index]
    info = row.mapped
    if info.tool_args is None and call.arguments is not None:
        info.tool_args = call.arguments
        row.issues.append("arguments backfilled from the assistant tool call")
    elif (
        isinstance(info.tool_args, str)
        and isinstance(call.arguments, dict)
        and len(call.arguments) == 1
        and info.tool_args in (str(v) for v in call.arguments.values())
    ):  # the tool span recorded the bare value of a one-argument call (LangGraph)
        info.tool_args = call.arguments
        row.issues.append("arguments named from the assistant tool call (the span has the value)")
    if info.tool_result is None:
        result = _result_for(call_row, index, call, rows)
        if result is not _UNSET and result is not None:
            info.tool_result = result
            row.issues.append("result backfilled from the next LLM input")
    if info.tool_name is None:
        info.tool_name = call.name


def _synthesize(call_row: _Row, index: int, call: ToolCall, rows: list[_Row]) -> _Row:
    result = _result_for(call_row, index, call, rows)
    following = [r for r in rows[rows.index(call_row) + 1 :] if r.mapped.kind == "llm"]
    end_ns = following[0].start_ns if following else call_row.end_ns
    info = MappedSpan(
        kind="tool",
        name=call.name or "?",
        source=call_row.mapped.source,
        operation="execute_tool",
        tool_name=call.name,
        tool_call_id=call.id,
        tool_args=call.arguments,
        tool_result=None if result is _UNSET else result,
    )
    row = _Row(
        info,
        None,
        call_row.parent_span_id,
        call_row.end_ns,
        max(end_ns, call_row.end_ns),
        episode_id=call_row.episode_id,
        agent_name=call_row.agent_name,
        synthesized=True,
        call_row=call_row,
    )
    row.issues.append(
        "no tool span recorded; synthesized from the assistant tool call"
        + ("" if result is _UNSET else ", result from the next LLM input")
    )
    return row


def _messages(items: Iterable[Message] | None, field: str) -> list[dict[str, Any]] | None:
    """The table rows of one of a step's message lists (``field`` names it)."""
    return None if items is None else derived_each(("row", field), list(items), _row_of)


def _row_of(_position: int, message: Message) -> dict[str, Any]:
    return message.to_row()


def _to_step(trace_id: str, row: _Row) -> dict[str, Any]:
    info, span = row.mapped, row.span
    rest = {}
    if span is not None:
        rest = {k: v for k, v in span.attributes.items() if k not in info.consumed}
    status = span.status_code if span is not None else "UNSET"
    error = (span.status_message if span is not None else None) or info.error
    captured = (
        (info.has_content() or info.content_truncated) if info.kind in ("llm", "tool") else None
    )
    return {
        "trace_id": trace_id,
        "step": row.step,
        "span_id": span.span_id if span is not None else None,
        "parent_span_id": row.parent_span_id,
        "episode_id": row.episode_id,
        "kind": info.kind,
        "name": info.name,
        "agent_name": row.agent_name,
        "operation": info.operation,
        "start_ns": row.start_ns,
        "end_ns": row.end_ns,
        "status": status,
        "error": error,
        "provider": info.provider,
        "request_model": info.request_model,
        "response_model": info.response_model,
        "params": {k: info.params.get(k) for k in PARAM_KEYS} if info.params else None,
        "input_messages": _messages(info.input_messages, "input_messages"),
        "tools_available": info.tools_available,
        "tool_choice": info.tool_choice,
        "output": info.output.to_row() if info.output is not None else None,
        "alternates": _messages(info.alternates, "alternates"),
        "n_choices": info.n_choices,
        "finish_reason": info.finish_reason,
        "tool_name": info.tool_name,
        "tool_call_id": info.tool_call_id,
        "tool_args": encode_arguments(info.tool_args),
        "tool_result": info.tool_result,
        "call_step": row.call_row.step if row.call_row is not None else None,
        "usage": {k: info.usage.get(k) for k in USAGE_KEYS} if info.usage else None,
        "response_id": info.response_id,
        "conversation_id": info.conversation_id,
        "source": info.source,
        "content_captured": captured,
        "content_truncated": info.content_truncated,
        "link_inferred": row.link_inferred,
        "synthesized": row.synthesized,
        "merged_span_ids": row.merged,
        "issues": [*info.issues, *row.issues],
        "attributes": _ATTRIBUTES_JSON(rest),
    }


def _summary(
    trace_id: str,
    unique: dict[str, SpanFrame],
    rows: list[_Row],
    logs: Sequence[LogFrame],
    unlinked_logs: int,
) -> dict[str, Any]:
    spans = list(unique.values())
    roots = [s for s in spans if s.parent_span_id is None or s.parent_span_id not in unique]
    root = min(roots, key=lambda s: (s.start_ns, s.seq)) if roots else None
    services = [s.service_name for s in ([root] if root else []) + spans if s.service_name]
    kinds = [row.mapped.kind for row in rows]
    content = [
        row.mapped.has_content() or row.mapped.content_truncated
        for row in rows
        if row.mapped.kind in ("llm", "tool")
    ]
    dialects = sorted(
        {row.mapped.source for row in rows if row.mapped.kind != "other"}
        or {row.mapped.source for row in rows}
    )
    return {
        "trace_id": trace_id,
        "service": services[0] if services else None,
        "root_name": root.name if root else None,
        "start_ns": min((s.start_ns for s in spans), default=None),
        "end_ns": max((s.end_ns for s in spans), default=None),
        "n_spans": len(spans),
        "n_steps": len(rows),
        "n_llm": kinds.count("llm"),
        "n_tool": kinds.count("tool"),
        "n_agent": kinds.count("agent"),
        "n_errors": sum(1 for s in spans if s.status_code == "ERROR"),
        "n_logs": len(logs),
        "n_unlinked_logs": unlinked_logs,
        "n_issues": sum(len(row.mapped.issues) + len(row.issues) for row in rows),
        "dialects": dialects,
        "content_captured": (
            "n/a"
            if not content
            else "unread"
            if any(issue.startswith(UNREAD) for row in rows for issue in row.mapped.issues)
            else "yes"
            if all(content)
            else "no"
            if not any(content)
            else "partial"
        ),
    }


def build_traces(
    spans: Iterable[SpanFrame],
    logs: Iterable[LogFrame] = (),
    trace_ids: Iterable[str] | None = None,
) -> list[TraceBuild]:
    """Group frames by trace and build each trace (``trace_ids``: which ones; default all).

    Log records without a trace id belong to no trace and are ignored here.
    """
    spans_by_trace: dict[str, list[SpanFrame]] = defaultdict(list)
    for span in spans:
        spans_by_trace[span.trace_id].append(span)
    logs_by_trace: dict[str, list[LogFrame]] = defaultdict(list)
    for log in logs:
        if log.trace_id:
            logs_by_trace[log.trace_id].append(log)
    wanted = (
        sorted(set(spans_by_trace) | set(logs_by_trace)) if trace_ids is None else sorted(trace_ids)
    )
    return [build_trace(t, spans_by_trace.get(t, ()), logs_by_trace.get(t, ())) for t in wanted]
