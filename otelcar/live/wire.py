"""The model APIs on the wire, as the live endpoint reads and answers them.

A request becomes a :class:`LiveRequest`: the agent's own messages (normalized as the
conventions normalize a trace's, so they compare with the recorded context), its tools, tool
choice, sampling parameters, model and whether it streams. An answer (a normalized assistant
message) goes back in the API's own shape: a JSON body, or server-sent events when the agent
streams. Each API is one :class:`WireApi` (parse, render, stream, error body); the same
conversation reads into the same messages whichever API carries it.

This module holds what the APIs share and the OpenAI Chat Completions API (:data:`CHAT`);
:mod:`.wire_responses` the OpenAI Responses API, :mod:`.wire_anthropic` the Anthropic
Messages API.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from otelcar.conventions.genai import messages_from_parts, tool_definitions
from otelcar.conventions.openai_shapes import request_params, tool_choice_text
from otelcar.messages import Arguments, Message, normalize_role

#: The sampling parameters a request carries through to the policy (the ``params`` keys of
#: the steps table that a chat request sets).
PARAM_KEYS = ("temperature", "top_p", "max_tokens", "stop", "frequency_penalty", "presence_penalty")


class WireError(ValueError):
    """A request the endpoint cannot read (answered with HTTP 400 and this message)."""


@dataclass(frozen=True)
class LiveRequest:
    """One model request of the agent, normalized. ``api``: ``chat`` | ``responses`` |
    ``anthropic``; ``tools``: definitions in the replay's form (``{"type": "function",
    "name", "description", "parameters"}``), ``None`` when it offers none; ``tool_choice``:
    OpenAI's Chat Completions wire form (``"auto"``, ``"none"``, ``"required"``,
    ``{"type": "function", "function": {"name": …}}``) whichever API sent it, or ``None``;
    ``tool_choice_text``: the steps table's form of it (for comparing with a recorded
    choice); ``issues``: what the request carried that the normalized form does not
    represent (an image, a hosted tool, an error flag on a tool result)."""

    api: str
    messages: tuple[Message, ...]
    tools: tuple[dict[str, Any], ...] | None
    tool_choice: Any
    params: dict[str, Any]
    model: str | None
    stream: bool
    issues: tuple[str, ...] = ()
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def tool_choice_text(self) -> str | None:
        return tool_choice_text(self.tool_choice)


class Render(Protocol):
    """An answer as the API's JSON body. ``ref`` is unique per request of the endpoint (the
    ids of the response and of its items are built from it); ``usage`` is ``(input tokens,
    output tokens)``."""

    def __call__(
        self, message: Message, request: LiveRequest, *, ref: str, usage: tuple[int, int]
    ) -> dict[str, Any]: ...


class Stream(Protocol):
    """An answer as the API's server-sent events (arguments as :class:`Render`)."""

    def __call__(
        self, message: Message, request: LiveRequest, *, ref: str, usage: tuple[int, int]
    ) -> Iterator[bytes]: ...


@dataclass(frozen=True)
class WireApi:
    """One model API: ``parse`` reads a request body (raises :class:`WireError`),
    ``render``/``stream`` write an answer, ``error`` is the body of an error response in
    the API's own shape (``(HTTP status, message)`` → JSON), so its SDK raises its API error.
    ``title`` names the API in messages."""

    name: str
    title: str
    parse: Callable[[Any], LiveRequest]
    render: Render
    stream: Stream
    error: Callable[[int, str], dict[str, Any]]


# What the APIs share.


def normal_roles(messages: Iterable[Message]) -> tuple[Message, ...]:
    """``messages`` with their roles in the normalized vocabulary (``developer`` → ``system``
    …), as the conventions normalize a trace's."""
    return tuple(
        m if normalize_role(m.role) == m.role else replace(m, role=normalize_role(m.role))
        for m in messages
    )


def function_tools(
    items: Any, issues: list[str], where: str, *, kinds: tuple[str | None, ...]
) -> tuple[dict[str, Any], ...] | None:
    """The function tools of a request's ``items`` (OpenAI-nested, flat, or Anthropic's
    ``input_schema``) in the replay's form; a tool whose ``type`` is not one of ``kinds`` (a
    hosted or provider-defined tool the policy cannot offer) is left out, named in
    ``issues``. ``None`` when there are none."""
    if not items:
        return None
    if not isinstance(items, list):
        raise WireError(f"{where} must be a list")
    kept = []
    for item in items:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind not in kinds:
            name = item.get("name") if isinstance(item, dict) else None
            what = f"{kind or type(item).__name__} tool" + (f" {name!r}" if name else "")
            issues.append(f"{where}: the {what} is not a function tool; not offered to the policy")
            continue
        kept.append(item)
    found = tool_definitions(kept, issues, where) or []
    tools = tuple(
        {
            "type": "function",
            "name": t.get("name"),
            "description": t.get("description"),
            "parameters": json.loads(t["parameters"]) if t.get("parameters") else None,
        }
        for t in found
    )
    return tools or None


