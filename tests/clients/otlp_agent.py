"""Run the fixtures' refund agent (openai client + opentelemetry-instrumentation-openai-v2,
util-genai agent and tool spans) against the fixtures' fake OpenAI server, exporting with
the official OTLP exporter chosen by the standard environment variables
(``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_PROTOCOL``,
``OTEL_EXPORTER_OTLP_COMPRESSION``) and, for comparison, to OTLP/JSON files.

Usage: python tests/clients/otlp_agent.py OUT_DIR   (prints the trace id)
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _fixture_module():
    spec = importlib.util.spec_from_file_location(
        "make_fixtures", ROOT / "fixtures" / "otlp" / "make_fixtures.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(out: Path) -> str:
    os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_AND_EVENT"
    fixtures = _fixture_module()
    import openai
    from opentelemetry import _logs, trace
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    from opentelemetry.exporter.otlp.json.file._log_exporter import FileLogExporter
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.util.genai.handler import TelemetryHandler

    if os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc") == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    else:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    resource = Resource.create({"service.name": "refund-agent-live"})
    tracer_provider = TracerProvider(resource=resource)
    logger_provider = LoggerProvider(resource=resource)
    out.mkdir(parents=True, exist_ok=True)
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    tracer_provider.add_span_processor(
        BatchSpanProcessor(FileSpanExporter(out / "agent.traces.jsonl"))
    )
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter()))
    logger_provider.add_log_record_processor(
        BatchLogRecordProcessor(FileLogExporter(out / "agent.logs.jsonl"))
    )
    trace.set_tracer_provider(tracer_provider)
    _logs.set_logger_provider(logger_provider)
    OpenAIInstrumentor().instrument(
        tracer_provider=tracer_provider, logger_provider=logger_provider
    )
    handler = TelemetryHandler(tracer_provider=tracer_provider, logger_provider=logger_provider)
    with fixtures.LocalServer(fixtures._FakeOpenAIHandler) as fake:
        client = openai.OpenAI(
            base_url=f"http://127.0.0.1:{fake.port}/v1",
            api_key="sk-test-not-a-real-key",
            max_retries=0,
        )
        with handler.invoke_local_agent(agent_name=fixtures.AGENT_NAME) as agent:
            agent.attributes["gen_ai.provider.name"] = "openai"
            fixtures.run_agent(client, handler)
            trace_id = format(trace.get_current_span().get_span_context().trace_id, "032x")
    tracer_provider.shutdown()
    logger_provider.shutdown()
    return trace_id


if __name__ == "__main__":
    print(main(Path(sys.argv[1])))
