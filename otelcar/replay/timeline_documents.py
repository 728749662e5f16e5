"""The JSON documents of kept timelines and their diffs, declared as types
(:mod:`otelcar.typeschema`): ``otelcar timelines --json`` (:class:`TimelinesListDocument`),
``otelcar show --timeline --json`` (:class:`TimelineShowDocument`) and ``otelcar diff --json``
(:class:`DiffDocument`); their schemas in ``schemas/`` are generated from these types."""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, TypedDict, get_args

from otelcar.typeschema import Doc, Extra, Ref

TimelineVersion = Literal[1]
TIMELINE_VERSION: int = get_args(TimelineVersion)[0]
DiffVersion = Literal[1]
DIFF_VERSION: int = get_args(DiffVersion)[0]
#: A timeline's name: what ``--timeline NAME`` accepts and its directory is called.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
RolloutStatus = Literal["final", "horizon", "truncated", "failed", "budget", "running"]
Parted = Literal["context", "action", "length"] | None

#: A normalized message (``schemas/message.schema.json``).
MessageRef = Annotated[dict[str, Any], Ref("message.schema.json")]


class RolloutRecordDocument(TypedDict):
    """How one rollout of a timeline ended."""

    rollout: int
    status: RolloutStatus
    failed: bool | None
    error: str | None
    own_trace: NotRequired[
        Annotated[
            bool,
            Doc(
                "the rollout made a trace of its own (a live rollout whose agent sent its "
                "spans): `otelcar show TRACE --timeline NAME --rollout N --own-trace`"
            ),
        ]
    ]


class TimelineInfoDocument(TypedDict):
    """What ``timeline.json`` holds: what was run, how, and how each rollout ended."""

    version: TimelineVersion
    kind: Literal["timeline"]
    name: Annotated[str, Extra(pattern=NAME_PATTERN)]
    trace_id: str
    plan: Annotated[
        dict[str, Any],
        Doc("the plan as Plan.to_dict() (otelcar rollout --plan reads it)"),
        Extra(required=["interventions"]),
    ]
    plan_text: str
    seed: int
    rollouts: list[RolloutRecordDocument]
    judged: int
    failed: int
    policies: dict[str, str]
    outcome: str | None
    recorded_failed: bool | None
    cost: dict[str, int]
    created: str
    otelcar_version: NotRequired[str]
    note: NotRequired[str | None]
    extra: NotRequired[dict[str, Any]]


class ObservationDocument(TypedDict):
    """What one of a decision's tool calls returned."""

    name: str | None
    arguments: Any
    result: str | None
    error: str | None
    origin: str


class DecisionDocument(TypedDict):
    """One decision of a rollout: where it was, what it did, what its calls returned."""

    index: int
    recorded_step: int | None
    name: str
    agent: str | None
    origin: Annotated[str, Doc("recorded | do | removed | policy:<name> | cache:<name>")]
    action: MessageRef | None
    action_text: str
    context_messages: int | None
    observations: list[ObservationDocument]


class DecisionWithContextDocument(DecisionDocument):
    """A decision with its whole context."""

    context: list[MessageRef] | None


class TimelinesListDocument(TypedDict):
    """``otelcar timelines TRACE --json``: the timelines kept for one trace."""

    trace_id: str
    timelines: list[TimelineInfoDocument]
    problems: Annotated[list[str], Doc("timelines that could not be read, one line each")]


class TimelineShowDocument(TypedDict):
    """``otelcar show TRACE --timeline NAME --json``: one rollout of a timeline."""

    timeline: TimelineInfoDocument
    rollout: int
    decisions: list[DecisionWithContextDocument]


class RunDocument(TypedDict):
    """One side of a diff: a rollout or the recorded run."""

    label: str
    decisions: int
    status: str
    failed: bool | None


class ContextDiffDocument(TypedDict):
    """How two decisions' contexts differ: the messages only one side has."""

    status: Literal["same", "differs", "unknown"]
    shared: int
    a_only: list[MessageRef]
    b_only: list[MessageRef]


class StepDiffDocument(TypedDict):
    """One decision index of two runs, side by side."""

    index: int
    parts: Parted
    context: ContextDiffDocument
    same_action: bool
    a: DecisionDocument | None
    b: DecisionDocument | None


class PathDiffDocument(TypedDict):
    """Where two runs parted, and on what."""

    a: RunDocument
    b: RunDocument
    parted_at: int | None
    parted_on: Parted
    shared_decisions: int
    steps: list[StepDiffDocument]


class PartingDocument(TypedDict):
    """Where one rollout of A parted from B."""

    rollout: int
    parted_at: int | None
    parted_on: Parted
    recorded_step: int | None
    failed: bool | None
    status: str


class DiffDocument(TypedDict):
    """``otelcar diff TRACE A [B] --json``: where two runs of one trace part."""

    version: DiffVersion
    kind: Literal["diff"]
    trace_id: str
    a: Annotated[str, Doc("timeline A's name")]
    b: Annotated[str, Doc("timeline B's name, or 'recorded'")]
    a_plan: NotRequired[str]
    b_plan: NotRequired[str]
    detail: PathDiffDocument
    rollouts: list[PartingDocument]
    a_failed: int
    a_judged: int
    never_parted: int
