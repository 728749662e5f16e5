"""A support (refund) agent: the `openai` client, plain tool functions, OpenTelemetry.

Traced by `opentelemetry-instrumentation-openai-v2` (content capture on) with util-genai's
`invoke_agent` and `execute_tool` spans, exported by the official OTLP exporter chosen by the
standard variables (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_PROTOCOL``).

Run one episode::

    OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317 \\
    python -m examples.refund_agent.agent --base-url http://127.0.0.1:8080/v1 --seed 3
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
from dataclasses import dataclass
from typing import Any

from examples.refund_agent.tools import CUSTOMER_ORDER, TOOL_FUNCTIONS, TOOLS

SYSTEM_PROMPT = (
    "You are a customer support agent for an online shop. To handle a refund request, first "
    "look up the order with lookup_order, then issue the refund with issue_refund for the "
    "customer's order, then confirm to the customer in one sentence."
)
USER_PROMPT = "Hi, I'd like a refund for order A-1001, the headphones arrived broken."
# The triage agent always starts by looking the order up (a forced tool call, as agent
# frameworks do for a first retrieval step); the refunds agent then decides freely, once.
TRIAGE_TOOL_CHOICE = {"type": "function", "function": {"name": "lookup_order"}}
REFUND_DECISIONS = 1


@dataclass
class Episode:
    trace_id: str
    refunds: list[dict[str, Any]]
    answer: str | None

    @property
    def failed(self) -> bool:
        """The outcome: a refund of any order but the customer's own."""
        return any(r.get("order_id") != CUSTOMER_ORDER for r in self.refunds)


_TELEMETRY: tuple[Any, Any, Any] | None = None


def _telemetry(service_name: str) -> tuple[Any, Any, Any]:
    """Providers and the instrumentation, set up once per process (not globally installed)."""
    global _TELEMETRY
    if _TELEMETRY is not None:
        return _TELEMETRY
    os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    if os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc") == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    else:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    resource = Resource.create({"service.name": service_name})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter()))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider, logger_provider=logger_provider)
    _TELEMETRY = (tracer_provider, logger_provider, instrumentor)
    return _TELEMETRY


def run_episode(
    client: Any, model: str, *, seed: int, temperature: float = 0.7, handler: Any = None
) -> tuple[list[dict[str, Any]], str | None]:
    """The agents' loop; returns the refunds issued and the final answer.

    Two agents share one conversation: ``triage`` looks the order up (one forced tool call),
    then ``refunds`` takes up to :data:`REFUND_DECISIONS` decisions with ``tool_choice=auto``;
    when its last decision was a tool call, the reply to the customer is that tool's result
    (a template, no model call). Each model call gets ``seed * 100 + decision`` so an episode
    is reproducible.
    """
    from examples.refund_agent import tools

    tools.REFUNDS.clear()
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": USER_PROMPT},
    ]
    phases = [("triage", TRIAGE_TOOL_CHOICE, 1), ("refunds", "auto", REFUND_DECISIONS)]
    decision = 0
    for agent_name, tool_choice, count in phases:
        with _agent(handler, agent_name):
            for _ in range(count):
                response = client.chat.completions.create(
                    model=model,
                    messages=messages,
                    tools=TOOLS,
                    tool_choice=tool_choice,
                    temperature=temperature,
                    seed=seed * 100 + decision,
                    max_tokens=64,
                )
                decision += 1
                message = response.choices[0].message
                if not message.tool_calls:
                    return list(tools.REFUNDS), message.content
                messages.append(_assistant_message(message))
                for call in message.tool_calls:
                    result = _execute(call, handler)
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return list(tools.REFUNDS), messages[-1]["content"]


def _agent(handler: Any, name: str) -> Any:
    """An ``invoke_agent`` span for one agent's turn (nothing without a handler)."""
    if handler is None:
        return contextlib.nullcontext()
    return handler.invoke_local_agent(agent_name=name)


def _assistant_message(message: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": message.content or "",
        "tool_calls": [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.function.name, "arguments": c.function.arguments},
            }
            for c in message.tool_calls
        ],
    }


def _execute(call: Any, handler: Any) -> str:
    name = call.function.name
    try:
        arguments = json.loads(call.function.arguments or "{}")
    except ValueError:
        arguments = {}
    function = TOOL_FUNCTIONS.get(name)

    def run() -> str:
        if function is None:
            return f"Unknown tool {name!r}."
        try:
            return function(**arguments)
        except TypeError as exc:
            return f"Bad arguments for {name}: {exc}"

    if handler is None:
        return run()
    with handler.tool(name, tool_call_id=call.id, tool_type="function") as invocation:
        if invocation.should_capture_content_on_span:
            invocation.arguments = arguments
        result = run()
        if invocation.should_capture_content_on_span:
            invocation.tool_result = result
        return result


def traced_episode(
    base_url: str, model: str, *, seed: int, service_name: str = "refund-agent"
) -> Episode:
    """One episode, traced and exported (flushed before returning)."""
    import openai
    from opentelemetry import trace
    from opentelemetry.util.genai.handler import TelemetryHandler

    tracer_provider, logger_provider, _ = _telemetry(service_name)
    try:
        handler = TelemetryHandler(tracer_provider=tracer_provider, logger_provider=logger_provider)
        client = openai.OpenAI(base_url=base_url, api_key="local", max_retries=2, timeout=300)
        with handler.invoke_local_agent(agent_name="support") as agent:
            agent.attributes["gen_ai.provider.name"] = "llama.cpp"
            trace_id = format(trace.get_current_span().get_span_context().trace_id, "032x")
            refunds, answer = run_episode(client, model, seed=seed, handler=handler)
        return Episode(trace_id, refunds, answer)
    finally:
        tracer_provider.force_flush()
        logger_provider.force_flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", default="gemma-3-270m")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    episode = traced_episode(args.base_url, args.model, seed=args.seed)
    print(
        json.dumps(
            {
                "trace_id": episode.trace_id,
                "failed": episode.failed,
                "refunds": episode.refunds,
                "answer": episode.answer,
            }
        )
    )


if __name__ == "__main__":
    main()
