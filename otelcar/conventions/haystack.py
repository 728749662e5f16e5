"""Haystack's own OpenTelemetry tracer (``haystack.*`` attributes, tracer scope ``haystack``)
(``fixtures/frameworks/haystack``; observed on haystack-ai 3.4.1 with opentelemetry-haystack
2.0.0, content tracing on).

* **Kind**: ``haystack.agent.step.llm`` → llm, ``haystack.agent.step.tool`` → tool,
  ``haystack.agent.run`` → agent (opens an episode). A ``haystack.component.run`` span of a
  chat generator (its output holds ``replies``) → llm; of a ``ToolInvoker`` that ran one tool
  call → tool. Pipelines, agent steps and other components → other.
* **LLM**: ``haystack.agent.step.llm.input`` (or ``haystack.component.input``) is ``{"messages",
  "tools"}``; ``…llm.output`` (or ``haystack.component.output``) ``{"replies": [...]}``.
  Haystack writes a tag as JSON when it can, **else as ``str(value)``**: a request holding a
  ``Tool`` (a function) is the Python repr ``{'messages': [ChatMessage(_role=<ChatRole.USER:
  'user'>, _content=[TextContent(text='…')], …)], 'tools': [Tool(name=…, function=<function …>,
  …)]}``. Both forms are read: JSON ``ChatMessage.to_dict()`` (``role``, ``content`` =
  ``[{"text"} | {"tool_call": {"tool_name", "arguments", "id"}} | {"tool_call_result":
  {"result", "origin", "error"}} | {"reasoning": {"reasoning_text"}}]``, ``meta``; older
  ``_role`` / ``_content``) and the repr, parsed with :mod:`ast` (never evaluated) once its
  ``<…>`` parts (enum members, functions) are replaced by their value or ``None``. A reply's
  ``meta`` gives the model, the finish reason and the usage.
* **TOOL**: ``haystack.tool.name``; arguments ``haystack.agent.step.tool.input``; result
  ``haystack.agent.step.tool.output``. No tool-call id is recorded (linked by name and order);
  a ``ToolInvoker`` component span gives the id.
* **Errors**: the span's status message, else its ``exception`` event.

Content of an llm or tool span left unread, and the inputs and outputs of containers (the
pipeline, components, the agent: repeats of their steps' content), are named in issues.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from typing import Any

from otelcar.conventions.base import UNREAD, Attrs, MappedSpan, span_error
from otelcar.conventions.blocks import messages_from_blocks, read_blocks
from otelcar.conventions.genai import normalize_finish_reason, tool_definitions
from otelcar.conventions.openai_shapes import count, usage_object
from otelcar.ingest.frames import LogFrame, SpanFrame
from otelcar.messages import Message, parse_arguments, text_of

NAME = "haystack"
PRIORITY = 15
PREFIX = "haystack."
LLM_IN, LLM_OUT = "haystack.agent.step.llm.input", "haystack.agent.step.llm.output"
TOOL_IN, TOOL_OUT = "haystack.agent.step.tool.input", "haystack.agent.step.tool.output"
COMPONENT_IN, COMPONENT_OUT = "haystack.component.input", "haystack.component.output"
#: Longest text parsed as a Python repr.
MAX_REPR = 500_000
_ENUM = re.compile(r"^[A-Za-z_][\w.]*: (.+)$", re.S)
_CONTAINER_CONTENT = (
    "haystack.pipeline.input_data",
    "haystack.pipeline.output_data",
    "haystack.agent.input",
    "haystack.agent.output",
    COMPONENT_IN,
    COMPONENT_OUT,
)


class HaystackMapper:
    """Mapper for Haystack's own tracer (see the module docstring)."""

    name = NAME

    def claim(self, span: SpanFrame) -> int | None:
        """15 for a span with a ``haystack.*`` attribute, or a ``haystack.*`` name from the
        ``haystack`` tracer."""
        if any(key.startswith(PREFIX) for key in span.attributes):
            return PRIORITY
        if span.scope_name == "haystack" and span.name.startswith(PREFIX):
            return PRIORITY
        return None

    def map(self, span: SpanFrame, logs: Sequence[LogFrame]) -> MappedSpan:
        del logs
        consumed: set[str] = set()
        attrs = Attrs(span.attributes, consumed)
        mapped = MappedSpan(
            kind="other", name=span.name, source=NAME, operation=span.name, consumed=consumed
        )
        mapped.error = span_error(span)
        component_type = text_of(span.attributes.get("haystack.component.type"))
        if span.name == "haystack.agent.step.llm" or LLM_IN in span.attributes:
            mapped.kind = "llm"
            _map_llm(attrs, mapped, LLM_IN, LLM_OUT)
        elif span.name == "haystack.agent.step.tool" or TOOL_IN in span.attributes:
            mapped.kind = "tool"
            _map_tool(attrs, mapped)
        elif span.name == "haystack.agent.run":
            mapped.kind = "agent"
            mapped.episode_boundary = True
            mapped.agent_name = mapped.name
        elif _is_generator(span):
            mapped.kind = "llm"
            _map_llm(attrs, mapped, COMPONENT_IN, COMPONENT_OUT)
        elif component_type == "ToolInvoker" or _has_key(span, COMPONENT_OUT, "tool_messages"):
            _map_tool_invoker(attrs, mapped)
        if mapped.kind in ("other", "agent"):
            held = [k for k in _CONTAINER_CONTENT if k in span.attributes and k not in consumed]
            if held:
                mapped.issues.append(
                    f"{', '.join(held)} not read: a container's inputs and outputs (its model "
                    "calls and tool calls are steps of their own when traced)"
                )
        mapped.content_truncated = bool(attrs.truncated)
        return mapped


