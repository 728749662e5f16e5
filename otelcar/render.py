"""Terminal rendering (rich) of traces, steps and import reports. Presentation only."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import Any

import polars as pl
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from otelcar.conventions import UNREAD
from otelcar.cost import policy_calls_text
from otelcar.messages import decode_arguments
from otelcar.safe_text import visible

KIND_STYLE = {"llm": "bold cyan", "tool": "bold green", "agent": "bold magenta", "other": "dim"}


def untrusted_text(text: Any, style: str = "") -> Text:
    """Trace text as a rich ``Text``: controls and invisible characters escaped
    (:func:`otelcar.safe_text.visible`), never parsed as rich markup."""
    return Text(visible("" if text is None else str(text)), style=style)


def clip(text: object, limit: int) -> str:
    """``text`` on one line (controls made visible, whitespace runs collapsed), cut to
    ``limit`` characters with an ellipsis; ``None`` is empty."""
    if text is None:
        return ""
    flat = " ".join(visible(str(text)).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _time(ns: int | None) -> str:
    if ns is None:
        return "?"
    return dt.datetime.fromtimestamp(ns / 1e9, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _duration(start: int | None, end: int | None) -> str:
    if start is None or end is None:
        return "?"
    ms = (end - start) / 1e6
    return f"{ms:.0f} ms" if ms < 10_000 else f"{ms / 1000:.1f} s"


def _args(text: str | None) -> str:
    value = decode_arguments(text)
    if value is None:
        return "…"
    if isinstance(value, dict):
        return ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in value.items())
    return value


def _calls(message: dict[str, Any] | None) -> str:
    calls = (message or {}).get("tool_calls") or []
    return ", ".join(f"{c['name']}({_args(c['arguments'])})" for c in calls)


def _missing_content(row: dict[str, Any]) -> str:
    """Why a step shows no content: its span carried some no mapper read, or none."""
    unread = any(str(issue).startswith(UNREAD) for issue in row.get("issues") or ())
    return "[content unread: see issues]" if unread else "[content not captured]"


def step_summary(row: dict[str, Any], limit: int = 90) -> str:
    """A one-line gist of a step: what went in and what came out."""
    if row["kind"] == "llm":
        if not row["content_captured"]:
            calls = _calls(row["output"])
            return _missing_content(row) + (f" → {calls}" if calls else "")
        output = row["output"]
        if output and output.get("tool_calls"):
            return clip("→ " + _calls(output), limit)
        return clip("→ " + ((output or {}).get("content") or ""), limit)
    if row["kind"] == "tool":
        if not row["content_captured"]:
            return _missing_content(row)
        result = row["tool_result"]
        return clip(f"({_args(row['tool_args'])}) → {result if result is not None else '…'}", limit)
    return ""


#: How ``otelcar traces`` shows a recorded run's outcome.
OUTCOME_STYLE = {"fail": "bold red", "pass": "green", "judge": "dim", "error": "yellow"}


def traces_table(traces: pl.DataFrame, *, outcomes: Mapping[str, str] | None = None) -> Table:
    """The trace listing; ``outcomes`` (trace id → ``fail`` | ``pass`` | ``judge`` |
    ``error``) adds an outcome column (the configured outcome on each recorded run)."""
    table = Table(title=f"{traces.height} traces", header_style="bold")
    columns = ["trace id", "service", "start (UTC)", "dur", "steps", "llm", "tool", "errors"]
    columns += ["dialect", "content", "issues"] + (["outcome"] if outcomes is not None else [])
    for column in columns:
        table.add_column(column, no_wrap=column in ("trace id", "start (UTC)"))
    for row in traces.iter_rows(named=True):
        extra = []
        if outcomes is not None:
            verdict = outcomes.get(row["trace_id"], "")
            extra.append(Text(verdict, style=OUTCOME_STYLE.get(verdict, "")))
        table.add_row(
            untrusted_text(row["trace_id"]),
            untrusted_text(row["service"] or ""),
            _time(row["start_ns"]),
            _duration(row["start_ns"], row["end_ns"]),
            str(row["n_steps"]),
            str(row["n_llm"]),
            str(row["n_tool"]),
            Text(str(row["n_errors"]), style="red" if row["n_errors"] else ""),
            untrusted_text(", ".join(row["dialects"] or [])),
            untrusted_text(row["content_captured"]),
            str(row["n_issues"]) if row["n_issues"] else "",
            *extra,
        )
    return table


def steps_table(summary: dict[str, Any], steps: pl.DataFrame) -> Table:
    title = (
        f"trace {summary['trace_id']} · {summary['service'] or '?'} · "
        f"{_time(summary['start_ns'])} UTC · {summary['n_steps']} steps"
    )
    table = Table(title=untrusted_text(title), header_style="bold", expand=True)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("kind", no_wrap=True)
    table.add_column("name", no_wrap=True)
    table.add_column("agent", no_wrap=True)
    table.add_column("dur", justify="right", no_wrap=True)
    table.add_column("tok in/out", justify="right", no_wrap=True)
    table.add_column("what happened", ratio=1)
    for row in steps.iter_rows(named=True):
        usage = row["usage"] or {}
        tokens = ""
        if usage.get("input_tokens") is not None or usage.get("output_tokens") is not None:
            tokens = f"{usage.get('input_tokens') or 0}/{usage.get('output_tokens') or 0}"
        name = row["name"] or ""
        if row["synthesized"]:
            name += " (synth)"
        gist = untrusted_text(step_summary(row))
        if row["status"] == "ERROR":
            gist = untrusted_text(f"ERROR {row['error'] or ''} ", style="red") + gist
        if row["issues"]:
            gist.append(f"  [{len(row['issues'])} issue(s)]", style="yellow")
        table.add_row(
            str(row["step"]),
            untrusted_text(row["kind"], style=KIND_STYLE.get(row["kind"], "")),
            untrusted_text(name),
            untrusted_text(row["agent_name"] or ""),
            _duration(row["start_ns"], row["end_ns"]),
            tokens,
            gist,
        )
    return table


def step_details(row: dict[str, Any]) -> Panel:
    """Every message, call, result and issue of one step."""
    parts: list[Any] = []
    if row["kind"] == "llm":
        for index, message in enumerate(row["input_messages"] or []):
            head = f"[{index}] {message['role']}"
            if message.get("tool_call_id"):
                head += f" (answers {message['tool_call_id']})"
            parts.append(untrusted_text(head, style="bold"))
            if message.get("content") is not None:
                parts.append(untrusted_text(message["content"]))
            if message.get("tool_calls"):
                parts.append(untrusted_text("calls " + _calls(message), style="green"))
        output = row["output"]
        parts.append(untrusted_text(f"→ output ({row['finish_reason'] or '?'})", style="bold cyan"))
        if output:
            if output.get("content") is not None:
                parts.append(untrusted_text(output["content"]))
            if output.get("tool_calls"):
                parts.append(untrusted_text("calls " + _calls(output), style="green"))
    elif row["kind"] == "tool":
        parts.append(
            untrusted_text(
                f"call id {row['tool_call_id'] or '?'}"
                + (" (linked by name and order)" if row["link_inferred"] else "")
                + (
                    f", requested by step {row['call_step']}"
                    if row["call_step"] is not None
                    else ""
                )
            )
        )
        parts.append(untrusted_text("arguments " + _args(row["tool_args"]), style="green"))
        parts.append(
            untrusted_text(
                "result "
                + (row["tool_result"] if row["tool_result"] is not None else "(not recorded)")
            )
        )
    for issue in row["issues"] or []:
        parts.append(untrusted_text("issue: " + issue, style="yellow"))
    title = f"step {row['step']} · {row['kind']} · {row['name']}"
    return Panel(
        Group(*parts) if parts else untrusted_text("(nothing recorded)"),
        title=untrusted_text(title),
        title_align="left",
    )


def fidelity_table(doc: Mapping[str, Any]) -> Table:
    """The per-step verdicts of a fidelity check, from its document (``otelcar replay
    --json``: :func:`otelcar.report.prose.document` of the check)."""
    verdict_style = {"ok": "green", "held-only": "yellow", "unreproducible": "red"}
    title = (
        f"replay of {doc['trace_id']}: "
        + ("reproducible" if doc["reproducible"] else "NOT reproducible")
        + ("" if doc["propagates"] or not doc["reproducible"] else " (some steps held-only)")
    )
    table = Table(title=untrusted_text(title), header_style="bold")
    table.add_column("step", justify="right")
    table.add_column("agent")
    table.add_column("verdict")
    table.add_column("why")
    table.add_column("a re-decision offers")
    requests = {d["step"]: d for d in (doc.get("requests") or {}).get("decisions", [])}
    for step in doc["steps"]:
        table.add_row(
            str(step["step"]),
            untrusted_text(step["agent"] or ""),
            Text(step["verdict"], style=verdict_style.get(step["verdict"], "")),
            untrusted_text("; ".join(step["reasons"])),
            _offered(requests.get(step["step"])),
        )
    caption = [
        f"replay ended: {doc['replay_status']}"
        + (f" ({doc['replay_error']})" if doc["replay_error"] else "")
    ]
    structure = (doc.get("requests") or {}).get("structure")
    if structure:
        caption.append(
            f"structure: {structure['value']} ({structure['source']}: {structure['basis']})"
        )
    caption.extend(doc["notes"])
    if doc["outcome"] is not None:
        caption.append(
            f"outcome '{doc['outcome']}': recorded failed={doc['recorded_failed']}, "
            f"replayed failed={doc['replayed_failed']}"
        )
    table.caption = untrusted_text("\n".join(caption))
    return table


def _offered(request: dict[str, Any] | None) -> Text:
    """A decision's re-decided request in a cell: its tools and tool choice, each with where
    it comes from (inferred parts in yellow)."""
    if request is None:
        return Text("")
    tools = request["tools"]
    names = ", ".join(str(n) for n in tools["names"]) or "no tools"
    text = Text()
    text.append(untrusted_text(names))
    text.append(f" ({tools['source']})", style="yellow" if tools["source"] == "inferred" else "")
    choice = request["tool_choice"]
    if tools["names"]:
        shown = choice["value"] if choice["value"] is not None else "default"
        if isinstance(shown, dict):
            shown = (shown.get("function") or {}).get("name", "a tool")
        text.append(f"; choice {shown}")
        text.append(
            f" ({choice['source']})", style="yellow" if choice["source"] == "inferred" else ""
        )
    return text


def live_check_table(doc: Mapping[str, Any]) -> Table:
    """The live check (its document, :func:`otelcar.report.prose.document` of a
    :class:`otelcar.live.check.LiveCheck`): per recorded decision, whether the agent made its
    request again, what it offered, and how it differs."""
    table = Table(title=untrusted_text(doc["headline"]), header_style="bold")
    for name in ("step", "request", "tools the agent offered", "tool choice", "differs"):
        table.add_column(name)
    for r in doc["requests"]:
        table.add_row(
            str(r["step"]),
            Text("made", style="green") if r["made"] else Text("not made", style="red"),
            untrusted_text(", ".join(r["tools"] or []) if r["made"] else ""),
            untrusted_text(r["tool_choice"] or ("default" if r["tools"] else "")),
            untrusted_text("; ".join(r["differs"]), style="red" if r["differs"] else ""),
        )
    table.caption = untrusted_text(
        f"the agent made {doc['made']} request(s); its run ended: {doc['status']}"
        + (f" ({doc['error']})" if doc["error"] else "")
    )
    return table


def policy_check_table(doc: Mapping[str, Any]) -> Table:
    """The per-decision reproduction rates of a policy check (its document,
    :func:`otelcar.report.prose.document` of a
    :class:`~otelcar.attribution.faithfulness.PolicyCheck`)."""
    table = Table(
        title=untrusted_text(f"policy check of {doc['trace_id']} (same: {doc['same']})"),
        header_style="bold",
    )
    for name, justify in (
        ("step", "right"), ("agent", "left"), ("T", "right"), ("reproduced", "right"),
        ("rate [interval]", "left"), ("recorded", "left"), ("instead", "left"),
    ):  # fmt: skip
        table.add_column(name, justify=justify)
    for d in doc["decisions"]:
        if not d["n"]:
            rate = Text(d.get("note") or "not checked", style="dim")
        else:
            low, high = d["interval"]
            rate = Text(
                f"{d['rate']:.0%} [{low:.0%}, {high:.0%}]"
                + (" unfaithful" if d["unfaithful"] else "")
                + (
                    f" (residual nondeterminism {d['residual_nondeterminism']:.0%})"
                    if d.get("residual_nondeterminism")
                    else ""
                ),
                style="bold red" if d["unfaithful"] else "",
            )
        temperature = d.get("temperature")
        table.add_row(
            str(d["step"]),
            untrusted_text(d.get("agent") or ""),
            "" if temperature is None else f"{temperature:g}",
            f"{d['reproduced']}/{d['n']}",
            rate,
            untrusted_text(d["recorded"]),
            untrusted_text("; ".join(f"{i['action']} ×{i['count']}" for i in d["instead"])),
        )
    table.caption = untrusted_text(doc["headline"])
    return table


def attribution_report(console: Console, doc: Mapping[str, Any]) -> None:
    """The verdict and a compact per-step table of an attribution.

    ``doc``: the attribution's document (:func:`otelcar.report.prose.document` of an
    :class:`~otelcar.attribution.AttributionResult`, or as read back from ``--json``); with a
    ``timeline`` section the table shows each step's action.
    """
    style = {"culprit": "bold red", "locked-in": "bold yellow", "undecided": "bold"}
    console.print(untrusted_text(doc["headline"], style=style.get(doc["verdict"], "")))
    gists = {s["step"]: s.get("gist") or "" for s in (doc.get("timeline") or {}).get("steps", [])}
    table = Table(
        header_style="bold",
        title=untrusted_text(
            f"commitment curve of {doc['trace_id']} "
            f"({doc['mode']}, {doc['confidence']:.1%} intervals, outcome: {doc['outcome']})"
        ),
    )
    columns = ["step", "agent", "name", "q (fail | held ≤ step)", "Δ step effect", "p (Holm)", "n"]
    if gists:
        columns.insert(3, "recorded action")
    for column in columns:
        table.add_column(column, justify="right" if column in ("step", "n") else "left")

    def row(*cells: Any, action: str = "") -> None:
        items = list(cells)
        if gists:
            items.insert(3, untrusted_text(clip(action, 60)))
        table.add_row(*(untrusted_text(item) if isinstance(item, str) else item for item in items))

    b = doc["baseline"]
    missing = Text("not measured", style="dim")  # no judged rollout: q is unknown, not a value
    row(
        "start",
        "",
        "(everything re-decided)",
        f"{b['q']:.2f} [{b['q_ci'][0]:.2f}, {b['q_ci'][1]:.2f}]" if b["rollouts"] else missing,
        "",
        "",
        str(b["rollouts"]),
    )
    ties = set(doc.get("ties") or [])
    measured = b["rollouts"] > 0
    for e in doc["steps"]:
        culprit = e["step"] == doc.get("culprit")
        mark = " ◀ culprit" if culprit else (" (tie)" if e["step"] in ties else "")
        low, high = e["delta_ci"]
        known = e["rollouts"] > 0 and measured  # Δ needs this plan and the one before
        row(
            str(e["step"]),
            e.get("agent") or "",
            e.get("name") or "",
            f"{e['q']:.2f} [{e['q_ci'][0]:.2f}, {e['q_ci'][1]:.2f}]" if e["rollouts"] else missing,
            Text(
                f"{e['delta']:+.2f} [{low:+.2f}, {high:+.2f}]{mark}",
                style="bold red" if culprit else "",
            )
            if known
            else missing,
            f"{e['p_adjusted']:.2g}" + (" *" if e["significant"] else "") if known else "",
            str(e["rollouts"]),
            action=gists.get(e["step"], ""),
        )
        measured = e["rollouts"] > 0
    console.print(table)
    if doc["verdict"] != "undecided" and doc.get("point_of_no_return") is not None:
        console.print(f"point of no return: step {doc['point_of_no_return']}", highlight=False)
    cost = doc.get("cost") or {}
    console.print(
        f"cost: {policy_calls_text(cost)} ({cost.get('cache_hits', 0)} "
        f"cache hits), {cost.get('input_tokens', 0) + cost.get('output_tokens', 0)} "
        f"tokens, {cost.get('rollouts', 0)} rollouts, {cost.get('wall_s', 0)} s; "
        f"looks at {doc.get('looks')} rollouts per plan",
        highlight=False,
    )
    for check in doc.get("refutations") or []:
        low, high = check["delta_ci"]
        console.print(
            f"refutation — {check['name']}: {'passed' if check['passed'] else 'FAILED'} "
            f"(Δ {check['delta']:+.2f} [{low:+.2f}, {high:+.2f}], p={check['p_value']:.2g}, "
            f"{check['pairs']} pairs; {check.get('description', '')})",
            style="" if check["passed"] else "bold red",
            highlight=False,
        )
    shapley = doc.get("shapley")
    if shapley:
        console.print(
            "Shapley: "
            + ", ".join(
                f"step {v['step']} φ={v['phi']:+.2f} [{v['ci'][0]:+.2f}, {v['ci'][1]:+.2f}]"
                for v in shapley["values"]
            ),
            highlight=False,
        )
    for note in doc.get("notes") or []:
        console.print(untrusted_text(f"note: {note}", style="yellow"))
