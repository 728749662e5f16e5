"""The JSON documents of ``otelcar fix --json``, declared as types: ``schemas/fix.schema.json``
is generated from :class:`FixDocument` (:mod:`otelcar.typeschema`), and the results'
``to_dict`` methods return these types."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypedDict, get_args

from otelcar.attribution.context.documents import ArmCounts, LostDocument
from otelcar.notes import NoteData
from otelcar.typeschema import Doc, Pair

FixVersion = Literal[1]
FIX_VERSION: int = get_args(FixVersion)[0]
FixKind = Literal["untrusted", "guard", "both", "source", "forced"]
FixVerdict = Literal["PASS", "PART", "FAIL", "UNTESTED"]
FIX_KINDS: tuple[str, ...] = get_args(FixKind)
FIX_VERDICTS: tuple[str, ...] = get_args(FixVerdict)


class DecisionCheckDocument(TypedDict):
    """The fix at the decision: bad re-decisions with it against the unfixed base arm."""

    bad: int
    n: int
    rate: float | None
    ci: Pair
    base_bad: int
    base_n: int
    difference: float | None
    difference_ci: Pair
    p: float
    p_adjusted: float
    verdict: FixVerdict
    instead: dict[str, int]
    alternative: str | None
    alternative_action: Annotated[
        dict[str, Any] | None,
        Doc(
            "the most common good action under the fix, whole (a message of "
            "schemas/message.schema.json)"
        ),
    ]
    lost: LostDocument


class ForwardPairs(TypedDict):
    """The forward rollouts paired by seed: failed in both, only fixed, only base, neither."""

    both: int
    only_fixed: int
    only_base: int
    neither: int


class ForwardCheckDocument(TypedDict):
    """The fix run forward: how often the whole run still fails, against the unfixed run."""

    failed: int
    n: int
    rate: float | None
    ci: Pair
    base_failed: int
    base_n: int
    base_rate: float | None
    difference: float | None
    difference_ci: Pair
    pairs: ForwardPairs
    p: float
    p_adjusted: float
    verdict: FixVerdict
    errors: Annotated[list[str], Doc("the first 20 rollout errors")]
    rollouts: int
    rate_below_max: bool


class CandidateDocument(TypedDict):
    """One candidate fix and how it fared."""

    name: str
    kind: FixKind
    description: str
    rule: Annotated[str | None, Doc("text appended to the system prompt")]
    plan: Annotated[dict[str, Any], Doc("the edits at the step (Plan JSON), or the forced action")]
    forward_plan: dict[str, Any] | None
    verdict: FixVerdict
    decision: DecisionCheckDocument | None
    forward: ForwardCheckDocument | None


class FixBaseDocument(TypedDict):
    """The unfixed base arm the candidates were tested against; ``why``'s own base arm."""

    bad: int
    n: int
    why: ArmCounts | None


class FixDocument(TypedDict):
    """``otelcar fix --json``: candidate fixes of one decision, validated; the best named."""

    version: FixVersion
    kind: Literal["fix"]
    trace_id: str
    step: int
    decision: str
    same: str
    same_spec: str
    cause: str | None
    cause_label: str | None
    base: FixBaseDocument
    best: str | None
    candidates: list[CandidateDocument]
    max_rate: float
    alpha: float
    confidence: float
    samples: int
    outcome: str | None
    cost: dict[str, Any]
    notes: list[NoteData]
