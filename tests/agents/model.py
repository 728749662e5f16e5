"""A scripted OpenAI-compatible model on 127.0.0.1 (stdlib only): ``POST /v1/chat/completions``
and ``POST /v1/responses`` (the Responses API, the OpenAI Agents SDK's default).

Its answer to each request comes from a **brain**, ``brain(messages, tools, rng) -> message``:
``messages`` and ``tools`` in OpenAI's chat format (tools as ``{"type": "function",
"function": {...}}``), ``rng`` a :class:`random.Random` seeded with the request's ``seed``; the
message is an assistant message dict (``content`` and/or ``tool_calls`` of ``{"name",
"arguments"}``). A brain may only call a tool the request offers; :func:`answer` enforces it,
as a constrained server does. Every request body is kept (:attr:`ScriptedModel.requests`).

``forced``: answers to give in order instead of the brain's, to run an agent live along a
rollout's actions (after the last, the server answers ``"(no more forced answers)"`` and
counts the request in :attr:`ScriptedModel.extra`).

A Responses request is read into the same chat messages the brain reads
(:func:`responses_messages`: ``instructions`` as the system message, a turn's
``function_call`` items as one assistant message's ``tool_calls``, each
``function_call_output`` a ``tool`` message); its tools are the same names; its seed is the
body's ``seed`` (sent by the agent as an extra body field; the real API has none). The answer
is a Response object that echoes the request's ``instructions``, ``tools`` and settings, as
the real API does.
"""

from __future__ import annotations

import functools
import json
import random
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Brain = Callable[[list[dict[str, Any]], list[dict[str, Any]], random.Random], dict[str, Any]]


def offered(tools: list[dict[str, Any]] | None) -> list[str]:
    """The names of the tools a request offers (OpenAI's or otelcar's tool format)."""
    return [str((t.get("function") or t).get("name")) for t in tools or ()]


def answer(brain: Brain, messages: list[dict[str, Any]], tools: Any, seed: int) -> dict:
    """The brain's answer; a call of a tool that is not offered is refused."""
    message = brain(messages, list(tools or ()), random.Random(seed))
    names = offered(tools)
    for call in message.get("tool_calls") or ():
        if call["name"] not in names:
            raise ValueError(f"the brain called {call['name']!r}, offered: {names}")
    return message


def context_text(messages: list[dict[str, Any]]) -> str:
    """Every message's text, for brains that react to what the context says."""
    return "\n".join(str(m.get("content") or "") for m in messages)


def called(messages: list[dict[str, Any]], tool: str) -> list[dict[str, Any]]:
    """The arguments of every call of ``tool`` in the conversation so far."""
    out = []
    for m in messages:
        for call in m.get("tool_calls") or ():
            function = call.get("function") or call
            if function.get("name") == tool:
                arguments = function.get("arguments")
                out.append(json.loads(arguments) if isinstance(arguments, str) else arguments)
    return out


def call(tool: str, /, **arguments: Any) -> dict[str, Any]:
    """A tool call of ``tool`` (positional-only: an argument may be called ``tool``)."""
    return {"content": None, "tool_calls": [{"name": tool, "arguments": arguments}]}


def say(text: str) -> dict[str, Any]:
    return {"content": text, "tool_calls": []}


