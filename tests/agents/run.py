"""Run one agent once against a model server, traced by a real instrumentation.

    python -m tests.agents.run cleanup --base-url http://127.0.0.1:PORT/v1 --out t.jsonl \
        --instrument openai-v2 --seed 7

``--instrument``: ``openai-v2`` (``opentelemetry-instrumentation-openai-v2`` with message
content on spans, util-genai ``invoke_agent`` and ``execute_tool`` spans: no tool definitions,
no tool choice), ``openinference`` (``openinference-instrumentation-openai``, which records
the tools offered, with OITracer AGENT and TOOL spans) or ``none`` (no tracing: a live run
along a rollout). Spans go to ``--out`` through the official OTLP/JSON file exporter, or
without ``--out`` through the official OTLP/HTTP exporter configured from the environment
(``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_RESOURCE_ATTRIBUTES``), as a deployed agent's do.
Prints the agent's final answer. ``--fail-on TOOL:ARG=VALUE`` is the acceptance check a
user's script ends with: after the answer it prints ``CHECK FAILED: …`` and exits with
status 1 (``--fail-status``) when the agent called TOOL with ARG = VALUE (what an ``exit_status`` or
``output_line`` outcome judges on a live rollout).

``agents_sdk`` (the OpenAI Agents SDK) makes its own client from the environment
(``--base-url`` sets ``OPENAI_BASE_URL``) and traces its own agents, tools and model calls:
``--instrument openinference`` is ``openinference-instrumentation-openai-agents`` (whose
processor replaces the SDK's exporter to OpenAI's trace backend), ``none`` disables the SDK's
tracing; either way nothing leaves the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
from collections.abc import Callable, Iterator
from typing import Any

from tests.agents.kit import Hooks

AGENTS = ("cleanup", "refund_loop", "handoff", "agents_sdk")


class GenAIHooks(Hooks):
    """util-genai spans, as the openai-v2 instrumentation's own package writes them."""

    def __init__(self, handler: Any) -> None:
        self.handler = handler

    @contextlib.contextmanager
    def agent(self, name: str) -> Iterator[None]:
        with self.handler.invoke_local_agent(agent_name=name) as invocation:
            invocation.attributes["gen_ai.provider.name"] = "openai"
            yield

    def tool(self, name: str, call_id: str, arguments: dict[str, Any], run: Callable[[], str]):
        with self.handler.tool(name, tool_call_id=call_id, tool_type="function") as invocation:
            invocation.arguments = arguments
            result = run()
            invocation.tool_result = result
            return result


