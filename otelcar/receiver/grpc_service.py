"""OTLP/gRPC: ``TraceService/Export`` and ``LogsService/Export``.

Requests arrive as raw bytes (no deserializer), so the stored record is exactly what was
sent. Status codes: OK (with ``partial_success``), INVALID_ARGUMENT for an undecodable body,
RESOURCE_EXHAUSTED above the size limit (enforced by gRPC itself) or the concurrency limit,
UNAVAILABLE when the writer is behind or shutting down (the exporters retry it).
"""

from __future__ import annotations

from concurrent import futures
from typing import Any

import grpc

from otelcar.receiver.handling import IntakeResult, handle
from otelcar.receiver.stats import ReceiverStats
from otelcar.receiver.writer import DurableWriter

SERVICES = {
    "opentelemetry.proto.collector.trace.v1.TraceService": "traces",
    "opentelemetry.proto.collector.logs.v1.LogsService": "logs",
}


def _export_handler(signal: str, writer: DurableWriter, stats: ReceiverStats) -> Any:
    def export(request: bytes, context: grpc.ServicerContext) -> bytes:
        outcome = handle(
            request,
            signal=signal,
            encoding="proto",
            peer=f"grpc {context.peer()}",
            writer=writer,
            stats=stats,
        )
        if outcome.result is IntakeResult.OK:
            assert outcome.intake is not None
            return outcome.intake.response_proto()
        if outcome.result is IntakeResult.INVALID:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, outcome.message)
        context.abort(grpc.StatusCode.UNAVAILABLE, outcome.message)
        raise AssertionError("unreachable")  # context.abort raises

    return grpc.unary_unary_rpc_method_handler(export)


def grpc_server(
    address: str,
    *,
    writer: DurableWriter,
    stats: ReceiverStats,
    max_body_bytes: int,
    max_in_flight: int,
    workers: int = 16,
) -> tuple[Any, int]:
    """A started-ready (not yet started) gRPC server and its bound port."""
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="otelcar-grpc"),
        options=[
            ("grpc.max_receive_message_length", max_body_bytes),
            ("grpc.max_send_message_length", 4 * 1024 * 1024),
        ],
        maximum_concurrent_rpcs=max_in_flight,
    )
    handlers = {
        service: grpc.method_handlers_generic_handler(
            service, {"Export": _export_handler(signal, writer, stats)}
        )
        for service, signal in SERVICES.items()
    }
    server.add_generic_rpc_handlers(tuple(handlers.values()))
    port = server.add_insecure_port(address)
    if port == 0:
        raise OSError(f"cannot listen on {address}")
    return server, port
