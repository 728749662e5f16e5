"""Each triage result as an OpenTelemetry span, linked to the trace it explains, sent to the
user's own tracing backend (``[triage] export``, docs/triage.md).

A result (a trace ``done`` or ``skipped``) becomes one span named ``otelcar triage`` of the
service ``otelcar-triage``, in a trace of its own, with a **link to the failing trace's root
span** (the trace id alone when no root span is stored) and attributes a backend can show and
search: ``otelcar.triage.trace_id`` (the failing trace, as text), ``otelcar.triage.state``,
``.verdict``, ``.reason``, ``.calls``, ``otelcar.culprit.step``, ``.name``, ``.delta``,
``otelcar.headline`` and ``otelcar.cause`` (the sentence ``why`` named). A skipped trace's
span has status ERROR with its reason. It is exported with the official OTLP/HTTP exporter
(``export`` is the backend's OTLP/HTTP base URL; ``/v1/traces`` is added) through a batch
processor; a backend that is down costs a log line, never a result.
"""

from __future__ import annotations

from typing import Any

from otelcar.triage.summaries import cause_of

#: The service name of the spans triage emits.
SERVICE = "otelcar-triage"


class ResultExporter:
    """Sends each finished triage state as a span (module docstring). :meth:`close` flushes."""

    def __init__(self, endpoint: str, *, timeout_s: float = 10.0) -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        self.endpoint = endpoint.rstrip("/") + "/v1/traces"
        self.provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
        exporter = OTLPSpanExporter(endpoint=self.endpoint, timeout=timeout_s)
        self.provider.add_span_processor(BatchSpanProcessor(exporter))
        self.tracer = self.provider.get_tracer("otelcar.triage")

    def emit(self, state: dict[str, Any], root_span_id: str | None) -> None:
        """One span for ``state`` (a triage state file, docs/triage.md), linked to its trace's
        root span ``root_span_id`` (hex; ``None``: none stored)."""
        from opentelemetry.trace import Link, SpanContext, Status, StatusCode, TraceFlags

        trace_id = int(state["trace_id"], 16)
        span_id = int(root_span_id, 16) if root_span_id else 1  # a link needs a span id
        linked = SpanContext(
            trace_id, span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED)
        )
        attributes = _attributes(state)
        link = Link(
            linked, {"otelcar.link": "the triaged trace", "otelcar.root_span": bool(root_span_id)}
        )
        with self.tracer.start_as_current_span(
            "otelcar triage", links=[link], attributes=attributes
        ) as span:
            if state.get("state") == "skipped":
                span.set_status(Status(StatusCode.ERROR, state.get("reason") or "skipped"))

    def close(self) -> None:
        """Send what is waiting and stop (at most the exporter's timeout)."""
        self.provider.shutdown()


def _attributes(state: dict[str, Any]) -> dict[str, Any]:
    """The span attributes of a state (``None`` values left out: OTel has no null)."""
    culprit = state.get("culprit") if isinstance(state.get("culprit"), dict) else {}
    values: dict[str, Any] = {
        "otelcar.triage.trace_id": state.get("trace_id"),
        "otelcar.triage.service": state.get("service"),
        "otelcar.triage.state": state.get("state"),
        "otelcar.triage.verdict": state.get("verdict"),
        "otelcar.triage.reason": state.get("reason"),
        "otelcar.triage.calls": state.get("calls"),
        "otelcar.culprit.step": culprit.get("step"),
        "otelcar.culprit.name": culprit.get("name"),
        "otelcar.culprit.delta": culprit.get("delta"),
        "otelcar.headline": state.get("headline"),
        "otelcar.cause": cause_of(state.get("why")),
    }
    return {k: v for k, v in values.items() if v is not None}
