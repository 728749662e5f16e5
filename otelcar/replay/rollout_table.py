"""A rollout as a steps table, so reports can show the alternative timelines and outcomes
can be evaluated on rollouts and on recorded traces alike; and as the events the built-in
outcomes read, so judging a rollout builds no table unless the outcome asks for one.

The table has the steps-table columns an outcome needs (same names and dtypes as
:data:`otelcar.schema.STEPS_SCHEMA`) plus where each step came from. The events
(:class:`~otelcar.outcome.RunEvent`) are exactly what :func:`otelcar.outcome.events_of` reads
from that table.
"""

from __future__ import annotations

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
from otelcar.replay.contexts import ReplayedObservation
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
    """One row per decision and per tool call of the rollout, in order."""
    rows: list[dict[str, Any]] = []
    for decision in rollout.decisions:
        rows.append(
            {
                "rollout": rollout.index,
                "step": len(rows),
                "recorded_step": decision.recorded_step,
                "kind": "llm",
                "name": decision.name,
                "agent_name": decision.agent,
                "input_messages": None
                if decision.context is None
                else [m.to_row() for m in decision.context],
                "output": decision.action.to_row() if decision.action is not None else None,
                "tool_name": None,
                "tool_call_id": None,
                "tool_args": None,
                "tool_result": None,
                "error": None,
                "origin": decision.origin,
                "seed": decision.seed,
            }
        )
        for obs in decision.observations:
            rows.append(
                {
                    "rollout": rollout.index,
                    "step": len(rows),
                    "recorded_step": None,
                    "kind": "tool",
                    "name": obs.call.name,
                    "agent_name": decision.agent,
                    "input_messages": None,
                    "output": None,
                    "tool_name": obs.call.name,
                    "tool_call_id": obs.call.id,
                    "tool_args": encode_arguments(obs.call.arguments),
                    "tool_result": obs.result,
                    "error": obs.error,
                    "origin": obs.origin,
                    "seed": decision.seed,
                }
            )
    return pl.DataFrame(rows, schema=ROLLOUT_SCHEMA)


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
