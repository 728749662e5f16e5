"""What a report needs beyond the numbers: the trace's step timeline and a few rollouts.

Result writers (``otelcar attribute --json``, ``why``, ``fix``) call :func:`report_sections`
(or :func:`with_report_sections`) so that a JSON result carries everything
``otelcar report RESULT.json`` needs to draw the HTML again, without the store:

- ``timeline`` — every step of the trace (kind, name, agent, times, tokens, status) with each
  LLM step's context and action and each tool step's call and result. Contexts are
  delta-encoded: an LLM step whose context starts with an earlier step's whole context stores
  only the messages added since (``same_as_step`` + ``shared``), so the section grows with the
  trace, not with its square.
- ``alternatives`` — a few rollouts of the plans around the decisive step, as alternative
  timelines (what the agent did instead, and whether that run failed), collected during
  attribution by a :class:`RolloutSampler` passed as ``on_rollout``.

Both keys are optional in ``schemas/attribution.schema.json``; the section shapes are
:class:`~otelcar.report.documents.TimelineSection` and
:class:`~otelcar.report.documents.Alternative`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import polars as pl

from otelcar.messages import Message, decode_arguments
from otelcar.replay.execution import Judged
from otelcar.replay.harness import Rollout
from otelcar.report.documents import TIMELINE_VERSION

MAX_TEXT = 100_000  # characters of one message or tool result kept in a report section
GIST = 140  # characters of a one-line gist


# -- small text helpers ----------------------------------------------------------------------
def clip(text: str | None, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    if not text:
        return ""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _keep(text: str | None) -> tuple[str | None, bool]:
    if text is None or len(text) <= MAX_TEXT:
        return text, False
    cut = len(text) - MAX_TEXT
    return text[:MAX_TEXT] + f"\n… [{cut} more characters not kept in the report]", True


def _arguments(value: Any) -> Any:
    """Arguments as stored in a steps-table cell (JSON text) → a JSON value."""
    if isinstance(value, str):
        try:
            return decode_arguments(value)
        except (ValueError, TypeError):
            return value
    return value


def message_view(message: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A normalized message (table row or dict) as a report message (arguments decoded,
    very long contents cut to :data:`MAX_TEXT` with ``truncated`` set)."""
    if message is None:
        return None
    content, cut = _keep(message.get("content"))
    out: dict[str, Any] = {
        "role": message.get("role"),
        "content": content,
        "tool_calls": [
            {
                "id": call.get("id"),
                "name": call.get("name"),
                "arguments": _arguments(call.get("arguments")),
            }
            for call in message.get("tool_calls") or ()
        ],
        "tool_call_id": message.get("tool_call_id"),
        "name": message.get("name"),
    }
    if cut:
        out["truncated"] = True
    return out


def arguments_text(arguments: Any) -> str:
    """Arguments on one line: ``k=v, …`` for an object, the text for a raw string."""
    if arguments is None:
        return ""
    if isinstance(arguments, dict):
        return ", ".join(
            f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in arguments.items()
        )
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def message_gist(message: Mapping[str, Any] | None, limit: int = GIST) -> str:
    """One line: the tool calls of a message (``name(args)``), else its text."""
    if message is None:
        return "(no action)"
    calls = message.get("tool_calls") or []
    if calls:
        return clip(
            "→ "
            + ", ".join(
                f"{c.get('name')}({arguments_text(_arguments(c.get('arguments')))})" for c in calls
            ),
            limit,
        )
    return clip("→ " + (message.get("content") or ""), limit)


# -- the timeline -----------------------------------------------------------------------------
def _tokens(usage: Mapping[str, Any] | None) -> dict[str, int | None] | None:
    if not usage:
        return None
    tokens = {
        "input": usage.get("input_tokens"),
        "output": usage.get("output_tokens"),
    }
    return tokens if any(v is not None for v in tokens.values()) else None


