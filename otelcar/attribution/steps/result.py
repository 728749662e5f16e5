"""The result of an attribution: typed, printable, and JSON
(``schemas/attribution.schema.json``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from otelcar.attribution.steps.curve import Baseline, StepEffect
from otelcar.attribution.steps.documents import (
    RESULT_VERSION,
    AttributionDocument,
    ShapleyDocument,
    ShapleyValueDocument,
)
from otelcar.attribution.steps.equivalence import POWER, largest_upper, seen_text
from otelcar.cost import policy_calls_text


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
    steps: list[StepEffect]
    culprit: StepEffect | None
    ties: list[int]
    point_of_no_return: int | None
    harmful_step: int | None  # the decision whose recorded action made the outcome fail
    looks: list[int]
    cost: dict[str, Any]
    # why sampling stopped: separated | tied | futility | last-look | budget | bisection | fixed
    stop_reason: str = "last-look"
    shapley: ShapleyResult | None = None
    notes: list[str] = field(default_factory=list)
    rollout_errors: list[str] = field(default_factory=list)
    refutations: list[Any] = field(default_factory=list)  # refute.Refutation, culprit only
    #: The policy check at the culprit (``PolicyCheck.to_dict()``; None when not run).
    policy_check: dict[str, Any] | None = None
    #: The equivalence margin "locked-in" needs every step's upper bound on Δ below.
    margin: float | None = None
    #: Without a culprit: any step with Δ at least this would have been found with 80 %
    #: power (:func:`~otelcar.attribution.steps.equivalence.detectable`; None: no step could
    #: have been significant).
    detectable: float | None = None

    def headline(self) -> str:
        """One sentence: what, where, how sure, at what cost."""
        calls = policy_calls_text(self.cost)
        if self.verdict == "culprit" and self.culprit is not None:
            c = self.culprit
            where = f"step {c.step} ({c.name}" + (f", agent {c.agent}" if c.agent else "") + ")"
            tie = f"; cannot be told apart from steps {self.ties}" if self.ties else ""
            checks = ""
            if self.refutations:
                passed = all(r.passed for r in self.refutations)
                names = " and ".join(r.name for r in self.refutations)
                checks = (
                    f" Refutation ({names}): passed."
                    if passed
                    else " Refutation FAILED: "
                    + "; ".join(r.summary() for r in self.refutations if not r.passed)
                    + "."
                )
            return (
                f"Step {c.step} caused the {self.question}: committing {where} raised "
                f"P({self.question}) by {c.delta:+.2f} "
                f"[{c.delta_ci.low:+.2f}, {c.delta_ci.high:+.2f}] "
                f"({self.confidence:.1%} CI, p_adj={c.p_adjusted:.2g}, {c.pairs} paired "
                f"rollouts){tie}.{checks}{self._policy_warning()} Cost: {calls}."
            )
        if self.verdict == "locked-in":
            target = (
                f" The harmful call was made at step {self.harmful_step}; run "
                f"`otelcar why --step {self.harmful_step}`."
                if self.harmful_step is not None
                else ""
            )
            most = largest_upper(self.steps)
            margin = f", below the margin {self.margin:g}" if self.margin is not None else ""
            return (
                f"Locked in: re-deciding every step still ends in {self.question} "
                f"(q_start={self.baseline.q:.2f} [{self.baseline.q_ci.low:.2f}, "
                f"{self.baseline.q_ci.high:.2f}]), and no step's effect was significant at "
                f"{self.confidence:.1%} with {self.rollouts_text()}: every step's upper bound "
                f"is Δ ≤ {most:+.2f}{margin}; {self.seen()}.{target} Cost: {calls}."
            )
        unmeasured = self.unmeasured()
        bounded = [e for e in self.steps if e.repeats_recorded and e.n > 0]
        tail = (
            f"; the re-decisions of steps {[e.step for e in bounded]} always repeated the "
            "recorded action, so their effects are only bounded (up to "
            f"±{max(e.delta_ci.high for e in bounded):.2f})"
            if bounded
            else ""
        )
        if unmeasured:
            cause = (
                "the budget ran out"
                if self.stop_reason == "budget"
                else "every rollout of some plans failed"
            )
            return (
                f"Undecided: {cause} before every step was measured — q at "
                f"{', '.join(unmeasured)} {'has' if len(unmeasured) == 1 else 'have'} no "
                "judged rollout, so the effects there are "
                f"unknown; among the steps measured, none was significant at "
                f"{self.confidence:.1%}{tail}. "
                f"Cost: {calls}."
            )
        above = (
            f"; not locked in: the largest upper bound, Δ ≤ {largest_upper(self.steps):+.2f}, "
            f"is not below the margin {self.margin:g}"
            if self.margin is not None
            and self.baseline.q_ci.low >= 0.5
            and largest_upper(self.steps) >= self.margin
            else ""
        )
        return (
            f"Undecided: no step's effect was significant at {self.confidence:.1%} with "
            f"{self.rollouts_text()}{tail}{above}; {self.seen()}. Cost: {calls}."
        )

    def seen(self) -> str:
        """Which effects a verdict without a culprit would have seen (a clause)."""
        return seen_text(self.detectable, self.rollouts_text())

    def unmeasured(self) -> list[str]:
        """Where the curve has no judged rollout (``"the start"``, ``"step K"``): an
        incomplete run's q there is unknown, not a value."""
        missing = ["the start"] if self.baseline.n == 0 else []
        return missing + [f"step {e.step}" for e in self.steps if e.n == 0]

    def _policy_warning(self) -> str:
        """A sentence when the policy check found the policy rarely reproduces the recorded
        action at a step the verdict names (empty otherwise)."""
        check = self.policy_check or {}
        named = {self.culprit.step if self.culprit else None, self.harmful_step}
        flagged = [
            d for d in check.get("decisions", []) if d.get("unfaithful") and d["step"] in named
        ]
        if not flagged:
            return ""
        shown = ", ".join(f"step {d['step']} ({d['reproduced']}/{d['n']})" for d in flagged)
        differences = sorted({x for d in flagged for x in d.get("differences") or ()})
        why = (
            "its request differs from the recorded one (" + "; ".join(differences) + ")"
            if differences
            else "it was recorded at temperature 0"
        )
        return (
            f" The policy rarely reproduces the recorded action at {shown} and {why}: these "
            "counterfactuals may describe another agent than the one that ran."
        )

    def rollouts_text(self) -> str:
        """``"up to N rollouts per plan"`` (the last look), for the headlines."""
        most = self.looks[-1] if self.looks else max((e.n for e in self.steps), default=0)
        return f"up to {most} rollouts per plan"

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
            "headline": self.headline(),
            "culprit": self.culprit.step if self.culprit else None,
            "ties": self.ties,
            "point_of_no_return": self.point_of_no_return,
            "harmful_step": self.harmful_step,
            "baseline": self.baseline.to_dict(),
            "steps": [s.to_dict() for s in self.steps],
            "looks": self.looks,
            "stop_reason": self.stop_reason,
            "cost": self.cost,
            "shapley": self.shapley.to_dict() if self.shapley else None,
            "notes": self.notes,
            "rollout_errors": self.rollout_errors[:50],
            "refutations": [r.to_dict() for r in self.refutations],
            "policy_check": self.policy_check,
            "equivalence": None
            if self.culprit is not None
            else {
                "margin": self.margin,
                "largest_upper": largest_upper(self.steps),
                "detectable_delta": self.detectable,
                "power": POWER,
            },
        }
