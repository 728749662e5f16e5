"""The step timeline and the alternative timelines of an HTML report."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from otelcar.report.data import arguments_text, full_context
from otelcar.report.markup import Safe, clip_label, el, highlight, join
from otelcar.report.page import toolbar
from otelcar.report.svg import interval, number
from otelcar.report.view import ReportView, duration, pretty, tokens


def _message(message: Mapping[str, Any], index: int | None, r: ReportView, css: str = "") -> Safe:
    role = message.get("role") or "?"
    head = f"[{index}] {role}" if index is not None else role
    if message.get("name"):
        head += f" ({message['name']})"
    if message.get("tool_call_id"):
        head += f" · answers {message['tool_call_id']}"
    parts: list[Safe] = [el("div", head, class_="role")]
    content = message.get("content")
    if content is not None:
        parts.append(el("pre", highlight(str(content), r.causal_texts)))
    for call in message.get("tool_calls") or []:
        args = call.get("arguments")
        inline = arguments_text(args)
        shown = inline if len(inline) <= 100 and "\n" not in inline else pretty(args)
        parts.append(el("pre", highlight(f"call {call.get('name')}({shown})", r.causal_texts)))
    if message.get("truncated"):
        parts.append(el("div", "(cut for the report)", class_="muted"))
    return el("div", *parts, class_=f"msg {role if role.isidentifier() else ''} {css}".strip())


def _step_body(item: Mapping[str, Any], r: ReportView) -> Safe:
    parts: list[Safe] = []
    facts = []
    for key, label in (
        ("name", "name"),
        ("agent", "agent"),
        ("model", "model"),
        ("finish_reason", "finish reason"),
        ("status", "status"),
        ("error", "error"),
    ):
        if item.get(key):
            facts.append(f"{label}: {item[key]}")
    if facts:
        parts.append(el("div", " · ".join(facts), class_="muted"))
    if item["kind"] == "llm":
        context = item.get("context") or {}
        parts.append(el("h3", "Context"))
        if item["step"] == r.why_step and r.timeline is not None:
            messages = full_context(r.timeline, item["step"])
            parts += [_message(m, i, r) for i, m in enumerate(messages)]
        else:
            shared = context.get("shared", 0)
            before = context.get("same_as_step")
            if before is not None and shared:
                parts.append(
                    el(
                        "p",
                        f"messages 0–{shared - 1}: the whole context of ",
                        el("a", f"step {before}", href=f"#step-{before}"),
                        ", then:",
                        class_="shared",
                    )
                )
            messages = context.get("messages") or []
            parts += [_message(m, shared + i, r) for i, m in enumerate(messages)]
            if not messages and not shared:
                parts.append(el("p", "(no context recorded)", class_="muted"))
        parts.append(el("h3", "Action"))
        output = item.get("output")
        parts.append(
            _message(output, None, r, "output")
            if output
            else el("p", "(no action recorded)", class_="muted")
        )
    elif item["kind"] == "tool":
        tool = item.get("tool") or {}
        origin = (
            f" (requested by step {tool['call_step']})" if tool.get("call_step") is not None else ""
        )
        parts.append(el("h3", f"Call {tool.get('name') or '?'}{origin}"))
        parts.append(el("pre", pretty(tool.get("arguments"))))
        parts.append(el("h3", "Result"))
        result = tool.get("result")
        parts.append(
            el("pre", highlight(result, r.causal_texts))
            if result is not None
            else el("p", "(not recorded)", class_="muted")
        )
    for issue in item.get("issues") or []:
        parts.append(el("div", f"issue: {issue}", class_="notes"))
    return el("div", *parts, class_="stepbody")


def timeline_section_html(r: ReportView) -> Safe:
    if r.timeline is None:
        return el(
            "section",
            el("h2", "Step timeline"),
            el(
                "p",
                "This result carries no timeline. Write it with `otelcar attribute --json` "
                "(or pass the steps table to the report) to see every step here.",
                class_="muted",
            ),
            id="timeline",
        )
    t0 = r.timeline.get("start_ns")
    t1 = r.timeline.get("end_ns")
    span = (t1 - t0) if t0 is not None and t1 is not None and t1 > t0 else None
    items: list[Safe] = []
    for item in r.timeline.get("steps", []):
        step = item["step"]
        gantt: Safe = Safe("")
        if span and item.get("start_ns") is not None and item.get("end_ns") is not None:
            left = (item["start_ns"] - t0) / span * 100
            width = max(0.6, (item["end_ns"] - item["start_ns"]) / span * 100)
            gantt = el(
                "div",
                el("span", style=f"left:{left:.2f}%;width:{min(width, 100 - left):.2f}%"),
                class_="gantt",
            )
        effect = r.effects.get(step)
        chip: Safe = Safe("")
        if effect is not None:
            ci = effect.get("delta_ci") or [None, None]
            chip = el(
                "div",
                f"Δ {number(effect.get('delta'), signed=True)} "
                f"{interval(ci[0], ci[1], signed=True)}"
                + (" ◀ culprit" if step == r.culprit else ""),
                class_=f"effect {r.css(step)}".strip(),
            )
        kind = item.get("kind") or "other"
        summary = el(
            "summary",
            el("span", str(step), class_="num"),
            el("span", kind, class_=f"badge {kind}"),
            el(
                "span",
                el("b", clip_label(item.get("name"), 40), title=item.get("name")),
                gantt,
            ),
            el(
                "span",
                clip_label(item.get("agent"), 24),
                class_="muted",
                title=item.get("agent"),
            ),
            el("span", duration(item.get("duration_ms")), class_="num"),
            el("span", tokens(item.get("tokens")), class_="num"),
            el(
                "span",
                el("div", item.get("gist") or "", class_="gist"),
                chip,
            ),
        )
        css = ["step", f"kind-{kind}"]
        if step == r.culprit:
            css.append("culprit")
        if step == r.why_step:
            css.append("why")
        items.append(
            el(
                "details",
                summary,
                _step_body(item, r),
                id=f"step-{step}",
                class_=" ".join(css),
                open=step in (r.culprit, r.why_step),
            )
        )
    steps = r.timeline.get("steps", [])
    llm = sum(s.get("kind") == "llm" for s in steps)
    tool = sum(s.get("kind") == "tool" for s in steps)
    agents = sorted({s.get("agent") for s in steps if s.get("agent")})
    return el(
        "section",
        el("h2", "Step timeline"),
        el(
            "p",
            f"{len(steps)} steps ({llm} LLM, {tool} tool"
            + (f"; agents: {', '.join(agents)}" if agents else "")
            + "). Click a step to see its context and action; the bar under each name shows "
            "when it ran within the trace.",
            class_="explain",
        ),
        toolbar(),
        join(items),
        id="timeline",
    )


def _plan_title(key: int | None, r: ReportView) -> str:
    if key is None:
        return "Every step held (the factual replay)"
    if key == r.culprit:
        return f"Step {key} re-decided (the steps before it held): what the agent did instead"
    return f"Steps from {key} on re-decided (the steps before it held)"


def _origin_kind(origin: str) -> str:
    """``recorded``, ``policy`` or ``cache`` (served by the request cache), else the origin."""
    return origin.split(":", 1)[0] if origin else ""


def _signature(alt: Mapping[str, Any]) -> tuple[Any, ...]:
    return (
        alt.get("failed"),
        alt.get("status"),
        tuple(
            (d.get("step"), _origin_kind(d.get("origin") or ""), d.get("gist"))
            for d in alt.get("decisions") or []
        ),
    )


def _alternative_card(alts: list[Mapping[str, Any]]) -> Safe:
    """One card for rollouts that took the same path (their indexes listed together)."""
    alt = alts[0]
    failed = alt.get("failed")
    badge = (
        el("span", "failed", class_="badge failed")
        if failed
        else el("span", "passed", class_="badge passed")
        if failed is False
        else el("span", alt.get("status", "?"), class_="badge")
    )
    lines = []
    for d in alt.get("decisions") or []:
        origin = d.get("origin") or ""
        obs = "; ".join(
            f"{o.get('tool')} → "
            + str(o.get("result") if o.get("result") is not None else o.get("error"))
            for o in d.get("observations") or []
        )
        kept = origin == "recorded"
        lines.append(
            el(
                "li",
                el("span", f"step {d.get('step')}" if d.get("step") is not None else "new"),
                " ",
                el(
                    "span",
                    "recorded" if kept else "decided again",
                    class_="badge held" if kept else "badge",
                    title=origin,
                ),
                " ",
                d.get("gist") or "",
                el("div", obs[:300], class_="muted") if obs else "",
                class_=None if kept else "changed",
            )
        )
    indexes = ", ".join(str(a.get("rollout")) for a in alts)
    name = f"rollout {indexes}" if len(alts) == 1 else f"rollouts {indexes} (the same path)"
    error = el("div", alt["error"], class_="notes") if alt.get("error") else ""
    return el("div", el("div", el("b", name), " ", badge), el("ol", *lines), error, class_="alt")


def alternatives_section_html(r: ReportView) -> Safe:
    alts = (r.attribution or {}).get("alternatives")
    if not alts:
        return Safe("")
    groups: dict[Any, list[Mapping[str, Any]]] = {}
    for alt in alts:
        groups.setdefault(alt.get("resample_from"), []).append(alt)
    blocks: list[Safe] = []
    for key, rollouts in groups.items():
        paths: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
        for alt in rollouts:
            paths.setdefault(_signature(alt), []).append(alt)
        cards = [_alternative_card(same) for same in paths.values()]
        blocks.append(el("div", el("h3", _plan_title(key, r)), *cards))
    return el(
        "section",
        el("h2", "Alternative timelines"),
        el(
            "p",
            "A few of the rollouts behind the curve: the same run replayed with some steps "
            "decided again by the policy. 'recorded' steps kept their recorded action; the "
            "highlighted ones were decided anew.",
            class_="explain",
        ),
        *blocks,
        id="alternatives",
    )
