"""The report's sections of a result document, declared as types (:mod:`otelcar.typeschema`):
``timeline`` (the trace's steps, :func:`otelcar.report.data.timeline_section`) and
``alternatives`` (a few rollouts drawn as timelines), which result writers add to an
attribution (:class:`AttributionReportDocument`) so the result can be drawn again."""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, TypedDict, get_args

from otelcar.attribution.aggregate_documents import AggregateDocument
from otelcar.attribution.context.documents import WhyDocument
from otelcar.attribution.fixes.documents import FixDocument
from otelcar.attribution.steps.documents import AttributionDocument
from otelcar.replay.timeline_documents import DiffDocument
from otelcar.typeschema import Doc

TimelineVersion = Literal[1]
TIMELINE_VERSION: int = get_args(TimelineVersion)[0]


class MessageView(TypedDict):
    """A message as the report shows it (long content cut, ``truncated`` says so)."""

    role: str | None
    content: NotRequired[str | None]
    tool_calls: NotRequired[list[dict[str, Any]]]
    tool_call_id: NotRequired[str | None]
    name: NotRequired[str | None]
    truncated: NotRequired[bool]


class ContextView(TypedDict):
    """A decision's context: the messages new since ``same_as_step`` (``shared`` of them are
    that step's)."""

    same_as_step: int | None
    shared: int
    messages: list[MessageView]


class TimelineStep(TypedDict):
    """One step of the trace as the report draws it."""

    step: int
    kind: str
    name: NotRequired[str | None]
    agent: NotRequired[str | None]
    start_ns: NotRequired[int | None]
    end_ns: NotRequired[int | None]
    duration_ms: NotRequired[float | None]
    status: NotRequired[str | None]
    error: NotRequired[str | None]
    model: NotRequired[str | None]
    tokens: NotRequired[dict[str, Any] | None]
    finish_reason: NotRequired[str | None]
    content_captured: NotRequired[bool | None]
    issues: NotRequired[list[str]]
    gist: str
    context: NotRequired[ContextView]
    output: NotRequired[MessageView | None]
    tool: NotRequired[dict[str, Any]]


class TimelineSection(TypedDict):
    """The trace's steps for the report (otelcar.report.data)."""

    version: TimelineVersion
    trace_id: NotRequired[str | None]
    service: NotRequired[str | None]
    start_ns: NotRequired[int | None]
    end_ns: NotRequired[int | None]
    steps: list[TimelineStep]


class Alternative(TypedDict):
    """A rollout drawn as an alternative timeline (otelcar.report.data)."""

    plan: str
    resample_from: NotRequired[int | None]
    rollout: int
    status: str
    error: NotRequired[str | None]
    failed: NotRequired[bool | None]
    decisions: list[dict[str, Any]]


class AttributionReportDocument(AttributionDocument):
    """``otelcar attribute --json``: which step caused the outcome, how sure, at what cost;
    its headline (:func:`otelcar.report.prose.document`), and the report's sections when the
    writer adds them."""

    headline: str
    notes: Annotated[list[str], Doc("the notes, worded (otelcar.report.notes)")]
    timeline: NotRequired[TimelineSection]
    alternatives: NotRequired[list[Alternative]]


class WhyReportDocument(WhyDocument):
    """``otelcar why --json``: which text in a decision's context made the agent take it, and
    the headline that says so (:func:`otelcar.report.prose.document`)."""

    headline: str
    notes: Annotated[list[str], Doc("the notes, worded (otelcar.report.notes)")]


class FixReportDocument(FixDocument):
    """``otelcar fix --json``: candidate fixes of one decision, validated, the best named; and
    the headline that says so (:func:`otelcar.report.prose.document`)."""

    headline: str
    notes: Annotated[list[str], Doc("the notes, worded (otelcar.report.notes)")]


class AggregateReportDocument(AggregateDocument):
    """``otelcar aggregate --json``: step identities ranked by how systematically they cause
    the failures, and the headline that says so (:func:`otelcar.report.prose.document`)."""

    headline: str
    notes: Annotated[list[str], Doc("the notes, worded (otelcar.report.notes)")]


class DiffReportDocument(DiffDocument):
    """``otelcar diff TRACE A [B] --json``: where two runs of one trace part, and the headline
    that says so (:func:`otelcar.report.prose.document`)."""

    headline: str
