"""Named timelines: the rollouts of a plan kept in the store, to list, show and diff later.

``otelcar rollout TRACE … --save NAME`` keeps one :class:`~otelcar.replay.engine.RolloutSet`
under ``<store>/timelines/<trace>/<NAME>/``:

- ``timeline.json`` — :class:`TimelineInfo`: the plan, the base seed, the policies and the
  outcome as configured, every rollout's status, outcome and error, the recorded run's
  outcome, the cost, when and by which otelcar it was made;
- ``steps.parquet`` — every step of every rollout
  (:data:`~otelcar.replay.rollout_table.ROLLOUT_SCHEMA`: contexts, actions, tool calls and
  results, where each came from, the seeds);
- ``traces.parquet`` — only where rollouts made traces of their own (live rollouts whose agent
  sent its spans: :mod:`otelcar.live.spans`): those traces' steps
  (:data:`~otelcar.schema.STEPS_SCHEMA`) with a ``rollout`` column.

A timeline is written whole: into a hidden folder beside it, renamed into place, so a reader
never sees half of one, and an existing name is replaced only when asked. Names are short
words (:data:`NAME`); a trace id that is not a safe folder name is kept under its digest
(the id itself is in ``timeline.json``). Reading checks the version and the files, and a
damaged timeline is a :class:`TimelineError` that names it, never a crash of the listing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import polars as pl

from otelcar.errors import OtelcarError
from otelcar.messages import Message, decode_arguments, describe_action
from otelcar.replay.engine import RolloutSet
from otelcar.replay.rollout_table import ROLLOUT_SCHEMA
from otelcar.replay.timeline_documents import (
    NAME_PATTERN,
    TIMELINE_VERSION,
    DecisionDocument,
    RolloutRecordDocument,
    TimelineInfoDocument,
    TimelinesListDocument,
)
from otelcar.schema import STEPS_SCHEMA
from otelcar.version import __version__

#: What a timeline may be called: a letter or digit, then letters, digits, ``.``, ``_``, ``-``.
NAME = re.compile(NAME_PATTERN)
_SAFE_TRACE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
INFO_FILE = "timeline.json"
STEPS_FILE = "steps.parquet"
TRACES_FILE = "traces.parquet"


class TimelineError(OtelcarError):
    """A timeline that cannot be saved or read: a bad name, a name taken, damaged files."""


class TimelineNotFound(TimelineError):
    """No timeline of that name is kept for the trace."""


def timelines_dir(store_root: str | Path) -> Path:
    """Where the store at ``store_root`` keeps its timelines."""
    return Path(store_root) / "timelines"


def trace_dir(store_root: str | Path, trace_id: str) -> Path:
    """The folder of ``trace_id``'s timelines (its id when that is a safe folder name, else
    ``sha256-`` and its digest)."""
    if _SAFE_TRACE.match(trace_id) and trace_id not in (".", ".."):
        folder = trace_id
    else:
        folder = "sha256-" + hashlib.sha256(trace_id.encode("utf-8")).hexdigest()[:40]
    return timelines_dir(store_root) / folder


def check_name(name: str) -> str:
    """``name`` when it may name a timeline, else :class:`TimelineError` saying why."""
    if not NAME.match(name):
        raise TimelineError(
            f"{name!r} cannot name a timeline: use up to 64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name


@dataclass(frozen=True)
class RolloutRecord:
    """How one rollout of a timeline ended: its status (final | horizon | truncated |
    failed | budget), its outcome (``failed``: None when not judged), its error, and whether
    it made a trace of its own (``traces.parquet``)."""

    rollout: int
    status: str
    failed: bool | None
    error: str | None = None
    own_trace: bool = False

    def to_dict(self) -> RolloutRecordDocument:
        return {
            "rollout": self.rollout,
            "status": self.status,
            "failed": self.failed,
            "error": self.error,
            "own_trace": self.own_trace,
        }


@dataclass(frozen=True)
class TimelineInfo:
    """What ``timeline.json`` holds: what was run, how, and how each rollout ended."""

    name: str
    trace_id: str
    plan: dict[str, Any]
    plan_text: str
    seed: int
    rollouts: list[RolloutRecord]
    policies: dict[str, str]
    outcome: str | None
    recorded_failed: bool | None  # the recorded run judged by the same outcome
    cost: dict[str, int]
    created: str  # UTC, ISO 8601
    otelcar_version: str = __version__
    note: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def judged(self) -> int:
        return sum(r.failed is not None for r in self.rollouts)

    @property
    def failed(self) -> int:
        return sum(bool(r.failed) for r in self.rollouts)

    def rollout(self, index: int) -> RolloutRecord:
        """The record of rollout ``index``; :class:`TimelineError` listing the ones kept."""
        for record in self.rollouts:
            if record.rollout == index:
                return record
        kept = ", ".join(str(r.rollout) for r in self.rollouts) or "none"
        raise TimelineError(f"timeline {self.name!r} has no rollout {index} (kept: {kept})")

    def to_dict(self) -> TimelineInfoDocument:
        return {
            "version": TIMELINE_VERSION,
            "kind": "timeline",
            "name": self.name,
            "trace_id": self.trace_id,
            "plan": self.plan,
            "plan_text": self.plan_text,
            "seed": self.seed,
            "rollouts": [r.to_dict() for r in self.rollouts],
            "judged": self.judged,
            "failed": self.failed,
            "policies": self.policies,
            "outcome": self.outcome,
            "recorded_failed": self.recorded_failed,
            "cost": self.cost,
            "created": self.created,
            "otelcar_version": self.otelcar_version,
            "note": self.note,
            **({"extra": self.extra} if self.extra else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TimelineInfo:
        if data.get("kind") != "timeline" or data.get("version") != TIMELINE_VERSION:
            raise ValueError(
                f"not a version-{TIMELINE_VERSION} timeline "
                f"(kind {data.get('kind')!r}, version {data.get('version')!r})"
            )
        return cls(
            name=str(data["name"]),
            trace_id=str(data["trace_id"]),
            plan=dict(data["plan"]),
            plan_text=str(data.get("plan_text") or ""),
            seed=int(data["seed"]),
            rollouts=[
                RolloutRecord(
                    int(r["rollout"]),
                    str(r["status"]),
                    r.get("failed"),
                    r.get("error"),
                    bool(r.get("own_trace", False)),
                )
                for r in data["rollouts"]
            ],
            policies={str(k): str(v) for k, v in (data.get("policies") or {}).items()},
            outcome=data.get("outcome"),
            recorded_failed=data.get("recorded_failed"),
            cost={str(k): int(v) for k, v in (data.get("cost") or {}).items()},
            created=str(data.get("created") or ""),
            otelcar_version=str(data.get("otelcar_version") or ""),
            note=data.get("note"),
            extra=dict(data.get("extra") or {}),
        )


@dataclass(frozen=True)
class PathObservation:
    """One tool call of a run and what it returned, and who answered it."""

    name: str | None
    arguments: Any
    result: str | None
    error: str | None
    origin: str


@dataclass(frozen=True)
class PathDecision:
    """One decision of a run as it happened: the context it saw, the action it took, what
    its tool calls returned, and where the action came from (recorded | do | removed |
    policy:<name> | cache:<name>)."""

    index: int
    recorded_step: int | None
    name: str
    agent: str | None
    context: tuple[Message, ...] | None
    action: Message | None
    observations: tuple[PathObservation, ...]
    origin: str

    def to_dict(self, *, context: bool = False) -> DecisionDocument:
        """JSON: where it was, what it did (``action_text``: one line), what its calls
        returned; the whole context too with ``context`` (else its length)."""
        out: DecisionDocument = {
            "index": self.index,
            "recorded_step": self.recorded_step,
            "name": self.name,
            "agent": self.agent,
            "origin": self.origin,
            "action": None if self.action is None else self.action.to_dict(),
            "action_text": describe_action(self.action),
            "context_messages": None if self.context is None else len(self.context),
            "observations": [
                {
                    "name": o.name,
                    "arguments": o.arguments,
                    "result": o.result,
                    "error": o.error,
                    "origin": o.origin,
                }
                for o in self.observations
            ],
        }
        if context:
            out["context"] = None if self.context is None else [m.to_dict() for m in self.context]
        return out


@dataclass(frozen=True)
class RunPath:
    """One run, recorded or counterfactual, as its decisions in order and how it ended."""

    label: str
    decisions: tuple[PathDecision, ...]
    failed: bool | None
    status: str


@dataclass(frozen=True)
class Timeline:
    """A kept timeline: its :class:`TimelineInfo`, every rollout's steps and, where rollouts
    made traces of their own, those traces' steps (``rollout`` column; ``None``: none)."""

    info: TimelineInfo
    steps: pl.DataFrame
    traces: pl.DataFrame | None = None

    def rollout_trace(self, index: int) -> pl.DataFrame | None:
        """Rollout ``index``'s own trace (:data:`~otelcar.schema.STEPS_SCHEMA`), or ``None``
        when it made none (the rebuilt agent; a live agent that sent no spans)."""
        self.info.rollout(index)
        if self.traces is None:
            return None
        found = self.traces.filter(pl.col("rollout") == index).drop("rollout")
        return found if found.height else None

    def rollout_steps(self, index: int) -> pl.DataFrame:
        """The steps of rollout ``index`` (:data:`ROLLOUT_SCHEMA`)."""
        self.info.rollout(index)
        found = self._by_rollout.get(index)
        return found if found is not None else self.steps.clear()

    @cached_property
    def _by_rollout(self) -> dict[int, pl.DataFrame]:
        """The steps split by rollout once: a diff walks every rollout, and filtering the
        whole table for each was work in rollouts × rows."""
        return {
            key[0]: frame for key, frame in self.steps.partition_by("rollout", as_dict=True).items()
        }

    def path(self, index: int) -> RunPath:
        """Rollout ``index`` as a :class:`RunPath` (label ``NAME#index``)."""
        record = self.info.rollout(index)
        decisions: list[PathDecision] = []
        for row in self.rollout_steps(index).sort("step").iter_rows(named=True):
            if row["kind"] == "llm":
                context = row["input_messages"]
                decisions.append(
                    PathDecision(
                        index=len(decisions),
                        recorded_step=row["recorded_step"],
                        name=row["name"] or "",
                        agent=row["agent_name"],
                        context=None
                        if context is None
                        else tuple(Message.from_row(m) for m in context),
                        action=None if row["output"] is None else Message.from_row(row["output"]),
                        observations=(),
                        origin=row["origin"] or "",
                    )
                )
            elif decisions:
                last = decisions[-1]
                observation = PathObservation(
                    row["tool_name"],
                    decode_arguments(row["tool_args"]),
                    row["tool_result"],
                    row["error"],
                    row["origin"] or "",
                )
                decisions[-1] = PathDecision(
                    last.index,
                    last.recorded_step,
                    last.name,
                    last.agent,
                    last.context,
                    last.action,
                    (*last.observations, observation),
                    last.origin,
                )
        return RunPath(f"{self.info.name}#{index}", tuple(decisions), record.failed, record.status)


