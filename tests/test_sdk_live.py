"""Spans made live by the official OpenTelemetry SDK, written by its real exporters/encoders,
then imported: the whole chain with whatever SDK version is installed."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from otelcar import Store, import_files
from otelcar.messages import decode_arguments


def _agent_run(tmp_path: Path) -> tuple[Path, Path, str]:
    memory = InMemorySpanExporter()
    json_path = tmp_path / "live.traces.jsonl"
    provider = TracerProvider(resource=Resource.create({"service.name": "live-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(json_path))))
    tracer = provider.get_tracer("live-test")
    inputs = [{"role": "user", "parts": [{"type": "text", "content": "weather in Paris?"}]}]
    call = {
        "type": "tool_call",
        "id": "call_w",
        "name": "get_weather",
        "arguments": {"city": "Paris"},
    }
    with tracer.start_as_current_span(
        "invoke_agent weather",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather"},
    ) as agent:
        with tracer.start_as_current_span(
            "chat small",
            kind=SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "small",
                "gen_ai.input.messages": json.dumps(inputs),
                "gen_ai.output.messages": json.dumps(
                    [{"role": "assistant", "parts": [call], "finish_reason": "tool_call"}]
                ),
            },
        ):
            pass
        with tracer.start_as_current_span(
            "execute_tool get_weather",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.id": "call_w",
            },
        ) as tool:
            tool.set_status(Status(StatusCode.ERROR, "upstream timeout"))
        trace_id = format(agent.get_span_context().trace_id, "032x")
    provider.shutdown()
    stream = tmp_path / "live.traces.binpb"
    spans = memory.get_finished_spans()
    with stream.open("wb") as handle:
        for part in (spans[:1], spans[1:]):  # two frames, as the Collector file exporter writes
            body = encode_spans(part).SerializeToString()
            handle.write(len(body).to_bytes(4, "big") + body)
    return json_path, stream, trace_id


def test_live_sdk_output_in_both_encodings_imports_to_the_same_steps(tmp_path: Path):
    json_path, stream, trace_id = _agent_run(tmp_path)
    a, b = Store(tmp_path / "a"), Store(tmp_path / "b")
    import_files([json_path], store=a)
    import_files([stream], store=b)
    steps = a.steps(trace_id)
    assert steps.drop("attributes").equals(b.steps(trace_id).drop("attributes"))
    assert steps["kind"].to_list() == ["agent", "llm", "tool"]
    tool = steps.filter(pl.col("kind") == "tool").row(0, named=True)
    assert (tool["status"], tool["error"], tool["call_step"]) == ("ERROR", "upstream timeout", 1)
    assert decode_arguments(tool["tool_args"]) == {"city": "Paris"}  # backfilled from the call
    assert a.traces()["service"].to_list() == ["live-agent"]
    assert a.traces()["n_errors"].to_list() == [1]
