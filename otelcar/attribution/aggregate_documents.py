"""The JSON documents of ``otelcar aggregate --json``, declared as types:
``schemas/aggregate.schema.json`` is generated from :class:`AggregateDocument`
(:mod:`otelcar.typeschema`), and the results' ``to_dict`` methods return these types."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypedDict, get_args

from otelcar.notes import NoteData
from otelcar.typeschema import Doc, Pair

AggregateVersion = Literal[1]
AGGREGATE_VERSION: int = get_args(AggregateVersion)[0]
Classification = Literal["design flaw", "suspect", "bad luck", "not blamed"]
TraceStatus = Literal["attributed", "passed", "skipped"]
CLASSES: tuple[str, ...] = get_args(Classification)
TRACE_STATUSES: tuple[str, ...] = get_args(TraceStatus)


class TraceVerdictDocument(TypedDict):
    """One trace's attribution as the aggregate read it (or why it was skipped)."""

    trace_id: str
    status: TraceStatus
    verdict: Literal["culprit", "locked-in", "undecided"] | None
    culprit_step: int | None
    culprit_identity: str | None
    delta: float | None
    delta_ci: Pair | None
    p_adjusted: float | None
    headline: str | None
    reason: str | None
    effects: Annotated[dict[str, float], Doc("identity → the largest Δ in this trace")]
    decisions: Annotated[dict[str, int], Doc("identity → its decision steps in this trace")]
    cost: dict[str, Any]


class StepStatsDocument(TypedDict):
    """One step identity across the traces: how often it was the culprit, against chance."""

    identity: str
    traces: int
    decisions: int
    culprit: int
    share: float
    share_ci: Pair
    expected: float
    p_value: float
    p_adjusted: float
    mean_delta: float | None
    mean_delta_ci: Pair | None
    delta_sd: float | None
    effect_traces: int
    classification: Classification


class CountsDocument(TypedDict):
    """Traces by status."""

    attributed: int
    passed: int
    skipped: int


class AggregateDocument(TypedDict):
    """``otelcar aggregate --json``: step identities ranked by how systematically they
    cause the failures."""

    version: AggregateVersion
    kind: Literal["aggregate"]
    service: str | None
    since: str | None
    confidence: float
    counts: CountsDocument
    method: Annotated[dict[str, Any], Doc("how identities, intervals and tests were made")]
    steps: list[StepStatsDocument]
    traces: list[TraceVerdictDocument]
    cost: dict[str, Any]
    notes: list[NoteData]