class ScriptedModel:
    """The server (a context manager): ``base_url``, ``requests``, ``forced``, ``extra``."""

    def __init__(self, brain: Brain) -> None:
        self.brain = brain
        self.requests: list[dict[str, Any]] = []
        self.forced: list[dict[str, Any]] | None = None
        self.extra = 0
        self._lock = threading.Lock()
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path.rstrip("/").endswith("/responses"):
                    reply = model._reply_responses(body)
                else:
                    reply = model._reply(body)
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> ScriptedModel:
        # shutdown() waits for the serving loop to look at its flag: every 0.5 s by default,
        # which was most of the time of a short live run (a server per run, hundreds a suite)
        serve = functools.partial(self._server.serve_forever, poll_interval=0.02)
        threading.Thread(target=serve, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _message(self, body: dict[str, Any], messages: list[dict[str, Any]]) -> tuple[int, dict]:
        """The request's index and the answer to it (forced, or the brain's)."""
        with self._lock:
            self.requests.append(body)
            index = len(self.requests) - 1
            if self.forced is not None:
                if index < len(self.forced):
                    return index, self.forced[index]
                self.extra += 1
                return index, say("(no more forced answers)")
            seed = int(body.get("seed") or 0)
            return index, answer(self.brain, messages, body.get("tools"), seed)

    def _reply(self, body: dict[str, Any]) -> dict[str, Any]:
        index, message = self._message(body, body["messages"])
        calls = [
            {
                "id": f"call_{index}_{i}",
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
            }
            for i, c in enumerate(message.get("tool_calls") or ())
        ]
        return {
            "id": f"chatcmpl-{index}",
            "object": "chat.completion",
            "created": 1_764_000_000,
            "model": body.get("model", "scripted"),
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": message.get("content"),
                        **({"tool_calls": calls} if calls else {}),
                    },
                    "finish_reason": "tool_calls" if calls else "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }

    def _reply_responses(self, body: dict[str, Any]) -> dict[str, Any]:
        index, message = self._message(body, responses_messages(body))
        output: list[dict[str, Any]] = []
        if message.get("content") or not message.get("tool_calls"):
            output.append(
                {
                    "id": f"msg_{index}",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [
                        {"type": "output_text", "text": message.get("content") or "",
                         "annotations": []}
                    ],
                }
            )  # fmt: skip
        for i, c in enumerate(message.get("tool_calls") or ()):
            output.append(
                {
                    "id": f"fc_{index}_{i}",
                    "type": "function_call",
                    "status": "completed",
                    "call_id": f"call_{index}_{i}",
                    "name": c["name"],
                    "arguments": json.dumps(c["arguments"]),
                }
            )
        return {
            "id": f"resp_{index}",
            "object": "response",
            "created_at": 1_764_000_000,
            "status": "completed",
            "error": None,
            "incomplete_details": None,
            "instructions": body.get("instructions"),
            "metadata": body.get("metadata") or {},
            "model": body.get("model", "scripted"),
            "output": output,
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "temperature": body.get("temperature"),
            "tool_choice": body.get("tool_choice") or "auto",
            "tools": body.get("tools") or [],
            "top_p": body.get("top_p"),
            "usage": {
                "input_tokens": 10,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 5,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 15,
            },
        }


def _item_text(content: Any) -> str | None:
    """A Responses content value (a string or text parts) as text."""
    if content is None or isinstance(content, str):
        return content
    return "".join(str(p.get("text") or "") for p in content if isinstance(p, dict))


def responses_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A Responses request's ``instructions`` and ``input`` as chat messages (module
    docstring); ``reasoning`` items carry nothing a brain reads."""
    messages: list[dict[str, Any]] = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": body["instructions"]})
    items = body.get("input")
    if isinstance(items, str):
        return [*messages, {"role": "user", "content": items}]
    turn: dict[str, Any] | None = None
    for item in items or ():
        kind = item.get("type") or "message"
        if kind == "function_call" or (kind == "message" and item.get("role") == "assistant"):
            if turn is None:
                turn = {"role": "assistant", "content": None, "tool_calls": []}
                messages.append(turn)
            if kind == "message":
                turn["content"] = (turn["content"] or "") + (_item_text(item["content"]) or "")
            else:
                turn["tool_calls"].append(
                    {
                        "id": item["call_id"],
                        "type": "function",
                        "function": {"name": item["name"], "arguments": item["arguments"]},
                    }
                )
            continue
        if kind == "reasoning":
            continue
        turn = None
        if kind == "function_call_output":
            content = _item_text(item.get("output"))
            messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": content})
        else:
            messages.append({"role": item.get("role") or "user",
                             "content": _item_text(item.get("content"))})  # fmt: skip
    return messages


def decide_with(brain: Brain, request: Any) -> Any:
    """otelcar's view of the same model: the brain's answer to a re-decided request
    (:class:`otelcar.policies.base.DecisionRequest`) as an assistant message, refusing a
    call of a tool the request does not offer, as the server does."""
    from otelcar.messages import Message, ToolCall
    from otelcar.policies.openai_compat import to_openai_messages, to_openai_tools

    messages = to_openai_messages(request.messages, request.agent)
    message = answer(brain, messages, to_openai_tools(request.tools), request.seed)
    calls = tuple(
        ToolCall(c["name"], c["arguments"], f"r{request.seed}_{i}")
        for i, c in enumerate(message.get("tool_calls") or ())
    )
    return Message("assistant", message.get("content"), calls)
