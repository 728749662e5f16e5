"""The receiver: gRPC and HTTP OTLP endpoints, one durable writer, background derivation.

Lifecycle: :meth:`Receiver.start` recovers the store (interrupted writes are quarantined),
derives what is pending, then listens. :meth:`Receiver.stop` stops listening, lets in-flight
requests finish, writes everything accepted, derives it, and returns. Steps are derived in
the background every ``materialize_every_s`` while new batches arrive, so ``otelcar traces``
shows a trace within seconds of its export.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from otelcar.receiver.grpc_service import grpc_server
from otelcar.receiver.http_service import OTLPHTTPServer
from otelcar.receiver.stats import ReceiverStats
from otelcar.receiver.writer import DurableWriter
from otelcar.store import ImportReport, Store

log = logging.getLogger("otelcar.receiver")


@dataclass(frozen=True, slots=True)
class ReceiverConfig:
    """Where and how to listen. A port of 0 picks a free one; ``None`` disables it."""

    host: str = "127.0.0.1"
    grpc_port: int | None = 4317
    http_port: int | None = 4318
    max_request_bytes: int = 32 * 1024 * 1024
    max_in_flight: int = 256
    max_pending: int = 4096
    max_pending_bytes: int = 256 * 1024 * 1024
    materialize_every_s: float = 0.5
    ack_timeout_s: float = 30.0


class Receiver:
    """An OTLP endpoint writing into one store."""

    def __init__(self, store: Store, config: ReceiverConfig | None = None) -> None:
        self.store = store
        self.config = config or ReceiverConfig()
        self.stats = ReceiverStats()
        self.grpc_port: int | None = None
        self.http_port: int | None = None
        self.startup: ImportReport | None = None
        self.materialize_errors = 0
        self._writer: DurableWriter | None = None
        self._grpc: Any = None
        self._http: OTLPHTTPServer | None = None
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()

    def start(self) -> None:
        config = self.config
        self.startup = self.store.catch_up(recover=True)
        for line in self.startup.quarantined:
            log.warning("quarantined %s", line)
        self._writer = DurableWriter(
            self.store, max_pending=config.max_pending, max_pending_bytes=config.max_pending_bytes
        )
        if config.grpc_port is not None:
            self._grpc, self.grpc_port = grpc_server(
                f"{config.host}:{config.grpc_port}",
                writer=self._writer,
                stats=self.stats,
                max_body_bytes=config.max_request_bytes,
                max_in_flight=config.max_in_flight,
            )
            self._grpc.start()
        if config.http_port is not None:
            self._http = OTLPHTTPServer(
                (config.host, config.http_port),
                writer=self._writer,
                stats=self.stats,
                max_body_bytes=config.max_request_bytes,
                max_in_flight=config.max_in_flight,
            )
            self.http_port = self._http.server_address[1]
            self._spawn("otelcar-http", self._http.serve_forever)
        self._spawn("otelcar-materialize", self._materialize_loop)

    def _spawn(self, name: str, target: Any) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _materialize_loop(self) -> None:
        derived_upto = 0
        while not self._stopping.wait(self.config.materialize_every_s):
            appended = self._writer.appended if self._writer else 0
            if appended == derived_upto:
                continue
            try:
                self.store.catch_up()
                derived_upto = appended
            except Exception as exc:
                self.materialize_errors += 1
                log.error("deriving steps failed (raw records are safe; will retry): %s", exc)

    def stop(self, grace_s: float = 10.0) -> ImportReport:
        """Drain and stop; returns what the final derivation did."""
        if self._grpc is not None:
            self._grpc.stop(grace_s).wait(grace_s + 1)
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
        if self._writer is not None:
            self._writer.close()
        self._stopping.set()
        for thread in self._threads:
            thread.join()  # the derive thread finishes its build: it holds the derived lock
        return self.store.catch_up(lock_timeout_s=None)

    def endpoints(self) -> dict[str, str]:
        out = {}
        if self.grpc_port is not None:
            out["grpc"] = f"http://{self.config.host}:{self.grpc_port}"
        if self.http_port is not None:
            out["http"] = f"http://{self.config.host}:{self.http_port}"
        return out
