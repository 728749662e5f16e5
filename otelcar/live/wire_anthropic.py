"""The Anthropic Messages API on the wire (``POST …/v1/messages``: the ``anthropic`` SDK with
``base_url`` = ``ANTHROPIC_BASE_URL``), as the live endpoint reads and answers it.

A request reads into the messages a chat request carrying the same conversation would: the
``system`` parameter (a string or text blocks) is a leading system message; an assistant
turn is one assistant message (its text blocks joined, its ``tool_use`` blocks as tool calls
with their ids and ``input`` objects, ``thinking`` as reasoning); a user turn's blocks are
read in order, consecutive text blocks making one user message and each ``tool_result`` one
``tool`` message answering its ``tool_use_id``. ``tool_choice`` becomes OpenAI's form
(``any`` → ``required``, ``tool`` → the named function), ``stop_sequences`` the ``stop``
parameter. What has no normalized form (images, documents, ``is_error`` on a result,
provider-defined tools) is named in the request's issues.

An answer goes back as a Message object (a text block, then one ``tool_use`` block per tool
call, ``stop_reason`` ``tool_use`` or ``end_turn``), or streamed as the events the
``anthropic`` SDK's ``messages.create(stream=True)`` and ``messages.stream()`` read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from otelcar.conventions.blocks import read_blocks
from otelcar.live.wire import (
    LiveRequest,
    WireApi,
    WireError,
    arguments_object,
    function_tools,
    normal_roles,
    sampling,
    sse,
)
from otelcar.messages import Message, ToolCall, normalize_role, parse_arguments

#: Anthropic's error ``type`` by HTTP status (anything else is an ``api_error``).
ERROR_TYPES = {400: "invalid_request_error", 404: "not_found_error"}


def _block_text(value: Any, issues: list[str], where: str) -> str | None:
    """A string, or text blocks joined; other blocks (images, documents) named in issues."""
    if value is None or isinstance(value, str):
        return value
    blocks = read_blocks(value, parse_json=False)
    for kind in blocks.unknown:
        issues.append(f"{where}: block {kind!r} is not represented; ignored")
    if blocks.calls or blocks.results or blocks.reasoning:
        issues.append(f"{where}: only text blocks are read here; the others are ignored")
    return blocks.text


def _user_turn(content: list[Any], issues: list[str], where: str) -> list[Message]:
    out: list[Message] = []
    texts: list[str] = []
    for n, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
            continue
        if kind != "tool_result":
            issues.append(f"{where} block {n}: {kind!r} is not represented; ignored")
            continue
        if texts:
            out.append(Message("user", "\n".join(texts)))
            texts = []
        if block.get("is_error"):
            issues.append(f"{where} block {n}: the tool result's is_error flag is not represented")
        text = _block_text(block.get("content"), issues, f"{where} block {n}")
        out.append(Message("tool", text, tool_call_id=block.get("tool_use_id")))
    if texts:
        out.append(Message("user", "\n".join(texts)))
    return out


def _assistant_turn(content: list[Any], issues: list[str], where: str) -> Message:
    texts: list[str] = []
    calls: list[ToolCall] = []
    reasoning: list[str] = []
    for n, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "tool_use":
            calls.append(
                ToolCall(block.get("name"), parse_arguments(block.get("input")), block.get("id"))
            )
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            reasoning.append(block["thinking"])
        elif kind != "redacted_thinking":
            issues.append(f"{where} block {n}: {kind!r} is not represented; ignored")
    return Message(
        "assistant",
        "\n".join(texts) if texts else None,
        tuple(calls),
        reasoning="\n".join(reasoning) if reasoning else None,
    )


def _tool_choice(value: Any, issues: list[str]) -> Any:
    """Anthropic's ``tool_choice`` in the Chat Completions form (:class:`LiveRequest`)."""
    if value is None:
        return None
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "tool" and isinstance(value.get("name"), str):
        choice: Any = {"type": "function", "function": {"name": value["name"]}}
    elif kind in ("auto", "any", "none"):
        choice = {"any": "required"}.get(kind, kind)
    else:
        issues.append(f"tool_choice {value!r} is not one the endpoint reads; ignored")
        return None
    if value.get("disable_parallel_tool_use"):
        issues.append("tool_choice disable_parallel_tool_use is not represented")
    return choice


