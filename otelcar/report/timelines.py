"""Terminal reports (rich) of kept timelines and their diffs, drawn from their JSON forms
(``schemas/timelines-list.schema.json``, ``timeline.schema.json``, ``diff.schema.json``), so a
result read back from a file is drawn the same way."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from otelcar.attribution.stats import wilson
from otelcar.render import clip, untrusted_text
from otelcar.safe_text import visible


def _outcome(failed: Any) -> Text:
    if failed is None:
        return Text("not judged", style="dim")
    return Text("failed", style="bold red") if failed else Text("passed", style="green")


def _rate(failed: int, judged: int) -> str:
    if not judged:
        return "none judged"
    ci = wilson(failed, judged, 0.95)
    return f"{failed}/{judged} failed [{ci.low:.0%}, {ci.high:.0%}]"


def timelines_table(trace_id: str, timelines: Sequence[Mapping[str, Any]]) -> Table:
    """The timelines kept for one trace: name, plan, rollouts, failures, seed, when."""
    table = Table(
        title=untrusted_text(f"{len(timelines)} timelines of trace {trace_id}"),
        header_style="bold",
    )
    for column in ("name", "plan", "rollouts", "outcome (95% CI)", "seed", "created (UTC)"):
        table.add_column(column, no_wrap=column in ("name", "created (UTC)"))
    for info in timelines:
        table.add_row(
            untrusted_text(info["name"]),
            untrusted_text(clip(info.get("plan_text"), 60)),
            str(len(info.get("rollouts") or [])),
            _rate(int(info.get("failed") or 0), int(info.get("judged") or 0))
            if info.get("outcome")
            else "no outcome",
            str(info.get("seed")),
            untrusted_text(info.get("created") or ""),
        )
    return table


def _action_text(decision: Mapping[str, Any] | None) -> str:
    return "(run ended)" if decision is None else str(decision.get("action_text") or "")


def _observations(decision: Mapping[str, Any] | None, limit: int = 70) -> str:
    if not decision:
        return ""
    return "; ".join(
        f"{o.get('name')} → "
        + clip(
            o.get("result") if o.get("result") is not None else f"error: {o.get('error')}", limit
        )
        for o in decision.get("observations") or []
    )


def timeline_report(
    console: Console, info: Mapping[str, Any], rollout: int, decisions: Sequence[Mapping[str, Any]]
) -> None:
    """One timeline: what was run, how its rollouts ended, and rollout ``rollout`` decision
    by decision (``decisions``: the ``decisions`` of ``timeline.schema.json``)."""
    out = console
    out.print(
        untrusted_text(f"timeline {info['name']} of trace {info['trace_id']}", "bold"),
    )
    out.print(untrusted_text(f"plan: {info.get('plan_text')}"), highlight=False)
    out.print(
        untrusted_text(
            f"seed {info.get('seed')}; {len(info.get('rollouts') or [])} rollouts; made "
            f"{info.get('created')} by otelcar {info.get('otelcar_version')}"
        ),
        highlight=False,
    )
    if info.get("outcome"):
        recorded = info.get("recorded_failed")
        out.print(
            untrusted_text(
                f"outcome: {info['outcome']}: {_rate(int(info['failed']), int(info['judged']))}"
                + (
                    ""
                    if recorded is None
                    else f" (the recorded run {'failed' if recorded else 'passed'})"
                )
            ),
            highlight=False,
        )
    policies = info.get("policies") or {}
    if policies:
        out.print(
            untrusted_text("policies: " + "; ".join(f"{k}: {v}" for k, v in policies.items())),
            highlight=False,
        )
    if info.get("note"):
        out.print(untrusted_text(f"note: {info['note']}"), highlight=False)
    record = next((r for r in info.get("rollouts") or [] if r["rollout"] == rollout), {})
    table = Table(
        title=untrusted_text(f"rollout {rollout}: {record.get('status', '?')}"),
        header_style="bold",
        expand=True,
    )
    for column in ("#", "step", "name", "origin", "ctx", "action", "tool results"):
        table.add_column(column, justify="right" if column in ("#", "step", "ctx") else "left")
    for d in decisions:
        table.add_row(
            str(d["index"]),
            "" if d.get("recorded_step") is None else str(d["recorded_step"]),
            untrusted_text(d.get("name") or ""),
            untrusted_text(
                d.get("origin") or "", "cyan" if d.get("origin") != "recorded" else "dim"
            ),
            "" if d.get("context_messages") is None else str(d["context_messages"]),
            untrusted_text(clip(_action_text(d), 90)),
            untrusted_text(_observations(d)),
        )
    out.print(table)
    line = Text("outcome: ")
    line.append_text(_outcome(record.get("failed")))
    if record.get("error"):
        line.append(f" — {clip(record['error'], 200)}", style="yellow")
    out.print(line)


def decision_details(decision: Mapping[str, Any]) -> Panel:
    """One decision in full: every context message, the action, each tool result."""
    lines: list[Text] = []
    for message in decision.get("context") or []:
        lines.append(untrusted_text(_message_line(message, limit=2000), "dim"))
    action = decision.get("action")
    if action is not None:
        lines.append(untrusted_text(_message_line(action, limit=2000), "bold"))
    for o in decision.get("observations") or []:
        result = o.get("result") if o.get("result") is not None else f"error: {o.get('error')}"
        lines.append(
            untrusted_text(f"tool {o.get('name')} [{o.get('origin')}] → {result}", "green")
        )
    title = (
        f"decision {decision['index']} · step {decision.get('recorded_step')} · "
        f"{decision.get('origin')}"
    )
    return Panel(Group(*lines), title=untrusted_text(title), title_align="left")


def _message_line(message: Mapping[str, Any], limit: int = 110) -> str:
    calls = message.get("tool_calls") or []
    if calls:
        body = ", ".join(
            f"{c.get('name')}({json.dumps(c.get('arguments'), ensure_ascii=False)})" for c in calls
        )
    else:
        body = message.get("content") or ""
    return f"{message.get('role')}: {clip(body, limit)}"


def diff_report(console: Console, doc: Mapping[str, Any]) -> None:
    """The diff of timeline A against B: the headline, where every rollout parted, then the
    detailed rollouts from the decision where they part, and how each ended."""
    out = console
    detail = doc["detail"]
    a, b = detail["a"], detail["b"]
    out.print(
        untrusted_text(
            f"A: {a['label']} ({doc.get('a_plan')})   B: {b['label']} ({doc.get('b_plan')})"
        ),
        highlight=False,
    )
    out.print(untrusted_text(doc["headline"], "bold"), highlight=False)
    rollouts = doc.get("rollouts") or []
    if len(rollouts) > 1:
        counts = Counter(r["parted_at"] for r in rollouts)
        parts = [
            f"at decision {k} in {n}"
            for k, n in sorted(
                ((k, n) for k, n in counts.items() if k is not None), key=lambda kv: kv[0]
            )
        ]
        if counts.get(None):
            parts.append(f"never in {counts[None]}")
        out.print(
            untrusted_text(
                f"over the {len(rollouts)} rollouts of {doc['a']}, A parted from B "
                + ", ".join(parts)
                + f"; {_rate(int(doc['a_failed']), int(doc['a_judged']))}"
            ),
            highlight=False,
        )
    shared = detail.get("shared_decisions", 0)
    if shared:
        out.print(
            untrusted_text(
                (f"decisions 0–{shared - 1}" if shared > 1 else "decision 0")
                + ": the same context and action in A and B"
            ),
            style="dim",
            highlight=False,
        )
    table = Table(header_style="bold", expand=True)
    for column in ("#", "step A/B", "parts", "context", "A", "B"):
        table.add_column(column, justify="right" if column == "#" else "left")
    for s in detail.get("steps") or []:
        da, db = s.get("a"), s.get("b")
        steps = "/".join(
            "–" if d is None or d.get("recorded_step") is None else str(d["recorded_step"])
            for d in (da, db)
        )
        context = s["context"]
        ctx_text = Text(
            context["status"], style="yellow" if context["status"] == "differs" else "dim"
        )
        if context["status"] == "differs":
            ctx_text.append(f" after message {context['shared']}")
            for side, messages in (("A", context["a_only"]), ("B", context["b_only"])):
                if messages:
                    ctx_text.append(f"\n{side}+{len(messages)}: ")
                    ctx_text.append(visible(_message_line(messages[0])))
        cells = []
        for d in (da, db):
            cell = Text(visible(clip(_action_text(d), 80)))
            if d is not None and d.get("origin") not in (None, "recorded"):
                cell.append(f" [{visible(str(d['origin']))}]", style="cyan")
            results = _observations(d, 50)
            if results:
                cell.append("\n" + visible(results), style="dim")
            cells.append(cell)
        out_parts = s.get("parts")
        table.add_row(
            str(s["index"]),
            steps,
            Text(out_parts or "same", style="bold yellow" if out_parts else "dim"),
            ctx_text,
            *cells,
        )
    if detail.get("steps"):
        out.print(table)
    line = Text("outcome: A ")
    line.append_text(_outcome(a.get("failed")))
    line.append(f" ({a.get('status')}), B ")
    line.append_text(_outcome(b.get("failed")))
    line.append(f" ({b.get('status')})")
    out.print(line)
