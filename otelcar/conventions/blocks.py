"""Message content as the providers' content-block lists, read into one shape.

Producers record a message's content in the block form of the API they wrap: OpenAI content
arrays (``{"type": "text", "text"}``), Bedrock/Strands blocks (``{"text"}``, ``{"toolUse"}``,
``{"toolResult"}``), Anthropic blocks (``tool_use`` / ``tool_result``), the Vercel AI SDK's
parts (``tool-call`` / ``tool-result``), the Responses API items (``function_call`` /
``function_call_output``), Gemini parts (``function_call`` / ``function_response``) and the
GenAI semconv parts (``tool_call`` /
``tool_call_response``). :func:`read_blocks` turns any of them (or a plain string, or a JSON
string holding them) into text, tool calls, tool results and reasoning; a block it does not
know is named in ``unknown`` so the caller can report it rather than drop it silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from otelcar.conventions.memo import decode_json
from otelcar.messages import Message, ToolCall, parse_arguments, text_of


@dataclass(slots=True)
class Blocks:
    """What a content value holds."""

    texts: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    results: list[tuple[str | None, str | None]] = field(default_factory=list)  # (call id, text)
    reasoning: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)

    @property
    def text(self) -> str | None:
        return "\n".join(self.texts) if self.texts else None

    def empty(self) -> bool:
        return not (self.texts or self.calls or self.results or self.reasoning)


def messages_from_blocks(
    role: str,
    blocks: Blocks,
    *,
    calls: tuple[ToolCall, ...] | None = None,
    tool_call_id: str | None = None,
    name: str | None = None,
) -> list[Message]:
    """One message of ``role`` holding ``blocks`` (its tool ``calls``, default the blocks'),
    followed by one ``tool`` message per tool result they hold (each keeping ``name``); only
    the tool messages when there is nothing else (a turn that just returns results)."""
    calls = tuple(blocks.calls) if calls is None else calls
    results = [
        Message(role="tool", content=text, tool_call_id=result_id or tool_call_id, name=name)
        for result_id, text in blocks.results
    ]
    if results and not blocks.texts and not calls:
        return results
    message = Message(
        role=role,
        content=blocks.text,
        tool_calls=calls,
        tool_call_id=tool_call_id,
        name=name,
        reasoning="\n".join(blocks.reasoning) if blocks.reasoning else None,
    )
    return [message, *results]


def read_blocks(value: Any, *, parse_json: bool = True) -> Blocks:
    """Read ``value`` (a string, a block, a list of blocks, or — with ``parse_json`` — a
    JSON string of a block list) into :class:`Blocks`."""
    out = Blocks()
    if value is None:
        return out
    if isinstance(value, str):
        if parse_json and value[:1] in "[{":
            try:
                parsed = decode_json(value)
            except ValueError:
                parsed = None
            if isinstance(parsed, list) or (isinstance(parsed, dict) and _is_block(parsed)):
                return read_blocks(parsed, parse_json=False)
        out.texts.append(value)
        return out
    items = value if isinstance(value, list) else [value]
    for item in items:
        _read_one(item, out)
    return out


def _is_block(item: dict[str, Any]) -> bool:
    return isinstance(item.get("type"), str) or any(
        key in item
        for key in (
            "text",
            "toolUse",
            "toolResult",
            "reasoningContent",
            "function_call",
            "function_response",
        )
    )


def _result_text(value: Any) -> str | None:
    """A tool result's content: text blocks joined, anything else as text."""
    if isinstance(value, list | dict):
        inner = read_blocks(value, parse_json=False)
        if inner.texts and not (inner.calls or inner.results or inner.unknown):
            return inner.text
    if isinstance(value, dict) and set(value) <= {"type", "value"} and "value" in value:
        return text_of(value["value"])  # the AI SDK's {"type": "text"|"json", "value"}
    return text_of(value)


def _read_one(item: Any, out: Blocks) -> None:
    if isinstance(item, str):
        out.texts.append(item)
        return
    if not isinstance(item, dict):
        out.unknown.append(type(item).__name__)
        return
    kind = item.get("type")
    if "toolUse" in item and isinstance(item["toolUse"], dict):
        use = item["toolUse"]
        out.calls.append(
            ToolCall(
                name=use.get("name"),
                arguments=parse_arguments(use.get("input")),
                id=use.get("toolUseId"),
            )
        )
    elif "toolResult" in item and isinstance(item["toolResult"], dict):
        result = item["toolResult"]
        out.results.append((result.get("toolUseId"), _result_text(result.get("content"))))
    elif kind in ("text", "input_text", "output_text") or (kind is None and "text" in item):
        text = item.get("text", item.get("content"))
        if text is not None:
            out.texts.append(text_of(text) or "")
    elif kind == "tool-call":  # the Vercel AI SDK
        out.calls.append(
            ToolCall(
                name=item.get("toolName"),
                arguments=parse_arguments(item.get("input", item.get("args"))),
                id=item.get("toolCallId"),
            )
        )
    elif kind in ("tool_use", "tool_call", "function_call"):
        arguments = next((item[k] for k in ("input", "arguments", "args") if k in item), None)
        call_id = item.get("call_id") if kind == "function_call" else item.get("id")
        out.calls.append(
            ToolCall(name=item.get("name"), arguments=parse_arguments(arguments), id=call_id)
        )
    elif kind in ("tool_result", "tool-result", "tool_call_response", "function_call_output"):
        call_id = (
            item.get("tool_use_id")
            or item.get("toolCallId")
            or item.get("call_id")
            or item.get("id")
        )
        content = next(
            (item[k] for k in ("content", "output", "result", "response") if k in item), None
        )
        out.results.append((call_id, _result_text(content)))
    elif kind is None and isinstance(item.get("function_call"), dict):  # Gemini
        call = item["function_call"]
        out.calls.append(
            ToolCall(
                name=call.get("name"),
                arguments=parse_arguments(call.get("args")),
                id=call.get("id"),
            )
        )
    elif kind is None and isinstance(item.get("function_response"), dict):  # Gemini
        response = item["function_response"]
        out.results.append((response.get("id"), _result_text(response.get("response"))))
    elif kind in ("reasoning", "thinking") or "reasoningContent" in item:
        text = item.get("text") or item.get("thinking") or item.get("content")
        if text is None and isinstance(item.get("reasoningContent"), dict):
            text = (item["reasoningContent"].get("reasoningText") or {}).get("text")
        if text is not None:
            out.reasoning.append(text_of(text) or "")
    else:
        out.unknown.append(str(kind) if kind is not None else "/".join(sorted(item)))