def _has_key(span: SpanFrame, attribute: str, key: str) -> bool:
    value = span.attributes.get(attribute)
    return isinstance(value, str) and f'"{key}"' in value[:200_000]


def _is_generator(span: SpanFrame) -> bool:
    """A chat generator's component span: its output holds ``replies``."""
    if span.name != "haystack.component.run":
        return False
    kind = text_of(span.attributes.get("haystack.component.type")) or ""
    return kind.endswith("Generator") or _has_key(span, COMPONENT_OUT, "replies")


# ------------------------------------------------------------------------------------------
# Values: JSON, or Haystack's str() of objects
# ------------------------------------------------------------------------------------------


def decode(value: Any) -> Any:
    """A tag's value: JSON decoded, a Python repr parsed (see the module docstring), a
    non-text value as it is; ``None`` when a text is neither."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text[:1] not in "[{\"'" and not re.match(r"^[A-Z]\w*\(", text):
        return value
    try:
        return json.loads(text)
    except ValueError:
        pass
    return python_repr(text)


def python_repr(text: str) -> Any:
    """The value of a Python repr: literals, and objects as dicts of their keyword fields
    (with ``__class__``); ``<Enum.X: 'v'>`` is ``'v'``, any other ``<…>`` is ``None``.
    ``None`` when the text cannot be parsed."""
    if len(text) > MAX_REPR:
        return None
    source = _without_angles(text)
    if source is None:
        return None
    try:
        return _value(ast.parse(source.strip(), mode="eval").body)
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return None


def _string_end(text: str, start: int) -> int:
    quote = text[start]
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == quote:
            return i + 1
        i += 1
    return len(text)


def _without_angles(text: str) -> str | None:
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char in "'\"":
            end = _string_end(text, i)
            out.append(text[i:end])
            i = end
        elif char == "<":
            depth, j = 0, i
            while j < len(text):
                if text[j] in "'\"":
                    j = _string_end(text, j)
                    continue
                depth += {"<": 1, ">": -1}.get(text[j], 0)
                j += 1
                if depth == 0:
                    break
            if depth:
                return None
            enum = _ENUM.match(text[i + 1 : j - 1])
            out.append(enum.group(1) if enum else "None")
            i = j
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _value(node: ast.AST) -> Any:
    if isinstance(node, ast.Call):
        name = node.func.attr if isinstance(node.func, ast.Attribute) else None
        name = node.func.id if isinstance(node.func, ast.Name) else name
        fields: dict[str, Any] = {"__class__": name}
        for keyword in node.keywords:
            if keyword.arg is not None:
                fields[keyword.arg] = _value(keyword.value)
        return fields
    if isinstance(node, ast.Dict):
        return {
            _value(k) if k is not None else None: _value(v)
            for k, v in zip(node.keys, node.values, strict=True)
        }
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return [_value(item) for item in node.elts]
    if isinstance(node, ast.Name | ast.Attribute):
        return None
    return ast.literal_eval(node)


# ------------------------------------------------------------------------------------------
# Messages
# ------------------------------------------------------------------------------------------


def _blocks(content: Any) -> list[dict[str, Any]]:
    """Haystack's content parts (``to_dict`` or repr form) as the blocks of :mod:`.blocks`."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    out: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        kind = part.get("__class__")
        call = part.get("tool_call") if kind is None else (part if kind == "ToolCall" else None)
        result = (
            part.get("tool_call_result")
            if kind is None
            else (part if kind == "ToolCallResult" else None)
        )
        reasoning = part.get("reasoning") if kind is None else None
        if kind == "ReasoningContent":
            reasoning = part
        if kind == "TextContent" or (kind is None and "text" in part):
            out.append({"type": "text", "text": text_of(part.get("text")) or ""})
        elif isinstance(call, dict):
            out.append(
                {
                    "type": "tool_call",
                    "name": call.get("tool_name"),
                    "arguments": call.get("arguments"),
                    "id": call.get("id"),
                }
            )
        elif isinstance(result, dict):
            origin = result.get("origin") if isinstance(result.get("origin"), dict) else {}
            out.append(
                {"type": "tool_call_response", "id": origin.get("id"), "result": result["result"]}
                if "result" in result
                else {"type": "tool_call_response", "id": origin.get("id")}
            )
        elif isinstance(reasoning, dict):
            out.append({"type": "reasoning", "text": reasoning.get("reasoning_text")})
        else:
            out.append({"type": str(kind or "/".join(sorted(map(str, part))))})
    return out


