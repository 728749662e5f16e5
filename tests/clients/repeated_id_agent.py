"""A two-call weather agent (tool call, then answer) traced by the real
opentelemetry-instrumentation-openai-v2, against a scripted OpenAI-compatible server that,
like many mock servers, proxies and caches, answers every call with the same response id.

Usage: python tests/clients/repeated_id_agent.py OUT.traces.jsonl   (prints the trace id)
"""

from __future__ import annotations

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPEATED_ID = "chatcmpl-fake1"
FINAL_ANSWER = "It is 18 degrees and sunny in Paris."


class _ScriptedServer(BaseHTTPRequestHandler):
    def log_message(self, *_args) -> None:
        pass

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        answered_tool = any(m.get("role") == "tool" for m in request["messages"])
        if answered_tool:
            message = {"role": "assistant", "content": FINAL_ANSWER}
            finish = "stop"
        else:
            call = {
                "id": "call_weather_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
        body = json.dumps(
            {
                "id": REPEATED_ID,
                "object": "chat.completion",
                "created": 1700000000,
                "model": request["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 20, "completion_tokens": 8, "total_tokens": 28},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main(out: Path) -> str:
    os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_ONLY"
    os.environ.setdefault("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    import openai
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": "weather-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(out))))
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ScriptedServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = openai.OpenAI(
            base_url=f"http://127.0.0.1:{server.server_address[1]}/v1",
            api_key="sk-test-not-a-real-key",
            max_retries=0,
        )
        tools = [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                },
            }
        ]
        messages: list[dict] = [{"role": "user", "content": "What is the weather in Paris?"}]
        with provider.get_tracer("weather-agent").start_as_current_span("weather agent"):
            first = client.chat.completions.create(model="small", messages=messages, tools=tools)
            call = first.choices[0].message.tool_calls[0]
            messages.append(first.choices[0].message.model_dump(exclude_none=True))
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": "18 degrees, sunny"}
            )
            client.chat.completions.create(model="small", messages=messages, tools=tools)
            trace_id = format(trace.get_current_span().get_span_context().trace_id, "032x")
    finally:
        server.shutdown()
        provider.shutdown()
    return trace_id


if __name__ == "__main__":
    print(main(Path(sys.argv[1])))
