"""A rollout as a steps table, so reports can show the alternative timelines and outcomes
can be evaluated on rollouts and on recorded traces alike; and as the events the built-in
outcomes read, so judging a rollout builds no table unless the outcome asks for one.

The table has the steps-table columns an outcome needs (same names and dtypes as
:data:`otelcar.schema.STEPS_SCHEMA`) plus where each step came from. The events
(:class:`~otelcar.outcome.RunEvent`) are exactly what :func:`otelcar.outcome.events_of` reads
from that table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from otelcar.identity import IdentityMemo
from otelcar.messages import (
    MESSAGE_DTYPE,
    Message,
    ToolCall,
    decode_arguments,
    encode_arguments,
    survives_encoding,
)
from otelcar.outcome import Outcome, OutcomeError, RunEvent, judges_events, judges_process
from otelcar.replay.contexts import ReplayedObservation, SharedContext
from otelcar.replay.harness import Rollout
from otelcar.replay.recorded import RecordedRun

ROLLOUT_SCHEMA = pl.Schema(
    {
        "rollout": pl.Int64,
        "step": pl.Int64,
        "recorded_step": pl.Int64,
        "kind": pl.String,
        "name": pl.String,
        "agent_name": pl.String,
        "input_messages": pl.List(MESSAGE_DTYPE),
        "output": MESSAGE_DTYPE,
        "tool_name": pl.String,
        "tool_call_id": pl.String,
        "tool_args": pl.String,
        "tool_result": pl.String,
        "error": pl.String,
        "origin": pl.String,
        "seed": pl.Int64,
    }
)


def rollout_steps(rollout: Rollout) -> pl.DataFrame:
    """One row per decision and per tool call of the rollout, in order.

    Built column by column: each distinct message is converted to its table row once (and
    remembered: held messages are the same objects in every rollout), and the contexts are
    gathered from those rows in Polars, so the Python work grows with the rollout's messages,
    not with the sum of its contexts' lengths."""
    columns: dict[str, list[Any]] = {name: [] for name in ROLLOUT_SCHEMA}
    contexts: list[Sequence[Message] | None] = []
    outputs: list[Message | None] = []
    for decision in rollout.decisions:
        _append_row(
            columns,
            (len(contexts), decision.recorded_step, "llm", decision.name, decision.agent),
            (None, None, None, None, None),
            (decision.origin, decision.seed),
        )
        contexts.append(decision.context)
        outputs.append(decision.action)
        for obs in decision.observations:
            call = obs.call
            _append_row(
                columns,
                (len(contexts), None, "tool", call.name, decision.agent),
                (call.name, call.id, encode_arguments(call.arguments), obs.result, obs.error),
                (obs.origin, decision.seed),
            )
            contexts.append(None)
            outputs.append(None)
    columns["rollout"] = [rollout.index] * len(contexts)
    if sum(len(context) for context in contexts if context is not None) <= ROW_BY_ROW_MOST:
        return _row_by_row(columns, contexts, outputs)
    messages = _MessageColumns(contexts, outputs)
    return pl.DataFrame(
        [
            messages.contexts()
            if name == "input_messages"
            else messages.outputs()
            if name == "output"
            else pl.Series(name, columns[name], dtype=dtype)
            for name, dtype in ROLLOUT_SCHEMA.items()
        ]
    )


#: Up to this many context messages in all, a rollout's table is built from one dict per row
#: (its messages' remembered rows): for a few messages Polars' costs per column and the
#: contexts' group-by outweigh converting every context message (measured: below about 130).
ROW_BY_ROW_MOST = 120


