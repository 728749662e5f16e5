"""Recorded conversations from plain messages, for tests and benchmarks of ``why``/``fix``.

:func:`conversation_steps` turns a start context and a list of turns (an assistant action and
the results of its tool calls) into a steps table the way a real trace becomes one: GenAI
spans (``invoke_agent``, ``chat``, ``execute_tool``) through the real trajectory builder
(:func:`otelcar.trajectory.build_trace`), like :mod:`otelcar.testing.scenarios`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from otelcar.messages import Message
from otelcar.schema import STEPS_SCHEMA
from otelcar.testing.genai_spans import message_parts, span
from otelcar.trajectory import build_trace


@dataclass(frozen=True)
class Turn:
    """One recorded decision: the action, and one result per tool call it makes.
    ``before``: messages the agent's code adds to the context before this decision (a
    workflow's next instruction); ``tools``: the tool definitions offered at this decision
    (``()``: none), overriding the conversation's ``tools`` (``None``: those)."""

    action: Message
    results: Sequence[str] = field(default_factory=tuple)
    before: Sequence[Message] = field(default_factory=tuple)
    tools: Sequence[dict[str, Any]] | None = None


def conversation_steps(
    trace_id: str,
    start: Sequence[Message],
    turns: Sequence[Turn],
    *,
    model: str = "scripted",
    temperature: float = 1.0,
    agent: str = "scripted",
    tools: Sequence[dict[str, Any]] | None = None,
) -> pl.DataFrame:
    """The steps table of a run that began with ``start`` and took ``turns``.

    Every turn's tool calls need ids; the context of each decision is the start context
    plus every earlier action and its results, as an instrumented agent records it.
    ``tools``: the tool definitions the agent offered the model (``gen_ai.tool.definitions``
    on every chat span, ``{"type": "function", "name", "description", "parameters"}``);
    without them a re-decision is offered only the tools the run called.
    """
    spans = [
        span(
            trace_id,
            1,
            f"invoke_agent {agent}",
            {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent},
            None,
        )
    ]
    context = list(start)
    number = 2
    for turn in turns:
        context.extend(turn.before)
        offered = tools if turn.tools is None else turn.tools
        spans.append(
            span(
                trace_id,
                number,
                f"chat {model}",
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.request.model": model,
                    "gen_ai.request.temperature": temperature,
                    "gen_ai.input.messages": json.dumps([message_parts(m) for m in context]),
                    "gen_ai.output.messages": json.dumps([message_parts(turn.action)]),
                    **(
                        {"gen_ai.tool.definitions": json.dumps(list(offered))}
                        if offered is not None and (offered or turn.tools is not None)
                        else {}
                    ),
                },
                1,
            )
        )
        number += 1
        context.append(turn.action)
        for call, result in zip(turn.action.tool_calls, turn.results, strict=True):
            spans.append(
                span(
                    trace_id,
                    number,
                    f"execute_tool {call.name}",
                    {
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": call.name,
                        "gen_ai.tool.call.id": call.id,
                        "gen_ai.tool.call.arguments": json.dumps(call.arguments),
                        "gen_ai.tool.call.result": result,
                    },
                    1,
                )
            )
            number += 1
            context.append(Message("tool", result, tool_call_id=call.id))
    return pl.DataFrame(build_trace(trace_id, spans).steps, schema=STEPS_SCHEMA)
