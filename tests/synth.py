"""Builders of synthetic frames for unit tests (real fixtures live in fixtures/otlp)."""

from __future__ import annotations

import json
from typing import Any

from otelcar.ingest.frames import LogFrame, SpanFrame

TRACE = "0af7651916cd43dd8448eb211c80319c"


def span(
    span_id: str,
    name: str,
    attributes: dict[str, Any] | None = None,
    *,
    parent: str | None = None,
    start: int = 0,
    end: int = 10,
    seq: int = 0,
    kind: str = "INTERNAL",
    events: list[dict[str, Any]] | None = None,
    status: str = "UNSET",
    trace_id: str = TRACE,
) -> SpanFrame:
    return SpanFrame(
        trace_id=trace_id,
        span_id=span_id.rjust(16, "0"),
        parent_span_id=parent.rjust(16, "0") if parent else None,
        name=name,
        kind=kind,
        start_ns=start,
        end_ns=end,
        status_code=status,
        attributes=attributes or {},
        events=events or [],
        resource={"service.name": "svc"},
        seq=seq,
    )


def log(
    span_id: str,
    event_name: str,
    body: Any,
    *,
    observed: int = 0,
    seq: int = 0,
    attributes: dict[str, Any] | None = None,
) -> LogFrame:
    return LogFrame(
        trace_id=TRACE,
        span_id=span_id.rjust(16, "0"),
        time_ns=None,
        observed_time_ns=observed,
        event_name=event_name,
        body=body,
        attributes=attributes or {},
        seq=seq,
    )


def text(role: str, content: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": content}]}


def calls(*items: tuple[str | None, str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "parts": [{"type": "tool_call", "id": i, "name": n, "arguments": a} for i, n, a in items],
    }


def responses(*items: tuple[str | None, str]) -> dict[str, Any]:
    return {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": i, "response": r} for i, r in items],
    }


def chat(
    span_id: str, inputs: list[dict[str, Any]], outputs: list[dict[str, Any]], **kw: Any
) -> SpanFrame:
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "m",
        "gen_ai.input.messages": json.dumps(inputs),
        "gen_ai.output.messages": json.dumps(outputs),
    }
    attrs.update(kw.pop("attributes", {}))
    return span(span_id, "chat m", attrs, kind="CLIENT", **kw)


def tool(span_id: str, name: str, call_id: str | None = None, **kw: Any) -> SpanFrame:
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
    if call_id:
        attrs["gen_ai.tool.call.id"] = call_id
    attrs.update(kw.pop("attributes", {}))
    return span(span_id, f"execute_tool {name}", attrs, **kw)
