"""The result of an attribution: typed data, and its JSON without prose (``to_dict()``; the
headline and the document every front end writes are :mod:`otelcar.report.prose`'s,
``schemas/attribution.schema.json``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from otelcar.attribution.frozen import freeze_sequences
from otelcar.attribution.steps.curve import Baseline, StepEffect
from otelcar.attribution.steps.documents import (
    RESULT_VERSION,
    AttributionDocument,
    ShapleyDocument,
    ShapleyValueDocument,
)
from otelcar.attribution.steps.equivalence import POWER, largest_upper
from otelcar.attribution.steps.policy_check import PolicyCheck
from otelcar.notes import Note


@dataclass
class ShapleyValue:
    step: int
    phi: float
    ci: tuple[float, float]
    permutations: int

    def to_dict(self) -> ShapleyValueDocument:
        return {
            "step": self.step,
            "phi": self.phi,
            "ci": list(self.ci),
            "permutations": self.permutations,
        }


@dataclass
class ShapleyResult:
    values: list[ShapleyValue]
    v_all: float
    v_none: float
    sum_phi: float
    rollouts_per_coalition: int
    permutations: int
    rollouts: int = 0  # every rollout the estimate ran (all coalitions), for the cost

    @property
    def efficiency_gap(self) -> float:
        """Σφ − (v(all) − v(none)): near 0 when the estimate is consistent."""
        return self.sum_phi - (self.v_all - self.v_none)

    def to_dict(self) -> ShapleyDocument:
        return {
            "values": [v.to_dict() for v in self.values],
            "v_all": self.v_all,
            "v_none": self.v_none,
            "sum_phi": self.sum_phi,
            "efficiency_gap": self.efficiency_gap,
            "rollouts_per_coalition": self.rollouts_per_coalition,
            "permutations": self.permutations,
            "rollouts": self.rollouts,
        }


@dataclass(frozen=True)
class AttributionResult:
    """Which step caused the failure, how sure, and what it cost."""

    trace_id: str
    outcome: str
    question: str  # "failure" or "credit"
    mode: str  # fixed | adaptive | bisect
    confidence: float  # the level the reported intervals and tests use
    requested_confidence: float
    verdict: str
    baseline: Baseline
    steps: tuple[StepEffect, ...]
    culprit: StepEffect | None
    ties: tuple[int, ...]
    point_of_no_return: int | None
    harmful_step: int | None  # the decision whose recorded action made the outcome fail
    looks: tuple[int, ...]
    cost: dict[str, Any]
    # why sampling stopped: separated | tied | futility | last-look | budget | bisection | fixed
    stop_reason: str = "last-look"
    shapley: ShapleyResult | None = None
    notes: tuple[Note, ...] = ()
    rollout_errors: tuple[str, ...] = ()
    refutations: tuple[Any, ...] = ()  # refute.Refutation, culprit only
    #: The policy check at the culprit (None when not run).
    policy_check: PolicyCheck | None = None
    #: The equivalence margin "locked-in" needs every step's upper bound on Δ below.
    margin: float | None = None
    #: Without a culprit: any step with Δ at least this would have been found with 80 %
    #: power (:func:`~otelcar.attribution.steps.equivalence.detectable`; None: no step could
    #: have been significant).
    detectable: float | None = None

    def __post_init__(self) -> None:
        freeze_sequences(self)

    def unmeasured(self) -> list[str]:
        """Where the curve has no judged rollout (``"the start"``, ``"step K"``): an
        incomplete run's q there is unknown, not a value."""
        missing = ["the start"] if self.baseline.n == 0 else []
        return missing + [f"step {e.step}" for e in self.steps if e.n == 0]

    def to_dict(self) -> AttributionDocument:
        return {
            "version": RESULT_VERSION,
            "kind": "attribution",
            "trace_id": self.trace_id,
            "outcome": self.outcome,
            "question": self.question,
            "mode": self.mode,
            "confidence": self.confidence,
            "requested_confidence": self.requested_confidence,
            "verdict": self.verdict,
            "culprit": self.culprit.step if self.culprit else None,
            "ties": list(self.ties),
            "point_of_no_return": self.point_of_no_return,
            "harmful_step": self.harmful_step,
            "baseline": self.baseline.to_dict(),
            "steps": [s.to_dict() for s in self.steps],
            "looks": list(self.looks),
            "stop_reason": self.stop_reason,
            "cost": self.cost,
            "shapley": self.shapley.to_dict() if self.shapley else None,
            "notes": [n.to_dict() for n in self.notes],
            "rollout_errors": list(self.rollout_errors[:50]),
            "refutations": [r.to_dict() for r in self.refutations],
            "policy_check": self.policy_check.to_dict() if self.policy_check else None,
            "equivalence": None
            if self.culprit is not None
            else {
                "margin": self.margin,
                "largest_upper": largest_upper(self.steps),
                "detectable_delta": self.detectable,
                "power": POWER,
            },
        }
