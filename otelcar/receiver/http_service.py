"""OTLP/HTTP: ``POST /v1/traces`` and ``/v1/logs``, protobuf or JSON, optionally gzip.

Status codes: 200 (with ``partial_success`` when items were rejected), 400 undecodable body, 404
unknown path, 405 other methods, 408 a request not sent whole within its deadline, 411 neither a
Content-Length nor a chunked body (``Transfer-Encoding: chunked``, what the OpenTelemetry
JavaScript exporters send), 413 body (or its decompressed form) over the limit, 415 unsupported
content type or encoding, 503 with ``Retry-After`` when the writer is behind, too many requests
are in flight, too many connections are open, or the receiver is stopping. Every error body is a
``google.rpc.Status`` in the request's encoding.

A connection holds no permit while its client sends (see :mod:`otelcar.receiver.connections`):
the body is read under a whole-request deadline first, then a fair permit is taken for the
work, so slow clients cannot starve the others. :meth:`OTLPHTTPServer.stop` drains.
"""

from __future__ import annotations

import logging
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from otelcar.receiver.connections import Connection, Connections, Deadlines, Permits, Reaper
from otelcar.receiver.handling import IntakeResult, handle
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
READ_CHUNK_BYTES = 64 * 1024
#: The longest chunk-size line (hex size and extensions) or trailer line of a chunked body.
MAX_CHUNK_LINE = 4096
# gRPC status codes used in google.rpc.Status bodies.
INVALID_ARGUMENT, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, UNAVAILABLE = 3, 4, 8, 14


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

    daemon_threads = True  # stop() drains them; none outlives its grace period
    request_queue_size = 1024

    def __init__(
        self,
        address: tuple[str, int],
        *,
        writer: DurableWriter,
        stats: ReceiverStats,
        max_body_bytes: int,
        max_in_flight: int,
        max_connections: int = 1024,
        max_buffered_bytes: int = 512 * 1024 * 1024,
        deadlines: Deadlines | None = None,
    ) -> None:
        self.writer = writer
        self.stats = stats
        self.max_body_bytes = max_body_bytes
        self.permits = Permits(max_in_flight)
        self.connections = Connections(
            deadlines or Deadlines(), max_connections, max(max_buffered_bytes, max_body_bytes)
        )
        super().__init__(address, _Handler)
        self.reaper = Reaper(self.connections)

    def stop(self, grace_s: float) -> int:
        """Stop accepting, let requests in progress finish within ``grace_s`` (idle
        keep-alive connections are closed at once), then close; returns how many requests
        were cut unfinished."""
        self.shutdown()
        self.server_close()
        left = self.connections.drain(grace_s)
        self.reaper.stop()
        return left


