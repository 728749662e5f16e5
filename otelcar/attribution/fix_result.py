"""The result of ``otelcar fix``: typed, printable, and JSON (``schemas/fix.schema.json``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from otelcar.attribution.stats import Interval, newcombe_paired, newcombe_unpaired, wilson
from otelcar.cost import policy_calls_text

if TYPE_CHECKING:
    from otelcar.attribution.why_result import WhyResult

FIX_VERSION = 1
FIX_KINDS = ("untrusted", "guard", "both", "source", "forced")
FIX_VERDICTS = ("PASS", "PART", "FAIL", "UNTESTED")


def _interval(value: Interval) -> list[float]:
    return [round(value.low, 6), round(value.high, 6)]


@dataclass
class DecisionCheck:
    """The fixed context re-decided: bad decisions out of ``n`` vs the unfixed base."""

    bad: int
    n: int
    base_bad: int
    base_n: int
    p: float
    p_adjusted: float = 1.0
    verdict: str = "FAIL"
    instead: dict[str, int] = field(default_factory=dict)
    alternative: str | None = None
    confidence: float = 0.95

    @property
    def rate(self) -> float:
        return self.bad / self.n if self.n else float("nan")

    @property
    def ci(self) -> Interval:
        return wilson(self.bad, self.n, self.confidence)

    @property
    def difference_ci(self) -> Interval:
        """Newcombe interval of (base rate − fixed rate), independent samples."""
        return newcombe_unpaired(self.bad, self.n, self.base_bad, self.base_n, self.confidence)

    def to_dict(self) -> dict[str, Any]:
        base = self.base_bad / self.base_n if self.base_n else None
        return {
            "bad": self.bad,
            "n": self.n,
            "rate": self.rate if self.n else None,
            "ci": _interval(self.ci),
            "base_bad": self.base_bad,
            "base_n": self.base_n,
            "difference": (base - self.rate) if base is not None and self.n else None,
            "difference_ci": _interval(self.difference_ci),
            "p": self.p,
            "p_adjusted": self.p_adjusted,
            "verdict": self.verdict,
            "instead": self.instead,
            "alternative": self.alternative,
        }


@dataclass
class ForwardCheck:
    """Full rollouts through the rest of the run, judged by the outcome, paired by seed with
    the unfixed rollouts (re-decide step K and every later step)."""

    failed: int
    n: int
    base_failed: int
    base_n: int
    pairs: tuple[int, int, int, int]  # both failed, only fixed, only base, neither
    p: float
    p_adjusted: float = 1.0
    verdict: str = "FAIL"
    errors: list[str] = field(default_factory=list)
    confidence: float = 0.95

    @property
    def rate(self) -> float:
        return self.failed / self.n if self.n else float("nan")

    @property
    def base_rate(self) -> float:
        return self.base_failed / self.base_n if self.base_n else float("nan")

    @property
    def difference_ci(self) -> Interval:
        """Newcombe paired interval of (base failure rate − fixed failure rate)."""
        both, only_fixed, only_base, neither = self.pairs
        return newcombe_paired(both, only_base, only_fixed, neither, self.confidence)

    def to_dict(self) -> dict[str, Any]:
        return {
            "failed": self.failed,
            "n": self.n,
            "rate": self.rate if self.n else None,
            "ci": _interval(wilson(self.failed, self.n, self.confidence)),
            "base_failed": self.base_failed,
            "base_n": self.base_n,
            "base_rate": self.base_rate if self.base_n else None,
            "difference": self.base_rate - self.rate if self.n and self.base_n else None,
            "difference_ci": _interval(self.difference_ci),
            "pairs": dict(
                zip(("both", "only_fixed", "only_base", "neither"), self.pairs, strict=True)
            ),
            "p": self.p,
            "p_adjusted": self.p_adjusted,
            "verdict": self.verdict,
            "errors": self.errors[:20],
        }


@dataclass
class FixCandidate:
    """One candidate fix of the decision at ``step`` and how it fared."""

    name: str
    kind: str
    description: str
    rule: str | None  # text appended to the system prompt
    plan: dict[str, Any]  # the edits at the step (Plan JSON), or the forced action
    forward_plan: dict[str, Any] | None = None
    decision: DecisionCheck | None = None
    forward: ForwardCheck | None = None

    @property
    def verdict(self) -> str:
        """The decision-level verdict (forced actions: the forward verdict)."""
        if self.decision is not None:
            return self.decision.verdict
        return self.forward.verdict if self.forward is not None else "UNTESTED"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "description": self.description,
            "rule": self.rule,
            "plan": self.plan,
            "forward_plan": self.forward_plan,
            "verdict": self.verdict,
            "decision": self.decision.to_dict() if self.decision else None,
            "forward": self.forward.to_dict() if self.forward else None,
        }


@dataclass
class FixResult:
    """Candidate fixes of one decision, validated; the best one named."""

    trace_id: str
    step: int
    decision: str
    same: str
    same_spec: str
    cause: str | None
    cause_label: str | None
    base_bad: int
    base_n: int
    candidates: list[FixCandidate]
    best: str | None
    max_rate: float
    alpha: float
    samples: int
    outcome: str | None
    cost: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    confidence: float = 0.95
    # The explanation the fixes were built from (not part of the fix JSON: `why --json` and
    # `fix --why-json` write it in its own schema).
    why: WhyResult | None = field(default=None, repr=False, compare=False)

    def candidate(self, name: str) -> FixCandidate:
        for candidate in self.candidates:
            if candidate.name == name:
                return candidate
        raise KeyError(f"no candidate {name!r}; candidates: {[c.name for c in self.candidates]}")

    def headline(self) -> str:
        calls = policy_calls_text(self.cost)
        base = f"{self.base_bad}/{self.base_n}"
        if self.best is None:
            return (
                f"Step {self.step} ({self.decision}): no candidate fix passed (bad-decision "
                f"rate significantly below {base} and its upper {self.confidence:.0%} bound "
                f"≤ {self.max_rate:.0%}). Cost: {calls}."
            )
        best = self.candidate(self.best)
        text = f"Step {self.step} ({self.decision}): best fix '{best.name}' ({best.description})"
        if best.decision is not None:
            d = best.decision
            text += (
                f": {d.bad}/{d.n} bad re-decisions [{d.ci.low:.0%}, {d.ci.high:.0%}] vs {base} "
                f"unfixed (Holm-adjusted Fisher p = {d.p_adjusted:.2g})"
            )
        if best.forward is not None:
            f = best.forward
            text += (
                f"; forward: the run fails in {f.failed}/{f.n} rollouts vs "
                f"{f.base_failed}/{f.base_n} unfixed (p = {f.p_adjusted:.2g})"
            )
        return f"{text}. Cost: {calls}."

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": FIX_VERSION,
            "kind": "fix",
            "trace_id": self.trace_id,
            "step": self.step,
            "decision": self.decision,
            "same": self.same,
            "same_spec": self.same_spec,
            "cause": self.cause,
            "cause_label": self.cause_label,
            "base": {"bad": self.base_bad, "n": self.base_n},
            "headline": self.headline(),
            "best": self.best,
            "candidates": [c.to_dict() for c in self.candidates],
            "max_rate": self.max_rate,
            "alpha": self.alpha,
            "confidence": self.confidence,
            "samples": self.samples,
            "outcome": self.outcome,
            "cost": self.cost,
            "notes": self.notes,
        }


def fix_schema_document() -> dict[str, Any]:
    """JSON Schema of ``otelcar fix --json`` (``schemas/fix.schema.json``)."""
    interval = {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2}
    number_or_null = {"type": ["number", "null"]}
    verdict = {"enum": list(FIX_VERDICTS)}
    check = {
        "type": "object",
        "required": ["bad", "n", "ci", "p", "p_adjusted", "verdict"],
        "properties": {
            "bad": {"type": "integer"},
            "n": {"type": "integer"},
            "rate": number_or_null,
            "ci": interval,
            "base_bad": {"type": "integer"},
            "base_n": {"type": "integer"},
            "difference": number_or_null,
            "difference_ci": interval,
            "p": {"type": "number"},
            "p_adjusted": {"type": "number"},
            "verdict": verdict,
            "instead": {"type": "object"},
            "alternative": {"type": ["string", "null"]},
        },
    }
    forward = {
        "type": "object",
        "required": ["failed", "n", "base_failed", "base_n", "p", "p_adjusted", "verdict"],
        "properties": {
            "failed": {"type": "integer"},
            "n": {"type": "integer"},
            "rate": number_or_null,
            "ci": interval,
            "base_failed": {"type": "integer"},
            "base_n": {"type": "integer"},
            "base_rate": number_or_null,
            "difference": number_or_null,
            "difference_ci": interval,
            "pairs": {"type": "object"},
            "p": {"type": "number"},
            "p_adjusted": {"type": "number"},
            "verdict": verdict,
            "errors": {"type": "array", "items": {"type": "string"}},
        },
    }
    candidate = {
        "type": "object",
        "required": ["name", "kind", "description", "plan", "verdict", "decision", "forward"],
        "properties": {
            "name": {"type": "string"},
            "kind": {"enum": list(FIX_KINDS)},
            "description": {"type": "string"},
            "rule": {"type": ["string", "null"]},
            "plan": {"type": "object"},
            "forward_plan": {"type": ["object", "null"]},
            "verdict": verdict,
            "decision": {"oneOf": [check, {"type": "null"}]},
            "forward": {"oneOf": [forward, {"type": "null"}]},
        },
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "otelcar/fix.schema.json",
        "title": "otelcar fix --json",
        "type": "object",
        "required": [
            "version",
            "kind",
            "trace_id",
            "step",
            "base",
            "headline",
            "best",
            "candidates",
            "cost",
        ],
        "properties": {
            "version": {"const": FIX_VERSION},
            "kind": {"const": "fix"},
            "trace_id": {"type": "string"},
            "step": {"type": "integer"},
            "decision": {"type": "string"},
            "same": {"type": "string"},
            "same_spec": {"type": "string"},
            "cause": {"type": ["string", "null"]},
            "cause_label": {"type": ["string", "null"]},
            "base": {"type": "object"},
            "headline": {"type": "string"},
            "best": {"type": ["string", "null"]},
            "candidates": {"type": "array", "items": candidate},
            "max_rate": {"type": "number"},
            "alpha": {"type": "number"},
            "confidence": {"type": "number"},
            "samples": {"type": "integer"},
            "outcome": {"type": ["string", "null"]},
            "cost": {"type": "object"},
            "notes": {"type": "array", "items": {"type": "string"}},
        },
    }