def _row_by_row(
    columns: dict[str, list[Any]],
    contexts: list[Sequence[Message] | None],
    outputs: list[Message | None],
) -> pl.DataFrame:
    """The table of a rollout with few context messages, from one dict per row."""
    columns = {
        **columns,
        "input_messages": [
            None if context is None else [_TABLE_ROWS.get(m, Message.to_row) for m in context]
            for context in contexts
        ],
        "output": [None if m is None else _TABLE_ROWS.get(m, Message.to_row) for m in outputs],
    }
    names = list(ROLLOUT_SCHEMA)
    rows = [
        dict(zip(names, values, strict=True))
        for values in zip(*(columns[name] for name in names), strict=True)
    ]
    return pl.DataFrame(rows, schema=ROLLOUT_SCHEMA)


_ROW_START = ("step", "recorded_step", "kind", "name", "agent_name")
_TOOL_COLUMNS = ("tool_name", "tool_call_id", "tool_args", "tool_result", "error")


def _append_row(
    columns: dict[str, list[Any]],
    start: tuple[Any, ...],
    tool: tuple[Any, ...],
    end: tuple[str, int],
) -> None:
    for name, value in zip(_ROW_START, start, strict=True):
        columns[name].append(value)
    for name, value in zip(_TOOL_COLUMNS, tool, strict=True):
        columns[name].append(value)
    columns["origin"].append(end[0])
    columns["seed"].append(end[1])


class _MessageColumns:
    """The ``input_messages`` and ``output`` columns of one rollout's table: each distinct
    message (by identity) converted to its table row once, into one Polars series both
    columns are gathered from. ``contexts[r]``: row ``r``'s context (``None``: null);
    ``outputs[r]``: its action (``None``: null)."""

    def __init__(
        self, contexts: list[Sequence[Message] | None], outputs: list[Message | None]
    ) -> None:
        self._index: dict[int, int] = {}
        self._rows: list[dict[str, Any] | None] = [None]  # 0: null (a placeholder, a gap)
        self._captured = [context is not None for context in contexts]
        self._output_at = [0 if m is None else self._at(m) for m in outputs]
        self._context_at = self._contexts_at(contexts)
        self._series = pl.Series(self._rows, dtype=MESSAGE_DTYPE)

    def _at(self, message: Message) -> int:
        i = self._index.get(id(message))
        if i is None:
            i = self._index[id(message)] = len(self._rows)
            self._rows.append(_TABLE_ROWS.get(message, Message.to_row))
        return i

    def _contexts_at(self, contexts: list[Sequence[Message] | None]) -> list[list[int]]:
        """Each context's messages as indexes into the rows; a context that starts with the
        previous one (:meth:`SharedContext.starts_with`) reuses its indexes, so only its new
        messages are looked at."""
        found: list[list[int]] = []
        previous: Sequence[Message] | None = None
        previous_at: list[int] = []
        for context in contexts:
            at: list[int] = []
            if context is not None:
                new: Sequence[Message] = context
                if isinstance(context, SharedContext) and context.starts_with(previous):
                    at = previous_at[:]
                    new = context[len(at) :]
                at.extend(self._at(message) for message in new)
                previous, previous_at = context, at
            found.append(at)
        return found

    def outputs(self) -> pl.Series:
        return self._series.gather(self._output_at).rename("output")

    def contexts(self) -> pl.Series:
        """Every row gets a leading null placeholder, so the group-by keeps empty and null
        rows in place; it is sliced off after."""
        flat: list[int] = []
        owners: list[int] = []
        for r, at in enumerate(self._context_at):
            flat.append(0)
            flat.extend(at)
            owners.extend([r] * (len(at) + 1))
        lists = (
            # the rows come in order: a sorted key groups without hashing
            pl.DataFrame({"row": pl.Series(owners).set_sorted(), "m": self._series.gather(flat)})
            .group_by("row", maintain_order=True)
            .agg(pl.col("m").slice(1))
            .get_column("m")
        )
        missing = pl.Series([None] * len(self._captured), dtype=_CONTEXT_LISTS)
        captured = pl.Series(self._captured, dtype=pl.Boolean)
        return lists.zip_with(captured, missing).rename("input_messages")