def parse_messages(body: Any) -> LiveRequest:
    """An Anthropic Messages request body (module docstring); raises :class:`WireError`
    when it is not one."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        raise WireError("a messages request needs a JSON object with 'messages'")
    issues: list[str] = []
    messages: list[Message] = []
    system = _block_text(body.get("system"), issues, "system")
    if system:
        messages.append(Message("system", system))
    for index, turn in enumerate(body["messages"]):
        where = f"message {index}"
        if not isinstance(turn, dict):
            raise WireError(f"{where} is not an object")
        role = normalize_role(str(turn.get("role") or "user"))
        content = turn.get("content")
        if isinstance(content, str) or content is None:
            messages.append(Message(role, content))
        elif not isinstance(content, list):
            raise WireError(f"{where}: content must be a string or a list of blocks")
        elif role == "assistant":
            messages.append(_assistant_turn(content, issues, where))
        else:
            messages += _user_turn(content, issues, where)
    values = {key: body.get(key) for key in ("temperature", "top_p", "max_tokens")}
    return LiveRequest(
        api="anthropic",
        messages=normal_roles(messages),
        tools=function_tools(body.get("tools"), issues, "tools", kinds=("custom", None)),
        tool_choice=_tool_choice(body.get("tool_choice"), issues),
        params=sampling({**values, "stop": body.get("stop_sequences")}),
        model=body.get("model") if isinstance(body.get("model"), str) else None,
        stream=bool(body.get("stream")),
        issues=tuple(issues),
        raw=body,
    )


def _blocks(message: Message) -> list[dict[str, Any]]:
    """The content blocks of ``message``: its text (if any, or nothing else), then one
    ``tool_use`` block per tool call (its id, its arguments as the ``input`` object)."""
    blocks: list[dict[str, Any]] = []
    if message.content or not message.tool_calls:
        blocks.append({"type": "text", "text": message.content or ""})
    for call in message.tool_calls:
        blocks.append(
            {
                "type": "tool_use",
                "id": call.id,
                "name": call.name,
                "input": arguments_object(call.arguments),
            }
        )
    return blocks


def _message(
    message: Message, request: LiveRequest, ref: str, content: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "id": f"msg_{ref}",
        "type": "message",
        "role": "assistant",
        "model": request.model or "otelcar",
        "content": content,
        "stop_reason": "tool_use" if message.tool_calls else "end_turn",
        "stop_sequence": None,
    }


def messages_response(
    message: Message, request: LiveRequest, *, ref: str, usage: tuple[int, int] = (0, 0)
) -> dict[str, Any]:
    """``message`` as a Message object (every tool call's id as its ``tool_use`` id)."""
    body = _message(message, request, ref, _blocks(message))
    body["usage"] = {"input_tokens": usage[0], "output_tokens": usage[1]}
    return body


def messages_stream(
    message: Message, request: LiveRequest, *, ref: str, usage: tuple[int, int] = (0, 0)
) -> Iterator[bytes]:
    """``message`` as the Messages stream: ``message_start`` (no content yet), per block
    ``content_block_start``, one ``content_block_delta`` (``text_delta`` or
    ``input_json_delta``) and ``content_block_stop``, then ``message_delta`` with the stop
    reason and the usage, and ``message_stop``; each event named after its ``type``."""

    def event(kind: str, **fields: Any) -> bytes:
        return sse({"type": kind, **fields}, kind)

    opening = _message(message, request, ref, [])
    opening.update(stop_reason=None, usage={"input_tokens": usage[0], "output_tokens": 0})
    yield event("message_start", message=opening)
    for index, block in enumerate(_blocks(message)):
        if block["type"] == "text":
            yield event("content_block_start", index=index, content_block={**block, "text": ""})
            if block["text"]:
                delta = {"type": "text_delta", "text": block["text"]}
                yield event("content_block_delta", index=index, delta=delta)
        else:
            yield event("content_block_start", index=index, content_block={**block, "input": {}})
            partial = json.dumps(block["input"], ensure_ascii=False)
            delta = {"type": "input_json_delta", "partial_json": partial}
            yield event("content_block_delta", index=index, delta=delta)
        yield event("content_block_stop", index=index)
    stop = {"stop_reason": "tool_use" if message.tool_calls else "end_turn", "stop_sequence": None}
    yield event("message_delta", delta=stop, usage={"output_tokens": usage[1]})
    yield event("message_stop")


def anthropic_error(status: int, message: str) -> dict[str, Any]:
    """An Anthropic error body."""
    return {
        "type": "error",
        "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message},
    }


MESSAGES = WireApi(
    name="anthropic",
    title="messages",
    parse=parse_messages,
    render=messages_response,
    stream=messages_stream,
    error=anthropic_error,
)
