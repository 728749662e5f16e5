"""The one normaliser of messages and tool payloads, shared by every mapper.

Producers record the same few things — messages, tool calls, tool arguments, tool results —
inside their own wrappers. Everything that takes such a wrapper apart lives here, so a
mapper (built-in, the shape reader, or a plugin's) reads a payload the same way whatever
wrote it:

- **Tool calls** (:func:`tool_call`, :func:`tool_calls`): OpenAI's ``{id, type, function:
  {name, arguments}}``, LangChain's ``{name, args, id}``, flat ``{name, arguments}`` and
  ``{name, input}`` forms; the call id wherever a producer put it (``id``, ``call_id``,
  ``tool_call_id``, ``toolCallId``, ``toolUseId``, ``tool_use_id``, inside ``function``, or a
  nested ``tool_call`` / ``toolCall`` object).
- **Serialized framework objects** (:func:`message_dict`): LangChain's ``{"lc": 1, "type":
  "constructor", "id": [..., "ToolMessage"], "kwargs": {...}}`` and its ``model_dump``
  (``{"type": "tool", "content": ...}``), and the Python ``repr`` of its message classes
  (``ToolMessage(content='…', tool_call_id='…')``, parsed with :mod:`ast`, never evaluated),
  read as a plain ``{role, content, tool_calls, tool_call_id, name}`` message.
- **Wrapper dicts** (:func:`tool_arguments`): LangChain's callback record
  ``{"input_str", "inputs", "kwargs", "tags", "metadata"}`` (the arguments are ``inputs``),
  a ``{"input": {...}, "options": ...}`` tool input (the arguments are ``input``), a call
  record ``{"args": [], "kwargs": {...}}`` (the arguments are ``kwargs``); a Python-repr
  dict is read as the dict.
- **Tool results** (:func:`tool_result`): content-block lists (``[{"type": "text", "text":
  …}]``, Strands ``[{"text": …}]``, MCP's ``{"content": [...], "isError": …}``), a
  LangChain ``ToolMessage`` in any of the forms above (also as ``{"output": …}``, alone or
  in LangChain's ``on_tool_end`` record ``{"output", "kwargs"}``),
  LlamaIndex's ``ToolOutput``, a one-key ``{"result": …}``, a JSON-encoded string, and the
  Python repr of a block list.
- **Flattened records** (:func:`indexed`, :func:`unflatten`): attributes recorded one
  field per key with numeric indexes (OpenLLMetry's ``gen_ai.prompt.0.tool_calls.1.name``,
  ``….function_call.arguments``) grouped by index and nested back into the message object
  they flatten, so a message given with flat keys is read like its JSON form.
- **Tool calls written as text** (:func:`repr_tool_call`): the Python ``repr`` of an SDK
  tool-call object that an instrumentation ``str()``-ed into a text part or a message's
  content (OpenAI Agents' ``ResponseFunctionToolCall(…)``) is that tool call, with an issue.
- **Messages** (:func:`messages`, :func:`normalize_message`, :func:`messages_from_list`):
  a list in any of OpenAI's, Anthropic's, LangChain's (constructors, dumps, ``(role,
  content)`` tuples) or the GenAI blocks' forms, or a request holding one (``{"messages":
  [...]}``, LangChain's ``{"input": [...]}`` / ``{"inputs": {"messages": ...}}``) or a
  reply holding one (LangChain's ``{"generations": [[{"text", "message"}]]}``: the first); a
  message made only of tool results becomes one ``tool`` message per result, each keeping
  the message's ``name``.

Every function takes any JSON value (or a string holding one) and never raises on content.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from otelcar.conventions.blocks import read_blocks
from otelcar.conventions.memo import decode_json
from otelcar.conventions.python_reprs import object_from_repr, repr_class, tool_call_from_repr
from otelcar.ingest.jsontext import literal_value
from otelcar.messages import Arguments, Message, ToolCall, parse_arguments, text_of

#: How deep wrappers are taken apart (a wrapper of a wrapper …).
MAX_DEPTH = 6
#: Keys a producer puts a tool call's id under, in order of preference.
CALL_ID_KEYS = ("id", "call_id", "tool_call_id", "toolCallId", "toolUseId", "tool_use_id", "callId")
#: Objects some producers nest a tool call in (``{"tool_call": {"id", "function"}}``).
NESTED_CALL_KEYS = ("tool_call", "toolCall", "function_call")
#: LangChain's callback record for a tool run (``on_tool_start``'s arguments).
CALLBACK_KEYS = frozenset({"input_str", "inputs", "kwargs", "tags", "metadata", "run_id"})
#: LangChain's callback record for a tool's end (``on_tool_end``'s output and keyword
#: arguments), as OpenLLMetry's LangChain instrumentation records it.
CALLBACK_OUTPUT_KEYS = frozenset({"output", "kwargs", "tags", "metadata", "run_id"})
#: A call record (smolagents, LlamaIndex, traceloop's decorators).
CALL_RECORD_KEYS = frozenset({"args", "kwargs", "sanitize_inputs_outputs"})
#: Keys beside ``input`` in an ``{"input": {...}, "options": ...}`` tool input.
INPUT_WRAPPER_KEYS = frozenset({"input", "options", "config", "context"})
#: One-key wrappers around a tool result.
RESULT_KEYS = ("result", "output", "content", "text")

LC_ROLES = {
    "human": "user",
    "humanmessage": "user",
    "ai": "assistant",
    "aimessage": "assistant",
    "system": "system",
    "systemmessage": "system",
    "tool": "tool",
    "toolmessage": "tool",
    "function": "tool",
    "functionmessage": "tool",
    "chat": None,  # ChatMessage: the role is in the message
    "chatmessage": None,
    "remove": None,
}
ROLE_ALIASES = {"human": "user", "ai": "assistant", "model": "assistant", "function": "tool"}
TEXT_BLOCKS = frozenset({"text", "input_text", "output_text"})
REASONING_BLOCKS = frozenset({"thinking", "reasoning", "redacted_thinking"})
TUPLE_ROLES = frozenset(
    {"user", "human", "ai", "assistant", "system", "developer", "tool", "function", "model"}
)

# --------------------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------------------


def decoded(value: Any) -> Any:
    """``value`` with text that holds a structure read into it: JSON, else a Python-repr
    literal, else the repr of a message object (:func:`message_dict`); other values and
    other text as they are."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text[:1] in ("[", "{", '"'):
        try:
            return decode_json(text)
        except ValueError:
            pass
        if text[:1] in ("[", "{"):
            try:
                return literal_value(text)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                return value
        return value
    found = _repr_message(text)
    return value if found is None else found


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _arguments(value: Any) -> Arguments:
    """Tool-call arguments: a dict stays, a JSON string is decoded, else raw text."""
    return parse_arguments(value)


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return text_of(value)


# --------------------------------------------------------------------------------------
# Tool calls
# --------------------------------------------------------------------------------------


def tool_call_id(item: Any) -> str | None:
    """A tool call's id, under whichever key the producer used (:data:`CALL_ID_KEYS`), on
    the call, inside its ``function``, or in a nested call object."""
    if not isinstance(item, dict):
        return None
    for source in (
        item,
        _dict(item.get("function")),
        *(_dict(item.get(k)) for k in NESTED_CALL_KEYS),
    ):
        for key in CALL_ID_KEYS:
            value = source.get(key)
            if value is not None and value != "":
                return value if isinstance(value, str) else str(value)
    return None


def tool_call(item: Any) -> ToolCall | None:
    """One tool call in any producer's form (see the module docstring); ``None`` when
    ``item`` is not an object."""
    if not isinstance(item, dict):
        return None
    body = item
    for key in NESTED_CALL_KEYS:  # {"tool_call": {...}} around the call itself
        inner = item.get(key)
        if isinstance(inner, dict) and "name" not in item and key != "function_call":
            body = {**inner, **{k: v for k, v in item.items() if k != key}}
            break
    function = body.get("function")
    if isinstance(function, dict):
        name = function.get("name", body.get("name"))
        args = next(
            (function[k] for k in ("arguments", "args", "input") if function.get(k) is not None),
            None,
        )
        if args is None:
            args = body.get("arguments", body.get("args"))
    else:
        name = body.get("name", body.get("toolName"))
        args = next(
            (body[k] for k in ("args", "arguments", "input") if body.get(k) is not None),
            None,
        )
    return ToolCall(name=_text(name), arguments=_arguments(args), id=tool_call_id(item))


def tool_calls(items: Any) -> tuple[ToolCall, ...]:
    """Every tool call of a list (OpenAI's ``tool_calls``, LangChain's, …); a lone call
    object counts as a list of one; what is not an object is skipped."""
    if isinstance(items, dict):
        items = [items]
    if not isinstance(items, list | tuple):
        return ()
    return tuple(call for call in map(tool_call, items) if call is not None)


def repr_tool_call(text: Any, issues: list[str], where: str = "") -> ToolCall | None:
    """The tool call ``text`` is the Python repr of (an SDK object ``str()``-ed into a text
    part: ``ResponseFunctionToolCall(arguments='…', call_id='…', name='…')``), with an issue
    (``where``: what held it, for the issue); ``None`` for any other value. Parsed with
    :mod:`ast`, never evaluated (:func:`~.python_reprs.tool_call_from_repr`)."""
    call = tool_call_from_repr(text)
    if call is not None:
        issues.append(
            f"{where + ': ' if where else ''}a tool call recorded as the text "
            f"{repr_class(text)}(…) (a Python repr); read as the tool call"
        )
    return call


# --------------------------------------------------------------------------------------
# Flattened records
# --------------------------------------------------------------------------------------


def indexed(attributes: Mapping[str, Any], prefix: str) -> dict[int, dict[str, Any]]:
    """``{prefix}.{i}.{rest}`` keys grouped by the numeric ``i``, in index order:
    ``{i: {rest: value}}`` (one flattened message, choice or tool definition per ``i``)."""
    pattern = re.compile(rf"^{re.escape(prefix)}\.(\d+)\.(.+)$")
    groups: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        match = pattern.match(key)
        if match:
            groups.setdefault(int(match.group(1)), {})[match.group(2)] = value
    return dict(sorted(groups.items()))


def is_flat(fields: Mapping[str, Any]) -> bool:
    """Whether a record holds dotted keys (``tool_calls.0.name``) to :func:`unflatten`."""
    return any(isinstance(key, str) and "." in key for key in fields)


def unflatten(fields: Mapping[str, Any]) -> dict[str, Any]:
    """A record flattened one field per dotted key (``{"role", "tool_calls.0.name",
    "tool_calls.0.arguments", "function_call.name"}``) nested back: dotted keys become
    nested dicts, a dict whose keys are all numeric a list in index order. A key that is
    both a value and a prefix keeps its value."""
    tree: dict[str, Any] = {}
    for key, value in fields.items():
        *path, last = str(key).split(".")
        node: Any = tree
        for segment in path:
            node = node.setdefault(segment, {}) if isinstance(node, dict) else None
            if not isinstance(node, dict):
                break
        if isinstance(node, dict):
            node.setdefault(last, value)
    return _listed(tree)


def _listed(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    items = {key: _listed(value) for key, value in node.items()}
    if items and all(key.isdigit() for key in items):
        return [items[key] for key in sorted(items, key=int)]
    return items


# --------------------------------------------------------------------------------------
# Serialized framework objects
# --------------------------------------------------------------------------------------


def _lc_role(type_name: str, body: dict[str, Any]) -> str | None:
    key = type_name.lower().removesuffix("chunk")
    if key in LC_ROLES:
        return LC_ROLES[key] or body.get("role")
    return body.get("role") or type_name


def _is_message_class(name: str) -> bool:
    return name.lower().removesuffix("chunk") in LC_ROLES or name.endswith("Message")


def _repr_message(text: str) -> dict[str, Any] | None:
    """The repr of a LangChain message (``ToolMessage(content='x', tool_call_id='c')``) as
    a message dict; ``None`` for any other text."""
    found = object_from_repr(text)
    if found is None or not _is_message_class(found[0]):
        return None
    name, fields = found
    if "content" not in fields and "tool_calls" not in fields:
        return None
    return _message_of(name, fields)


def _message_of(class_name: str, body: dict[str, Any]) -> dict[str, Any]:
    role = _lc_role(class_name, body)
    out = {k: body[k] for k in ("content", "tool_calls", "tool_call_id", "name") if k in body}
    for key in ("additional_kwargs", "invalid_tool_calls", "function_call", "status"):
        if key in body:
            out[key] = body[key]
    out["role"] = ROLE_ALIASES.get(str(role), str(role)) if role else "user"
    return out


def message_dict(value: Any) -> dict[str, Any] | None:
    """A serialized framework message as a plain message dict ``{role, content,
    tool_calls, tool_call_id, name}``: a LangChain constructor (``{"lc": 1, "type":
    "constructor", "id": [..., "ToolMessage"], "kwargs": {...}}``), the repr of a message
    class, or either as JSON text; ``None`` for anything else."""
    value = decoded(value) if isinstance(value, str) else value
    if not isinstance(value, dict):
        return None
    ids = value.get("id")
    if value.get("lc") == 1 and isinstance(ids, list) and ids and isinstance(ids[-1], str):
        if not _is_message_class(ids[-1]):
            return None
        return _message_of(ids[-1], _dict(value.get("kwargs")))
    if "role" in value and ("content" in value or "tool_calls" in value):
        return value if "lc" not in value else None
    return None


def tool_message_call_id(value: Any) -> str | None:
    """The ``tool_call_id`` of a tool message in any form :func:`message_dict` reads, or in
    LangChain's ``message_to_dict`` form ``{"type": "tool", "data": {...}}`` (what
    OpenInference records as a LangChain tool's ``output.value``), alone or wrapped as
    ``{"output": …}`` (OpenInference's LangChain.js tool span); ``None`` otherwise."""
    value = decoded(value) if isinstance(value, str) else value
    if isinstance(value, dict) and set(value) == {"output"}:  # LangChain.js's {"output": …}
        value = decoded(value["output"])
    if (
        isinstance(value, dict)
        and value.get("type") == "tool"
        and isinstance(value.get("data"), dict)
    ):
        value = {**value["data"], "role": "tool"}
    message = message_dict(value)
    if message is None or message.get("role") != "tool":
        return None
    return text_of(message.get("tool_call_id")) or None


def unwrap(value: Any, depth: int = 0) -> Any:
    """``value`` with serialized framework messages read as plain message dicts, in lists
    and under ``messages`` / ``output`` / ``outputs`` too; text holding a structure decoded
    first. Anything else is returned as it is."""
    if depth > MAX_DEPTH:
        return value
    value = decoded(value)
    message = message_dict(value)
    if message is not None:
        return message
    if isinstance(value, list):
        return [unwrap(item, depth + 1) for item in value]
    if isinstance(value, dict):
        for key in ("messages", "output", "outputs"):
            if key in value and isinstance(value[key], list | dict | str):
                inner = unwrap(value[key], depth + 1)
                if inner is not value[key]:
                    return {**value, key: inner}
    return value


# --------------------------------------------------------------------------------------
# Tool arguments and results
# --------------------------------------------------------------------------------------


def tool_arguments(value: Any, depth: int = 0) -> Arguments:
    """Tool arguments out of the wrappers frameworks record them in (see the module
    docstring); anything else as :func:`~otelcar.messages.parse_arguments` reads it."""
    inner = _argument_wrapper(decoded(value) if isinstance(value, str) else value)
    if inner is not None and depth < MAX_DEPTH:
        return tool_arguments(inner, depth + 1)
    if isinstance(value, str):
        parsed = decoded(value)
        if isinstance(parsed, dict) and "role" not in parsed:
            return parsed
    return parse_arguments(value)


def _argument_wrapper(value: Any) -> Any:
    """The arguments inside one wrapper, else ``None``."""
    if not isinstance(value, dict):
        return None
    keys = set(value)
    if "input_str" in keys and "inputs" in keys and keys <= CALLBACK_KEYS:
        inputs = value["inputs"]  # LangChain's callback record: the tool's own input
        if isinstance(inputs, dict):
            return inputs
        return None if inputs is None else decoded(value.get("input_str"))
    if "input" in keys and "options" in keys and keys <= INPUT_WRAPPER_KEYS:
        return value["input"] if isinstance(value["input"], dict) else None
    if isinstance(value.get("kwargs"), dict) and keys <= CALL_RECORD_KEYS and not value.get("args"):
        return value["kwargs"]
    return None


def unwrap_arguments(arguments: Arguments) -> Arguments:
    """The arguments inside a known wrapper (:func:`tool_arguments`), else ``arguments``
    unchanged (a string that is no wrapper stays the string)."""
    inner = _argument_wrapper(decoded(arguments) if isinstance(arguments, str) else arguments)
    if inner is None:
        return arguments
    return tool_arguments(inner)


def tool_result(value: Any) -> str | None:
    """A tool's result as the text the model read: the inner text of a known wrapper
    (see the module docstring), else the value as text (a string exactly as recorded)."""
    if value is None:
        return None
    structure = decoded(value)
    if isinstance(structure, str):
        return structure  # plain text, or a JSON-encoded string (CrewAI's '"18 degrees"')
    inner = _inner_result(structure, 0)
    if inner is not None:
        return inner
    return value if isinstance(value, str) else text_of(value)


def unwrap_result(text: str | None) -> str | None:
    """The result text inside a known wrapper, else ``text`` (exactly as recorded)."""
    return text if text is None else tool_result(text)


def _inner_result(value: Any, depth: int) -> str | None:
    if depth > MAX_DEPTH:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        messages = [message_dict(item) for item in value]
        if value and all(m is not None and m.get("role") == "tool" for m in messages):
            texts = [_inner_result(m.get("content"), depth + 1) for m in messages]  # type: ignore[union-attr]
            return "\n".join(t for t in texts if t is not None)
        blocks = read_blocks(value, parse_json=False)
        if blocks.unknown or blocks.calls:
            return None
        texts = blocks.texts + [t for _, t in blocks.results if t is not None]
        return "\n".join(texts) if texts else None
    if not isinstance(value, dict):
        return None
    message = message_dict(value)
    if message is not None and message.get("role") == "tool":
        content = message.get("content")
        return _inner_result(content, depth + 1) or text_of(content)
    data = value.get("data")
    if value.get("type") == "tool" and isinstance(data, dict) and "content" in data:
        return _inner_result(data["content"], depth + 1) or text_of(data["content"])
    if value.get("type") == "tool" and "content" in value:
        return _inner_result(value["content"], depth + 1) or text_of(value["content"])
    if isinstance(value.get("blocks"), list) and "tool_name" in value:  # LlamaIndex ToolOutput
        return _inner_result(value["blocks"], depth + 1)
    if isinstance(value.get("content"), list) and set(value) <= MCP_RESULT_KEYS:
        return _inner_result(value["content"], depth + 1)  # MCP CallToolResult
    if value.get("type") in ("text", "output_text") and isinstance(value.get("text"), str):
        return value["text"]
    if len(value) == 1:
        ((key, inner),) = value.items()
        if key in RESULT_KEYS:
            return _inner_result(decoded(inner), depth + 1) or text_of(inner)
    if "output" in value and set(value) <= CALLBACK_OUTPUT_KEYS:  # LangChain's on_tool_end
        return _inner_result(decoded(value["output"]), depth + 1) or text_of(value["output"])
    return None


#: The keys of an MCP ``CallToolResult``.
MCP_RESULT_KEYS = frozenset(
    {"content", "isError", "is_error", "structuredContent", "_meta", "meta"}
)


# --------------------------------------------------------------------------------------
# Messages
# --------------------------------------------------------------------------------------


def messages(value: Any, issues: list[str], default_role: str = "user") -> list[Message] | None:
    """The messages ``value`` holds — a message list in any form, one message, or a
    request holding them (``{"messages": [...]}``, ``{"input": [...]}``, ``{"inputs":
    {"messages": ...}}``), or LangChain's reply (``{"generations": [[…]]}``, its first
    generation) — or ``None`` when it holds none."""
    value = decoded(value)
    for _ in range(MAX_DEPTH):
        if not isinstance(value, dict) or message_dict(value) is not None:
            break
        generated = _first_generation(value)
        if generated is not None:
            value = generated
            continue
        inner = next(
            (value[k] for k in ("messages", "input", "inputs", "prompt") if k in value), None
        )
        if inner is None:
            return None
        value = decoded(inner)
    if isinstance(value, str) or value is None:
        return None
    if isinstance(value, dict):
        return normalize_message(value, issues, default_role) or None
    if not isinstance(value, list) or not value:
        return None
    items = value[0] if _is_batch(value) else value
    if not all(
        message_dict(item) is not None or _is_tuple_message(item) or _is_typed_dump(item)
        for item in items
    ):
        return None
    return messages_from_list(value, issues)


def _first_generation(value: dict[str, Any]) -> Any:
    """The reply of LangChain's ``LLMResult`` (``{"generations": [[{"text", "message"},
    ...], ...]}``): the first generation's ``message``, else its ``text`` as an assistant
    message; ``None`` when ``value`` is no such result."""
    batches = value.get("generations")
    if not isinstance(batches, list) or not batches:
        return None
    first = batches[0][0] if isinstance(batches[0], list) and batches[0] else batches[0]
    if not isinstance(first, dict):
        return None
    message = decoded(first.get("message"))
    if isinstance(message, dict):
        return message
    text = first.get("text")
    return {"role": "assistant", "content": text} if isinstance(text, str) else None


def _is_typed_dump(item: Any) -> bool:
    """A LangChain ``model_dump`` (``{"type": "human", "content": …}``)."""
    return (
        isinstance(item, dict)
        and isinstance(item.get("type"), str)
        and item["type"].lower().removesuffix("chunk") in LC_ROLES
        and "content" in item
    )


def _is_batch(items: list[Any]) -> bool:
    """``[[msg, ...], ...]``: one message list per batch element (not a ``(role, text)``)."""
    return bool(items) and all(isinstance(x, list) and not _is_tuple_message(x) for x in items)


def _is_tuple_message(item: Any) -> bool:
    """A ``(role, content)`` pair, as LangChain accepts (``("user", "hi")``)."""
    return (
        isinstance(item, list | tuple)
        and len(item) == 2
        and isinstance(item[0], str)
        and item[0].lower() in TUPLE_ROLES
        and isinstance(item[1], str | list | dict)
    )


def messages_from_list(items: Any, issues: list[str]) -> list[Message]:
    """A message list in any form (see the module docstring); a batch keeps element 0."""
    if isinstance(items, str):
        return [Message(role="user", content=items)]
    if not isinstance(items, list):
        return normalize_message(items, issues)
    if _is_batch(items):
        if len(items) > 1:
            issues.append(f"batch of {len(items)} message lists; the first is used")
        items = items[0]
    out: list[Message] = []
    for item in items:
        out.extend(normalize_message(item, issues))
    return out


def normalize_message(item: Any, issues: list[str], default_role: str = "user") -> list[Message]:
    """One recorded message as normalized messages (an Anthropic message carrying
    ``tool_result`` blocks becomes one ``tool`` message per result)."""
    if isinstance(item, str):
        found = _repr_message(item)
        if found is None:
            return [Message(role=default_role, content=item)]
        item = found
    if _is_tuple_message(item):
        role, content = item[0], item[1]
        parts = content_parts(content, issues)
        return [Message(role=ROLE_ALIASES.get(role, role), content=parts.text)]
    if not isinstance(item, dict):
        issues.append(f"message of type {type(item).__name__} ignored")
        return []
    if is_flat(item):
        item = unflatten(item)
    body = item
    role = item.get("role")
    if item.get("lc") == 1 and isinstance(item.get("id"), list) and item.get("id"):
        body = _dict(item.get("kwargs"))
        role = _lc_role(str(item["id"][-1]), body)
    elif role is None and isinstance(item.get("type"), str):
        role = _lc_role(item["type"], body)
    role = ROLE_ALIASES.get(str(role), str(role)) if role else default_role
    parts = content_parts(body.get("content"), issues)
    calls = _merge_calls(_message_calls(body, issues), parts.calls)
    content = parts.text
    if role == "assistant" and calls and content == "":
        content = None  # LangChain's stand-in for the provider's null content
    message_id = body.get("tool_call_id") if role == "tool" else None
    messages = []
    if content is not None or calls or parts.reasoning or not parts.results:
        messages.append(
            Message(
                role=role,
                content=content,
                tool_calls=calls,
                tool_call_id=message_id,
                name=body.get("name") if isinstance(body.get("name"), str) else None,
                reasoning=parts.reasoning,
            )
        )
    name = body.get("name") if isinstance(body.get("name"), str) else None
    messages.extend(
        result if result.name is not None or name is None else replace(result, name=name)
        for result in parts.results
    )
    return messages


class _Parts:
    """Content split into text, tool calls (blocks), tool results and reasoning."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.calls: list[ToolCall] = []
        self.results: list[Message] = []
        self.reasoning_parts: list[str] = []
        self.raw: str | None = None

    @property
    def text(self) -> str | None:
        if self.raw is not None:
            return self.raw
        return "\n".join(self.texts) if self.texts else None

    @property
    def reasoning(self) -> str | None:
        return "\n".join(self.reasoning_parts) if self.reasoning_parts else None


def content_parts(content: Any, issues: list[str]) -> _Parts:
    """A message ``content``: a string as is, else its blocks sorted out."""
    parts = _Parts()
    if content is None:
        return parts
    if isinstance(content, str):
        call = repr_tool_call(content, issues, "message content")
        if call is not None:
            parts.calls.append(call)
        else:
            parts.raw = content
        return parts
    if isinstance(content, dict):
        if "type" not in content:  # structured content that is not a block: keep it as JSON
            parts.raw = text_of(content)
            return parts
        content = [content]
    if not isinstance(content, list):
        parts.raw = text_of(content)
        return parts
    for block in content:
        _add_block(block, parts, issues)
    return parts


def _add_block(block: Any, parts: _Parts, issues: list[str]) -> None:
    if isinstance(block, str):
        _add_text(block, parts, issues)
        return
    if not isinstance(block, dict):
        issues.append(f"content block of type {type(block).__name__} ignored")
        return
    kind = block.get("type")
    if not isinstance(kind, str):  # a list or an object names no block type (and is unhashable)
        issues.append(f"content block type {kind!r} is not represented in the normalized message")
    elif kind in TEXT_BLOCKS:
        _add_text(str(block.get("text") or ""), parts, issues)
    elif kind == "tool_use":
        parts.calls.append(
            ToolCall(
                name=block.get("name"), arguments=_arguments(block.get("input")), id=block.get("id")
            )
        )
    elif kind == "tool_call":
        parts.calls.append(
            ToolCall(
                name=block.get("name"), arguments=_arguments(block.get("args")), id=block.get("id")
            )
        )
    elif kind == "tool_result":
        result = content_parts(block.get("content"), issues)
        parts.results.append(
            Message(role="tool", content=result.text, tool_call_id=block.get("tool_use_id"))
        )
    elif kind in REASONING_BLOCKS:
        text = block.get(kind) or block.get("text") or block.get("reasoning")
        if isinstance(text, str):
            parts.reasoning_parts.append(text)
    else:
        issues.append(f"content block type {kind!r} is not represented in the normalized message")


def _add_text(text: str, parts: _Parts, issues: list[str]) -> None:
    call = repr_tool_call(text, issues, "text block")
    if call is not None:
        parts.calls.append(call)
    else:
        parts.texts.append(text)


def message_tool_calls(record: Any, issues: list[str]) -> tuple[ToolCall, ...]:
    """The tool calls of one message record, nested or flattened one field per key
    (:func:`unflatten`): ``tool_calls`` in any producer's form, else the legacy
    ``function_call`` (one call, no id), then ``invalid_tool_calls``."""
    if not isinstance(record, dict):
        return ()
    return tuple(_message_calls(unflatten(record) if is_flat(record) else record, issues))


def _message_calls(body: dict[str, Any], issues: list[str]) -> list[ToolCall]:
    """A message's tool calls: ``tool_calls`` (LangChain or OpenAI dialect), else the raw
    ``additional_kwargs.tool_calls``/``function_call``; then ``invalid_tool_calls``."""
    calls = _calls_of(body.get("tool_calls"))
    extra = _dict(body.get("additional_kwargs"))
    if not calls:
        calls = _calls_of(extra.get("tool_calls"))
    function_call = body.get("function_call") or extra.get("function_call")
    if not calls and isinstance(function_call, dict):
        calls = _calls_of([{"function": function_call}])
    invalid = _calls_of(body.get("invalid_tool_calls"))
    if invalid:
        issues.append(f"{len(invalid)} invalid tool call(s) kept with their raw arguments")
    return [*calls, *invalid]


def _calls_of(items: Any) -> list[ToolCall]:
    return list(tool_calls(items)) if isinstance(items, list) else []


def _merge_calls(first: list[ToolCall], blocks: list[ToolCall]) -> tuple[ToolCall, ...]:
    """Calls from ``tool_calls`` plus content-block calls not already there (by id)."""
    seen = {c.id for c in first if c.id}
    return tuple([*first, *(c for c in blocks if not c.id or c.id not in seen)])
