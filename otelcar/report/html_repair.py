"""The ``why`` (causes in the decision's context) and ``fix`` (validated candidate fixes)
sections of an HTML report. Results of the shapes in ``schemas/why.schema.json`` and
``schemas/fix.schema.json`` get their own tables; anything else a generic one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from otelcar.report.markup import Safe, clip_label, el
from otelcar.report.svg import interval, number
from otelcar.report.view import ReportView, dict_table


def _rate(bad: Any, n: Any, ci: Any = None) -> str:
    if not isinstance(n, int) or not n:
        return ""
    text = f"{bad}/{n} = {bad / n:.0%}"
    if isinstance(ci, list) and len(ci) == 2:
        text += f" [{ci[0]:.0%}, {ci[1]:.0%}]"
    return text


def _p(value: Any) -> str:
    return f"{value:.2g}" if isinstance(value, int | float) else ""


def _causes_table(causes: list[Mapping[str, Any]]) -> Safe:
    head = el(
        "tr",
        *(
            el("th", h)
            for h in ("kind", "piece", "text", "rate without it", "drop [CI]", "p", "instead")
        ),
    )
    rows = []
    for cause in causes:
        effect = cause.get("effect") or {}
        counts = effect.get("counts") or {}
        ci = effect.get("difference_ci") or [None, None]
        kind = cause.get("kind") or ""
        rows.append(
            el(
                "tr",
                el("td", el("span", kind, class_=f"badge {'culprit' if kind == 'cause' else ''}")),
                el("td", cause.get("label") or ""),
                el("td", el("mark", clip_label(cause.get("text"), 240), class_="cause")),
                el(
                    "td",
                    _rate(counts.get("bad"), counts.get("n"), effect.get("rate_ci"))
                    + f" (was {_rate(counts.get('base_bad'), counts.get('base_n'))})",
                    class_="num",
                ),
                el(
                    "td",
                    f"{number(effect.get('difference'), signed=True)} "
                    f"{interval(ci[0], ci[1], signed=True)}",
                    class_="num",
                ),
                el("td", _p(effect.get("p")), class_="num"),
                el("td", cause.get("alternative") or ""),
            )
        )
    return el("table", el("thead", head), el("tbody", *rows), class_="data", id="causes")


def why_section_html(r: ReportView) -> Safe:
    """Causes (and prerequisites) of the decision at the ``why`` step."""
    why = r.why
    if not why:
        return Safe("")
    causes = [c for c in why.get("causes") or [] if isinstance(c, Mapping)]
    step = r.why_step
    structured = all("effect" in c and "label" in c for c in causes)
    base = why.get("base") or {}
    facts = []
    if why.get("decision"):
        facts.append(f"decision: {why['decision']}")
    if base.get("n"):
        facts.append(
            "on its unchanged context the decision recurs in "
            + _rate(base.get("bad"), base.get("n"), base.get("ci"))
        )
    if why.get("verdict"):
        facts.append(f"verdict: {why['verdict']}")
    return el(
        "section",
        el("h2", "Why: the text that made the decision"),
        el("p", why.get("headline") or "", class_="headline"),
        el("p", "; ".join(facts), class_="muted") if facts else "",
        el(
            "p",
            "Pieces of the decision's context were removed and the decision re-run; a cause "
            "is a piece whose removal makes the agent decide differently (significantly, "
            "one-sided Fisher test under a running multiplicity correction), a prerequisite "
            "one without which it re-fetches, asks or stops. "
            + (
                f"The text is highlighted where it appears in the timeline (open step {step})."
                if step is not None
                else ""
            ),
            class_="explain",
        ),
        _causes_table(causes)
        if causes and structured
        else dict_table(causes, prefer=("kind", "label", "text", "effect", "p")),
        id="why",
    )


def _fix_rows(fix: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    for key in ("candidates", "fixes", "results"):
        rows = fix.get(key)
        if isinstance(rows, list):
            return [x for x in rows if isinstance(x, Mapping)]
    return []


def _fix_table(rows: list[Mapping[str, Any]], best: Any) -> Safe:
    head = el(
        "tr",
        *(
            el("th", h)
            for h in (
                "fix",
                "kind",
                "verdict",
                "bad decisions with the fix",
                "drop [CI]",
                "p (Holm)",
                "run still fails (forward)",
                "what it changes",
            )
        ),
    )
    body = []
    for row in rows:
        decision = row.get("decision") or {}
        forward = row.get("forward") or {}
        dci = decision.get("difference_ci") or [None, None]
        verdict = row.get("verdict") or ""
        badge = {"PASS": "passed", "FAIL": "failed", "PART": "locked-in"}.get(verdict, "")
        change = row.get("rule") or row.get("description") or ""
        body.append(
            el(
                "tr",
                el(
                    "td",
                    el("b", row.get("name") or ""),
                    " ★ best" if row.get("name") == best else "",
                ),
                el("td", row.get("kind") or ""),
                el("td", el("span", verdict, class_=f"badge {badge}".strip())),
                el(
                    "td",
                    _rate(decision.get("bad"), decision.get("n"), decision.get("ci"))
                    + (
                        f" vs {decision.get('base_bad')}/{decision.get('base_n')}"
                        if decision.get("base_n")
                        else ""
                    ),
                    class_="num",
                ),
                el(
                    "td",
                    f"{number(decision.get('difference'), signed=True)} "
                    f"{interval(dci[0], dci[1], signed=True)}"
                    if decision
                    else "",
                    class_="num",
                ),
                el("td", _p(decision.get("p_adjusted")), class_="num"),
                el(
                    "td",
                    _rate(forward.get("failed"), forward.get("n"), forward.get("ci"))
                    + (
                        f" vs {forward.get('base_failed')}/{forward.get('base_n')}"
                        if forward.get("base_n")
                        else ""
                    ),
                    class_="num",
                ),
                el("td", el("div", clip_label(change, 300))),
                class_="culprit" if row.get("name") == best else None,
            )
        )
    return el("table", el("thead", head), el("tbody", *body), class_="data", id="fixes-table")


def fix_section_html(r: ReportView) -> Safe:
    """The candidate fixes, how each fared, and the best one."""
    fix = r.fix
    if not fix:
        return Safe("")
    rows = _fix_rows(fix)
    structured = rows and all("verdict" in x and "name" in x for x in rows)
    return el(
        "section",
        el("h2", "Fixes"),
        el("p", fix.get("headline") or "", class_="headline"),
        el(
            "p",
            "Each candidate fix was applied to the exact failed context and the decision re-run; "
            "a fix passes when the bad decision becomes significantly rarer (Holm-adjusted "
            "Fisher test). Forward: full rollouts through the rest of the run, with the fix.",
            class_="explain",
        ),
        _fix_table(rows, fix.get("best"))
        if structured
        else dict_table(rows, prefer=("name", "kind", "description", "verdict")),
        id="fixes",
    )