def _gist(row: Mapping[str, Any], output: dict[str, Any] | None) -> str:
    if row["kind"] == "llm":
        if not row.get("content_captured", True) and output is None:
            return "[content not captured]"
        return message_gist(output)
    if row["kind"] == "tool":
        result = row.get("tool_result")
        return clip(
            f"({arguments_text(_arguments(row.get('tool_args')))}) → "
            + (result if result is not None else "…"),
            GIST,
        )
    return ""


def timeline_section(steps: pl.DataFrame, *, service: str | None = None) -> dict[str, Any]:
    """The ``timeline`` section of a result from a trace's steps table (see the module doc)."""
    rows = sorted(steps.iter_rows(named=True), key=lambda r: r["step"])
    starts = [r["start_ns"] for r in rows if r.get("start_ns") is not None]
    ends = [r["end_ns"] for r in rows if r.get("end_ns") is not None]
    contexts: list[tuple[int, list[dict[str, Any]]]] = []  # (step, full context) of LLM steps
    out_steps: list[dict[str, Any]] = []
    for row in rows:
        start, end = row.get("start_ns"), row.get("end_ns")
        output = message_view(row.get("output"))
        item: dict[str, Any] = {
            "step": row["step"],
            "kind": row["kind"],
            "name": row.get("name"),
            "agent": row.get("agent_name"),
            "start_ns": start,
            "end_ns": end,
            "duration_ms": (end - start) / 1e6 if start is not None and end is not None else None,
            "status": row.get("status"),
            "error": row.get("error"),
            "model": row.get("response_model") or row.get("request_model"),
            "tokens": _tokens(row.get("usage")),
            "finish_reason": row.get("finish_reason"),
            "content_captured": row.get("content_captured"),
            "issues": list(row.get("issues") or []),
            "gist": _gist(row, output),
        }
        if row["kind"] == "llm":
            messages = [message_view(m) for m in row.get("input_messages") or []]
            context: dict[str, Any] = {"same_as_step": None, "shared": 0, "messages": messages}
            for previous_step, previous in reversed(contexts):
                if previous and messages[: len(previous)] == previous:
                    context = {
                        "same_as_step": previous_step,
                        "shared": len(previous),
                        "messages": messages[len(previous) :],
                    }
                    break
            contexts.append((row["step"], messages))
            item["context"] = context
            item["output"] = output
        elif row["kind"] == "tool":
            result, cut = _keep(row.get("tool_result"))
            item["tool"] = {
                "name": row.get("tool_name"),
                "call_id": row.get("tool_call_id"),
                "arguments": _arguments(row.get("tool_args")),
                "result": result,
                "result_truncated": cut,
                "call_step": row.get("call_step"),
            }
        out_steps.append(item)
    return {
        "version": TIMELINE_VERSION,
        "trace_id": rows[0]["trace_id"] if rows else None,
        "service": service,
        "start_ns": min(starts) if starts else None,
        "end_ns": max(ends) if ends else None,
        "steps": out_steps,
    }


def full_context(timeline: Mapping[str, Any], step: int) -> list[dict[str, Any]]:
    """The whole context of an LLM step of a ``timeline`` section (undoing the delta code)."""
    by_step = {s["step"]: s for s in timeline.get("steps", [])}
    item = by_step.get(step)
    if item is None or "context" not in item:
        return []
    context = item["context"]
    before = context.get("same_as_step")
    head = full_context(timeline, before)[: context.get("shared", 0)] if before is not None else []
    return head + list(context.get("messages") or [])


