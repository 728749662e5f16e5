"""A scripted tool-calling agent (six tool decisions, then an answer) and its recorded runs
generated as OTLP/JSON: the batches ``aggregate``, the report and the console are tested on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SERVICE = "support-bot"
AGENT = "support"
MODEL = "scripted-model"


# The agent under test, as a module the CLI test loads from otelcar.toml.
AGENT_SOURCE = """
import json
import random

from otelcar.messages import Message, ToolCall

TOOLS = ["search_orders", "lookup_order", "check_policy", "issue_refund", "notify_customer",
         "close_ticket"]
P_BAD = {"issue_refund": 0.35}


def decide(request):
    i = sum(1 for m in request.messages if m.role == "assistant")
    if i >= len(TOOLS):
        return Message("assistant", "All done.")
    bad = random.Random(request.seed).random() < P_BAD.get(TOOLS[i], 0.03)
    arguments = {"step": i, "choice": "BAD" if bad else "ok"}
    return Message("assistant", None, (ToolCall(TOOLS[i], arguments, f"call_{i}"),))


def run_tool(request):
    return f"{request.name}: done ({request.arguments['choice']})"


def fails(steps):
    rows = steps.filter(steps["kind"] == "tool")
    return any(a and json.loads(a).get("choice") == "BAD" for a in rows["tool_args"].to_list())
"""
AGENT_MODULE: dict[str, Any] = {}
exec(compile(AGENT_SOURCE, "agent_under_test", "exec"), AGENT_MODULE)
TOOLS: list[str] = AGENT_MODULE["TOOLS"]


# -- generated traces -------------------------------------------------------------------------
def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    return {"stringValue": value}


def _attributes(attributes: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": _value(v)} for k, v in attributes.items()]


def _parts(message: dict[str, Any]) -> dict[str, Any]:
    if message["role"] == "tool":
        parts = [
            {
                "type": "tool_call_response",
                "id": message["tool_call_id"],
                "response": message["content"],
            }
        ]
    else:
        parts = [{"type": "text", "content": message["content"]}] if message.get("content") else []
        parts += [
            {"type": "tool_call", "id": c["id"], "name": c["name"], "arguments": c["arguments"]}
            for c in message.get("tool_calls", [])
        ]
    return {"role": message["role"], "parts": parts}


def agent_trace_otlp(
    trace_id: str,
    choices: list[str],
    *,
    tools: list[str] | None = None,
    service: str = SERVICE,
    agent: str = AGENT,
    model: str = MODEL,
    start_ns: int = 1_780_000_000_000_000_000,
    system: str = "You are a support agent.",
    user: str = "Refund order A-1.",
    result: Any = None,
    final: str = "All done.",
) -> dict[str, Any]:
    """One recorded run of a scripted tool-calling agent as an OTLP/JSON ``resourceSpans``
    entry: decision i calls ``tools[i]`` with ``{"step": i, "choice": choices[i]}``."""
    tools = tools or TOOLS
    result = result or (lambda tool, choice: f"{tool}: done ({choice})")
    root = "a0" * 8
    spans = [
        {
            "traceId": trace_id,
            "spanId": root,
            "name": f"invoke_agent {agent}",
            "kind": 1,
            "startTimeUnixNano": str(start_ns),
            "endTimeUnixNano": str(start_ns + 9_000_000_000),
            "attributes": _attributes(
                {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent}
            ),
        }
    ]
    context: list[dict[str, Any]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": user},
    ]
    t = start_ns + 10_000_000
    for i, (tool, choice) in enumerate([*zip(tools, choices, strict=True), (None, None)]):
        if tool is None:
            action = {"role": "assistant", "content": final}
        else:
            call = {"id": f"call_{i}", "name": tool, "arguments": {"step": i, "choice": choice}}
            action = {"role": "assistant", "content": None, "tool_calls": [call]}
        spans.append(
            {
                "traceId": trace_id,
                "spanId": f"{0xB000 + i:016x}",
                "parentSpanId": root,
                "name": f"chat {model}",
                "kind": 3,
                "startTimeUnixNano": str(t),
                "endTimeUnixNano": str(t + 400_000_000),
                "attributes": _attributes(
                    {
                        "gen_ai.operation.name": "chat",
                        "gen_ai.agent.name": agent,
                        "gen_ai.request.model": model,
                        "gen_ai.request.temperature": 1.0,
                        "gen_ai.usage.input_tokens": 100 + 40 * i,
                        "gen_ai.usage.output_tokens": 12,
                        "gen_ai.input.messages": json.dumps([_parts(m) for m in context]),
                        "gen_ai.output.messages": json.dumps([_parts(action)]),
                    }
                ),
            }
        )
        if tool is None:
            break
        observed = result(tool, choice)
        spans.append(
            {
                "traceId": trace_id,
                "spanId": f"{0xC000 + i:016x}",
                "parentSpanId": root,
                "name": f"execute_tool {tool}",
                "kind": 1,
                "startTimeUnixNano": str(t + 450_000_000),
                "endTimeUnixNano": str(t + 650_000_000),
                "attributes": _attributes(
                    {
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.agent.name": agent,
                        "gen_ai.tool.name": tool,
                        "gen_ai.tool.call.id": f"call_{i}",
                        "gen_ai.tool.call.arguments": json.dumps({"step": i, "choice": choice}),
                        "gen_ai.tool.call.result": observed,
                    }
                ),
            }
        )
        context += [action, {"role": "tool", "content": observed, "tool_call_id": f"call_{i}"}]
        t += 1_000_000_000
    return {
        "resource": {"attributes": _attributes({"service.name": service})},
        "scopeSpans": [{"scope": {"name": "tests"}, "spans": spans}],
    }


def batch(*, weak: int, one_off: list[int], passing: int) -> list[tuple[str, list[str]]]:
    """``(trace_id, recorded choices)``: ``weak`` runs that went wrong at issue_refund, one
    run per index of ``one_off`` that went wrong there instead, and ``passing`` clean runs."""
    runs: list[list[str]] = []
    for _ in range(weak):
        runs.append(["ok", "ok", "ok", "BAD", "ok", "ok"])
    for index in one_off:
        choices = ["ok"] * len(TOOLS)
        choices[index] = "BAD"
        runs.append(choices)
    runs += [["ok"] * len(TOOLS) for _ in range(passing)]
    return [(f"{n + 1:032x}", choices) for n, choices in enumerate(runs)]


def write_dump(path: Path, entries: list[dict[str, Any]]) -> Path:
    """Write ``entries`` (``resourceSpans`` entries) to ``path`` as one OTLP/JSON dump."""
    path.write_text(json.dumps({"resourceSpans": entries}), encoding="utf-8")
    return path