class OpenInferenceHooks(Hooks):
    """OITracer AGENT and TOOL spans, as OpenInference users write them."""

    def __init__(self, tracer: Any) -> None:
        self.tracer = tracer

    @contextlib.contextmanager
    def agent(self, name: str) -> Iterator[None]:
        with self.tracer.start_as_current_span(name, openinference_span_kind="agent") as span:
            span.set_attribute("agent.name", name)
            yield

    def tool(self, name: str, call_id: str, arguments: dict[str, Any], run: Callable[[], str]):
        with self.tracer.start_as_current_span(name, openinference_span_kind="tool") as span:
            span.set_tool(name=name, parameters={"type": "object"})
            span.set_attribute("tool.id", call_id)
            span.set_input(json.dumps(arguments), mime_type="application/json")
            result = run()
            span.set_output(result)
            return result


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser()
    parser.add_argument("agent", choices=AGENTS)
    parser.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL"))
    parser.add_argument("--out")
    parser.add_argument(
        "--instrument", choices=("openai-v2", "openinference", "none"), default="none"
    )
    parser.add_argument("--seed", type=int, default=int(os.environ.get("OTELCAR_SEED", "0")))
    parser.add_argument("--system", help="Another system prompt (an agent changed since).")
    parser.add_argument(
        "--tool-choice", help="agents_sdk: a ModelSettings.tool_choice (default: none sent)."
    )
    parser.add_argument(
        "--handoff-reason", action="store_true", help="agents_sdk: the handoff takes a reason."
    )
    parser.add_argument("--fail-on", help="TOOL:ARG=VALUE: exit 1 when the agent made that call.")
    parser.add_argument("--fail-status", type=int, default=1, help="--fail-on's exit status.")
    args = parser.parse_args(argv)
    agent = importlib.import_module(f"tests.agents.{args.agent}")
    if args.system is not None:
        agent.SYSTEM = args.system
    if args.tool_choice is not None:
        agent.TOOL_CHOICE = args.tool_choice
    if args.handoff_reason:
        agent.HANDOFF_REASON = True
    if args.agent == "agents_sdk":
        return _agents_sdk(agent, args)
    import openai

    hooks: Hooks = Hooks()
    provider = None
    if args.instrument != "none":
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider

        provider = TracerProvider(resource=Resource.create({"service.name": args.agent}))
        provider.add_span_processor(_processor(args.out))
        if args.instrument == "openai-v2":
            os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_ONLY"
            from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
            from opentelemetry.util.genai.handler import TelemetryHandler

            OpenAIInstrumentor().instrument(tracer_provider=provider)
            hooks = GenAIHooks(TelemetryHandler(tracer_provider=provider))
        else:
            from openinference.instrumentation import OITracer, TraceConfig
            from openinference.instrumentation.openai import OpenAIInstrumentor

            OpenAIInstrumentor().instrument(tracer_provider=provider)
            hooks = OpenInferenceHooks(
                OITracer(provider.get_tracer("tests.agents"), config=TraceConfig())
            )
    watching = hooks = Watching(hooks)
    client = openai.OpenAI(base_url=args.base_url, api_key="not-a-key", max_retries=0)
    tracer = provider.get_tracer("tests.agents") if provider else None
    if tracer is not None and args.instrument == "openai-v2" and args.agent != "handoff":
        answer = agent.run(client, hooks, seed=args.seed)  # the agent's own span is its root
    elif tracer is not None:
        with tracer.start_as_current_span(f"run {args.agent}"):
            answer = agent.run(client, hooks, seed=args.seed)
    else:
        answer = agent.run(client, hooks, seed=args.seed)
    if provider is not None:
        provider.shutdown()
    if args.fail_on is not None and watching.made(args.fail_on):
        print(answer)
        print(f"CHECK FAILED: the agent called {args.fail_on}")
        raise SystemExit(args.fail_status)
    return answer


class Watching(Hooks):
    """Another agent's hooks, keeping every tool call the agent made (its acceptance check)."""

    def __init__(self, inner: Hooks) -> None:
        self.inner = inner
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def agent(self, name: str) -> contextlib.AbstractContextManager[None]:
        return self.inner.agent(name)

    def tool(self, name: str, call_id: str, arguments: dict[str, Any], run: Callable[[], str]):
        self.calls.append((name, dict(arguments)))
        return self.inner.tool(name, call_id, arguments, run)

    def made(self, spec: str) -> bool:
        """Whether a call matches ``TOOL:ARG=VALUE``."""
        tool, _, rest = spec.partition(":")
        key, _, value = rest.partition("=")
        return any(n == tool and str(a.get(key)) == value for n, a in self.calls)


def _processor(out: str | None) -> Any:
    """Spans to the file ``out``, or (``None``) over OTLP where the environment says: gRPC
    when ``OTEL_EXPORTER_OTLP_PROTOCOL=grpc``, else HTTP."""
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    if out is not None:
        from opentelemetry.exporter.otlp.json.file import FileSpanExporter

        return SimpleSpanProcessor(FileSpanExporter(out))
    if os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    return BatchSpanProcessor(OTLPSpanExporter())


def _agents_sdk(agent: Any, args: argparse.Namespace) -> str:
    """The Agents SDK agent: its client from the environment, its own tracing bridged."""
    if args.base_url:
        os.environ["OPENAI_BASE_URL"] = args.base_url
    os.environ["OPENAI_API_KEY"] = os.environ.get("OPENAI_API_KEY") or "not-a-key"
    if args.instrument == "openai-v2":
        raise SystemExit("agents_sdk: --instrument openinference or none")
    if args.instrument == "none":
        from agents import set_tracing_disabled

        set_tracing_disabled(True)
        return agent.run(None, Hooks(), seed=args.seed)
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": args.agent}))
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(args.out)))
    OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)  # exclusive: no export
    try:
        return agent.run(None, Hooks(), seed=args.seed)
    finally:
        provider.shutdown()


if __name__ == "__main__":
    print(main())