def chat_messages(items: Any, issues: list[str], where: str) -> list[Message] | None:
    """Haystack ``ChatMessage`` s (either form) as normalized messages; ``None`` when
    ``items`` is not a list of them."""
    if not isinstance(items, list):
        return None
    out: list[Message] = []
    for item in items:
        if not isinstance(item, dict):
            return None
        role = item.get("role", item.get("_role"))
        content = item.get("content", item.get("_content"))
        if not isinstance(role, str):
            return None
        blocks = read_blocks(_blocks(content), parse_json=False)
        for kind in blocks.unknown:
            issues.append(f"{where}: content part {kind!r} is not represented")
        name = text_of(item.get("name", item.get("_name")))
        out.extend(messages_from_blocks(role, blocks, name=name))
    return out


def _meta(item: Any) -> dict[str, Any]:
    if not isinstance(item, dict):
        return {}
    meta = item.get("meta", item.get("_meta"))
    return meta if isinstance(meta, dict) else {}


# ------------------------------------------------------------------------------------------
# Steps
# ------------------------------------------------------------------------------------------


def _map_llm(attrs: Attrs, mapped: MappedSpan, in_key: str, out_key: str) -> None:
    raw_in, raw_out = attrs.get(in_key), attrs.get(out_key)
    request = decode(raw_in)
    if isinstance(request, dict):
        mapped.input_messages = chat_messages(request.get("messages"), mapped.issues, in_key)
        tools = [
            {k: t.get(k) for k in ("name", "description", "parameters")}
            for t in request.get("tools") or ()
            if isinstance(t, dict)
        ]
        if tools:
            mapped.tools_available = tool_definitions(tools, mapped.issues, f"{in_key} tools")
        kwargs = request.get("generation_kwargs")
        if isinstance(kwargs, dict):
            for key in ("temperature", "top_p"):
                if isinstance(kwargs.get(key), int | float) and not isinstance(kwargs[key], bool):
                    mapped.params[key] = float(kwargs[key])
            if isinstance(kwargs.get("max_tokens"), int):
                mapped.params["max_tokens"] = kwargs["max_tokens"]
    if raw_in is not None and mapped.input_messages is None:
        mapped.issues.append(f"{UNREAD}{in_key} carries content {NAME!r} did not read")
    reply = decode(raw_out)
    replies = reply.get("replies") if isinstance(reply, dict) else None
    choices = chat_messages(replies, mapped.issues, out_key)
    if choices:
        mapped.output, mapped.alternates = choices[0], list(choices[1:])
        mapped.n_choices = len(replies)
        meta = _meta(replies[0])
        mapped.response_model = text_of(meta.get("model"))
        reason = meta.get("finish_reason")
        mapped.finish_reason = normalize_finish_reason(reason) or (
            "tool_call" if mapped.output.tool_calls else None
        )
        mapped.usage = _usage(meta.get("usage"))
    elif raw_out is not None:
        mapped.issues.append(f"{UNREAD}{out_key} carries content {NAME!r} did not read")
    mapped.name = mapped.response_model or mapped.name