# -- alternative timelines --------------------------------------------------------------------
class RolloutSampler:
    """An ``on_rollout`` callback that keeps the first ``per_plan`` judged rollouts of each
    plan of the commitment curve, to show them as alternative timelines: each with the
    outcome the analysis judged it by, so the report renders and never judges again. Which
    plan a rollout ran is its :attr:`~otelcar.replay.execution.Judged.plan_key` (stage
    ``"curve"``, by the plan's first re-decided step), as attribution labelled it; rollouts
    of other stages (bisection's confirmation, the refutation, Shapley) are not kept.

    It can wrap another callback (a progress bar): ``RolloutSampler(then=progress_tick)``.
    """

    def __init__(self, *, per_plan: int = 3, then: Callable[[Judged], None] | None = None) -> None:
        self.per_plan = per_plan
        self.then = then
        self.kept: dict[int | None, dict[int, Judged]] = {}

    def __call__(self, judged: Judged) -> None:
        key = judged.plan_key
        if key is not None and key[0] == "curve" and judged.rollout.index < self.per_plan:
            self.kept.setdefault(key[1], {})[judged.rollout.index] = judged
        if self.then is not None:
            self.then(judged)

    def plans_for(self, result: Mapping[str, Any]) -> list[int | None]:
        """Plans worth showing for a result: the decisive step re-decided (what the agent
        would have done instead), then held with everything after it re-decided, then
        everything re-decided."""
        focus = result.get("culprit")
        if focus is None:
            focus = result.get("harmful_step")
        if focus is None and result.get("steps"):
            focus = max(result["steps"], key=lambda s: s["delta"])["step"]
        decisions = sorted(s for s in self.kept if s is not None)
        chosen: list[int | None] = []
        if focus is not None:
            chosen.append(focus if focus in self.kept else None)
            later = [s for s in decisions if s > focus]
            chosen.append(later[0] if later else None)
        if decisions:
            chosen.append(decisions[0])
        seen: list[int | None] = []
        for key in chosen:
            if key in self.kept and key not in seen:
                seen.append(key)
        return seen

    def alternatives(self, result: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The ``alternatives`` section: the kept rollouts of :meth:`plans_for`, each with
        the outcome it was judged by during the analysis (None: not judged)."""
        return [
            rollout_view(
                self.kept[key][index].rollout,
                resample_from=key,
                failed=self.kept[key][index].failed,
            )
            for key in self.plans_for(result)
            for index in sorted(self.kept[key])
        ]


def rollout_view(
    rollout: Rollout, *, resample_from: int | None, failed: bool | None
) -> dict[str, Any]:
    """One rollout as an alternative timeline: its decisions' actions and observations."""
    decisions = []
    for decision in rollout.decisions:
        action = decision.action.to_row() if isinstance(decision.action, Message) else None
        decisions.append(
            {
                "step": decision.recorded_step,
                "agent": decision.agent,
                "name": decision.name,
                "origin": decision.origin,
                "action": message_view(action),
                "gist": message_gist(action),
                "observations": [
                    {
                        "tool": obs.call.name,
                        "arguments": obs.call.arguments,
                        "result": _keep(obs.result)[0],
                        "error": obs.error,
                        "origin": obs.origin,
                    }
                    for obs in decision.observations
                ],
            }
        )
    return {
        "plan": rollout.plan.describe(),
        "resample_from": resample_from,
        "rollout": rollout.index,
        "status": rollout.status,
        "error": rollout.error,
        "failed": failed,
        "decisions": decisions,
    }


# -- attaching the sections ------------------------------------------------------------------
def report_sections(
    *,
    steps: pl.DataFrame | None = None,
    service: str | None = None,
    sampler: RolloutSampler | None = None,
    result: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The optional report keys of a result: ``timeline`` (from ``steps``) and
    ``alternatives`` (from ``sampler``, choosing plans around ``result``'s decisive step)."""
    sections: dict[str, Any] = {}
    if steps is not None and steps.height:
        sections["timeline"] = timeline_section(steps, service=service)
    if sampler is not None and result is not None:
        sections["alternatives"] = sampler.alternatives(result)
    return sections


def with_report_sections(document: dict[str, Any], **options: Any) -> dict[str, Any]:
    """``document`` (a result's ``to_dict()``) with :func:`report_sections` added."""
    return {**document, **report_sections(result=document, **options)}
