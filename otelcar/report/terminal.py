"""Terminal reports (rich) of results read back from JSON: attribution (via
:func:`otelcar.render.attribution_report`), aggregate, and the headline of other kinds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from otelcar.cost import policy_calls_text
from otelcar.render import attribution_report, untrusted_text

CLASS_STYLE = {"design flaw": "bold red", "suspect": "yellow", "bad luck": "", "not blamed": "dim"}


def _interval(ci: Any, *, signed: bool = False, percent: bool = False) -> str:
    if not ci:
        return ""
    if percent:
        return f"[{ci[0]:.0%}, {ci[1]:.0%}]"
    return f"[{ci[0]:+.2f}, {ci[1]:+.2f}]" if signed else f"[{ci[0]:.2f}, {ci[1]:.2f}]"


def aggregate_report(console: Console, doc: Mapping[str, Any]) -> None:
    """The headline and the ranked step identities of ``otelcar aggregate``."""
    steps = doc.get("steps") or []
    flaw = bool(steps) and steps[0]["classification"] == "design flaw"
    console.print(untrusted_text(doc["headline"], style="bold red" if flaw else "bold"))
    n = (doc.get("counts") or {}).get("attributed", 0)
    table = Table(
        header_style="bold",
        title=f"step identities across {n} failing traces "
        f"({doc.get('confidence', 0.95):.0%} intervals)",
    )
    for column in (
        "#",
        "step identity",
        "class",
        "culprit",
        "share [Wilson]",
        "by chance",
        "p (Holm)",
        "mean Δ [t]",
        "traces",
    ):
        table.add_column(
            column, justify="left" if column in ("step identity", "class") else "right"
        )
    for rank, s in enumerate(steps, start=1):
        mean = s.get("mean_delta")
        table.add_row(
            str(rank),
            untrusted_text(s["identity"]),
            Text(s["classification"], style=CLASS_STYLE.get(s["classification"], "")),
            f"{s['culprit']}/{n}",
            f"{s['share']:.0%} {_interval(s['share_ci'], percent=True)}",
            f"{s['expected']:.1f}",
            f"{s['p_adjusted']:.2g}",
            (f"{mean:+.2f} " if mean is not None else "– ")
            + _interval(s.get("mean_delta_ci"), signed=True),
            str(s["traces"]),
        )
    console.print(table)
    skipped = [t for t in doc.get("traces") or [] if t["status"] == "skipped"]
    for t in skipped[:10]:
        line = f"skipped {t['trace_id']}: {t.get('reason') or ''}"
        console.print(untrusted_text(line, style="yellow"))
    cost = doc.get("cost") or {}
    console.print(
        f"cost: {policy_calls_text(cost)}, {cost.get('rollouts', 0)} rollouts, "
        f"{cost.get('wall_s', 0)} s",
        highlight=False,
    )
    for note in doc.get("notes") or []:
        console.print(untrusted_text(f"note: {note}", style="yellow"))


def result_report(console: Console, doc: Mapping[str, Any]) -> None:
    """The terminal report of any result kind read back from JSON."""
    kind = doc.get("kind")
    if kind == "attribution":
        attribution_report(console, dict(doc))
    elif kind == "aggregate":
        aggregate_report(console, doc)
    elif kind == "diff":
        from otelcar.report.timelines import diff_report

        diff_report(console, doc)
    else:
        headline = f"{kind}: {doc.get('headline') or '(no headline)'}"
        console.print(untrusted_text(headline, style="bold"))