def save_timeline(
    store_root: str | Path,
    name: str,
    result: RolloutSet,
    *,
    trace_id: str,
    seed: int,
    policies: dict[str, str],
    outcome: str | None,
    recorded_failed: bool | None,
    overwrite: bool = False,
    note: str | None = None,
) -> TimelineInfo:
    """Keep ``result``'s rollouts as timeline ``name`` of ``trace_id``, written whole.

    :class:`TimelineError` when the name is not allowed, or is taken and ``overwrite`` is
    false (nothing is written then)."""
    check_free(store_root, trace_id, name, overwrite=overwrite)
    folder = trace_dir(store_root, trace_id)
    final = folder / name
    info = TimelineInfo(
        name=name,
        trace_id=trace_id,
        plan=result.plan.to_dict(),
        plan_text=result.plan.describe(),
        seed=seed,
        rollouts=[
            RolloutRecord(r.index, r.status, failed, r.error, r.trace is not None)
            for r, failed in zip(result.rollouts, result.failures, strict=True)
        ],
        policies=dict(policies),
        outcome=outcome,
        recorded_failed=recorded_failed,
        cost=dict(result.cost),
        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        note=note,
    )
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f".{name}.partial-{secrets.token_hex(4)}"
    partial.mkdir()
    try:
        result.steps().write_parquet(partial / STEPS_FILE)
        traces = [
            r.trace.with_columns(pl.lit(r.index, pl.Int64).alias("rollout"))
            for r in result.rollouts
            if r.trace is not None
        ]
        if traces:
            pl.concat(traces, how="vertical").write_parquet(partial / TRACES_FILE)
        (partial / INFO_FILE).write_text(
            json.dumps(info.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        if final.exists():
            old = folder / f".{name}.old-{secrets.token_hex(4)}"
            os.replace(final, old)
            os.replace(partial, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(partial, final)
    finally:
        if partial.exists():
            shutil.rmtree(partial, ignore_errors=True)
    return info


def check_free(store_root: str | Path, trace_id: str, name: str, *, overwrite: bool) -> None:
    """:class:`TimelineError` when ``name`` may not name a timeline, or ``trace_id``
    already has one of that name and ``overwrite`` is false (checked before rollouts run,
    and again when saving)."""
    check_name(name)
    final = trace_dir(store_root, trace_id) / name
    if final.exists() and not overwrite:
        raise TimelineError(
            f"trace {trace_id} already has a timeline {name!r} (made "
            f"{_created_of(final)}); choose another name or pass --overwrite"
        )


def _created_of(folder: Path) -> str:
    try:
        return str(json.loads((folder / INFO_FILE).read_text(encoding="utf-8"))["created"])
    except (OSError, ValueError, KeyError, TypeError):
        return "at an unknown time"


def _read_info(folder: Path) -> TimelineInfo:
    try:
        return TimelineInfo.from_dict(json.loads((folder / INFO_FILE).read_text("utf-8")))
    except FileNotFoundError:
        raise TimelineError(f"timeline {folder.name!r} ({folder}) has no {INFO_FILE}") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise TimelineError(f"timeline {folder.name!r} ({folder}) is damaged: {exc}") from None


def timelines_document(store_root: str | Path, trace_id: str) -> TimelinesListDocument:
    """The timelines kept for ``trace_id`` as ``schemas/timelines-list.schema.json``:
    ``{"trace_id", "timelines", "problems"}`` (what ``otelcar timelines --json`` prints and the
    MCP tool ``list_timelines`` returns)."""
    infos, problems = list_timelines(store_root, trace_id)
    return {"trace_id": trace_id, "timelines": [i.to_dict() for i in infos], "problems": problems}


def list_timelines(store_root: str | Path, trace_id: str) -> tuple[list[TimelineInfo], list[str]]:
    """``(timelines, problems)``: the timelines kept for ``trace_id``, oldest first, and one
    line per folder that could not be read (listed, never fatal)."""
    folder = trace_dir(store_root, trace_id)
    infos: list[TimelineInfo] = []
    problems: list[str] = []
    if not folder.is_dir():
        return infos, problems
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith(".") or not entry.is_dir():
            continue
        try:
            infos.append(_read_info(entry))
        except TimelineError as exc:
            problems.append(str(exc))
    infos.sort(key=lambda i: (i.created, i.name))
    return infos, problems


def load_timeline(store_root: str | Path, trace_id: str, name: str) -> Timeline:
    """Timeline ``name`` of ``trace_id``; :class:`TimelineNotFound` (listing the names kept)
    when there is none, :class:`TimelineError` when it is damaged."""
    check_name(name)
    folder = trace_dir(store_root, trace_id) / name
    if not folder.is_dir():
        kept, _ = list_timelines(store_root, trace_id)
        names = ", ".join(i.name for i in kept) or "none"
        raise TimelineNotFound(
            f"trace {trace_id} has no timeline {name!r} (kept: {names}; make one with "
            f"`otelcar rollout {trace_id[:12]} … --save {name}`)"
        )
    info = _read_info(folder)
    steps = _read_table(folder, name, STEPS_FILE, ROLLOUT_SCHEMA)
    traces = None
    if (folder / TRACES_FILE).exists():
        traces = _read_table(folder, name, TRACES_FILE, (*STEPS_SCHEMA, "rollout"))
    return Timeline(info, steps, traces)


def _read_table(folder: Path, name: str, file: str, columns: Any) -> pl.DataFrame:
    """``file`` of timeline ``name``, which must have ``columns``; :class:`TimelineError`
    naming the file when it is unreadable or lacks one."""
    try:
        table = pl.read_parquet(folder / file)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise TimelineError(f"timeline {name!r} ({folder}): unreadable {file}: {exc}") from None
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise TimelineError(f"timeline {name!r} ({folder}): {file} lacks {missing}")
    return table


def delete_timeline(store_root: str | Path, trace_id: str, name: str) -> None:
    """Remove timeline ``name`` of ``trace_id`` (:class:`TimelineNotFound` when absent)."""
    check_name(name)
    folder = trace_dir(store_root, trace_id) / name
    if not folder.is_dir():
        raise TimelineNotFound(f"trace {trace_id} has no timeline {name!r}")
    shutil.rmtree(folder)
