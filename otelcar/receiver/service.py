"""The receiver: gRPC and HTTP OTLP endpoints, one durable writer, background derivation.

Lifecycle: :meth:`Receiver.start` listens at once; its writer thread first quarantines
interrupted writes (under the raw lock only; requests arriving meanwhile wait in its queue,
then are acknowledged as usual). Steps are derived in the background, by default in a child
process on another core (:mod:`.derivation`): what was pending first, then every
``materialize_every_s`` while new batches arrive, so ``otelcar traces`` shows a trace within
seconds of its export. While more than ``max_lag_bytes`` of raw records wait to be derived,
new batches are refused as busy (the exporters retry), so intake slows to the pace
derivation keeps and the backlog stays bounded. Another process may write the same store
meanwhile (an ``otelcar import``): both append under the raw lock, and while the import
holds the derivation lock its builds derive the receiver's records too.
:meth:`Receiver.stop` stops listening, lets in-flight requests finish within a grace period,
writes everything accepted, derives it (unless another derivation holds the store past the
grace period: then the next writer derives it), and returns.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from otelcar.errors import StoreBusy
from otelcar.receiver.connections import Deadlines
from otelcar.receiver.derivation import Derivation
from otelcar.receiver.grpc_service import grpc_server
from otelcar.receiver.http_service import OTLPHTTPServer
from otelcar.receiver.stats import ReceiverStats
from otelcar.receiver.writer import DurableWriter
from otelcar.store import ImportReport, Store
from otelcar.store.sink import TraceSink

log = logging.getLogger("otelcar.receiver")


@dataclass(frozen=True, slots=True)
class ReceiverConfig:
    """Where and how to listen. A port of 0 picks a free one; ``None`` disables it."""

    host: str = "127.0.0.1"
    grpc_port: int | None = 4317
    http_port: int | None = 4318
    max_request_bytes: int = 32 * 1024 * 1024
    max_in_flight: int = 256
    max_connections: int = 1024  # open HTTP connections (the oldest idle one makes room)
    max_buffered_bytes: int = 512 * 1024 * 1024  # HTTP bodies read, not yet written
    deadlines: Deadlines = field(default_factory=Deadlines)  # per HTTP request
    max_pending: int = 4096
    max_pending_bytes: int = 256 * 1024 * 1024
    materialize_every_s: float = 0.5
    ack_timeout_s: float = 30.0
    #: "process": on another core (a Store); "thread": in this process; "auto": process for
    #: a Store, thread for any other sink
    derive: str = "auto"
    max_lag_bytes: int | None = 256 * 1024 * 1024  # backlog past which batches are refused
    #: how often the HTTP server looks for a stop: the most :meth:`Receiver.stop` waits for it
    poll_interval_s: float = 0.5


class Receiver:
    """An OTLP endpoint writing into one sink (:class:`~otelcar.store.sink.TraceSink`: a
    :class:`~otelcar.store.Store`, or an :class:`~otelcar.store.sink.InMemorySink`)."""

    def __init__(self, sink: TraceSink, config: ReceiverConfig | None = None) -> None:
        self.sink = sink
        self.config = config or ReceiverConfig()
        self.stats = ReceiverStats()
        self.grpc_port: int | None = None
        self.http_port: int | None = None
        self.startup: ImportReport | None = None
        self.unfinished = 0  # HTTP requests still unfinished when stop()'s grace ran out
        self._writer: DurableWriter | None = None
        self._grpc: Any = None
        self._http: OTLPHTTPServer | None = None
        self._threads: list[threading.Thread] = []
        mode = self.config.derive
        if mode == "auto":
            mode = "process" if isinstance(sink, Store) else "thread"
        self.derivation = Derivation(sink, mode=mode, every_s=self.config.materialize_every_s)

    def start(self) -> None:
        config = self.config
        self.startup = ImportReport()
        self._writer = DurableWriter(
            self.sink,
            max_pending=config.max_pending,
            max_pending_bytes=config.max_pending_bytes,
            before_first_write=self._recover,
            refuse=self._too_far_behind,
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
                max_connections=config.max_connections,
                max_buffered_bytes=config.max_buffered_bytes,
                deadlines=config.deadlines,
            )
            self.http_port = self._http.server_address[1]
            self._spawn("otelcar-http", self._http.serve_forever, config.poll_interval_s)
        self.derivation.start()

    def _recover(self) -> None:
        """Quarantine tails of writes a crash interrupted (before this receiver appends)."""
        assert self.startup is not None
        self.startup.quarantined.extend(self.sink.recover())
        for line in self.startup.quarantined:
            log.warning("recovered: quarantined %s", line)

    def _spawn(self, name: str, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    @property
    def materialize_errors(self) -> int:
        """Derivations that failed so far (each is retried; raw records are safe)."""
        return self.derivation.errors

    def _too_far_behind(self) -> str | None:
        """Why a new batch is refused for now: derivation is more than ``max_lag_bytes``
        behind intake (the client retries later; intake slows to what derivation keeps up
        with)."""
        limit = self.config.max_lag_bytes
        if limit is None:
            return None
        lag = self.derivation.lag_bytes()
        if lag <= limit:
            return None
        return (
            f"deriving steps is {lag / 1e6:.0f} MB behind intake (limit "
            f"{limit / 1e6:.0f} MB: --max-lag)"
        )

    def stop(self, grace_s: float = 10.0) -> ImportReport:
        """Stop listening on both transports at once; let requests in progress finish
        within ``grace_s`` (their batches are written and acknowledged), write everything
        accepted, derive it, and return what the final derivation did. When another
        process's derivation holds the store past ``grace_s`` more, the final derivation is
        left to it or to the next writer (the records are safe in raw segments)."""
        self.unfinished = 0
        grpc_done = self._grpc.stop(grace_s) if self._grpc is not None else None
        if self._http is not None:
            self.unfinished += self._http.stop(grace_s)
        if grpc_done is not None:
            grpc_done.wait(grace_s + 1)
        if self._writer is not None:
            self._writer.close()
        self.derivation.stop()  # its derivation in progress finishes: it holds the lock
        for thread in self._threads:
            thread.join()
        try:
            return self.sink.catch_up(lock_timeout_s=grace_s)
        except StoreBusy as exc:
            log.warning("not deriving the last batches now (%s): the next writer will", exc)
            return ImportReport()

    def endpoints(self) -> dict[str, str]:
        out = {}
        if self.grpc_port is not None:
            out["grpc"] = f"http://{self.config.host}:{self.grpc_port}"
        if self.http_port is not None:
            out["http"] = f"http://{self.config.host}:{self.http_port}"
        return out
