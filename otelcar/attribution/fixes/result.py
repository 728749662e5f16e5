"""The result of ``otelcar fix``: typed, printable, and JSON (``schemas/fix.schema.json``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from otelcar.attribution.experiment.contrast import Pairs, paired, unpaired
from otelcar.attribution.fixes.documents import (
    FIX_VERSION,
    CandidateDocument,
    DecisionCheckDocument,
    FixDocument,
    ForwardCheckDocument,
)
from otelcar.attribution.frozen import freeze_sequences
from otelcar.attribution.stats import Interval, wilson
from otelcar.messages import Message
from otelcar.notes import Note

if TYPE_CHECKING:
    from otelcar.attribution.context.result import WhyResult


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
    #: The most common good action, whole (``alternative`` describes it), for preference pairs.
    alternative_action: Message | None = None
    lost: int = 0  # the fixed arm's re-decisions that errored (left out of ``n``)
    base_lost: int = 0  # the unfixed base arm's

    @property
    def rate(self) -> float:
        return self.bad / self.n if self.n else float("nan")

    @property
    def ci(self) -> Interval:
        return wilson(self.bad, self.n, self.confidence)

    @property
    def difference_ci(self) -> Interval:
        """Newcombe interval of (base rate − fixed rate), independent samples."""
        return unpaired(self.bad, self.n, self.base_bad, self.base_n, self.confidence).interval

    def to_dict(self) -> DecisionCheckDocument:
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
            "alternative_action": (
                self.alternative_action.to_dict() if self.alternative_action else None
            ),
            "lost": {"base": self.base_lost, "arm": self.lost},
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
    #: Rollouts run per arm (the sequential test stops when its evidence suffices).
    rollouts: int = 0
    #: Whether the fixed failure rate was shown below ``max_rate`` (anytime-valid e-value).
    below: bool = False

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
        return paired(Pairs(both, only_base, only_fixed, neither), self.confidence).interval

    def to_dict(self) -> ForwardCheckDocument:
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
            "rollouts": self.rollouts,
            "rate_below_max": self.below,
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

    def to_dict(self) -> CandidateDocument:
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


@dataclass(frozen=True)
class FixResult:
    """Candidate fixes of one decision, validated; the best one named.

    ``base_bad`` / ``base_n``: the unfixed base arm the candidates were tested against (fresh
    draws of the stage ``fix.validate``), the rate the headline quotes; ``why_base_bad`` /
    ``why_base_n``: ``why``'s own base arm (other draws, so other counts), for reference.
    """

    trace_id: str
    step: int
    decision: str
    same: str
    same_spec: str
    cause: str | None
    cause_label: str | None
    base_bad: int
    base_n: int
    candidates: tuple[FixCandidate, ...]
    best: str | None
    max_rate: float
    alpha: float
    samples: int
    outcome: str | None
    cost: dict[str, Any]
    notes: tuple[Note, ...] = ()
    confidence: float = 0.95
    why_base_bad: int | None = None
    why_base_n: int | None = None
    # The explanation the fixes were built from (not part of the fix JSON: `why --json` and
    # `fix --why-json` write it in its own schema).
    why: WhyResult | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        freeze_sequences(self)

    def candidate(self, name: str) -> FixCandidate:
        for candidate in self.candidates:
            if candidate.name == name:
                return candidate
        raise KeyError(f"no candidate {name!r}; candidates: {[c.name for c in self.candidates]}")

    def to_dict(self) -> FixDocument:
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
            "base": {
                "bad": self.base_bad,
                "n": self.base_n,
                "why": None
                if self.why_base_n is None
                else {"bad": self.why_base_bad, "n": self.why_base_n},
            },
            "best": self.best,
            "candidates": [c.to_dict() for c in self.candidates],
            "max_rate": self.max_rate,
            "alpha": self.alpha,
            "confidence": self.confidence,
            "samples": self.samples,
            "outcome": self.outcome,
            "cost": self.cost,
            "notes": [n.to_dict() for n in self.notes],
        }
