"""Serving the MCP server: on stdio (the default: stdout carries protocol only, every log
goes to stderr) or on streamable HTTP at ``http://127.0.0.1:PORT/mcp``.

A client that goes away (closes the pipe, drops the connection) ends its session normally:
one line at INFO on stderr, exit status 0, never an "unexpected error"."""

from __future__ import annotations

import logging
import socket
import sys
from typing import TextIO

import anyio
from mcp.server.mcpserver import MCPServer
from starlette.types import ASGIApp, Receive, Scope, Send

#: Where HTTP clients connect (loopback only: the server runs the project's policies).
HOST = "127.0.0.1"
PATH = "/mcp"


def _log_to_stderr() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("otelcar mcp: %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("otelcar")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)


#: What a write to (or read from) a client that went away raises.
GONE = (
    BrokenPipeError,
    ConnectionResetError,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    anyio.EndOfStream,
)

log = logging.getLogger("otelcar.mcp")


def client_gone(exc: BaseException) -> bool:
    """Whether ``exc`` (an exception group of the server's task groups included) says only
    that the client went away."""
    if isinstance(exc, BaseExceptionGroup):
        return all(client_gone(e) for e in exc.exceptions)
    return isinstance(exc, GONE)


def _gone_along_the_way(exc: BaseException | None) -> bool:
    """Whether ``exc`` or an exception it was raised while handling is :func:`client_gone`
    (the SDK answers a request of a session the client just closed with a 500 it cannot
    send any more: a RuntimeError raised while handling a ClosedResourceError)."""
    seen = 0
    while exc is not None and seen < 8:
        if client_gone(exc):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


class GoneFilter(logging.Filter):
    """Turns the SDK's and uvicorn's error records about a client that went away (a request
    of a session it just closed) into one INFO line without a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and _gone_along_the_way(record.exc_info[1]):
            record.msg = f"{record.getMessage()}: the client went away"
            record.args = ()
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.exc_info, record.exc_text = None, None
        return True


def _quiet_when_gone(app: ASGIApp) -> ASGIApp:
    """``app``, with a request that fails only because its client went away ending there:
    one INFO line, not uvicorn's "Exception in ASGI application"."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await app(scope, receive, send)
        except Exception as exc:
            if not _gone_along_the_way(exc):
                raise
            log.info("a request ended unanswered: its client had closed the session")

    return wrapped


def _leaf(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return type(exc).__name__


def _switch_often() -> None:
    """Tools read and size results on worker threads that share the interpreter with the
    loop answering other requests: switching every 1 ms (not 5) lets a short call (a list)
    in while a long one (a 500-step ``show_trace``) is built."""
    sys.setswitchinterval(0.001)


def serve_stdio(server: MCPServer) -> None:
    """Serve on stdin/stdout until the client closes stdin or stops reading stdout (both a
    normal end)."""
    _log_to_stderr()
    _switch_often()
    try:
        anyio.run(server.run_stdio_async)
    except BaseException as exc:
        if not client_gone(exc):
            raise
        log.info("the client went away (%s): session over", _leaf(exc))


def serve_http(server: MCPServer, *, port: int = 0, announce: TextIO | None = None) -> None:
    """Serve streamable HTTP on 127.0.0.1:``port`` (0: a free port) until interrupted; the
    URL is written, one line, to ``announce`` (default stdout) once the socket listens."""
    import uvicorn

    _log_to_stderr()
    _switch_often()
    for name in (
        "mcp.server.streamable_http",
        "mcp.server.streamable_http_manager",
        "uvicorn.error",
    ):
        logging.getLogger(name).addFilter(GoneFilter())
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((HOST, port))
    sock.listen(128)
    url = f"http://{HOST}:{sock.getsockname()[1]}{PATH}"
    app = _quiet_when_gone(server.streamable_http_app(streamable_http_path=PATH, host=HOST))
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    out = announce or sys.stdout
    print(url, file=out, flush=True)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
