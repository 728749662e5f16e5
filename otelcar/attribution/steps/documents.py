"""The JSON documents of an attribution (``otelcar attribute --json``), declared as types:
``schemas/attribution.schema.json`` is generated from :class:`AttributionDocument`
(:mod:`otelcar.typeschema`), and the results' ``to_dict`` methods return these types."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypedDict, get_args

from otelcar.notes import NoteData
from otelcar.typeschema import Doc, Pair

Verdict = Literal["culprit", "locked-in", "undecided"]
StopReason = Literal["separated", "tied", "futility", "last-look", "budget", "bisection", "fixed"]
VERDICTS: tuple[str, ...] = get_args(Verdict)
STOP_REASONS: tuple[str, ...] = get_args(StopReason)
ResultVersion = Literal[1]
RESULT_VERSION: int = get_args(ResultVersion)[0]


class DiscordantDocument(TypedDict):
    """A step's discordant pairs: failing only with the step held, only when re-decided."""

    fail_only_when_held: int
    fail_only_when_redecided: int


class StepDocument(TypedDict):
    """One step of an attribution's curve."""

    index: int
    step: int
    agent: str | None
    name: str | None
    rollouts: int
    failures: int
    q: float
    q_ci: Pair
    pairs: int
    discordant: DiscordantDocument
    delta: float
    delta_ci: Pair
    p_value: float
    p_adjusted: float
    significant: bool
    repeats_recorded_action: bool
    test_alpha: float
    futile: bool
    redecisions: int
    differs_bound: float | None


class BaselineDocument(TypedDict):
    """q_{-1}: the failure rate with every decision re-decided."""

    rollouts: int
    failures: int
    q: float
    q_ci: Pair


class RefutationDocument(TypedDict):
    """One refutation check of an attribution's culprit."""

    name: Literal["placebo", "fresh seeds"]
    description: str
    pairs: int
    delta: float
    delta_ci: Pair
    p_value: float
    passed: bool
    lost: int
    rollouts: int
    e_value: float
    detectable_effect: float | None
    max_pairs: int
    underpowered: bool


class ShapleyValueDocument(TypedDict):
    """One step's Shapley value with its interval."""

    step: int
    phi: float
    ci: Pair
    permutations: int


class ShapleyDocument(TypedDict):
    """Shapley values over the decisions: each step's share of v(all) − v(none)."""

    values: list[ShapleyValueDocument]
    v_all: float
    v_none: float
    sum_phi: float
    efficiency_gap: float
    rollouts_per_coalition: int
    permutations: int
    rollouts: int


class EquivalenceDocument(TypedDict):
    """Without a culprit: the margin locked-in needs every step's upper bound below, the
    largest upper bound, and the smallest Δ found with the given power (null: no step could
    have been significant)."""

    margin: float | None
    largest_upper: float
    detectable_delta: float | None
    power: float


class AttributionDocument(TypedDict):
    """``otelcar attribute --json``: which step caused the outcome, how sure, at what cost."""

    version: ResultVersion
    kind: Literal["attribution"]
    trace_id: str
    outcome: str
    question: Literal["failure", "success"]
    mode: Literal["fixed", "adaptive", "bisect"]
    confidence: float
    requested_confidence: float
    verdict: Verdict
    culprit: int | None
    ties: list[int]
    point_of_no_return: int | None
    harmful_step: int | None
    baseline: BaselineDocument
    steps: list[StepDocument]
    looks: list[int]
    stop_reason: StopReason
    cost: dict[str, Any]
    shapley: ShapleyDocument | None
    notes: list[NoteData]
    rollout_errors: Annotated[list[str], Doc("the first 50 rollout errors")]
    refutations: list[RefutationDocument]
    policy_check: Annotated[
        dict[str, Any] | None, Doc("the policy check at the culprit (null: not run)")
    ]
    equivalence: EquivalenceDocument | None