def _usage(usage: Any) -> dict[str, int | None]:
    if not isinstance(usage, dict):
        return {}
    if "prompt_tokens" in usage:
        return usage_object(usage)
    return {
        "input_tokens": count(usage.get("input_tokens")),
        "output_tokens": count(usage.get("output_tokens")),
        "total_tokens": count(usage.get("total_tokens")),
    }


def _map_tool(attrs: Attrs, mapped: MappedSpan) -> None:
    mapped.tool_name = attrs.text("haystack.tool.name")
    attrs.get("haystack.tool.description")
    mapped.name = mapped.tool_name or mapped.name
    arguments = attrs.get(TOOL_IN)
    if arguments is not None:
        decoded = decode(arguments)
        mapped.tool_args = decoded if isinstance(decoded, dict) else parse_arguments(arguments)
    result = attrs.get(TOOL_OUT)
    if result is not None:
        mapped.tool_result = text_of(result)


def _map_tool_invoker(attrs: Attrs, mapped: MappedSpan) -> None:
    """A ``ToolInvoker`` component: one tool call → a tool step (with its id); several are
    named in an issue (not split into steps)."""
    output = decode(attrs.get(COMPONENT_OUT))
    messages = output.get("tool_messages") if isinstance(output, dict) else None
    results = chat_messages(messages, mapped.issues, COMPONENT_OUT) or []
    results = [m for m in results if m.role == "tool"]
    request = decode(attrs.get(COMPONENT_IN))
    history = chat_messages(
        request.get("messages") if isinstance(request, dict) else None, mapped.issues, COMPONENT_IN
    )
    calls = {c.id: c for m in history or () for c in m.tool_calls}
    if len(results) == 1:
        result = results[0]
        call = calls.get(result.tool_call_id)
        mapped.kind = "tool"
        mapped.tool_call_id = result.tool_call_id
        mapped.tool_result = result.content
        if call is not None:
            mapped.tool_name = call.name
            mapped.tool_args = call.arguments
        mapped.name = mapped.tool_name or mapped.name
    elif results:
        names = ", ".join(str(getattr(calls.get(m.tool_call_id), "name", "?")) for m in results)
        mapped.issues.append(
            f"a ToolInvoker span ran {len(results)} tool calls ({names}); kept as one "
            "'other' step, not split into tool steps"
        )