_CONTEXT_LISTS = pl.List(MESSAGE_DTYPE)
#: Messages in their table rows, remembered: held messages (recorded contexts and actions)
#: are the same objects in every rollout. Rows are only read (Polars copies them).
_TABLE_ROWS: IdentityMemo[Message, dict[str, Any]] = IdentityMemo(1 << 15)


#: Actions and calls in their table encoding, remembered: held and cached decisions are the
#: same objects in every rollout.
_TABLE_MESSAGES: IdentityMemo[Message, Message] = IdentityMemo(1 << 15)
_TABLE_ARGUMENTS: IdentityMemo[ToolCall, Any] = IdentityMemo(1 << 15)
#: The events of held decisions' observations, remembered: a held decision adopts the same
#: observation objects in every rollout (``replay/held.py``).
_HELD_EVENTS: IdentityMemo[ReplayedObservation, RunEvent] = IdentityMemo(1 << 15)


def rollout_events(rollout: Rollout) -> list[RunEvent]:
    """The rollout's decisions and tool calls as events, with arguments and outputs passed
    through the table's encoding, so an outcome sees what it would read from the table."""
    events: list[RunEvent] = []
    append = events.append
    for decision in rollout.decisions:
        action = decision.action
        append(
            RunEvent("llm", None if action is None else _TABLE_MESSAGES.get(action, _as_in_table))
        )
        if decision.origin == "recorded" and not decision.diverged_before:
            for obs in decision.observations:
                append(_HELD_EVENTS.get(obs, _tool_event))
        else:
            for obs in decision.observations:
                append(_tool_event(obs))
    return events


def _tool_event(obs: ReplayedObservation) -> RunEvent:
    return RunEvent(
        "tool",
        tool_name=obs.call.name,
        arguments=_TABLE_ARGUMENTS.get(obs.call, _arguments_as_in_table),
        result=obs.result,
    )


def _as_in_table(message: Message) -> Message:
    if all(survives_encoding(call.arguments) for call in message.tool_calls):
        return message  # the round trip would give an equal message
    return Message.from_row(message.to_row())


def _arguments_as_in_table(call: ToolCall) -> Any:
    if survives_encoding(call.arguments):
        return call.arguments
    return decode_arguments(encode_arguments(call.arguments))


async def rollout_failed(outcome: Outcome, rollout: Rollout) -> bool:
    """Whether ``rollout`` failed by ``outcome``: on its agent's process when the outcome
    judges one (``exit_status``, ``output_line``: a live rollout's); on its own trace when it
    made one (a live rollout's spans: judged as a recorded trace is); else from its events
    when the outcome judges events (the built-ins), else from its steps table."""
    if judges_process(outcome):
        if rollout.process is None:
            raise OutcomeError(
                f"the outcome '{outcome.describe()}' judges the agent's process: only a live "
                "rollout has one (--agent CMD)"
            )
        return bool(outcome.failed_on_process(rollout.process))  # type: ignore[attr-defined]
    if rollout.trace is not None:
        return bool(await outcome.failed(rollout.trace))
    if judges_events(outcome):
        return bool(await outcome.failed_on(rollout_events(rollout)))  # type: ignore[attr-defined]
    return bool(await outcome.failed(rollout_steps(rollout)))


async def recorded_failed(
    outcome: Outcome, run: RecordedRun, steps: pl.DataFrame | None = None
) -> bool:
    """Whether the recorded run failed by ``outcome``: judged on its steps table (``steps``,
    else ``run.steps``), or, for an outcome on the agent's process, on ``run.process`` — the
    process of its held live replay, which made every recorded request again (a trace records
    no process); raises :class:`~otelcar.outcome.OutcomeError` without one."""
    if judges_process(outcome):
        if run.process is None:
            return bool(await outcome.failed(run.steps))  # raises: says to run with --agent
        return bool(outcome.failed_on_process(run.process))  # type: ignore[attr-defined]
    return bool(await outcome.failed(steps if steps is not None else run.steps))