class _Handler(BaseHTTPRequestHandler):
    server: OTLPHTTPServer
    protocol_version = "HTTP/1.1"
    conn: Connection | None = None

    def setup(self) -> None:
        # Per read: how long a connection may sit with nothing arriving. Whole requests
        # are bounded by the deadlines the reaper enforces.
        self.timeout = self.server.connections.deadlines.idle_timeout_s
        super().setup()
        self.conn = self.server.connections.open(self.connection, self.client_address[0])

    def handle(self) -> None:
        if self.conn is None:
            why = "stopping" if self.server.connections.draining else "too many connections"
            body = status_body(UNAVAILABLE, f"otelcar is {why}; retry later", encoding="json")
            self.wfile.write(
                b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\nRetry-After: {RETRY_AFTER_S}\r\n".encode()
                + b"Connection: close\r\n\r\n"
                + body
            )
            self.server.stats.refuse()
            return
        super().handle()

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass  # the client is gone; nothing left to flush to it
        finally:
            if self.conn is not None:
                self.server.connections.close(self.conn)

    def handle_one_request(self) -> None:
        connections, conn = self.server.connections, self.conn
        assert conn is not None
        if not connections.idle(conn):
            self.close_connection = True
            return
        try:
            first = self.rfile.peek(1)  # waits (idle_timeout_s at most) for a request
        except (OSError, ValueError):
            first = b""
        deadline = time.monotonic() + connections.deadlines.header_timeout_s
        if not first or not connections.reading(conn, deadline):
            self.close_connection = True
            return
        super().handle_one_request()

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The base class's errors (bad request line, headers too long …) as a
        ``google.rpc.Status`` like every other answer; 408 when the reaper cut the request."""
        self.close_connection = True
        if not hasattr(self, "path"):  # the request line itself was bad or cut short
            self.path = "(no request line)"
        self.request_version = "HTTP/1.1"  # answer with a status line, whatever came in
        if self.conn is not None and self.conn.expired:
            code, message = 408, "request headers not received in time"
        text = message or self.responses.get(code, ("error",))[0]
        grpc_code = DEADLINE_EXCEEDED if code == 408 else INVALID_ARGUMENT
        self._error(code, grpc_code, text)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("http %s " + format, self.client_address[0], *args)

    def _reply(
        self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        if self.server.connections.draining:
            self.close_connection = True  # tell keep-alive clients to go elsewhere
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            self.close_connection = True  # the client left before reading its answer

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
        limit = self.server.max_body_bytes
        chunked = "chunked" in (self.headers.get("Transfer-Encoding") or "").lower()
        length_header = self.headers.get("Content-Length")
        if chunked:
            body = self._read_chunked(encoding, limit)
            if body is None:
                return
        elif length_header is None or not length_header.isdigit():
            self.close_connection = True
            self._error(
                411,
                INVALID_ARGUMENT,
                "Content-Length (or Transfer-Encoding: chunked) is required",
                encoding,
            )
            return
        elif int(length_header) > limit:
            length = int(length_header)
            self.close_connection = True  # the body is not kept: the connection is spent
            self._error(*self._over(length, limit), encoding)
            self._discard_body(length)
            return
        else:
            body = self._read_body(int(length_header), encoding)
            if body is None:
                return
        peer = self.client_address[0]
        try:
            if not self.server.permits.try_acquire(peer):
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
                assert self.conn is not None
                self.server.connections.working(self.conn)
                self._export(signal, encoding, body, limit)
            finally:
                self.server.permits.release(peer)
        finally:
            self.server.connections.unbuffer(len(body))

    def _read_chunked(self, encoding: str, limit: int) -> bytes | None:
        """A ``Transfer-Encoding: chunked`` body, whole: each chunk read as a body of its
        size (:meth:`_read_body`: the same deadline, memory budget and answers), at most
        ``limit`` bytes in all (413 beyond: the connection is closed, the rest unread), the
        trailers read and dropped. ``None`` when it was answered instead."""
        connections, conn = self.server.connections, self.conn
        assert conn is not None
        started = time.monotonic()
        parts: list[bytes] = []
        got = 0

        def give_up(code: int, status: int, message: str) -> None:
            connections.unbuffer(got)
            self.close_connection = True
            self._error(code, status, message, encoding)

        while True:
            connections.extend(conn, connections.deadlines.body_deadline(started, got))
            line = self._chunk_line()
            if line is None:
                give_up(*self._cut_short(started, got))
                return None
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                give_up(400, INVALID_ARGUMENT, f"bad chunk size line {line[:40]!r}")
                return None
            if size < 0:
                give_up(400, INVALID_ARGUMENT, f"bad chunk size line {line[:40]!r}")
                return None
            if size == 0:
                break
            if got + size > limit:
                give_up(*self._over(got + size, limit, at_least=True))
                return None
            part = self._read_body(size, encoding, started=started, before=got)
            if part is None:
                connections.unbuffer(got)
                return None
            parts.append(part)
            got += size
            if self._chunk_line() != b"":  # the CRLF that ends the chunk's data
                give_up(400, INVALID_ARGUMENT, "a chunk's data is not followed by CRLF")
                return None
        while True:  # trailers, up to the empty line
            trailer = self._chunk_line()
            if trailer is None:
                give_up(*self._cut_short(started, got))
                return None
            if trailer == b"":
                return b"".join(parts)

    def _chunk_line(self) -> bytes | None:
        """One line of a chunked body without its line end (``None``: the client is gone, or
        the line is longer than :data:`MAX_CHUNK_LINE`)."""
        try:
            line = self.rfile.readline(MAX_CHUNK_LINE + 2)
        except OSError:
            return None
        if not line.endswith(b"\n"):
            return None
        return line.rstrip(b"\r\n")

    def _over(self, length: int, limit: int, *, at_least: bool = False) -> tuple[int, int, str]:
        """The 413 answer to a body of ``length`` bytes (``at_least``: so far) over ``limit``."""
        return (
            413,
            RESOURCE_EXHAUSTED,
            f"body of {'at least ' if at_least else ''}{length} bytes exceeds the limit of "
            f"{limit} bytes (otelcar collect --max-request-bytes)",
        )

    def _cut_short(self, started: float, got: int) -> tuple[int, int, str]:
        return (
            408 if self.conn is not None and self.conn.expired else 400,
            DEADLINE_EXCEEDED if self.conn is not None and self.conn.expired else INVALID_ARGUMENT,
            f"the chunked body ended unfinished after {got} bytes in "
            f"{time.monotonic() - started:.1f} s",
        )

    def _read_body(
        self, length: int, encoding: str, *, started: float | None = None, before: int = 0
    ) -> bytes | None:
        """The whole body (or one chunk of a chunked body: ``started`` is when the body
        began, ``before`` its bytes read so far), read under the connection's deadline
        (extended as bytes arrive) and within the receiver's memory budget; ``None`` when
        it was answered instead."""
        connections, conn = self.server.connections, self.conn
        assert conn is not None
        started = time.monotonic() if started is None else started
        connections.extend(conn, connections.deadlines.body_deadline(started, before))
        chunks: list[bytes] = []
        got = 0
        while got < length:
            want = min(length - got, READ_CHUNK_BYTES)
            try:
                chunk = self.rfile.read1(want)
            except OSError:
                chunk = b""
            if chunk and not connections.buffer(len(chunk)):
                connections.unbuffer(got)
                self.close_connection = True
                self.server.stats.refuse()
                self._error(
                    503,
                    UNAVAILABLE,
                    "otelcar holds too many request bodies in memory; retry later",
                    encoding,
                    {"Retry-After": str(RETRY_AFTER_S)},
                )
                return None
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
            connections.extend(conn, connections.deadlines.body_deadline(started, before + got))
        if got < length:
            connections.unbuffer(got)
            self.close_connection = True
            if conn.expired:
                self._error(
                    408,
                    DEADLINE_EXCEEDED,
                    f"received {got} of {length} body bytes in {time.monotonic() - started:.1f} s"
                    f"; send at least {connections.deadlines.min_upload_bytes_per_s} bytes/s",
                    encoding,
                )
            else:
                log.warning(
                    "client %s disconnected after %d of %d body bytes; nothing stored",
                    self.client_address[0],
                    got,
                    length,
                )
            return None
        return b"".join(chunks)

    def _discard_body(self, length: int) -> None:
        """Read and drop up to :data:`DISCARD_MAX_BYTES` of a refused body. A client that
        sends its whole body before reading the reply (most do) would otherwise hit a reset
        connection, and never see the status that says why; beyond the cap it does."""
        connections, conn = self.server.connections, self.conn
        assert conn is not None
        started = time.monotonic()
        left = min(length, DISCARD_MAX_BYTES)
        try:
            while left > 0:
                chunk = self.rfile.read1(min(left, READ_CHUNK_BYTES))
                if not chunk:
                    return
                left -= len(chunk)
                done = min(length, DISCARD_MAX_BYTES) - left
                connections.extend(conn, connections.deadlines.body_deadline(started, done))
        except OSError:
            return  # the client gave up (or was cut at its deadline): nothing to wait for

    def _export(self, signal: str, encoding: str, body: bytes, limit: int) -> None:
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
        if outcome.result is IntakeResult.OK:
            assert outcome.intake is not None
            if encoding == "json":
                self._reply(200, outcome.intake.response_json(), "application/json")
            else:
                self._reply(200, outcome.intake.response_proto(), "application/x-protobuf")
        elif outcome.result is IntakeResult.INVALID:
            self._error(400, INVALID_ARGUMENT, outcome.message, encoding)
        else:
            self._error(
                503, UNAVAILABLE, outcome.message, encoding, {"Retry-After": str(RETRY_AFTER_S)}
            )
