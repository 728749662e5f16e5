"""The result of ``otelcar why``: typed, printable, and JSON (``schemas/why.schema.json``)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from otelcar.attribution.context.documents import (
    WHY_VERSION,
    CauseDocument,
    TestDocument,
    WhyDocument,
)
from otelcar.attribution.context.pieces import LEVELS, Piece
from otelcar.attribution.experiment.contrast import unpaired
from otelcar.attribution.frozen import freeze_sequences
from otelcar.attribution.stats import Interval, wilson
from otelcar.notes import Note


def _interval(value: Interval) -> list[float]:
    return [round(value.low, 6), round(value.high, 6)]


@dataclass
class TestRecord:
    """One hypothesis test: "removing ``removed`` lowers the rate of the decision".

    ``level`` is the significance level the online procedure gave this test; ``p`` the
    one-sided Fisher exact p-value (base arm vs this arm), ``p_paired`` the one-sided exact
    McNemar p-value on the samples both arms drew with the same seed (reported, not used).
    """

    t: int
    purpose: str  # screen | drill | joint | recheck
    removed: tuple[Piece, ...]
    fill: str
    level: float
    base_bad: int
    base_n: int
    bad: int
    n: int
    p: float | None
    p_paired: float | None
    verdict: str
    instead: dict[str, int]
    alternative: str | None
    plan: dict[str, Any]
    confidence: float = 0.95
    reference: tuple[Piece, ...] | None = None  # compared with this removal, not the base
    lost: int = 0  # this arm's re-decisions that errored (left out of ``n``)
    base_lost: int = 0  # the reference arm's
    threshold: float | None = None  # the level its last Fisher look was tested at
    bar: float = 0.0  # the drop a confirmation also needs

    @property
    def confirmed(self) -> bool:
        return self.verdict == "confirmed"

    @property
    def rate(self) -> float:
        return self.bad / self.n if self.n else float("nan")

    @property
    def base_rate(self) -> float:
        return self.base_bad / self.base_n if self.base_n else float("nan")

    @property
    def effect(self) -> float:
        """Base rate minus the rate with the pieces removed."""
        return self.base_rate - self.rate if self.n else 0.0

    @property
    def effect_ci(self) -> Interval:
        """Newcombe (1998, method 10) interval of the effect (independent samples)."""
        return unpaired(self.bad, self.n, self.base_bad, self.base_n, self.confidence).interval

    def to_dict(self) -> TestDocument:
        return {
            "t": self.t,
            "purpose": self.purpose,
            "removed": [p.label for p in self.removed],
            "texts": [p.text for p in self.removed],
            "fill": self.fill,
            "level": self.level,
            "reference": None if self.reference is None else [p.label for p in self.reference],
            "base": {"bad": self.base_bad, "n": self.base_n},
            "bad": self.bad,
            "n": self.n,
            "rate": self.rate if self.n else None,
            "rate_ci": _interval(wilson(self.bad, self.n, self.confidence)),
            "effect": self.effect,
            "effect_ci": _interval(self.effect_ci),
            "p": self.p,
            "p_paired": self.p_paired,
            "verdict": self.verdict,
            "instead": self.instead,
            "alternative": self.alternative,
            "plan": self.plan,
            "lost": {"base": self.base_lost, "arm": self.lost},
        }


@dataclass
class Cause:
    """A confirmed piece (or set of pieces acting only jointly), narrowed as far as it holds.

    ``chain``: the confirmed tests from the whole message down to ``parts`` (each link
    removes a smaller set); ``kind``: ``cause`` (the agent then decides differently) or
    ``prerequisite`` (it then re-fetches, asks or stops).
    """

    kind: str
    parts: tuple[Piece, ...]
    chain: list[TestRecord]
    recheck: TestRecord | None = None
    checks: list[TestRecord] = field(default_factory=list)  # is each joint part needed?

    @property
    def test(self) -> TestRecord:
        return self.chain[-1]

    @property
    def joint(self) -> bool:
        return len(self.parts) > 1

    @property
    def text(self) -> str:
        return " | ".join(p.text for p in self.parts)

    @property
    def label(self) -> str:
        return " + ".join(p.label for p in self.parts)

    @property
    def narrowed(self) -> bool:
        return any(p.level != "message" for p in self.parts)

    def to_dict(self) -> CauseDocument:
        test = self.test
        return {
            "kind": self.kind,
            "joint": self.joint,
            "label": self.label,
            "text": self.text,
            "parts": [p.to_dict() for p in self.parts],
            "effect": {
                "base_rate": test.base_rate,
                "base_ci": _interval(wilson(test.base_bad, test.base_n, test.confidence)),
                "rate": test.rate,
                "rate_ci": _interval(wilson(test.bad, test.n, test.confidence)),
                "difference": test.effect,
                "difference_ci": _interval(test.effect_ci),
                "p": test.p,
                "p_paired": test.p_paired,
                "level": test.level,
                "counts": {
                    "base_bad": test.base_bad,
                    "base_n": test.base_n,
                    "bad": test.bad,
                    "n": test.n,
                },
            },
            "instead": test.instead,
            "alternative": test.alternative,
            "chain": [
                {
                    "level": max((p.level for p in link.removed), key=_depth),
                    "removed": [p.label for p in link.removed],
                    "texts": [p.text for p in link.removed],
                    "t": link.t,
                    "rate": link.rate,
                    "effect": link.effect,
                    "p": link.p,
                    "bad": link.bad,
                    "n": link.n,
                }
                for link in self.chain
            ],
            "needed": [
                {"t": c.t, "part": c.removed[-1].label, "needed": c.confirmed, "p": c.p}
                for c in self.checks
            ],
            "recheck": None
            if self.recheck is None
            else {
                "fill": self.recheck.fill,
                "holds": self.recheck.confirmed,
                "p": self.recheck.p,
                "bad": self.recheck.bad,
                "n": self.recheck.n,
            },
        }


def _depth(level: str) -> int:
    return LEVELS.index(level)


@dataclass(frozen=True)
class WhyResult:
    """Which text in a decision's context made the agent take it, how sure, at what cost."""

    trace_id: str
    step: int
    step_reason: str
    decision: str
    same: str
    same_spec: str
    policy: str
    base_bad: int
    base_n: int
    intermittent: bool
    verdict: str
    headline: Cause | None
    causes: tuple[Cause, ...]
    tests: tuple[TestRecord, ...]
    untested: tuple[str, ...]
    alpha: float
    min_drop: float
    fill: str
    samples: int
    correction: str
    cost: dict[str, Any]
    stopped: str = "done"
    base_instead: dict[str, int] = field(default_factory=dict)
    base_alternative: str | None = None
    notes: tuple[Note, ...] = ()
    confidence: float = 0.95

    def __post_init__(self) -> None:
        freeze_sequences(self)

    @property
    def base_rate(self) -> float:
        return self.base_bad / self.base_n if self.base_n else float("nan")

    def alternatives(self) -> Counter[str]:
        return Counter(self.base_instead)

    def to_dict(self) -> WhyDocument:
        base = wilson(self.base_bad, self.base_n, self.confidence)
        return {
            "version": WHY_VERSION,
            "kind": "why",
            "trace_id": self.trace_id,
            "step": self.step,
            "step_reason": self.step_reason,
            "decision": self.decision,
            "same": self.same,
            "same_spec": self.same_spec,
            "policy": self.policy,
            "verdict": self.verdict,
            "cause": self.headline.to_dict() if self.headline else None,
            "causes": [c.to_dict() for c in self.causes],
            "base": {
                "bad": self.base_bad,
                "n": self.base_n,
                "rate": self.base_rate if self.base_n else None,
                "ci": _interval(base),
                "intermittent": self.intermittent,
                "instead": self.base_instead,
                "alternative": self.base_alternative,
            },
            "tests": [t.to_dict() for t in self.tests],
            "untested": list(self.untested),
            "alpha": self.alpha,
            "min_drop": self.min_drop,
            "confidence": self.confidence,
            "correction": self.correction,
            "fill": self.fill,
            "samples": self.samples,
            "stopped": self.stopped,
            "cost": self.cost,
            "notes": [n.to_dict() for n in self.notes],
        }
