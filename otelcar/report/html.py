"""The HTML report of a result: one self-contained file that opens offline.

:func:`render_html` takes the attribution result (``AttributionResult.to_dict()``; optional),
a ``why`` and a ``fix`` result (optional dicts) and the trace's steps table (optional when the
attribution already carries its ``timeline`` section, see :mod:`otelcar.report.data`), and
draws, top to bottom:

1. the verdict: what failed, which step, how sure, what it cost;
2. the commitment curve q_k with its Wilson intervals, and the step effects Δ_k with theirs
   (inline SVG, :mod:`otelcar.report.svg`), with a table of every number;
3. Shapley values (when computed), the ``why`` causes and the ``fix`` table (when given);
4. the step timeline: every LLM and tool step with agent, duration, tokens and a one-line gist,
   each expandable to its context (with the causal text of ``why`` highlighted) and action;
5. alternative timelines: a few rollouts showing what the agent did instead;
6. how to read the numbers.

Every value from a trace goes through :mod:`otelcar.report.markup` (escaped by default).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from otelcar.attribution.aggregate import action_tools
from otelcar.report.data import timeline_section
from otelcar.report.html_repair import fix_section_html, why_section_html
from otelcar.report.html_steps import alternatives_section_html, timeline_section_html
from otelcar.report.markup import Safe, el, join
from otelcar.report.page import page
from otelcar.report.svg import Point, bar_chart, curve_chart, interval, number
from otelcar.report.view import ReportView, as_dict, cost_text, facts


def _verdict(r: ReportView) -> Safe:
    a = r.attribution
    if a is None:
        source = r.why or r.fix or {}
        return el(
            "section",
            el("span", source.get("kind", "result"), class_="badge"),
            el("h1", source.get("headline") or "Result"),
            id="verdict",
            class_="verdict",
        )
    verdict = a.get("verdict", "undecided")
    question = a.get("question", "failure")
    cost = a.get("cost") or {}
    conf = a.get("confidence", 0.95)
    pairs: list[tuple[str, Any]] = [("What failed", f"the {question}: {a.get('outcome') or '?'}")]
    if verdict == "culprit" and r.culprit is not None:
        e = r.effects.get(r.culprit, {})
        title = f"Step {r.culprit} caused the {question}"
        item = r.steps.get(r.culprit) or {}
        which: list[Any] = [el("b", r.label(r.culprit))]
        if item.get("gist"):
            which += [el("br"), el("span", item["gist"], class_="muted")]
        if r.ties:
            which += [el("br"), f"cannot be told apart from steps {sorted(r.ties)}"]
        ci = e.get("delta_ci") or [None, None]
        pairs += [
            ("Which step", join(which)),
            (
                "How sure",
                f"Δ = {number(e.get('delta'), signed=True)} "
                f"{interval(ci[0], ci[1], signed=True)} at {conf:.1%}; "
                f"p (Holm) = {e.get('p_adjusted', 1):.2g}; {e.get('pairs', 0)} paired rollouts",
            ),
        ]
        checks = a.get("refutations") or []
        if checks:
            pairs.append(
                (
                    "Refutation",
                    join(
                        [
                            item
                            for c in checks
                            for item in (
                                el(
                                    "span",
                                    f"{c['name']}: {'passed' if c['passed'] else 'FAILED'}",
                                    class_="ok" if c["passed"] else "bad",
                                ),
                                f" — Δ = {number(c.get('delta'), signed=True)} "
                                f"{interval(*(c.get('delta_ci') or [None, None]), signed=True)}, "
                                f"p = {c.get('p_value', 1):.2g}, {c.get('pairs', 0)} pairs "
                                f"({c.get('description', '')})",
                                el("br"),
                            )
                        ][:-1]
                    ),
                )
            )
    elif verdict == "locked-in":
        title = f"Locked in: re-deciding every step still ends in {question}"
        b = a.get("baseline") or {}
        ci = b.get("q_ci") or [None, None]
        harmful = a.get("harmful_step")
        pairs += [
            (
                "Which step",
                "no step's effect was significant"
                + (f"; the harmful call was made at step {harmful}" if harmful is not None else ""),
            ),
            ("How sure", f"q at the start = {number(b.get('q'))} {interval(ci[0], ci[1])}"),
        ]
    else:
        title = f"Undecided: no step's effect is significant at {conf:.1%}"
        pairs += [("Which step", "none yet: more rollouts would tell")]
    if verdict in ("locked-in", "undecided") and a.get("equivalence"):
        pairs.append(("What it would have seen", _seen(a["equivalence"])))
    pairs.append(("What it cost", cost_text(cost)))
    notes = list(a.get("notes") or [])
    if a.get("rollout_errors"):
        notes.append(f"{len(a['rollout_errors'])} rollouts failed: {a['rollout_errors'][0]}")
    return el(
        "section",
        el("span", verdict, class_=f"badge {verdict}"),
        el("h1", title),
        facts(pairs),
        el("p", a.get("headline", ""), class_="headline"),
        el("ul", *(el("li", n) for n in notes), class_="notes") if notes else "",
        id="verdict",
        class_=f"verdict {verdict}",
    )


def _seen(equivalence: dict[str, Any]) -> str:
    """The equivalence statement of a verdict without a culprit: every step's upper bound
    against the margin, and the smallest effect found with the stated power."""
    upper, margin = equivalence.get("largest_upper"), equivalence.get("margin")
    detectable = equivalence.get("detectable_delta")
    bound = f"every step's Δ ≤ {number(upper, signed=True)}" + (
        f" (margin {margin:g})" if margin is not None else ""
    )
    if detectable is None:
        return f"{bound}; no step's effect could have been significant at these rollouts"
    power = equivalence.get("power", 0.8)
    found = f"any step with Δ ≥ {detectable:.2f} would have been found with {power:.0%} power"
    return f"{bound}; {found}"


def _curve(r: ReportView) -> Safe:
    a = r.attribution or {}
    b = a.get("baseline") or {}
    rows = a.get("steps") or []
    q_ci = b.get("q_ci") or [None, None]
    points = [
        Point(
            "start",
            b.get("q"),
            q_ci[0],
            q_ci[1],
            f"start (every step re-decided): q = {number(b.get('q'))} "
            f"{interval(q_ci[0], q_ci[1])}, {b.get('rollouts', 0)} rollouts",
        )
    ]
    marker = None
    for i, e in enumerate(rows, start=1):
        ci = e.get("q_ci") or [None, None]
        points.append(
            Point(
                str(e["step"]),
                e.get("q"),
                ci[0],
                ci[1],
                f"{r.label(e['step'])}: q = {number(e.get('q'))} {interval(ci[0], ci[1])}, "
                f"{e.get('failures', 0)}/{e.get('rollouts', 0)} rollouts failed",
                r.css(e["step"]),
                e["step"],
            )
        )
        if e["step"] == a.get("point_of_no_return"):
            marker = i
    chart = curve_chart(
        points,
        chart_id="curve-chart",
        caption=f"Commitment curve: P({a.get('question', 'failure')}) when steps up to k are "
        "held at their recorded actions",
        y_label=f"P({a.get('question', 'failure')})",
        marker=marker,
        marker_label="no return",
    )
    return el(
        "section",
        el("h2", "Commitment curve"),
        el(
            "p",
            "Each point q_k is the probability of the "
            f"{a.get('question', 'failure')} when the steps up to k keep their recorded actions "
            "and every later step is decided again by the policy; 'start' re-decides every "
            "step. The band and whiskers are Wilson intervals. A jump at a step means "
            "committing that step's action made the outcome much more likely; the dashed "
            "line marks the point of no return.",
            class_="explain",
        ),
        el("div", chart, class_="chartbox"),
        id="curve",
    )


def _effects(r: ReportView) -> Safe:
    a = r.attribution or {}
    rows = a.get("steps") or []
    points = []
    for e in rows:
        ci = e.get("delta_ci") or [None, None]
        css = r.css(e["step"]) or ("positive" if (e.get("delta") or 0) > 0 else "")
        points.append(
            Point(
                r.label(e["step"]),
                e.get("delta"),
                ci[0],
                ci[1],
                f"{r.label(e['step'])}: Δ = {number(e.get('delta'), signed=True)} "
                f"{interval(ci[0], ci[1], signed=True)}, p (Holm) = "
                f"{e.get('p_adjusted', 1):.2g}",
                css,
                e["step"],
            )
        )
    chart = bar_chart(
        points,
        chart_id="effects-chart",
        caption="Step effects Δ_k = q_k − q_(k−1) with paired intervals",
        x_label=f"Δ P({a.get('question', 'failure')})",
    )
    head = el(
        "tr",
        *(
            el("th", h)
            for h in ("step", "agent", "name", "action", "q [CI]", "Δ [CI]", "p", "p (Holm)", "n")
        ),
    )
    body = []
    for e in rows:
        item = r.steps.get(e["step"]) or {}
        qci, dci = e.get("q_ci") or [None, None], e.get("delta_ci") or [None, None]
        mark = " ◀ culprit" if e["step"] == r.culprit else (" (tie)" if e["step"] in r.ties else "")
        body.append(
            el(
                "tr",
                el("td", el("a", str(e["step"]), href=f"#step-{e['step']}"), class_="num"),
                el("td", e.get("agent") or ""),
                el("td", e.get("name") or ""),
                el("td", action_tools(item.get("output")) if "output" in item else ""),
                el("td", f"{number(e.get('q'))} {interval(qci[0], qci[1])}", class_="num"),
                el(
                    "td",
                    f"{number(e.get('delta'), signed=True)} "
                    f"{interval(dci[0], dci[1], signed=True)}{mark}",
                    class_="num",
                ),
                el("td", f"{e.get('p_value', 1):.2g}", class_="num"),
                el(
                    "td",
                    f"{e.get('p_adjusted', 1):.2g}" + (" *" if e.get("significant") else ""),
                    class_="num",
                ),
                el("td", str(e.get("rollouts", 0)), class_="num"),
                class_=r.css(e["step"]) or None,
            )
        )
    return el(
        "section",
        el("h2", "Step effects"),
        el(
            "p",
            "Δ_k is how much committing step k's recorded action raised the probability of "
            "the outcome (q_k − q_(k−1)), from rollouts that share their seeds across plans "
            "(paired). Whiskers: Newcombe paired intervals. p: one-sided exact McNemar test; "
            "p (Holm): adjusted across steps; * marks a significant step. The Δ's add up to "
            "the rise from the start to the recorded run.",
            class_="explain",
        ),
        el("div", chart, class_="chartbox"),
        el("table", el("thead", head), el("tbody", *body), class_="data", id="effects-table"),
        id="effects",
    )


def _shapley(r: ReportView) -> Safe:
    s = (r.attribution or {}).get("shapley")
    if not s:
        return Safe("")
    points = []
    for v in s.get("values") or []:
        ci = v.get("ci") or [None, None]
        css = r.css(v["step"]) or ("positive" if (v.get("phi") or 0) > 0 else "")
        points.append(
            Point(
                r.label(v["step"]),
                v.get("phi"),
                ci[0],
                ci[1],
                f"{r.label(v['step'])}: φ = {number(v.get('phi'), signed=True)} "
                f"{interval(ci[0], ci[1], signed=True)}",
                css,
                v["step"],
            )
        )
    chart = bar_chart(
        points,
        chart_id="shapley-chart",
        caption="Shapley values of the steps",
        x_label="φ (share of the failure probability)",
    )
    return el(
        "section",
        el("h2", "Shapley values"),
        el(
            "p",
            "When a failure needs several steps together (or any of several steps causes it), "
            "a single step effect cannot split the credit: φ is each step's average marginal "
            "contribution over random orders of the steps (permutation sampling with "
            f"antithetic pairs; t-intervals). v(all) = {number(s.get('v_all'))}, v(none) = "
            f"{number(s.get('v_none'))}, Σφ = {number(s.get('sum_phi'))} (efficiency gap "
            f"{number(s.get('efficiency_gap'), signed=True)}), {s.get('permutations', 0)} "
            f"permutations × {s.get('rollouts_per_coalition', 0)} rollouts per coalition.",
            class_="explain",
        ),
        el("div", chart, class_="chartbox"),
        id="shapley",
    )


def _method() -> Safe:
    return el(
        "section",
        el("h2", "How to read this report"),
        el(
            "ul",
            el(
                "li",
                "otelcar replays the recorded run many times (rollouts), keeping the first "
                "steps at their recorded actions and letting the policy decide the rest again, "
                "and counts how often the run still fails.",
            ),
            el(
                "li",
                "Culprit: the step with the largest significant effect after Holm's "
                "correction; steps whose interval overlaps it are ties. Locked-in: the failure "
                "happens whatever the steps decide. Undecided: no effect is significant with "
                "the rollouts spent.",
            ),
            el(
                "li",
                "Every number carries its interval and its count; intervals are at the "
                "confidence shown in the verdict (lowered from the requested level when "
                "rollouts were added in rounds, to stay valid under optional stopping).",
            ),
        ),
        id="method",
    )


def render_html(
    *,
    attribution: Any = None,
    why: Any = None,
    fix: Any = None,
    steps: pl.DataFrame | None = None,
    title: str | None = None,
    back: tuple[str, str] | None = None,
) -> str:
    """The HTML report (a whole document) of the given results; see the module docstring.

    ``attribution``, ``why``, ``fix``: result dicts (or objects with ``to_dict()``); at least
    one is required. ``steps``: the trace's steps table, used when the attribution carries
    no ``timeline`` section. ``back``: ``(label, href)`` of a link in the header (the
    console's way back to where the report was opened from).
    """
    a, w, f = as_dict(attribution), as_dict(why), as_dict(fix)
    if a is None and w is None and f is None:
        raise ValueError("render_html needs an attribution, why or fix result")
    timeline = next((d.get("timeline") for d in (a, w, f) if d and d.get("timeline")), None)
    if timeline is None and steps is not None and steps.height:
        timeline = timeline_section(steps)
    r = ReportView(a, w, f, timeline)
    trace_id = next((d.get("trace_id") for d in (a, w, f) if d and d.get("trace_id")), "?")
    sections: list[tuple[str, str, Safe]] = []
    if a is not None:
        sections += [("curve", "curve", _curve(r)), ("effects", "step effects", _effects(r))]
        if a.get("shapley"):
            sections.append(("shapley", "Shapley", _shapley(r)))
    if w:
        sections.append(("why", "why", why_section_html(r)))
    if f:
        sections.append(("fixes", "fixes", fix_section_html(r)))
    sections.append(("timeline", "timeline", timeline_section_html(r)))
    if a is not None and a.get("alternatives"):
        sections.append(("alternatives", "alternative timelines", alternatives_section_html(r)))
    sections.append(("method", "how to read", _method()))
    service = (timeline or {}).get("service")
    header = el(
        "header",
        el("b", "otelcar report"),
        el("span", f"trace {trace_id}"),
        el("span", f"service {service}") if service else "",
        el("span", f"mode {a.get('mode')}") if a else "",
        el("a", back[0], href=back[1], class_="back") if back else "",
        class_="top",
    )
    nav = el(
        "nav", *(el("a", label, href=f"#{anchor}") for anchor, label, _ in sections), class_="toc"
    )
    body = join([nav, _verdict(r), *(s for _, _, s in sections)])
    data = {"attribution": a, "why": w, "fix": f}
    if a is not None and timeline is not None and "timeline" not in a:
        data["timeline"] = timeline
    return page(
        title=title or f"otelcar · {trace_id}",
        header=header,
        body=body,
        data=data,
    )


def write_html(
    path: str | Path,
    *,
    attribution: Any = None,
    why: Any = None,
    fix: Any = None,
    steps: pl.DataFrame | None = None,
) -> Path:
    """Write :func:`render_html` to ``path`` (UTF-8) and return the path."""
    path = Path(path)
    path.write_text(
        render_html(attribution=attribution, why=why, fix=fix, steps=steps), encoding="utf-8"
    )
    return path


__all__ = ["render_html", "write_html"]
