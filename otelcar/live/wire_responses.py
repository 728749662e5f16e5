"""The OpenAI Responses API on the wire (``POST …/v1/responses``, what the OpenAI Agents SDK
sends by default), as the live endpoint reads and answers it.

A request's ``instructions`` become a leading system message and its ``input`` items the
conversation, normalized as a chat request carrying the same conversation would be: the
assistant side of a turn (its ``message`` items, ``function_call`` items and ``reasoning``
summaries, consecutive) is one assistant message with its tool calls (``call_id`` as the
call's id), each ``function_call_output`` one ``tool`` message answering its ``call_id``.
The endpoint keeps no conversation: a request that continues a stored one
(``previous_response_id``, ``conversation``) is refused; the Agents SDK sends the whole
conversation unless told otherwise.

An answer goes back as a Response object (a ``message`` item with the text, then one
``function_call`` item per tool call), or streamed as the events the ``openai`` SDK's
``responses.create(stream=True)`` and ``responses.stream()`` read.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from otelcar.conventions.blocks import read_blocks
from otelcar.live.wire import (
    LiveRequest,
    WireApi,
    WireError,
    arguments_text,
    function_tools,
    normal_roles,
    openai_error,
    sampling,
    sse,
)
from otelcar.messages import Message, ToolCall, normalize_role, parse_arguments


@dataclass(slots=True)
class _Turn:
    """The assistant side of one turn, gathered from consecutive items."""

    texts: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)

    def message(self) -> Message:
        return Message(
            "assistant",
            "\n".join(self.texts) if self.texts else None,
            tuple(self.calls),
            reasoning="\n".join(self.reasoning) if self.reasoning else None,
        )


def _text(value: Any, issues: list[str], where: str) -> str | None:
    """A content value (a string, or ``input_text``/``output_text`` parts) as text; parts it
    cannot represent (images, files, refusals) are named in ``issues``."""
    if isinstance(value, str):
        return value
    blocks = read_blocks(value, parse_json=False)
    for kind in blocks.unknown:
        issues.append(f"{where}: content part {kind!r} is not represented; ignored")
    return blocks.text


def input_messages(items: list[Any], issues: list[str]) -> list[Message]:
    """The Responses ``input`` items as normalized messages (module docstring)."""
    out: list[Message] = []
    turn: _Turn | None = None
    for index, item in enumerate(items):
        where = f"input item {index}"
        if not isinstance(item, dict):
            issues.append(f"{where} is not an object; ignored")
            continue
        kind = item.get("type") or ("message" if "role" in item else None)
        if kind == "message":
            role = normalize_role(str(item.get("role") or "user"))
            text = _text(item.get("content"), issues, where)
            if role == "assistant":
                turn = turn or _Turn()
                if text is not None:
                    turn.texts.append(text)
                continue
            if turn is not None:
                out.append(turn.message())
                turn = None
            out.append(Message(role, text))
        elif kind in ("function_call", "reasoning"):
            turn = turn or _Turn()
            if kind == "function_call":
                arguments = parse_arguments(item.get("arguments"))
                turn.calls.append(ToolCall(item.get("name"), arguments, item.get("call_id")))
            else:
                summary = item.get("summary") or []
                turn.reasoning.extend(
                    part["text"]
                    for part in summary
                    if isinstance(part, dict) and isinstance(part.get("text"), str)
                )
        elif kind == "function_call_output":
            if turn is not None:
                out.append(turn.message())
                turn = None
            output = _text(item.get("output"), issues, where)
            out.append(Message("tool", output, tool_call_id=item.get("call_id")))
        else:
            issues.append(f"{where} of type {kind!r} is not represented; ignored")
    if turn is not None:
        out.append(turn.message())
    return out


def _tool_choice(value: Any, issues: list[str]) -> Any:
    """A Responses ``tool_choice`` in the Chat Completions form (:class:`LiveRequest`)."""
    if value is None or isinstance(value, str):
        return value
    if not isinstance(value, dict):
        issues.append(f"tool_choice {value!r} is not one the endpoint reads; ignored")
        return None
    kind = value.get("type")
    if kind == "function" and isinstance(value.get("name"), str):
        return {"type": "function", "function": {"name": value["name"]}}
    if kind == "allowed_tools" and value.get("mode") in ("auto", "required"):
        issues.append("tool_choice allowed_tools: the narrowed tool list is not represented")
        return value["mode"]
    issues.append(f"tool_choice of type {kind!r} is not a function choice; ignored")
    return None


def parse_responses(body: Any) -> LiveRequest:
    """An OpenAI Responses request body (module docstring); raises :class:`WireError` when
    it is not one, or continues a conversation stored server-side."""
    if not isinstance(body, dict) or not isinstance(body.get("input"), str | list):
        raise WireError("a responses request needs a JSON object with 'input'")
    for key in ("previous_response_id", "conversation"):
        if body.get(key):
            raise WireError(
                f"{key} is not supported: the endpoint keeps no conversation; send the whole "
                "conversation as input"
            )
    issues: list[str] = []
    messages: list[Message] = []
    instructions = body.get("instructions")
    if isinstance(instructions, list):  # instructions as input items
        messages += input_messages(instructions, issues)
    elif isinstance(instructions, str) and instructions:
        messages.append(Message("system", instructions))
    items = body["input"]
    if isinstance(items, str):
        messages.append(Message("user", items))
    else:
        messages += input_messages(items, issues)
    text = body.get("text")
    form = text.get("format") if isinstance(text, dict) else None
    if isinstance(form, dict) and form.get("type") not in (None, "text"):
        issues.append(f"text.format {form.get('type')!r} is not forwarded to the policy")
    return LiveRequest(
        api="responses",
        messages=normal_roles(messages),
        tools=function_tools(body.get("tools"), issues, "tools", kinds=("function",)),
        tool_choice=_tool_choice(body.get("tool_choice"), issues),
        params=sampling(body),
        model=body.get("model") if isinstance(body.get("model"), str) else None,
        stream=bool(body.get("stream")),
        issues=tuple(issues),
        raw=body,
    )


def _items(message: Message, ref: str) -> list[dict[str, Any]]:
    """The output items of ``message``, complete: its text (if any, or nothing else), then
    one ``function_call`` per tool call, each item with an id of its own."""
    items: list[dict[str, Any]] = []
    if message.content or not message.tool_calls:
        items.append(
            {
                "id": f"msg_{ref}_0",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [
                    {"type": "output_text", "text": message.content or "", "annotations": []}
                ],
            }
        )
    for call in message.tool_calls:
        items.append(
            {
                "id": f"fc_{ref}_{len(items)}",
                "type": "function_call",
                "status": "completed",
                "call_id": call.id,
                "name": call.name,
                "arguments": arguments_text(call.arguments),
            }
        )
    return items


def _response(
    request: LiveRequest,
    ref: str,
    created: int,
    output: list[dict[str, Any]],
    usage: tuple[int, int] | None,
) -> dict[str, Any]:
    body = request.raw
    return {
        "id": f"resp_{ref}",
        "object": "response",
        "created_at": created,
        "status": "completed" if usage is not None else "in_progress",
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "metadata": body.get("metadata") or {},
        "model": request.model or "otelcar",
        "output": output,
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": None,
        "temperature": body.get("temperature"),
        "tool_choice": body.get("tool_choice") or "auto",
        "tools": body.get("tools") or [],
        "top_p": body.get("top_p"),
        "text": body.get("text") or {"format": {"type": "text"}},
        "usage": None
        if usage is None
        else {
            "input_tokens": usage[0],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": usage[1],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage[0] + usage[1],
        },
    }


def responses_response(
    message: Message, request: LiveRequest, *, ref: str, usage: tuple[int, int] = (0, 0)
) -> dict[str, Any]:
    """``message`` as a completed Response object (every tool call's id as its ``call_id``)."""
    return _response(request, ref, int(time.time()), _items(message, ref), usage)


def responses_stream(
    message: Message, request: LiveRequest, *, ref: str, usage: tuple[int, int] = (0, 0)
) -> Iterator[bytes]:
    """``message`` as the Responses stream: ``response.created`` and ``.in_progress``; per
    item ``response.output_item.added``, then for the text ``response.content_part.added``,
    ``response.output_text.delta``/``.done``, ``response.content_part.done``, for a tool call
    ``response.function_call_arguments.delta``/``.done``; ``response.output_item.done``; and
    ``response.completed`` with the whole response. Every event has its ``sequence_number``
    (from 0) and is named after its ``type``."""
    created = int(time.time())
    sequence = 0

    def event(kind: str, **fields: Any) -> bytes:
        nonlocal sequence
        data = {"type": kind, "sequence_number": sequence, **fields}
        sequence += 1
        return sse(data, kind)

    opening = _response(request, ref, created, [], None)
    yield event("response.created", response=opening)
    yield event("response.in_progress", response=opening)
    items = _items(message, ref)
    for index, item in enumerate(items):
        at = {"item_id": item["id"], "output_index": index}
        if item["type"] == "message":
            text = item["content"][0]["text"]
            yield event(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "content": []},
            )
            part = {"type": "output_text", "text": "", "annotations": []}
            yield event("response.content_part.added", **at, content_index=0, part=part)
            if text:
                yield event(
                    "response.output_text.delta", **at, content_index=0, delta=text, logprobs=[]
                )
            yield event("response.output_text.done", **at, content_index=0, text=text, logprobs=[])
            yield event(
                "response.content_part.done", **at, content_index=0, part={**part, "text": text}
            )
        else:
            yield event(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "arguments": ""},
            )
            if item["arguments"]:
                yield event("response.function_call_arguments.delta", **at, delta=item["arguments"])
            yield event(
                "response.function_call_arguments.done",
                **at,
                name=item["name"],
                arguments=item["arguments"],
            )
        yield event("response.output_item.done", output_index=index, item=item)
    yield event("response.completed", response=_response(request, ref, created, items, usage))


RESPONSES = WireApi(
    name="responses",
    title="responses",
    parse=parse_responses,
    render=responses_response,
    stream=responses_stream,
    error=openai_error,
)
