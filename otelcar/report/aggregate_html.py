"""The HTML report of ``otelcar aggregate``: the step identities ranked, with their culprit
shares and mean effects as charts, and every trace's verdict."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from otelcar.report.markup import Safe, el, join
from otelcar.report.page import page
from otelcar.report.svg import Point, bar_chart, interval, number
from otelcar.report.view import facts as _facts

CLASS_CSS = {"design flaw": "design-flaw", "suspect": "suspect", "bad luck": "", "not blamed": ""}


def _as_dict(value: Any) -> dict[str, Any]:
    from otelcar.report.prose import document

    return document(value) if hasattr(value, "to_dict") else dict(value)


def _ranking(doc: Mapping[str, Any]) -> Safe:
    steps = doc.get("steps") or []
    shares = [
        Point(
            s["identity"],
            s["share"],
            s["share_ci"][0],
            s["share_ci"][1],
            f"{s['identity']}: culprit in {s['culprit']} traces ({s['classification']})",
            CLASS_CSS.get(s["classification"], ""),
        )
        for s in steps
    ]
    effects = [
        Point(
            s["identity"],
            s.get("mean_delta"),
            (s.get("mean_delta_ci") or [None, None])[0],
            (s.get("mean_delta_ci") or [None, None])[1],
            f"{s['identity']}: mean Δ over {s.get('effect_traces', 0)} traces",
            CLASS_CSS.get(s["classification"], "") or "positive",
        )
        for s in steps
    ]
    conf = doc.get("confidence", 0.95)
    head = el(
        "tr",
        *(
            el("th", h)
            for h in (
                "rank",
                "step identity",
                "class",
                "culprit",
                "share [Wilson]",
                "expected by chance",
                "p (Holm)",
                "mean Δ [t]",
                "in traces",
            )
        ),
    )
    rows = []
    for rank, s in enumerate(steps, start=1):
        ci = s.get("mean_delta_ci") or [None, None]
        rows.append(
            el(
                "tr",
                el("td", str(rank), class_="num"),
                el("td", s["identity"]),
                el(
                    "td",
                    el(
                        "span",
                        s["classification"],
                        class_=f"badge {CLASS_CSS.get(s['classification'], '')}".strip(),
                    ),
                ),
                el("td", str(s["culprit"]), class_="num"),
                el(
                    "td",
                    f"{s['share']:.0%} [{s['share_ci'][0]:.0%}, {s['share_ci'][1]:.0%}]",
                    class_="num",
                ),
                el("td", f"{s['expected']:.1f}", class_="num"),
                el("td", f"{s['p_adjusted']:.2g}", class_="num"),
                el(
                    "td",
                    f"{number(s.get('mean_delta'), signed=True)} "
                    f"{interval(ci[0], ci[1], signed=True)}",
                    class_="num",
                ),
                el("td", str(s["traces"]), class_="num"),
                class_=CLASS_CSS.get(s["classification"]) or None,
            )
        )
    return el(
        "section",
        el("h2", "Steps ranked"),
        el(
            "p",
            "Each row is a step identity (agent · step name → the tools its recorded action "
            "called). Culprit: in how many attributed failing traces it was the culprit; "
            "share: of all attributed failing traces, with a Wilson interval at "
            f"{conf:.0%}; expected by chance: the count if blame fell on a random decision "
            "step of each trace, with the one-sided exact (Poisson-binomial) test, Holm across "
            "identities; mean Δ: its step effect averaged over the traces it occurs in, with a "
            "Student-t interval over traces. A design flaw is blamed in at least two traces, "
            "significantly more often than chance, with a mean effect above zero; a one-off "
            "culprit is bad luck.",
            class_="explain",
        ),
        el(
            "div",
            bar_chart(
                shares,
                chart_id="share-chart",
                caption="Culprit share per step identity",
                x_label="share of failing traces in which the step is the culprit",
                domain=(0.0, 1.0),
                signed=False,
            ),
            class_="chartbox",
        ),
        el(
            "div",
            bar_chart(
                effects,
                chart_id="mean-effect-chart",
                caption="Mean step effect per step identity",
                x_label="mean Δ P(failure) over traces",
            ),
            class_="chartbox",
        ),
        el("table", el("thead", head), el("tbody", *rows), class_="data", id="ranking"),
        id="ranking-section",
    )


def _traces(doc: Mapping[str, Any]) -> Safe:
    head = el(
        "tr", *(el("th", h) for h in ("trace", "status", "verdict", "culprit", "Δ [CI]", "note"))
    )
    rows = []
    for t in doc.get("traces") or []:
        ci = t.get("delta_ci") or [None, None]
        culprit = (
            f"step {t['culprit_step']} · {t.get('culprit_identity')}"
            if t.get("culprit_step") is not None
            else ""
        )
        rows.append(
            el(
                "tr",
                el("td", t["trace_id"]),
                el("td", t["status"]),
                el("td", t.get("verdict") or ""),
                el("td", culprit),
                el(
                    "td",
                    f"{number(t.get('delta'), signed=True)} {interval(ci[0], ci[1], signed=True)}"
                    if t.get("delta") is not None
                    else "",
                    class_="num",
                ),
                el("td", t.get("reason") or ""),
            )
        )
    return el(
        "section",
        el("h2", "Traces"),
        el("table", el("thead", head), el("tbody", *rows), class_="data", id="traces"),
        id="traces-section",
    )


def render_aggregate_html(aggregate: Any) -> str:
    """The HTML report of an aggregate result (``AggregateResult`` or its ``to_dict()``)."""
    doc = _as_dict(aggregate)
    steps = doc.get("steps") or []
    flaw = steps and steps[0]["classification"] == "design flaw"
    counts = doc.get("counts") or {}
    cost = doc.get("cost") or {}
    verdict = el(
        "section",
        el(
            "span",
            "design flaw" if flaw else "no systematic weak step",
            class_="badge design-flaw" if flaw else "badge",
        ),
        el(
            "h1",
            f"'{steps[0]['identity']}' fails this agent systematically"
            if flaw
            else "No step fails this agent systematically",
        ),
        _facts(
            [
                (
                    "Traces",
                    f"{counts.get('attributed', 0)} failing traces attributed, "
                    f"{counts.get('passed', 0)} passed, {counts.get('skipped', 0)} skipped",
                ),
                (
                    "Selection",
                    f"service {doc.get('service') or 'any'}; "
                    f"since {doc.get('since') or 'any time'}",
                ),
                (
                    "What it cost",
                    f"{cost.get('llm_calls', 0)} policy calls, {cost.get('rollouts', 0)} "
                    f"rollouts, {cost.get('wall_s', 0)} s",
                ),
            ]
        ),
        el("p", doc.get("headline", ""), class_="headline"),
        el("ul", *(el("li", n) for n in doc.get("notes") or []), class_="notes")
        if doc.get("notes")
        else "",
        id="verdict",
        class_="verdict design-flaw" if flaw else "verdict",
    )
    header = el(
        "header",
        el("b", "otelcar aggregate"),
        el("span", f"service {doc.get('service') or 'any'}"),
        class_="top",
    )
    nav = el(
        "nav",
        el("a", "steps ranked", href="#ranking-section"),
        el("a", "traces", href="#traces-section"),
        class_="toc",
    )
    return page(
        title=f"otelcar aggregate · {doc.get('service') or 'traces'}",
        header=header,
        body=join([nav, verdict, _ranking(doc), _traces(doc)]),
        data={"aggregate": doc},
    )


def write_aggregate_html(path: str | Path, aggregate: Any) -> Path:
    """Write :func:`render_aggregate_html` to ``path`` and return the path."""
    path = Path(path)
    path.write_text(render_aggregate_html(aggregate), encoding="utf-8")
    return path
