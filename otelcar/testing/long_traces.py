"""A long agent run as an OTLP/JSON document, for tests and benchmarks at real sizes.

:func:`long_conversation` writes what an instrumented agent of ``turns`` chat turns sends: an
``invoke_agent`` root span, one ``chat`` span per turn carrying the **whole conversation so
far** in ``gen_ai.input.messages`` (as the OpenTelemetry GenAI conventions record it, so the
document grows with the square of the turns), and one ``execute_tool`` span per tool call;
every ``fail_every``-th tool call ends in an error status. The document is what
``otelcar import`` reads (``resourceSpans`` → ``scopeSpans`` → ``spans``).
"""

from __future__ import annotations

import json
import random
from typing import Any

MODEL = "gpt-4o-mini"
WORDS = ("refund", "order", "late", "delivery", "policy", "invoice", "kettle", "warranty")


def _attributes(values: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for key, value in values.items():
        if isinstance(value, bool):
            wrapped = {"boolValue": value}
        elif isinstance(value, int):
            wrapped = {"intValue": str(value)}
        elif isinstance(value, float):
            wrapped = {"doubleValue": value}
        elif isinstance(value, list):
            wrapped = {"arrayValue": {"values": [{"stringValue": str(v)} for v in value]}}
        else:
            wrapped = {"stringValue": str(value)}
        out.append({"key": key, "value": wrapped})
    return out


def long_conversation(
    turns: int,
    *,
    seed: int = 0,
    trace_id: str = "5" * 32,
    payload: int = 400,
    fail_every: int = 0,
    start_ns: int = 1_700_000_000_000_000_000,
    model: str = MODEL,
    conversation: str | None = None,
) -> dict[str, Any]:
    """The OTLP/JSON document of one run of ``turns`` chat turns (module docstring); tool
    results have ``payload`` characters; ``fail_every`` > 0 makes every such tool call fail;
    ``conversation``: the ``gen_ai.conversation.id`` its chat spans record (a session)."""
    rng = random.Random(seed)
    spans: list[dict[str, Any]] = []
    step_ns = 1_000_000_000
    root = f"{1:016x}"

    def span(number: int, name: str, start: int, end: int, attributes: dict[str, Any], **extra):
        spans.append(
            {
                "traceId": trace_id,
                "spanId": f"{number:016x}",
                "parentSpanId": root if number != 1 else "",
                "name": name,
                "kind": 3 if name.startswith("chat") else 1,
                "startTimeUnixNano": str(start),
                "endTimeUnixNano": str(end),
                "attributes": _attributes(attributes),
                **extra,
            }
        )

    context: list[dict[str, Any]] = [
        {"role": "system", "parts": [{"type": "text", "content": "You are a support agent."}]},
        {"role": "user", "parts": [{"type": "text", "content": "Why was my refund late?"}]},
    ]
    number = 2
    clock = start_ns
    for turn in range(turns):
        final = turn == turns - 1
        output, call_id, arguments = _turn_output(turn, final, rng)
        input_text = json.dumps(context)
        output_text = json.dumps([output])
        span(
            number,
            f"chat {model}",
            clock,
            clock + step_ns // 2,
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": model,
                "gen_ai.response.model": model,
                **({"gen_ai.conversation.id": conversation} if conversation else {}),
                "gen_ai.usage.input_tokens": len(input_text) // 4,
                "gen_ai.usage.output_tokens": len(output_text) // 4,
                "gen_ai.input.messages": input_text,
                "gen_ai.output.messages": output_text,
            },
        )
        number += 1
        context.append({k: v for k, v in output.items() if k != "finish_reason"})
        if final:
            break
        failed = fail_every > 0 and (turn + 1) % fail_every == 0
        result = (
            "error: the search backend timed out"
            if failed
            else " ".join(rng.choices(WORDS, k=max(1, payload // 7)))[:payload]
        )
        span(
            number,
            "execute_tool search",
            clock + step_ns // 2,
            clock + step_ns,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "search",
                "gen_ai.tool.call.id": call_id,
                "gen_ai.tool.call.arguments": json.dumps(arguments),
                "gen_ai.tool.call.result": result,
            },
            **({"status": {"code": 2, "message": "search timed out"}} if failed else {}),
        )
        number += 1
        context.append(
            {"role": "tool", "parts": [{"type": "tool_call_response", "id": call_id,
                                        "response": result}]}
        )  # fmt: skip
        clock += step_ns
    span(
        1,
        "invoke_agent support",
        start_ns,
        clock + step_ns,
        {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"},
    )
    return _document(spans)


def _turn_output(
    turn: int, final: bool, rng: random.Random
) -> tuple[dict[str, Any], str, dict[str, Any]]:
    """``(output message, call id, arguments)`` of chat turn ``turn``: the last one answers,
    each other calls ``search`` (its arguments drawn from ``rng``)."""
    if final:
        output = {
            "role": "assistant",
            "parts": [{"type": "text", "content": f"Found it after {turn} searches."}],
            "finish_reason": "stop",
        }
        return output, "", {}
    call_id = f"call_{turn:05d}"
    arguments = {"query": " ".join(rng.choices(WORDS, k=4)), "page": turn}
    output = {
        "role": "assistant",
        "parts": [{"type": "tool_call", "id": call_id, "name": "search", "arguments": arguments}],
        "finish_reason": "tool_calls",
    }
    return output, call_id, arguments


def _document(spans: list[dict[str, Any]]) -> dict[str, Any]:
    """The OTLP/JSON document of ``spans``, of the service ``support-agent``."""
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _attributes({"service.name": "support-agent"})},
                "scopeSpans": [{"scope": {"name": "otelcar.testing"}, "spans": spans}],
            }
        ]
    }