def sampling(values: dict[str, Any]) -> dict[str, Any]:
    """The :data:`PARAM_KEYS` that ``values`` (request keys in OpenAI's names) sets."""
    return {k: v for k, v in request_params(values).items() if k in PARAM_KEYS and v is not None}


def arguments_text(arguments: Arguments) -> str:
    """Tool-call arguments as the JSON text the OpenAI APIs carry (a raw string as it is)."""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments or {}, ensure_ascii=False)


def arguments_object(arguments: Arguments) -> dict[str, Any]:
    """Tool-call arguments as the object Anthropic's ``tool_use.input`` carries; a raw string
    that is no JSON object becomes ``{}`` (the API has no form for it)."""
    if isinstance(arguments, dict):
        return arguments
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments)
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}
    return {}


def sse(data: dict[str, Any], event: str | None = None) -> bytes:
    """One server-sent event (named when ``event`` is given)."""
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def openai_error(status: int, message: str) -> dict[str, Any]:
    """An OpenAI error body (both OpenAI APIs)."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


# The OpenAI Chat Completions API.


def parse_chat(body: Any) -> LiveRequest:
    """An OpenAI Chat Completions request body; raises :class:`WireError` when it is not one."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        raise WireError("a chat completions request needs a JSON object with 'messages'")
    issues: list[str] = []
    messages = messages_from_parts(body["messages"], issues, "input")
    return LiveRequest(
        api="chat",
        messages=normal_roles(messages),
        tools=function_tools(body.get("tools"), issues, "tools", kinds=("function", None)),
        tool_choice=body.get("tool_choice"),
        params=sampling(body),
        model=body.get("model") if isinstance(body.get("model"), str) else None,
        stream=bool(body.get("stream")),
        issues=tuple(issues),
        raw=body,
    )


def _calls(message: Message) -> list[dict[str, Any]]:
    return [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": arguments_text(call.arguments)},
        }
        for call in message.tool_calls
    ]


def _usage(usage: tuple[int, int]) -> dict[str, int]:
    return {
        "prompt_tokens": usage[0],
        "completion_tokens": usage[1],
        "total_tokens": usage[0] + usage[1],
    }


def chat_response(
    message: Message, request: LiveRequest, *, ref: str, usage: tuple[int, int] = (0, 0)
) -> dict[str, Any]:
    """``message`` (every tool call with its id) as a chat.completion body."""
    calls = _calls(message)
    reply: dict[str, Any] = {"role": "assistant", "content": message.content}
    if calls:
        reply["tool_calls"] = calls
    return {
        "id": f"chatcmpl-{ref}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.model or "otelcar",
        "choices": [
            {
                "index": 0,
                "message": reply,
                "finish_reason": "tool_calls" if calls else "stop",
                "logprobs": None,
            }
        ],
        "usage": _usage(usage),
    }


def chat_stream(
    message: Message, request: LiveRequest, *, ref: str, usage: tuple[int, int] = (0, 0)
) -> Iterator[bytes]:
    """``message`` as the server-sent events of a streamed chat completion: the role, the
    text, each tool call (id, name, then its arguments), the finish reason, the usage chunk
    when the request asks for it (``stream_options.include_usage``), and ``[DONE]``."""
    created = int(time.time())
    head = {
        "id": f"chatcmpl-{ref}",
        "object": "chat.completion.chunk",
        "created": created,
        "model": request.model or "otelcar",
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return sse({**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    yield chunk({"role": "assistant", "content": ""})
    if message.content:
        yield chunk({"content": message.content})
    for index, call in enumerate(_calls(message)):
        function = call["function"]
        opening = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": function["name"], "arguments": ""},
        }
        yield chunk({"tool_calls": [opening]})
        yield chunk(
            {"tool_calls": [{"index": index, "function": {"arguments": function["arguments"]}}]}
        )
    yield chunk({}, "tool_calls" if message.tool_calls else "stop")
    options = request.raw.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage"):
        yield sse({**head, "choices": [], "usage": _usage(usage)})
    yield b"data: [DONE]\n\n"


CHAT = WireApi(
    name="chat",
    title="chat completions",
    parse=parse_chat,
    render=chat_response,
    stream=chat_stream,
    error=openai_error,
)
