"""OTLP/HTTP: ``POST /v1/traces`` and ``/v1/logs``, protobuf or JSON, optionally gzip.

Status codes: 200 (with ``partial_success`` when items were rejected), 400 undecodable body
or truncated upload, 404 unknown path, 405 other methods, 411 no Content-Length, 413 body
(or its decompressed form) over the limit, 415 unsupported content type or encoding, 503 with
``Retry-After`` when the writer is behind or too many requests are in flight.
"""

from __future__ import annotations

import logging
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from otelcar.receiver.handling import handle
from otelcar.receiver.intake import status_body
from otelcar.receiver.stats import ReceiverStats
from otelcar.receiver.writer import DurableWriter

log = logging.getLogger("otelcar.receiver")
PATHS = {"/v1/traces": "traces", "/v1/logs": "logs"}
CONTENT_TYPES = {
    "application/x-protobuf": "proto",
    "application/protobuf": "proto",
    "application/json": "json",
}
RETRY_AFTER_S = 1
# A refused (too large) body is still read, up to this, so the client can read the 413.
DISCARD_MAX_BYTES = 64 * 1024 * 1024
# gRPC status codes used in google.rpc.Status bodies.
INVALID_ARGUMENT, RESOURCE_EXHAUSTED, UNAVAILABLE = 3, 8, 14


class TooLarge(Exception):
    """A body whose decompressed size passes the limit."""


def gunzip(data: bytes, limit: int) -> bytes:
    """Decompress gzip ``data``, refusing output over ``limit`` bytes (decompression bombs)."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = inflater.decompress(data, limit + 1)
    if len(out) > limit or inflater.unconsumed_tail:
        raise TooLarge(f"decompressed body exceeds {limit} bytes")
    if not inflater.eof:
        raise ValueError("gzip body is truncated")
    return out


class OTLPHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server carrying the receiver's shared state."""

    daemon_threads = True
    request_queue_size = 1024

    def __init__(
        self,
        address: tuple[str, int],
        *,
        writer: DurableWriter,
        stats: ReceiverStats,
        max_body_bytes: int,
        max_in_flight: int,
    ) -> None:
        self.writer = writer
        self.stats = stats
        self.max_body_bytes = max_body_bytes
        self.in_flight = threading.BoundedSemaphore(max_in_flight)
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: OTLPHTTPServer
    protocol_version = "HTTP/1.1"
    timeout = 30  # seconds a client may stall mid-request before its connection is dropped

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("http %s " + format, self.client_address[0], *args)

    def _reply(
        self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def _error(
        self,
        status: int,
        code: int,
        message: str,
        encoding: str = "json",
        headers: dict[str, str] | None = None,
    ) -> None:
        log.warning("http %s %s from %s: %s", status, self.path, self.client_address[0], message)
        content_type = "application/json" if encoding == "json" else "application/x-protobuf"
        self._reply(status, status_body(code, message, encoding=encoding), content_type, headers)

    def do_GET(self) -> None:
        self._error(405, INVALID_ARGUMENT, "use POST", headers={"Allow": "POST"})

    do_PUT = do_DELETE = do_PATCH = do_GET

    def do_POST(self) -> None:
        signal = PATHS.get(urlsplit(self.path).path)
        if signal is None:
            self.close_connection = True
            self._error(
                404,
                INVALID_ARGUMENT,
                f"no OTLP endpoint at {self.path}; use /v1/traces or /v1/logs",
            )
            return
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        encoding = CONTENT_TYPES.get(content_type)
        if encoding is None:
            self.close_connection = True
            self._error(
                415,
                INVALID_ARGUMENT,
                f"unsupported Content-Type {content_type!r}; "
                "use application/x-protobuf or application/json",
            )
            return
        length_header = self.headers.get("Content-Length")
        if length_header is None or not length_header.isdigit():
            self.close_connection = True
            self._error(411, INVALID_ARGUMENT, "Content-Length is required", encoding)
            return
        length = int(length_header)
        limit = self.server.max_body_bytes
        if length > limit:
            self.close_connection = True  # the body is not kept: the connection is spent
            self._error(
                413,
                RESOURCE_EXHAUSTED,
                f"body of {length} bytes exceeds the limit of {limit} bytes "
                "(otelcar collect --max-request-bytes)",
                encoding,
            )
            self._discard_body(length)
            return
        if not self.server.in_flight.acquire(blocking=False):
            self.close_connection = True
            self.server.stats.refuse()
            self._error(
                503,
                UNAVAILABLE,
                "too many requests in flight; retry later",
                encoding,
                {"Retry-After": str(RETRY_AFTER_S)},
            )
            return
        try:
            self._export(signal, encoding, length, limit)
        finally:
            self.server.in_flight.release()

    def _discard_body(self, length: int) -> None:
        """Read and drop up to :data:`DISCARD_MAX_BYTES` of a refused body. A client that
        sends its whole body before reading the reply (most do) would otherwise hit a reset
        connection, and never see the status that says why; beyond the cap it does."""
        left = min(length, DISCARD_MAX_BYTES)
        try:
            while left > 0:
                chunk = self.rfile.read(min(left, 64 * 1024))
                if not chunk:
                    return
                left -= len(chunk)
        except OSError:
            return  # the client gave up: nothing to wait for

    def _export(self, signal: str, encoding: str, length: int, limit: int) -> None:
        body = self.rfile.read(length)
        if len(body) < length:
            self.close_connection = True
            log.warning(
                "client %s disconnected after %d of %d body bytes; nothing stored",
                self.client_address[0],
                len(body),
                length,
            )
            return
        content_encoding = (self.headers.get("Content-Encoding") or "identity").strip().lower()
        if content_encoding == "gzip":
            try:
                body = gunzip(body, limit)
            except TooLarge as exc:
                self._error(413, RESOURCE_EXHAUSTED, str(exc), encoding)
                return
            except (ValueError, zlib.error) as exc:
                self._error(400, INVALID_ARGUMENT, f"bad gzip body: {exc}", encoding)
                return
        elif content_encoding != "identity":
            self._error(
                415,
                INVALID_ARGUMENT,
                f"unsupported Content-Encoding {content_encoding!r}",
                encoding,
            )
            return
        outcome = handle(
            body,
            signal=signal,
            encoding=encoding,
            peer=f"http {self.client_address[0]}",
            writer=self.server.writer,
            stats=self.server.stats,
        )
        if outcome.kind == "ok":
            assert outcome.intake is not None
            if encoding == "json":
                self._reply(200, outcome.intake.response_json(), "application/json")
            else:
                self._reply(200, outcome.intake.response_proto(), "application/x-protobuf")
        elif outcome.kind == "invalid":
            self._error(400, INVALID_ARGUMENT, outcome.message, encoding)
        else:
            self._error(
                503, UNAVAILABLE, outcome.message, encoding, {"Retry-After": str(RETRY_AFTER_S)}
            )
