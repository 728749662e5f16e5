"""What every part of an HTML report shares: the result dicts with lookups into the trace's
timeline, labels, and small formatting helpers. Everything returned is escaped markup."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from otelcar.attribution.aggregate import step_identity
from otelcar.cost import policy_calls_text
from otelcar.report.markup import Safe, el, esc
from otelcar.report.svg import interval


def as_dict(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if hasattr(value, "to_dict"):
        from otelcar.report.prose import document

        return document(value)
    return dict(value)


# -- small formatting -------------------------------------------------------------------------
def duration(ms: float | None) -> str:
    """A duration for people (ns, µs, ms, s)."""
    if ms is None:
        return ""
    if ms < 0.001:
        return f"{ms * 1e6:.0f} ns"
    if ms < 1:
        return f"{ms * 1e3:.0f} µs"
    if ms < 10_000:
        return f"{ms:.0f} ms"
    return f"{ms / 1000:.1f} s"


def tokens(tokens: Mapping[str, Any] | None) -> str:
    if not tokens:
        return ""
    return f"{tokens.get('input') or 0} in / {tokens.get('output') or 0} out"


def pretty(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=2)


def cost_text(cost: Mapping[str, Any]) -> str:
    tokens = (cost.get("input_tokens") or 0) + (cost.get("output_tokens") or 0)
    parts = [policy_calls_text(cost)]
    if cost.get("cache_hits"):
        parts.append(f"{cost['cache_hits']} cache hits")
    parts.append(f"{tokens} tokens")
    if cost.get("rollouts") is not None:
        parts.append(f"{cost['rollouts']} rollouts")
    if cost.get("wall_s") is not None:
        parts.append(f"{cost['wall_s']} s")
    return ", ".join(parts)


def _cell(value: Any) -> Safe:
    if isinstance(value, bool) or value is None:
        return esc("" if value is None else ("yes" if value else "no"))
    if isinstance(value, float):
        return esc(f"{value:.3g}")
    if (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, int | float) for v in value)
    ):
        return esc(interval(value[0], value[1]))
    if isinstance(value, dict | list):
        return el("pre", json.dumps(value, ensure_ascii=False, default=str)[:2000])
    return esc(value)


def dict_table(rows: Sequence[Mapping[str, Any]], *, prefer: Sequence[str] = ()) -> Safe:
    """A table of dicts (columns: ``prefer`` first, then the other keys in order seen)."""
    if not rows:
        return el("p", "(none)", class_="muted")
    keys: list[str] = [k for k in prefer if any(k in r for r in rows)]
    for row in rows:
        for key in row:
            if key not in keys:
                keys.append(key)
    head = el("tr", *(el("th", k) for k in keys))
    body = [
        el(
            "tr",
            *(
                el("td", _cell(row.get(k)), class_="num" if _numeric(row.get(k)) else None)
                for k in keys
            ),
        )
        for row in rows
    ]
    return el("table", el("thead", head), el("tbody", *body), class_="data")


def _numeric(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# -- the report -------------------------------------------------------------------------------
class ReportView:
    """Everything the sections share: the result dicts and lookups into the timeline."""

    def __init__(
        self,
        attribution: dict[str, Any] | None,
        why: dict[str, Any] | None,
        fix: dict[str, Any] | None,
        timeline: dict[str, Any] | None,
    ) -> None:
        self.attribution = attribution
        self.why = why
        self.fix = fix
        self.timeline = timeline
        self.steps = {s["step"]: s for s in (timeline or {}).get("steps", [])}
        self.effects = {e["step"]: e for e in (attribution or {}).get("steps", [])}
        self.culprit = (attribution or {}).get("culprit")
        self.ties = set((attribution or {}).get("ties") or [])
        self.why_step = _why_step(why)
        self.causal_texts = _causal_texts(why)

    def label(self, step: int) -> str:
        """``step 7 · agent · name → tools`` for a decision step."""
        item = self.steps.get(step)
        effect = self.effects.get(step, {})
        agent = (item or {}).get("agent") or effect.get("agent")
        name = (item or {}).get("name") or effect.get("name")
        if item is not None and "output" in item:
            return f"step {step} · " + step_identity(agent, name, item["output"])
        return f"step {step} · {agent or '?'} · {name or '?'}"

    def css(self, step: int) -> str:
        if step == self.culprit:
            return "culprit"
        if step in self.ties:
            return "tie"
        if self.effects.get(step, {}).get("significant"):
            return "significant"
        return ""


def _why_step(why: Mapping[str, Any] | None) -> int | None:
    if not why:
        return None
    for key in ("step", "decision_step"):
        if isinstance(why.get(key), int):
            return why[key]
    decision = why.get("decision")
    if isinstance(decision, Mapping) and isinstance(decision.get("step"), int):
        return decision["step"]
    return None


TEXT_KEYS = ("text", "quote", "snippet", "excerpt")


def _causal_texts(why: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """The causal text of a ``why`` result as ``(text, css class)``: the pieces of each cause
    (``mark.cause``) and of each prerequisite (``mark.prereq``), headline cause first.
    Results of another shape: strings under ``TEXT_KEYS`` anywhere in their causes."""
    if not why:
        return []
    found: list[tuple[str, str]] = []
    causes = [why.get("cause"), *(why.get("causes") or [])]
    for cause in causes:
        if not isinstance(cause, Mapping):
            continue
        css = "prereq" if cause.get("kind") == "prerequisite" else "cause"
        parts = [p for p in cause.get("parts") or [] if isinstance(p, Mapping)]
        texts = [p.get("text") for p in parts] if parts else [cause.get("text")]
        found += [(t, css) for t in texts if isinstance(t, str) and len(t.strip()) >= 3]
    if not found:

        def walk(value: Any) -> None:
            if isinstance(value, Mapping):
                for key, item in value.items():
                    if key in TEXT_KEYS and isinstance(item, str) and len(item.strip()) >= 3:
                        found.append((item, "cause"))
                    else:
                        walk(item)
            elif isinstance(value, list):
                for item in value:
                    walk(item)

        walk(why.get("causes"))
    unique: list[tuple[str, str]] = []
    for item in found:
        if item[0] not in {u[0] for u in unique}:
            unique.append(item)
    return unique


def facts(pairs: Sequence[tuple[str, Any]]) -> Safe:
    """A definition list of (label, value) pairs laid out as a grid of cards."""
    return el(
        "dl",
        *(el("div", el("dt", label), el("dd", value), class_="fact") for label, value in pairs),
        class_="facts",
    )
