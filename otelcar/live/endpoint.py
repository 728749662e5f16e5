"""The model endpoint live rollouts talk to: a server on 127.0.0.1 that speaks the OpenAI Chat
Completions (``/chat/completions``) and Responses (``/responses``) APIs and the Anthropic
Messages API (``/messages``).

Each rollout has a path of its own, ``/r/<token>/v1`` (its ``OPENAI_BASE_URL``; its
``ANTHROPIC_BASE_URL`` is ``/r/<token>``, to which the SDK adds ``/v1/messages``), so
concurrent rollouts never mix. A request is read on a server thread by its API's
:class:`~otelcar.live.wire.WireApi` (:data:`ROUTES`), answered by its rollout's
:class:`~otelcar.live.session.RolloutSession` on the event loop that owns the run's
environment (policy calls, cache, budget), and the answer goes back as JSON or as server-sent
events. An unknown rollout is a 404, a request that is not one a 400, a policy that
failed a 502 with the reason (the agent sees an API error; the rollout records it), each in
the API's error shape and marked not to be retried.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from otelcar.live.session import RolloutSession
from otelcar.live.wire import CHAT, WireApi, openai_error
from otelcar.live.wire_anthropic import MESSAGES
from otelcar.live.wire_responses import RESPONSES

#: How long one answer may take (a policy call on a slow model included).
ANSWER_TIMEOUT_S = 600.0

#: The model APIs served under ``/r/<token>/v1``, by route.
ROUTES: dict[str, WireApi] = {
    "/chat/completions": CHAT,
    "/responses": RESPONSES,
    "/messages": MESSAGES,
}

#: ``GET /models``: one model, in a shape both OpenAI's and Anthropic's model lists read.
MODELS = {
    "object": "list",
    "data": [
        {
            "id": "otelcar",
            "object": "model",
            "type": "model",
            "owned_by": "otelcar",
            "display_name": "otelcar",
            "created": 0,
            "created_at": "1970-01-01T00:00:00Z",
        }
    ],
    "has_more": False,
    "first_id": "otelcar",
    "last_id": "otelcar",
}


class ModelEndpoint:
    """The server (a context manager, started on enter): :meth:`open` a rollout's session
    to get its base URL, :meth:`close_session` when the rollout ends."""

    def __init__(self, loop: asyncio.AbstractEventLoop, *, host: str = "127.0.0.1") -> None:
        self.loop = loop
        self.sessions: dict[str, RolloutSession] = {}
        self.errors: dict[str, list[BaseException]] = {}
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                # a response's headers and body leave in separate writes: without this,
                # Nagle's algorithm holds the body until the client's delayed ACK (~40 ms)
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, *args: Any) -> None:  # the agent's requests are not logs
                pass

            def do_GET(self) -> None:
                token, route = endpoint._route(self.path)
                if token is None or route != "/models":
                    self._json(404, openai_error(404, f"no route {self.path}"))
                    return
                self._json(200, MODELS)

            def do_POST(self) -> None:
                token, route = endpoint._route(self.path)
                api = ROUTES.get(route)
                session = endpoint.sessions.get(token or "")
                if api is None or session is None:
                    self._error(api or CHAT, 404, f"no rollout at {self.path}")
                    return
                try:
                    length = int(self.headers.get("Content-Length") or 0)
                    request = api.parse(json.loads(self.rfile.read(length) or b"null"))
                except ValueError as exc:  # WireError too
                    self._error(api, 400, f"not a {api.title} request: {exc}")
                    return
                future = asyncio.run_coroutine_threadsafe(session.answer(request), endpoint.loop)
                try:
                    exchange = future.result(ANSWER_TIMEOUT_S)
                except BaseException as exc:  # a failing policy, the budget spent, a cancel
                    endpoint.errors.setdefault(token or "", []).append(exc)
                    self._error(api, 502, f"{type(exc).__name__}: {exc}")
                    return
                ref = f"{token}_{exchange.index}"
                usage = (exchange.input_tokens, exchange.output_tokens)
                if not request.stream:
                    self._json(200, api.render(exchange.answer, request, ref=ref, usage=usage))
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                for event in api.stream(exchange.answer, request, ref=ref, usage=usage):
                    self.wfile.write(event)
                self.wfile.flush()
                self.close_connection = True

            def _error(self, api: WireApi, status: int, message: str) -> None:
                """An error in ``api``'s shape; ``x-should-retry: false`` keeps the SDKs
                from sending it again (the rollout has recorded it already). The connection
                closes: a request body left unread must not be read as the next request."""
                headers = {"x-should-retry": "false", "Connection": "close"}
                self._json(status, api.error(status, message), headers)
                self.close_connection = True

            def _json(
                self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
            ) -> None:
                data = json.dumps(body, ensure_ascii=False).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer((host, 0), Handler)
        self._server.daemon_threads = True
        self.host = host
        self.port = self._server.server_address[1]
        self._thread: threading.Thread | None = None

    def __enter__(self) -> ModelEndpoint:
        # A short poll: shutdown() (at the end of every batch of rollouts, on the event
        # loop's thread) waits for the serving loop to look at its flag, every 0.5 s by default.
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="otelcar-live-endpoint",
            daemon=True,
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    def open(self, session: RolloutSession) -> str:
        """Serve ``session`` at a path of its own; returns its base URL (``…/v1``)."""
        self.sessions[session.token] = session
        return f"http://{self.host}:{self.port}/r/{session.token}/v1"

    def close_session(self, token: str) -> list[BaseException]:
        """Stop serving a rollout; the errors its requests met."""
        self.sessions.pop(token, None)
        return self.errors.pop(token, [])

    @staticmethod
    def new_token() -> str:
        return secrets.token_hex(8)

    @staticmethod
    def _route(path: str) -> tuple[str | None, str]:
        """``/r/<token>/v1/<route>`` → ``(token, "/<route>")``."""
        parts = path.split("?", 1)[0].split("/")
        if len(parts) >= 4 and parts[1] == "r" and parts[3] == "v1":
            return parts[2], "/" + "/".join(parts[4:])
        return None, path
