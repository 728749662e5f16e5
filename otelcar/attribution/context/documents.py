"""The JSON documents of ``otelcar why --json``, declared as types: ``schemas/why.schema.json``
is generated from :class:`WhyDocument` (:mod:`otelcar.typeschema`), and the results'
``to_dict`` methods return these types."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypedDict, get_args

from otelcar.notes import NoteData
from otelcar.typeschema import Doc, Pair

WhyVersion = Literal[1]
WHY_VERSION: int = get_args(WhyVersion)[0]
WhyVerdict = Literal["cause", "prerequisites-only", "no-cause", "not-reproduced", "too-rare"]
TestVerdict = Literal["confirmed", "not-confirmed", "screened-out", "no-samples"]
WHY_VERDICTS: tuple[str, ...] = get_args(WhyVerdict)
TEST_VERDICTS: tuple[str, ...] = get_args(TestVerdict)
Level = Literal["message", "item", "paragraph", "line", "sentence"]

#: How often each other action was taken instead of the decision, by its text.
Instead = dict[str, int]


class PieceDocument(TypedDict):
    """One piece of a decision's context that ``why`` removes."""

    label: str
    level: Level
    message: int
    role: str
    source: str | None
    path: list[str | int]
    span: list[int] | None
    text: str


class ArmCounts(TypedDict):
    """An arm's decisions counted: how many of ``n`` were the decision (``bad``)."""

    bad: int
    n: int


class LostDocument(TypedDict):
    """Re-decisions that errored, left out of the counts."""

    base: int
    arm: int


class TestDocument(TypedDict):
    """One test of ``why``: what was removed, the arm's counts and its verdict."""

    t: int
    purpose: Literal["screen", "drill", "joint", "needed", "recheck"]
    removed: list[str]
    texts: list[str]
    fill: str
    level: float
    reference: list[str] | None
    base: ArmCounts
    bad: int
    n: int
    rate: float | None
    rate_ci: Pair
    effect: float
    effect_ci: Pair
    p: float | None
    p_paired: float | None
    verdict: TestVerdict
    instead: Instead
    alternative: str | None
    plan: dict[str, Any]
    lost: LostDocument


class EffectCounts(TypedDict):
    """The counts of a cause's last test and of the base arm."""

    base_bad: int
    base_n: int
    bad: int
    n: int


class EffectDocument(TypedDict):
    """A cause's effect: the decision rate without it against the base rate."""

    base_rate: float
    base_ci: Pair
    rate: float
    rate_ci: Pair
    difference: float
    difference_ci: Pair
    p: float | None
    p_paired: float | None
    level: float
    counts: EffectCounts


class LinkDocument(TypedDict):
    """One confirmed test on the way from the whole message down to the cause."""

    level: Level
    removed: list[str]
    texts: list[str]
    t: int
    rate: float
    effect: float
    p: float | None
    bad: int
    n: int


class NeededDocument(TypedDict):
    """Whether one part of a joint cause is needed (its own test)."""

    t: int
    part: str
    needed: bool
    p: float | None


class RecheckDocument(TypedDict):
    """The cause removed again with another filler, on its own seeds."""

    fill: str
    holds: bool
    p: float | None
    bad: int
    n: int


class CauseDocument(TypedDict):
    """A cause (or prerequisite) ``why`` found, made of pieces, with its effect."""

    kind: Literal["cause", "prerequisite"]
    joint: bool
    label: str
    text: str
    parts: list[PieceDocument]
    effect: EffectDocument
    instead: Instead
    alternative: str | None
    chain: list[LinkDocument]
    needed: list[NeededDocument]
    recheck: RecheckDocument | None


class BaseDocument(TypedDict):
    """The decision's rate on its unchanged context."""

    bad: int
    n: int
    rate: float | None
    ci: Pair
    intermittent: bool
    instead: Instead
    alternative: str | None


class WhyDocument(TypedDict):
    """``otelcar why --json``: which text in a decision's context made the agent take it."""

    version: WhyVersion
    kind: Literal["why"]
    trace_id: str
    step: int
    step_reason: str
    decision: str
    same: str
    same_spec: str
    policy: str
    verdict: WhyVerdict
    cause: CauseDocument | None
    causes: list[CauseDocument]
    base: BaseDocument
    tests: list[TestDocument]
    untested: Annotated[list[str], Doc("pieces never tested (the budget or the test cap)")]
    alpha: float
    min_drop: float
    confidence: float
    correction: str
    fill: str
    samples: int
    stopped: Literal["done", "budget", "max-tests"]
    cost: dict[str, Any]
    notes: list[NoteData]
