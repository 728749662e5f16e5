"""Recorded conversations from plain messages, for tests and benchmarks of ``why``/``fix``.

:func:`conversation_steps` turns a start context and a list of turns (an assistant action and
the results of its tool calls) into a steps table the way a real trace becomes one: GenAI
spans (``invoke_agent``, ``chat``, ``execute_tool``) through the real trajectory builder
(:func:`otelcar.trajectory.build_trace`), like :mod:`otelcar.synthetic`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from otelcar.ingest.frames import SpanFrame
from otelcar.messages import Message
from otelcar.schema import STEPS_SCHEMA
from otelcar.trajectory import build_trace


@dataclass(frozen=True)
class Turn:
    """One recorded decision: the action, and one result per tool call it makes."""

    action: Message
    results: Sequence[str] = field(default_factory=tuple)


def _parts(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {
            "role": "tool",
            "parts": [
                {
                    "type": "tool_call_response",
                    "id": message.tool_call_id,
                    "response": message.content,
                }
            ],
        }
    parts: list[dict[str, Any]] = []
    if message.content is not None:
        parts.append({"type": "text", "content": message.content})
    parts += [
        {"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments}
        for c in message.tool_calls
    ]
    return {"role": message.role, "parts": parts}


def _span(
    trace_id: str, number: int, name: str, attributes: dict[str, Any], parent: int | None
) -> SpanFrame:
    return SpanFrame(
        trace_id=trace_id,
        span_id=f"{number:016x}",
        parent_span_id=f"{parent:016x}" if parent else None,
        name=name,
        kind="INTERNAL",
        start_ns=number * 10,
        end_ns=number * 10 + 5,
        attributes=attributes,
        resource={"service.name": "scripted"},
        seq=number,
    )


def conversation_steps(
    trace_id: str,
    start: Sequence[Message],
    turns: Sequence[Turn],
    *,
    model: str = "scripted",
    temperature: float = 1.0,
    agent: str = "scripted",
) -> pl.DataFrame:
    """The steps table of a run that began with ``start`` and took ``turns``.

    Every turn's tool calls need ids; the context of each decision is the start context
    plus every earlier action and its results, as an instrumented agent records it.
    """
    spans = [
        _span(
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
        spans.append(
            _span(
                trace_id,
                number,
                f"chat {model}",
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.request.model": model,
                    "gen_ai.request.temperature": temperature,
                    "gen_ai.input.messages": json.dumps([_parts(m) for m in context]),
                    "gen_ai.output.messages": json.dumps([_parts(turn.action)]),
                },
                1,
            )
        )
        number += 1
        context.append(turn.action)
        for call, result in zip(turn.action.tool_calls, turn.results, strict=True):
            spans.append(
                _span(
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
