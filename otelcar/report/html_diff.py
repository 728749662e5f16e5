"""The HTML page of ``otelcar diff``: where timeline A and run B part, drawn from the diff's
JSON (``schemas/diff.schema.json``) in the shared self-contained page shell."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from otelcar.report.markup import Safe, clip_label, el, join
from otelcar.report.page import page, toolbar


def _outcome(failed: Any) -> Safe:
    if failed is None:
        return el("span", "not judged", class_="badge")
    return el(
        "span",
        "failed" if failed else "passed",
        class_="badge " + ("failed" if failed else "passed"),
    )


def _message(message: Mapping[str, Any], css: str = "") -> Safe:
    role = str(message.get("role") or "")
    calls = message.get("tool_calls") or []
    body: list[Any] = []
    if message.get("content"):
        body.append(el("pre", message["content"]))
    for call in calls:
        body.append(
            el(
                "pre",
                f"→ {call.get('name')}({json.dumps(call.get('arguments'), ensure_ascii=False)})",
            )
        )
    return el("div", el("div", role, class_="role"), *body, class_=f"msg {role} {css}".strip())


def _side(decision: Mapping[str, Any] | None, label: str, only: list[Any]) -> Safe:
    if decision is None:
        return el("div", el("h3", label), el("p", "this run has ended here", class_="muted"))
    parts: list[Any] = [
        el("h3", f"{label}: step {decision.get('recorded_step')} · {decision.get('origin')}"),
    ]
    if only:
        parts.append(el("p", f"{len(only)} context message(s) only here:", class_="explain"))
        parts.extend(_message(m) for m in only)
    if decision.get("action") is not None:
        parts.append(el("p", "action:", class_="explain"))
        parts.append(_message(decision["action"], "output"))
    for o in decision.get("observations") or []:
        text = o.get("result") if o.get("result") is not None else f"error: {o.get('error')}"
        parts.append(
            el(
                "div",
                el("div", f"tool {o.get('name')} ({o.get('origin')})", class_="role"),
                el("pre", clip_label(text, 4000)),
                class_="msg tool",
            )
        )
    return el("div", *parts)


def _step(step: Mapping[str, Any], labels: tuple[str, str], first: int | None) -> Safe:
    a, b = step.get("a"), step.get("b")
    context = step["context"]
    parts = step.get("parts")
    summary = el(
        "summary",
        el("span", str(step["index"]), class_="num"),
        el("span", parts or "same", class_="badge " + ("failed" if parts else "passed")),
        el("span", (a or b or {}).get("name") or "", class_="gist"),
        el("span", f"ctx {context['status']}", class_="gist"),
        el("span", "", class_="gist"),
        el("span", "", class_="gist"),
        el(
            "span",
            f"A: {(a or {}).get('action_text', '(ended)')} · "
            f"B: {(b or {}).get('action_text', '(ended)')}",
            class_="gist",
        ),
    )
    explain = (
        f"The contexts agree on their first {context['shared']} messages, then differ."
        if context["status"] == "differs"
        else f"Contexts: {context['status']}."
    )
    body = el(
        "div",
        el("p", explain, class_="explain"),
        el(
            "div",
            _side(a, labels[0], context.get("a_only") or []),
            _side(b, labels[1], context.get("b_only") or []),
            class_="facts",
        ),
        class_="stepbody",
    )
    css = "step culprit" if step["index"] == first else "step"
    return el("details", summary, body, class_=css, id=f"d{step['index']}")


def render_diff_html(doc: Mapping[str, Any], *, back: tuple[str, str] | None = None) -> str:
    """The whole page of one diff document; ``back``: ``(label, href)`` of a link in the
    header (the console's way back to the trace)."""
    detail = doc["detail"]
    a, b = detail["a"], detail["b"]
    header = el(
        "header",
        el("b", "otelcar diff"),
        el("span", f"trace {doc['trace_id']}"),
        el("span", f"A: {a['label']} — {doc.get('a_plan')}"),
        el("span", f"B: {b['label']} — {doc.get('b_plan')}"),
        el("a", back[0], href=back[1], class_="back") if back else "",
        class_="top",
    )
    verdict = el(
        "section",
        el("h1", "Where the runs part"),
        el("p", doc["headline"], class_="headline"),
        el(
            "dl",
            el(
                "div",
                el("dt", "A"),
                el("dd", a["label"], " ", _outcome(a.get("failed"))),
                class_="fact",
            ),
            el(
                "div",
                el("dt", "B"),
                el("dd", b["label"], " ", _outcome(b.get("failed"))),
                class_="fact",
            ),
            el(
                "div",
                el("dt", "parted at decision"),
                el("dd", "never" if detail.get("parted_at") is None else str(detail["parted_at"])),
                class_="fact",
            ),
            el(
                "div",
                el("dt", "shared decisions"),
                el("dd", str(detail.get("shared_decisions"))),
                class_="fact",
            ),
            class_="facts",
        ),
        class_="verdict" + (" culprit" if detail.get("parted_at") is not None else ""),
    )
    rollouts = doc.get("rollouts") or []
    counts = Counter(r["parted_at"] for r in rollouts)
    summary_rows = [
        el(
            "tr",
            el("td", "never" if k is None else str(k), class_="num"),
            el("td", str(n), class_="num"),
            el(
                "td",
                str(sum(bool(r["failed"]) for r in rollouts if r["parted_at"] == k)),
                class_="num",
            ),
        )
        for k, n in sorted(counts.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))
    ]
    rollouts_table = el(
        "table",
        el(
            "thead",
            el(
                "tr",
                el("th", "parted at decision"),
                el("th", "rollouts"),
                el("th", "of them failed"),
            ),
        ),
        el("tbody", *summary_rows),
        class_="data",
        id="rollouts",
    )
    labels = (f"A ({a['label']})", f"B ({b['label']})")
    first = detail.get("parted_at")
    steps = [_step(s, labels, first) for s in detail.get("steps") or []]
    body = join(
        [
            verdict,
            el("h2", f"Every rollout of {doc['a']} against B"),
            el(
                "p",
                f"A failed in {doc.get('a_failed')} of {doc.get('a_judged')} judged rollouts; "
                f"{doc.get('never_parted')} never parted from B.",
                class_="explain",
            ),
            rollouts_table,
            el("h2", "Decision by decision"),
            el(
                "p",
                "From the first decision where the runs part (earlier ones are the same in both"
                " unless listed). Open a decision for the messages only one side saw, each "
                "side's action and its tool results.",
                class_="explain",
            ),
            toolbar(),
            *steps,
        ]
    )
    return page(title=f"otelcar diff {doc['a']} vs {doc['b']}", header=header, body=body, data=doc)


def write_diff_html(path: str | Path, doc: Mapping[str, Any]) -> Path:
    """Write :func:`render_diff_html` to ``path`` (UTF-8) and return the path."""
    path = Path(path)
    path.write_text(render_diff_html(doc), encoding="utf-8")
    return path
