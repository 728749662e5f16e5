"""Where two runs part: the recorded run and a kept timeline, or two timelines.

Runs are compared decision by decision, in order (:class:`~otelcar.replay.timelines.RunPath`).
At each position the contexts are compared message by message (the shared prefix, then what
each side has that the other has not) and the actions as decisions (role, text and tool calls
with their arguments; call ids ignored, as providers mint new ones:
:func:`~otelcar.replay.recorded.same_message`). The runs *part* at the first decision whose
context or action differs, or where one run ends and the other goes on; every later position
is reported too, with the tool results each side got, then how each run ended.

A timeline holds many rollouts. :func:`diff_timelines` details one rollout against one (the
same index of the other timeline by default: rollout ``r`` of two plans used the same seeds),
and summarizes every rollout: where it parted from the other run and how it ended.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

from otelcar.messages import Message
from otelcar.replay.recorded import RecordedRun, same_message
from otelcar.replay.timeline_documents import (
    DIFF_VERSION,
    ContextDiffDocument,
    DiffDocument,
    PartingDocument,
    PathDiffDocument,
    RunDocument,
    StepDiffDocument,
)
from otelcar.replay.timelines import (
    PathDecision,
    PathObservation,
    RunPath,
    Timeline,
    TimelineError,
    load_timeline,
)

RECORDED = "recorded"


def recorded_path(run: RecordedRun, failed: bool | None) -> RunPath:
    """The recorded run as a :class:`RunPath` (label ``recorded``; ``failed``: its outcome,
    None when not judged)."""
    return RunPath(
        RECORDED,
        tuple(
            PathDecision(
                index=d.index,
                recorded_step=d.step,
                name=d.name,
                agent=d.agent,
                context=None if d.context is None else tuple(d.context),
                action=d.action,
                observations=tuple(
                    PathObservation(o.call.name, o.call.arguments, o.result, o.error, "recorded")
                    for o in d.observations
                ),
                origin="recorded",
            )
            for d in run.decisions
        ),
        failed,
        "final",
    )


@dataclass(frozen=True)
class ContextChange:
    """How decision contexts compare: ``same``, ``differs`` (the first ``shared`` messages
    agree; ``a_only``/``b_only`` are the rest of each), or ``unknown`` (a side has no
    captured context)."""

    status: str
    shared: int
    a_only: tuple[Message, ...] = ()
    b_only: tuple[Message, ...] = ()

    def describe(self) -> str:
        if self.status != "differs":
            return self.status
        return (
            f"differs after message {self.shared}: "
            f"{len(self.a_only)} only in A, {len(self.b_only)} only in B"
        )

    def to_dict(self) -> ContextDiffDocument:
        return {
            "status": self.status,
            "shared": self.shared,
            "a_only": [m.to_dict() for m in self.a_only],
            "b_only": [m.to_dict() for m in self.b_only],
        }


def compare_contexts(a: tuple[Message, ...] | None, b: tuple[Message, ...] | None) -> ContextChange:
    """The :class:`ContextChange` from context ``a`` to context ``b``."""
    if a is None or b is None:
        return ContextChange("unknown", 0)
    shared = 0
    for x, y in zip(a, b, strict=False):
        if not _same_context_message(x, y):
            break
        shared += 1
    if shared == len(a) == len(b):
        return ContextChange("same", shared)
    return ContextChange("differs", shared, a[shared:], b[shared:])


def _same_context_message(a: Message, b: Message) -> bool:
    """Messages of a context agree as decisions do, and tool results answer the same call
    position (their ids are the provider's and differ between runs)."""
    return same_message(a, b) and (a.name or None) == (b.name or None)


@dataclass(frozen=True)
class StepDiff:
    """One position of the two runs: each side's decision (None: that run has ended), how
    their contexts compare, whether their actions are the same decision."""

    index: int
    a: PathDecision | None
    b: PathDecision | None
    context: ContextChange
    same_action: bool

    @property
    def parts(self) -> str | None:
        """Why the runs differ here (``context``, ``action``, ``length``), None when not."""
        if self.a is None or self.b is None:
            return "length"
        if self.context.status == "differs":
            return "context"
        if not self.same_action:
            return "action"
        return None

    def to_dict(self) -> StepDiffDocument:
        return {
            "index": self.index,
            "parts": self.parts,
            "context": self.context.to_dict(),
            "same_action": self.same_action,
            "a": None if self.a is None else self.a.to_dict(),
            "b": None if self.b is None else self.b.to_dict(),
        }


@dataclass(frozen=True)
class PathDiff:
    """Two runs side by side: where they part and every position from there on."""

    a: RunPath
    b: RunPath
    steps: tuple[StepDiff, ...]

    @property
    def parted(self) -> StepDiff | None:
        """The first position where the runs differ (None: they never part)."""
        return next((s for s in self.steps if s.parts is not None), None)

    def to_dict(self, *, shared_steps: bool = False) -> PathDiffDocument:
        """JSON: where they part, then each position from there on (every position with
        ``shared_steps``), and how each run ended."""
        parted = self.parted
        first = parted.index if parted is not None else len(self.steps)
        return {
            "a": _run_dict(self.a),
            "b": _run_dict(self.b),
            "parted_at": None if parted is None else parted.index,
            "parted_on": None if parted is None else parted.parts,
            "shared_decisions": first,
            "steps": [s.to_dict() for s in self.steps if shared_steps or s.index >= first],
        }


def _run_dict(path: RunPath) -> RunDocument:
    return {
        "label": path.label,
        "decisions": len(path.decisions),
        "status": path.status,
        "failed": path.failed,
    }


def diff_paths(a: RunPath, b: RunPath, *, until_parted: bool = False) -> PathDiff:
    """Compare runs ``a`` and ``b`` position by position (with ``until_parted``, only up
    to the first position where they differ: enough to say where they part)."""
    steps: list[StepDiff] = []
    for index in range(max(len(a.decisions), len(b.decisions))):
        x = a.decisions[index] if index < len(a.decisions) else None
        y = b.decisions[index] if index < len(b.decisions) else None
        context = (
            compare_contexts(x.context, y.context)
            if x is not None and y is not None
            else ContextChange("unknown", 0)
        )
        same = (
            x is not None
            and y is not None
            and (
                x.action is y.action
                or (
                    x.action is not None
                    and y.action is not None
                    and same_message(x.action, y.action)
                )
            )
        )
        steps.append(StepDiff(index, x, y, context, same))
        if until_parted and steps[-1].parts is not None:
            break
    return PathDiff(a, b, tuple(steps))


@dataclass(frozen=True)
class RolloutParting:
    """Where one rollout of timeline A parted from run B, and how it ended."""

    rollout: int
    parted_at: int | None
    parted_on: str | None
    recorded_step: int | None  # the recorded step of the decision where it parted
    failed: bool | None
    status: str

    def to_dict(self) -> PartingDocument:
        return {
            "rollout": self.rollout,
            "parted_at": self.parted_at,
            "parted_on": self.parted_on,
            "recorded_step": self.recorded_step,
            "failed": self.failed,
            "status": self.status,
        }


@dataclass(frozen=True)
class TimelineDiff:
    """Timeline A against run B (the recorded run or another timeline): one rollout in
    detail and where every rollout parted."""

    trace_id: str
    a_name: str
    b_name: str  # ``recorded`` or a timeline's name
    detail: PathDiff
    rollouts: tuple[RolloutParting, ...]
    a_plan: str
    b_plan: str
    #: The detailed rollouts' shared decisions are in the document too.
    shared_steps: bool = False

    def parting_counts(self) -> Counter[int | None]:
        """Rollouts per decision where they parted (None: never)."""
        return Counter(r.parted_at for r in self.rollouts)

    def to_dict(self) -> DiffDocument:
        judged = [r for r in self.rollouts if r.failed is not None]
        return {
            "version": DIFF_VERSION,
            "kind": "diff",
            "trace_id": self.trace_id,
            "a": self.a_name,
            "b": self.b_name,
            "a_plan": self.a_plan,
            "b_plan": self.b_plan,
            "detail": self.detail.to_dict(shared_steps=self.shared_steps),
            "rollouts": [r.to_dict() for r in self.rollouts],
            "a_failed": sum(bool(r.failed) for r in judged),
            "a_judged": len(judged),
            "never_parted": sum(r.parted_at is None for r in self.rollouts),
        }


def diff_timelines(
    a: Timeline,
    b: Timeline | RunPath,
    *,
    rollout: int | None = None,
    b_rollout: int | None = None,
) -> TimelineDiff:
    """Timeline ``a`` against ``b``: a timeline, or a run (the recorded one:
    :func:`recorded_path`). Rollout ``rollout`` of ``a`` (default: its first) is detailed
    against ``b_rollout`` of ``b`` (default: the same index, else ``b``'s first); every
    rollout of ``a`` is summarized against its counterpart (same index when ``b`` is a
    timeline and has it, else ``b``'s detailed rollout)."""
    indexes = [r.rollout for r in a.info.rollouts]
    if not indexes:
        raise TimelineError(f"timeline {a.info.name!r} has no rollouts")
    chosen = indexes[0] if rollout is None else rollout
    a_path = a.path(chosen)
    if isinstance(b, Timeline):
        b_indexes = {r.rollout for r in b.info.rollouts}
        if b_rollout is None:
            b_rollout = chosen if chosen in b_indexes else min(b_indexes, default=0)
        b_path = b.path(b_rollout)
        b_name, b_plan = b.info.name, b.info.plan_text
    else:
        b_path, b_name, b_plan = b, b.label, "the recorded run"
    partings = []
    for index in indexes:
        path = a_path if index == chosen else a.path(index)
        other = b_path
        if isinstance(b, Timeline) and index != b_rollout and index in b_indexes:
            other = b.path(index)
        parted = diff_paths(path, other, until_parted=True).parted
        side = None if parted is None else (parted.a or parted.b)
        partings.append(
            RolloutParting(
                index,
                None if parted is None else parted.index,
                None if parted is None else parted.parts,
                None if side is None else side.recorded_step,
                path.failed,
                path.status,
            )
        )
    return TimelineDiff(
        trace_id=a.info.trace_id,
        a_name=a.info.name,
        b_name=b_name,
        detail=diff_paths(a_path, b_path),
        rollouts=tuple(partings),
        a_plan=a.info.plan_text,
        b_plan=b_plan,
    )


def diff_kept(
    store_root: Any,
    run: RecordedRun,
    a: str,
    b: str | None = None,
    *,
    rollout: int | None = None,
    b_rollout: int | None = None,
    all_steps: bool = False,
) -> TimelineDiff:
    """Kept timeline ``a`` of ``run``'s trace against timeline ``b`` (``None`` or
    ``"recorded"``: the recorded run, judged as ``a`` judged it); ``all_steps``: its document
    has the detailed rollouts' shared decisions. Its document
    (:func:`otelcar.report.prose.document`, ``schemas/diff.schema.json``) is what ``otelcar
    diff --json`` writes and the MCP tool ``diff_timelines`` returns."""
    first = load_timeline(store_root, run.trace_id, a)
    if b is None or b == RECORDED:
        other: Timeline | RunPath = recorded_path(run, first.info.recorded_failed)
    else:
        other = load_timeline(store_root, run.trace_id, b)
    diff = diff_timelines(first, other, rollout=rollout, b_rollout=b_rollout)
    return replace(diff, shared_steps=all_steps)
