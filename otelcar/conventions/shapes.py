"""GenAI payloads read by their shape, whatever the attributes that hold them are called.

A new library records its model calls under a namespace no dialect mapper knows
(``mlflow.spanInputs``, ``haystack.agent.step.llm.input``, ``acme.request``…). The names say
nothing, but the values do: a JSON (or Python repr) value holding ``[{"role", "content"}…]``
is a message list, ``{"choices": [{"message"}]}`` a chat completion, ``{"type": "message",
"role": "assistant", "content": […]}`` an Anthropic reply. This module reads such values
wherever they sit in a span's attributes and events:

* :func:`read_span` builds an LLM step (input messages, output, model, usage) or a tool step
  (name, arguments, result) from a span no dialect mapper claimed (the generic fallback), with
  ``source`` :data:`SOURCE` and an issue naming the attributes it read; ``None`` when the
  payloads are not clearly LLM or tool shaped (the span then stays ``other``).
* :func:`content_keys` names the attributes and events of a span that carry content: at least
  :data:`MIN_TEXT` characters of text, or message-, API- or tool-shaped JSON / repr.
* :func:`unread_keys` names those of them whose content a mapped step does not hold (the
  *content unread* issue: never silent, whatever the names); :func:`holding_text` keeps, of
  the values a name list marks as content, those holding text the step does not (a value
  recorded with content capture off holds only a message's skeleton: *not captured*).

Cheap checks come first (type, length, first character) and values are parsed only when they
may be structured; values the dialect mappers read are never parsed again here. Python reprs
are parsed with :mod:`ast` and converted node by node (literals, and calls of a class name
with keyword arguments as dicts): never evaluated.

The one name-based rule is generic: OpenTelemetry's own non-GenAI namespaces
(:data:`NOT_CONTENT`: exception stack traces, SQL statements, URLs…) are not content. Which
side of a tool call a value is (arguments or result) is read from the direction words of its
key (``input``/``args``… or ``output``/``result``…) only when its shape does not say.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from otelcar.conventions.base import _TEXT_FIELDS, UNREAD, MappedSpan
from otelcar.conventions.blocks import messages_from_blocks, read_blocks
from otelcar.conventions.genai import messages_from_parts, normalize_finish_reason, tool_definitions
from otelcar.conventions.memo import decode_json
from otelcar.conventions.normalize import normalize_message, tool_call, tool_result, unflatten
from otelcar.conventions.normalize import unwrap_arguments as unwrap_call_record
from otelcar.conventions.openai_shapes import count, request_params, usage_object
from otelcar.conventions.python_reprs import object_from_repr
from otelcar.ingest.frames import LogFrame, SpanFrame
from otelcar.ingest.jsontext import literal_value
from otelcar.messages import Message, ToolCall, normalize_role, parse_arguments, text_of

SOURCE = "shape"
#: The prefix of the issue on a step whose span carries content no reader read.
#: Plain text at least this long is content.
MIN_TEXT = 200
#: Longest value parsed (longer ones are content by length, never parsed here).
MAX_PARSE = 4_000_000
#: How deep inside a value recognisable shapes are looked for.
MAX_DEPTH = 8
#: OpenTelemetry namespaces that hold no GenAI content (stack traces, queries, URLs…).
NOT_CONTENT = (
    "exception.",
    "db.",
    "http.",
    "url.",
    "code.",
    "server.",
    "client.",
    "network.",
    "rpc.",
    "messaging.",
    "thread.",
    "process.",
    "user_agent.",
    "otel.",
    "telemetry.",
    "service.",
)
ROLES = frozenset(
    {
        "system",
        "user",
        "assistant",
        "tool",
        "developer",
        "function",
        "model",
        "human",
        "ai",
        "ipython",
        "tool-call",
        "tool-response",
        "tool_call",
        "tool_response",
        "tool-result",
    }
)
_INPUT_WORDS = ("input", "args", "arguments", "request", "parameters", "params", "kwargs")
_OUTPUT_WORDS = ("output", "result", "response", "return", "reply", "replies")
_REPR_CALL = re.compile(r"^\s*[A-Za-z_][\w.]*\(")
_KIND_WORDS = {"tool": "tool", "execute_tool": "tool"}


# -- parsing -------------------------------------------------------------------------------


def parse(value: Any) -> Any:
    """``value`` as a structure when it is one: dicts and lists as they are; text that is a
    JSON object or array, a Python literal (``{'role': …}``) or the repr of an object
    (``Name(key=value, …)``, as a dict with its class under ``"__class__"``) parsed; else
    ``None``. Never raises and never evaluates anything."""
    if isinstance(value, dict | list):
        return value
    if not isinstance(value, str) or len(value) < 2 or len(value) > MAX_PARSE:
        return None
    head = value[:1] if value[:1] in "[{" else value.lstrip()[:1]
    if head in ("{", "["):
        try:
            parsed = decode_json(value)
        except ValueError:
            try:
                parsed = literal_value(value.strip())
            except (ValueError, SyntaxError, TypeError):
                parsed = repr_value(value)
        return parsed if isinstance(parsed, dict | list) else None
    if _REPR_CALL.match(value):
        found = object_from_repr(value)
        if found is not None:
            return {"__class__": found[0], **found[1]}
        parsed = repr_value(value)
        return parsed if isinstance(parsed, dict) else None
    return None


_ENUM = re.compile(r"<[A-Za-z_][\w.]*: ('[^'\n]*'|\"[^\"\n]*\"|-?[\d.]+)>")
_OPAQUE = re.compile(
    r"<(?:[A-Za-z_][\w.]* object at 0x[0-9a-fA-F]+"
    r"|(?:function|bound method|built-in function|class|module) (?:[^<>\n]|<locals>)*)>"
)


def repr_value(text: str) -> Any:
    """The value of a Python repr that holds objects (``{'messages': [ChatMessage(_role=
    <ChatRole.USER: 'user'>, _content=[TextContent(text='hi')])]}``): a general helper beside
    :func:`~otelcar.conventions.python_reprs.object_from_repr`, which reads one object. Calls
    of a (dotted) class name become dicts (``"__class__"``: the name; positional arguments
    under ``"__args__"``), an enum member's repr its value, an opaque ``<… object at 0x…>`` or
    ``<function …>`` ``None``. Parsed with :mod:`ast`, never evaluated; ``None`` when ``text``
    is not such a repr."""
    if len(text) > MAX_PARSE:
        return None
    source = _OPAQUE.sub("None", _ENUM.sub(lambda m: m.group(1), text.strip()))
    try:
        return _node(ast.parse(source, mode="eval").body, 0)
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return None


def _node(node: ast.AST, level: int) -> Any:
    if level > 60:
        raise ValueError("repr nested too deeply")
    if isinstance(node, ast.Call):
        func, names = node.func, []
        while isinstance(func, ast.Attribute):
            names.append(func.attr)
            func = func.value
        if not isinstance(func, ast.Name):
            raise ValueError("a call of something other than a class name")
        out: dict[str, Any] = {"__class__": names[0] if names else func.id}
        if node.args:
            out["__args__"] = [_node(arg, level + 1) for arg in node.args]
        for keyword in node.keywords:
            if keyword.arg is not None:
                out[keyword.arg] = _node(keyword.value, level + 1)
        return out
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return [_node(item, level + 1) for item in node.elts]
    if isinstance(node, ast.Dict):
        out = {}
        for key, item in zip(node.keys, node.values, strict=True):
            name = _node(key, level + 1) if key is not None else None
            if isinstance(name, str | int | float | bool) or name is None:
                out[str(name) if not isinstance(name, str) else name] = _node(item, level + 1)
        return out
    return ast.literal_eval(node)


# -- recognising shapes --------------------------------------------------------------------


def _role_of(item: dict[str, Any]) -> str | None:
    """The role of a message-shaped dict (OpenAI/Anthropic/Gemini ``role``, Haystack
    ``_role``, LangChain dumps' ``type`` and serialized ``id``), else ``None``."""
    role = item.get("role", item.get("_role"))
    if isinstance(role, dict):  # Haystack's ChatRole serialized as {"value": …}
        role = role.get("value")
    if isinstance(role, str) and role.lower() in ROLES:
        if any(k in item for k in ("content", "parts", "tool_calls", "_content", "text")):
            return role.lower()
        return None
    if item.get("lc") == 1 and isinstance(item.get("id"), list) and item["id"]:
        name = str(item["id"][-1])
        if name.endswith(("Message", "MessageChunk")):
            return name
    kind = item.get("type")
    if (
        isinstance(kind, str)
        and kind.lower() in ("human", "ai", "system", "tool", "function")
        and ("content" in item or isinstance(item.get("data"), dict))
    ):
        return kind.lower()
    return None


def is_message(item: Any) -> bool:
    return isinstance(item, dict) and _role_of(item) is not None


def is_message_list(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(is_message(item) or _is_pair(item) for item in value)
        and any(is_message(item) for item in value)
    )


def _is_pair(item: Any) -> bool:
    return (
        isinstance(item, list)
        and len(item) == 2
        and isinstance(item[0], str)
        and item[0].lower() in ROLES
        and isinstance(item[1], str)
    )


def _is_completion(value: dict[str, Any]) -> bool:
    choices = value.get("choices")
    return (
        isinstance(choices, list)
        and bool(choices)
        and all(isinstance(c, dict) and isinstance(c.get("message"), dict) for c in choices)
    )


def _is_anthropic_reply(value: dict[str, Any]) -> bool:
    return (
        value.get("type") == "message"
        and value.get("role") == "assistant"
        and isinstance(value.get("content"), list)
    )


def _is_responses_reply(value: dict[str, Any]) -> bool:
    return value.get("object") == "response" and isinstance(value.get("output"), list)


def _is_gemini_reply(value: dict[str, Any]) -> bool:
    candidates = value.get("candidates")
    return (
        isinstance(candidates, list)
        and bool(candidates)
        and all(isinstance(c, dict) and isinstance(c.get("content"), dict) for c in candidates)
    )


def _is_request(value: dict[str, Any]) -> bool:
    """A model API request: a model name with messages (chat, Anthropic), input items
    (Responses) or contents (Gemini)."""
    if not isinstance(value.get("model"), str):
        return False
    if is_message_list(value.get("messages")):
        return True
    if isinstance(value.get("contents"), list) and value["contents"]:
        return True
    inputs = value.get("input")
    return isinstance(inputs, str) or (isinstance(inputs, list) and bool(inputs))


_USAGE_PAIRS = (
    ("prompt_tokens", "completion_tokens"),
    ("input_tokens", "output_tokens"),
    ("prompt_token_count", "candidates_token_count"),
    ("promptTokenCount", "candidatesTokenCount"),
    ("inputTokens", "outputTokens"),
    ("promptTokens", "completionTokens"),
)


def read_usage(value: Any) -> dict[str, int | None]:
    """Token counts from a usage object of any provider (empty when ``value`` is none)."""
    if not isinstance(value, dict):
        return {}
    if "prompt_tokens" in value or "completion_tokens" in value:
        return usage_object(value)
    for prompt, completion in _USAGE_PAIRS[1:]:
        if prompt in value or completion in value:
            details = value.get("input_tokens_details")
            out_details = value.get("output_tokens_details")
            return {
                "input_tokens": count(value.get(prompt)),
                "output_tokens": count(value.get(completion)),
                "cache_read_tokens": count(
                    value.get("cache_read_input_tokens")
                    or value.get("cached_content_token_count")
                    or (details.get("cached_tokens") if isinstance(details, dict) else None)
                ),
                "reasoning_tokens": count(
                    value.get("thoughts_token_count")
                    or (
                        out_details.get("reasoning_tokens")
                        if isinstance(out_details, dict)
                        else None
                    )
                ),
                "total_tokens": count(
                    value.get("total_tokens")
                    or value.get("total_token_count")
                    or value.get("totalTokenCount")
                    or value.get("totalTokens")
                ),
            }
    return {}


def _is_tool_call(value: dict[str, Any]) -> bool:
    """A tool-call object: OpenAI (``{"function": {"name", "arguments"}}``), Responses
    (``function_call``), Anthropic (``tool_use``), Haystack (``{"tool_name", "arguments"}``),
    LangChain (``{"name", "args", "id"}``)."""
    function = value.get("function")
    if isinstance(function, dict) and isinstance(function.get("name"), str):
        return "arguments" in function
    if value.get("type") in ("function_call", "tool_use", "tool_call", "tool-call"):
        return isinstance(value.get("name", value.get("toolName")), str)
    if any(k in value for k in ("description", "parameters", "input_schema", "inputSchema")):
        return False  # a tool's definition, not a call of it
    name = value.get("tool_name", value.get("name"))
    return isinstance(name, str) and any(k in value for k in ("arguments", "args"))


def _tool_call(value: dict[str, Any]) -> ToolCall:
    """A tool-call object (:func:`_is_tool_call`) as a call, by the shared normaliser."""
    if "tool_name" in value and "name" not in value:  # Haystack's ToolCall
        value = {**value, "name": value["tool_name"]}
    call = tool_call(value) or ToolCall(name=None)
    return ToolCall(name=call.name, arguments=unwrap_call_record(call.arguments), id=call.id)


def _id(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


# -- messages ------------------------------------------------------------------------------


def messages_of(items: list[Any], issues: list[str], where: str) -> list[Message]:
    """A message list in any of the recognised forms as normalized messages."""
    out: list[Message] = []
    for item in items:
        out.extend(_message(item, issues, where))
    return [_normal(m) for m in out]


def _normal(message: Message) -> Message:
    role = normalize_role(message.role) if isinstance(message.role, str) else message.role
    if role == message.role:
        return message
    return Message(
        role=role,
        content=message.content,
        tool_calls=message.tool_calls,
        tool_call_id=message.tool_call_id,
        name=message.name,
        reasoning=message.reasoning,
    )


def _message(item: Any, issues: list[str], where: str) -> list[Message]:
    if _is_pair(item):
        return normalize_message(item, issues)
    if not isinstance(item, dict):
        return []
    if "_role" in item or "_content" in item or _haystack_content(item.get("content")):
        return _haystack_message(item)
    if isinstance(item.get("parts"), list) and not any(
        isinstance(p, dict) and "type" in p for p in item["parts"]
    ):  # Gemini: untyped parts ({"text"}, {"function_call"}, {"function_response"})
        role = str(item.get("role") or "user")
        return messages_from_blocks(role, read_blocks(item["parts"], parse_json=False))
    if isinstance(item.get("role"), str) and ("content" in item or "parts" in item):
        return messages_from_parts([item], issues, where)
    return normalize_message(item, issues)


def _haystack_content(content: Any) -> bool:
    return (
        isinstance(content, list)
        and bool(content)
        and all(isinstance(c, dict) and "type" not in c for c in content)
        and any(k in c for c in content for k in ("tool_call", "tool_call_result", "reasoning"))
    )


def _haystack_message(item: dict[str, Any]) -> list[Message]:
    """Haystack's ``ChatMessage`` (``to_dict`` or its private fields): content parts
    ``{"text"}``, ``{"tool_call": {"tool_name", "arguments", "id"}}``, ``{"tool_call_result":
    {"result", "origin"}}``, ``{"reasoning": {"reasoning_text"}}``."""
    role = item.get("role", item.get("_role"))
    role = role.get("value") if isinstance(role, dict) else role
    role = str(role or "user").lower()
    parts = item.get("content", item.get("_content"))
    texts: list[str] = []
    calls: list[ToolCall] = []
    results: list[Message] = []
    reasoning: list[str] = []
    for part in parts if isinstance(parts, list) else [parts]:
        if isinstance(part, str):
            texts.append(part)
        elif not isinstance(part, dict):
            continue
        elif isinstance(part.get("tool_call"), dict) or "tool_name" in part:
            calls.append(_tool_call(part.get("tool_call") or part))
        elif isinstance(part.get("tool_call_result"), dict) or "origin" in part:
            result = part.get("tool_call_result") or part
            origin = result.get("origin") if isinstance(result.get("origin"), dict) else {}
            results.append(
                Message(
                    role="tool",
                    content=tool_result(result.get("result")),
                    tool_call_id=_id(origin.get("id")),
                    name=text_of(origin.get("tool_name")),
                )
            )
        elif isinstance(part.get("reasoning"), dict):
            text = part["reasoning"].get("reasoning_text")
            if isinstance(text, str):
                reasoning.append(text)
        elif isinstance(part.get("text"), str):
            texts.append(part["text"])
    if results and not texts and not calls:
        return results
    name = item.get("name", item.get("_name"))
    message = Message(
        role=role,
        content="\n".join(texts) if texts else None,
        tool_calls=tuple(calls),
        name=name if isinstance(name, str) else None,
        reasoning="\n".join(reasoning) if reasoning else None,
    )
    return [message, *results]


# -- what one value holds ------------------------------------------------------------------


@dataclass(slots=True)
class Found:
    """What the recognisable shapes inside a span's values hold."""

    inputs: list[Message] | None = None
    outputs: list[Message] | None = None
    model: str | None = None
    usage: dict[str, int | None] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    tools: list[dict[str, Any]] | None = None
    finish_reason: str | None = None
    response_id: str | None = None
    system: str | None = None  # system instructions recorded apart from the messages
    api: bool = False  # a request or reply object of a model API was seen
    calls: list[ToolCall] = field(default_factory=list)  # tool-call objects standing alone
    results: list[Message] = field(default_factory=list)  # tool results standing alone
    lists: list[list[Message]] = field(default_factory=list)  # message lists, in order seen
    keys: list[str] = field(default_factory=list)  # keys that held a shape
    issues: list[str] = field(default_factory=list)


def _walk(value: Any, key: str, found: Found, level: int) -> bool:
    """Record in ``found`` the shapes inside ``value``; whether any was recognised."""
    if level > MAX_DEPTH:
        return False
    if isinstance(value, str):
        inner = parse(value) if level and value[:1] in "[{" else None
        return inner is not None and _walk(inner, key, found, level + 1)
    if isinstance(value, list):
        if is_message_list(value):
            for item in value:
                _meta(item, key, found, level)
            found.lists.append(messages_of(value, found.issues, key))
            return True
        if value and isinstance(value[0], list) and is_message_list(value[0]):
            found.lists.append(messages_of(value[0], found.issues, key))  # a batch: the first
            return True
        hit = False
        for item in value[:64]:
            if isinstance(item, dict | list | str):
                hit = _walk(item, key, found, level + 1) or hit
        return hit
    if not isinstance(value, dict):
        return False
    if _is_completion(value) or _is_anthropic_reply(value) or _is_responses_reply(value):
        _reply(value, found)
        return True
    if _is_gemini_reply(value):
        _gemini_reply(value, found)
        return True
    if _is_request(value):
        _request(value, found)
        return True
    if is_message(value):
        _meta(value, key, found, level)
        messages = messages_of([value], found.issues, key)
        if all(m.role == "tool" for m in messages):
            found.results.extend(messages)
        else:
            found.lists.append(messages)
        return True
    if _is_tool_call(value):
        if level == 0:  # a call standing alone, not one inside a reply or a request
            found.calls.append(_tool_call(value))
        return True
    if value.get("type") in ("tool_result", "function_call_output", "tool_call_response"):
        blocks = read_blocks([value], parse_json=False)
        found.results.extend(
            Message(role="tool", content=text, tool_call_id=call_id)
            for call_id, text in blocks.results
        )
        return bool(blocks.results)
    usage = read_usage(value)
    if usage and any(v is not None for v in usage.values()):
        found.usage = {**usage, **{k: v for k, v in found.usage.items() if v is not None}}
        return True
    hit = False
    for inner_key, inner in list(value.items())[:256]:
        if inner_key in ("model", "model_name", "modelId") and isinstance(inner, str) and inner:
            found.model = found.model or inner
        elif isinstance(inner, dict | list | str):
            hit = _walk(inner, key, found, level + 1) or hit
    return hit


def _meta(item: Any, key: str, found: Found, level: int) -> None:
    """The model and usage a reply message carries beside its content (Haystack's ``meta``,
    LangChain's ``response_metadata`` and ``usage_metadata``)."""
    if not isinstance(item, dict):
        return
    if item.get("lc") == 1 and isinstance(item.get("kwargs"), dict):
        item = item["kwargs"]  # a serialized LangChain message
    for extra in ("meta", "_meta", "response_metadata", "usage_metadata", "usage"):
        if isinstance(item.get(extra), dict):
            _walk(item[extra], key, found, level + 1)


def _request(value: dict[str, Any], found: Found) -> None:
    found.api = True
    found.model = found.model or value["model"]
    found.params = {k: v for k, v in request_params(value).items() if v is not None}
    messages: list[Message] = []
    system = value.get("system", value.get("instructions"))
    if system is not None:
        text = read_blocks(system).text if not isinstance(system, str) else system
        messages.append(Message(role="system", content=text))
    items = value.get("messages", value.get("contents", value.get("input")))
    if isinstance(items, str):
        messages.append(Message(role="user", content=items))
    elif isinstance(items, list):
        messages.extend(_items(items, found.issues, "request"))
    found.lists.append(messages)
    if isinstance(value.get("tools"), list):
        found.tools = tool_definitions(value["tools"], found.issues, "request tools")


def _items(items: list[Any], issues: list[str], where: str) -> list[Message]:
    """Input items: messages, or Responses-API items (``function_call`` and
    ``function_call_output`` beside messages), or Gemini contents."""
    out: list[Message] = []
    for item in items:
        if isinstance(item, str):
            out.append(Message(role="user", content=item))
        elif isinstance(item, dict) and (is_message(item) or "parts" in item):
            out.extend(messages_of([item], issues, where))
        elif isinstance(item, dict):
            blocks = read_blocks([item], parse_json=False)
            if blocks.calls:
                out.append(Message(role="assistant", tool_calls=tuple(blocks.calls)))
            out.extend(
                Message(role="tool", content=text, tool_call_id=call_id)
                for call_id, text in blocks.results
            )
    return out


def _reply(value: dict[str, Any], found: Found) -> None:
    found.api = True
    if isinstance(value.get("model"), str):
        found.model = found.model or value["model"]
    found.response_id = found.response_id or _id(value.get("id"))
    usage = read_usage(value.get("usage"))
    if usage:
        found.usage = usage
    if _is_completion(value):
        choices = value["choices"]
        outputs = messages_of(
            [{"role": "assistant", **c["message"]} for c in choices], found.issues, "reply"
        )
        reason = choices[0].get("finish_reason")
    elif _is_anthropic_reply(value):
        outputs = messages_of([value], found.issues, "reply")
        reason = value.get("stop_reason")
    else:  # the Responses API: message items and function calls
        blocks: list[Any] = []
        for item in value["output"]:
            if isinstance(item, dict) and item.get("type") == "message":
                content = item.get("content")
                blocks.extend(content if isinstance(content, list) else [content])
            else:
                blocks.append(item)
        outputs = messages_from_blocks("assistant", read_blocks(blocks, parse_json=False))
        reason = value.get("status") if value.get("status") != "completed" else None
    found.outputs = [m for m in outputs if m.role == "assistant"] or outputs
    reason = _TOOL_STOPS.get(reason, normalize_finish_reason(reason))
    if reason is None and found.outputs and found.outputs[0].tool_calls:
        reason = "tool_call"
    found.finish_reason = found.finish_reason or reason


_TOOL_STOPS = {"tool_use": "tool_call", "tool_calls": "tool_call", "function_call": "tool_call"}


def _gemini_reply(value: dict[str, Any], found: Found) -> None:
    found.api = True
    candidates = value["candidates"]
    found.outputs = messages_of([c["content"] for c in candidates], found.issues, "reply")
    found.model = found.model or _id(value.get("model_version") or value.get("modelVersion"))
    usage = read_usage(value.get("usage_metadata", value.get("usageMetadata")))
    if usage:
        found.usage = usage
    reason = normalize_finish_reason(candidates[0].get("finish_reason"))
    found.finish_reason = found.finish_reason or reason


# -- a span --------------------------------------------------------------------------------


def _values(span: SpanFrame, logs: Sequence[LogFrame]) -> Iterator[tuple[str, Any]]:
    """Every (name, value) of a span that may hold content: attributes, then each event's
    and log record's attributes and body (named ``event <name>: <key>``)."""
    for key, value in span.attributes.items():
        if not key.startswith(NOT_CONTENT):
            yield key, value
    for event in span.events:
        name = event.get("name")
        for key, value in (event.get("attributes") or {}).items():
            if not key.startswith(NOT_CONTENT):
                yield f"event {name}: {key}", value
    for log in logs:
        if log.body is not None:
            yield f"log {log.event_name or ''}".rstrip(), log.body
        for key, value in log.attributes.items():
            if not key.startswith(NOT_CONTENT) and key != "event.name":
                yield f"log {log.event_name or ''}: {key}", value


def carries_content(value: Any, *, structured: bool = False) -> bool:
    """Whether ``value`` is content: text of at least :data:`MIN_TEXT` characters, or a
    structure (JSON, repr or an attribute's own list/map) holding messages, a model API
    object, tool calls or tool results. With ``structured``, only the latter."""
    if isinstance(value, str):
        if len(value) >= MIN_TEXT and not structured:
            return True
        if len(value) < 8 or not (value[:1] in "[{" or _REPR_CALL.match(value)):
            return False
    elif isinstance(value, list):
        if all(isinstance(v, str) for v in value):
            return not structured and sum(map(len, value)) >= MIN_TEXT
    elif not isinstance(value, dict):
        return False
    parsed = parse(value)
    if parsed is None:
        return False
    found = Found()
    _walk(parsed, "", found, 0)
    return bool(found.lists or found.outputs or found.calls or found.results or found.api)


def content_keys(span: SpanFrame, logs: Sequence[LogFrame] = ()) -> list[str]:
    """The names of the attributes and event values of ``span`` that carry content
    (:func:`carries_content`), in order."""
    return [key for key, value in _values(span, logs) if carries_content(value)]


def read_span(span: SpanFrame, logs: Sequence[LogFrame] = ()) -> MappedSpan | None:
    """An LLM or tool step read from the shapes of the span's values, or ``None`` when they
    are not clearly LLM or tool shaped (see the module docstring)."""
    found = Found()
    kind_word = _KIND_WORDS.get(re.split(r"[.:/ ]", span.name.lower())[-1])
    for key, value in _values(span, logs):
        if isinstance(value, str) and len(value) < 40 and _KIND_KEY.search(key):
            kind_word = kind_word or _KIND_WORDS.get(value.strip().lower())
        _flat(key, value, found)
        if not _may_hold(value):
            continue
        parsed = parse(value)
        if parsed is not None and _walk(parsed, key, found, 0):
            found.keys.append(key)
        elif found.system is None and _SYSTEM_KEY.search(key):
            found.system = _system_text(parsed)
            if found.system is not None:
                found.keys.append(key)
    for key, value in _assembled(span):
        # the items of a flattened list stand alone (a call there is no part of a reply)
        items = [value] if is_message_list(value) or not isinstance(value, list) else value
        if any([_walk(item, key, found, 0) for item in items]):
            found.keys.append(key)
    if _is_llm(found):
        return _llm_step(span, found)
    tool = _tool_step(span, logs, found, kind_word)
    return tool


#: A key whose short value may say what the span is (``….span.kind``, ``….spanType``,
#: ``….type``): a role or any other short value elsewhere says nothing of the span.
_KIND_KEY = re.compile(r"(?:kind|type)$", re.IGNORECASE)
#: An index segment of a flattened key: ``<prefix>.<n>.<field>…``.
_INDEX = re.compile(r"\.(\d{1,6})(?=\.|$)")
#: Most flattened keys of one span re-assembled (a larger span keeps only its first ones).
MAX_FLAT = 20_000


def _assembled(span: SpanFrame) -> list[tuple[str, Any]]:
    """Values recorded flattened under indexed keys (``<prefix>.<n>.<field>…``: OpenInference's
    ``llm.input_messages.0.message.role``, OpenLLMetry's ``gen_ai.prompt.0.content``, any
    namespace) re-assembled into lists of dicts, one per prefix, named ``<prefix>.*``: indexes
    become list positions, dotted fields nested dicts, and a list whose items all wrap their
    one field in the same singular key (``{"message": {…}}``, ``{"tool_call": {…}}``) is
    unwrapped. Span attributes and each event's apart; a key without an index costs one
    regex search."""
    out: list[tuple[str, Any]] = []
    sources = [("", span.attributes)] + [
        (f"event {event.get('name')}: ", event.get("attributes") or {}) for event in span.events
    ]
    for label, attributes in sources:
        groups: dict[str, dict[str, Any]] = {}
        seen = 0
        for key, value in attributes.items():
            match = _INDEX.search(key)
            if match is None or key.startswith(NOT_CONTENT):
                continue
            seen += 1
            if seen > MAX_FLAT:
                break
            groups.setdefault(key[: match.start()], {})[key[match.start() + 1 :]] = value
        out += [
            (f"{label}{prefix}.*", _unwrapped(unflatten(fields), 0))
            for prefix, fields in groups.items()
        ]
    return out


def _unwrapped(node: Any, level: int) -> Any:
    """A tree :func:`~.normalize.unflatten` nested back, with the shape reader's readings:
    content parts under the plural (``contents``) as ``content``, and the items of a list
    that all wrap their one field in the same singular key unwrapped."""
    if level > 2 * MAX_DEPTH:
        return node
    if isinstance(node, dict):
        items = {key: _unwrapped(value, level + 1) for key, value in node.items()}
        if isinstance(items.get("contents"), list) and "content" not in items:
            items["content"] = items.pop("contents")  # content parts under the plural
        return items
    if not isinstance(node, list):
        return node
    listed = [_unwrapped(item, level + 1) for item in node]
    wrappers = {next(iter(i)) for i in listed if isinstance(i, dict) and len(i) == 1}
    if len(wrappers) == 1 and all(
        isinstance(i, dict) and len(i) == 1 and isinstance(next(iter(i.values())), dict)
        for i in listed
    ):
        listed = [next(iter(i.values())) for i in listed]
    return listed


#: The last word of a key holding system instructions apart from the messages (GenAI
#: ``…system_instructions``, ``…systemInstruction``, ``…system_prompt``, ``…instructions``);
#: read only as a list of text parts, and only into an LLM step.
_SYSTEM_KEY = re.compile(
    r"(?:^|[.:/ ])(?:system_?instructions?|system_?prompt|instructions)$", re.IGNORECASE
)


def _system_text(parsed: Any) -> str | None:
    """The text of system instructions given as a list of text parts (``[{"type": "text",
    "content" | "text": …}]``); ``None`` for any other shape."""
    if not isinstance(parsed, list) or not parsed:
        return None
    texts = []
    for part in parsed:
        if not isinstance(part, dict) or part.get("type", "text") != "text":
            return None
        text = part.get("content", part.get("text"))
        if not isinstance(text, str):
            return None
        texts.append(text)
    return "\n".join(texts)


_MODEL_WORDS = frozenset({"model", "model_name", "model_id", "modelid", "modelname"})
_TOKEN_WORDS = {
    "input_tokens": "input_tokens",
    "prompt_tokens": "input_tokens",
    "inputtokens": "input_tokens",
    "prompttokens": "input_tokens",
    "output_tokens": "output_tokens",
    "completion_tokens": "output_tokens",
    "outputtokens": "output_tokens",
    "completiontokens": "output_tokens",
    "total_tokens": "total_tokens",
    "totaltokens": "total_tokens",
}


def _flat(key: str, value: Any, found: Found) -> None:
    """A model name or a token count recorded as its own attribute, in any namespace: the
    key's last word says which (``….model``, ``….request.model``, ``….input_tokens``…)."""
    last = key.lower().rsplit(".", 1)[-1]
    if last in _MODEL_WORDS and isinstance(value, str) and 0 < len(value) < 200:
        if found.model is None or key.lower().endswith("response.model"):
            found.model = value
    elif last in _TOKEN_WORDS and isinstance(value, int) and not isinstance(value, bool):
        found.usage.setdefault(_TOKEN_WORDS[last], value)


def _may_hold(value: Any) -> bool:
    if isinstance(value, str):
        return len(value) >= 8 and (
            value[:1] in "[{" or value.lstrip()[:1] in "[{" or bool(_REPR_CALL.match(value))
        )
    return isinstance(value, dict | list)


def _is_llm(found: Found) -> bool:
    """An LLM call: a model API object, or a conversation with a reply made only of
    assistant messages beside it (and a model name or token counts)."""
    if found.api and (found.outputs or found.lists):
        return True
    reply = _reply_list(found)
    return reply is not None and (found.model is not None or bool(found.usage))


def _reply_list(found: Found) -> list[Message] | None:
    """The assistant-only message list beside a context that waits for it (its last message
    is not the assistant's). ``None`` when a conversation already holding its reply is
    among the values: that is an agent's or a chain's transcript, not one model call."""
    if len(found.lists) < 2:
        return None
    replies = [m for m in found.lists if m and all(x.role == "assistant" for x in m)]
    contexts = [m for m in found.lists if m and any(x.role != "assistant" for x in m)]
    if not replies or not contexts or any(m[-1].role == "assistant" for m in contexts):
        return None
    return replies[-1]


def _llm_step(span: SpanFrame, found: Found) -> MappedSpan:
    mapped = MappedSpan(kind="llm", name=span.name, source=SOURCE, operation="chat")
    outputs = found.outputs
    contexts = [m for m in found.lists if m and any(x.role != "assistant" for x in m)]
    if outputs is None:
        outputs = _reply_list(found)
    if contexts:
        mapped.input_messages = max(contexts, key=len)
    elif found.lists and found.lists[0] is not outputs:
        mapped.input_messages = found.lists[0]
    if found.system is not None:
        system = Message(role="system", content=found.system)
        mapped.input_messages = [system, *(mapped.input_messages or ())]
    if outputs and _empty_reply(outputs[0]) and found.calls:
        # a reply message left empty beside the calls the span records apart: its calls
        outputs = [replace(outputs[0], tool_calls=tuple(found.calls)), *outputs[1:]]
    if outputs:
        mapped.output = outputs[0]
        mapped.alternates = list(outputs[1:])
        mapped.n_choices = len(outputs)
    mapped.request_model = found.model
    mapped.response_model = found.model
    mapped.usage = found.usage
    mapped.params = found.params
    mapped.tools_available = found.tools
    mapped.response_id = found.response_id
    mapped.finish_reason = found.finish_reason or (
        "tool_call" if mapped.output is not None and mapped.output.tool_calls else None
    )
    mapped.issues.extend(dict.fromkeys(found.issues))
    mapped.issues.append(
        f"read by shape (no dialect mapper claimed the span): {_named(found.keys)}"
    )
    return mapped


def _empty_reply(message: Message) -> bool:
    return message.role == "assistant" and not message.content and not message.tool_calls


def _tool_step(
    span: SpanFrame, logs: Sequence[LogFrame], found: Found, kind_word: str | None
) -> MappedSpan | None:
    """A tool step: a tool-call object standing alone (with its result if one stands beside
    it), a tool result message naming its tool, or a span whose kind value says ``tool``
    with its arguments and result told apart by their keys' direction words."""
    call = found.calls[0] if len(found.calls) == 1 else None
    result = found.results[0] if len(found.results) == 1 else None
    if call is None and result is None and kind_word != "tool":
        return None
    if call is None and result is not None and result.name is None and kind_word != "tool":
        return None
    mapped = MappedSpan(kind="tool", name=span.name, source=SOURCE, operation="execute_tool")
    keys = list(found.keys)
    if call is not None:
        mapped.tool_name, mapped.tool_args, mapped.tool_call_id = call.name, call.arguments, call.id
    if result is not None:
        mapped.tool_result = result.content
        mapped.tool_call_id = mapped.tool_call_id or result.tool_call_id
        mapped.tool_name = mapped.tool_name or result.name
    if kind_word == "tool" and (mapped.tool_args is None or mapped.tool_result is None):
        for key, value in _values(span, logs):
            side = _side(key) if isinstance(value, str | dict | list) else None
            if side is not None and _is_schema(parse(value)):
                continue  # a tool's definition (its parameters' schema), not a call of it
            if side == "args" and mapped.tool_args is None:
                parsed = parse(value)
                mapped.tool_args = unwrap_call_record(
                    parsed if isinstance(parsed, dict) else parse_arguments(value)
                )
                keys.append(key)
            elif side == "result" and mapped.tool_result is None:
                mapped.tool_result = tool_result(value)
                keys.append(key)
    if not mapped.has_content():
        return None
    mapped.tool_name = mapped.tool_name or _named_tool(span) or span.name
    mapped.issues.append(
        f"read by shape (no dialect mapper claimed the span): {_named(list(dict.fromkeys(keys)))}"
    )
    return mapped


def _named_tool(span: SpanFrame) -> str | None:
    """The tool's name when an attribute says it (a key ending ``tool.name``, ``tool_name``
    or ``toolName``, in any namespace)."""
    for key, value in span.attributes.items():
        if isinstance(value, str) and key.lower().replace("_", ".").endswith("tool.name"):
            return value
        if isinstance(value, str) and key.endswith("toolName"):
            return value
    return None


def _is_schema(value: Any) -> bool:
    """A JSON schema (a tool's parameters), which is no tool's arguments or result."""
    return isinstance(value, dict) and (
        "$schema" in value
        or (value.get("type") == "object" and isinstance(value.get("properties"), dict))
    )


#: Last words of a key that only say it holds a value (``input.value``, ``output.json``…):
#: the word before says which side.
_HOLDER_WORDS = frozenset({"value", "json", "text", "data", "body", "content"})


def _side(key: str) -> str | None:
    words = re.split(r"[.:/ ]", key.lower())
    last = words[-1]
    if last in _HOLDER_WORDS and len(words) > 1:
        last = words[-2]
    words = set(re.split(r"[_\-]|(?<=[a-z])(?=[A-Z])", last)) | {last}
    if words & set(_OUTPUT_WORDS) or last.endswith(("outputs", "output", "result")):
        return "result"
    if words & set(_INPUT_WORDS) or last.endswith(("inputs", "input", "args")):
        return "args"
    return None


def _named(keys: list[str]) -> str:
    return ", ".join(keys[:6]) + (f" … {len(keys) - 6} more" if len(keys) > 6 else "")


# -- content a step does not hold ----------------------------------------------------------

_WORD = re.compile(r"\w+")
#: Text leaves shorter than this (ids, roles, model names, flags) are not compared.
MIN_LEAF = 24


def unread_keys(mapped: MappedSpan, span: SpanFrame, logs: Sequence[LogFrame] = ()) -> list[str]:
    """The attributes and event values of ``span`` that carry content (:func:`carries_content`)
    which ``mapped`` neither consumed nor holds: some text of theirs appears nowhere in the
    step's messages, tool arguments, result or tool definitions."""
    held: _Held | None = None
    out = []
    for key, value in _values(span, logs):
        if (
            key in mapped.consumed
            or key in mapped.kept
            or not carries_content(value, structured=True)
        ):
            continue
        if held is None:
            held = _Held([mapped])
        if not held.covers(value):
            out.append(key)
    return out


class _Held:
    """The texts mapped steps hold, to look a payload's texts up in."""

    def __init__(self, steps: Iterable[MappedSpan]) -> None:
        texts: set[str] = set()
        for mapped in steps:
            messages = [*(mapped.input_messages or ()), *([mapped.output] if mapped.output else ())]
            for message in [*messages, *mapped.alternates]:
                for text in (message.content, message.reasoning):
                    _leaves(text, texts)
                for call in message.tool_calls:
                    _leaves(call.arguments, texts)
            _leaves(mapped.tool_args, texts)
            _leaves(mapped.tool_result, texts)
            for tool in mapped.tools_available or ():
                _leaves(tool, texts)
        self.texts = texts
        self.joined = "\n".join(sorted(texts, key=len, reverse=True))
        self.words: set[str] | None = None

    def covers(self, value: Any) -> bool:
        """Whether every text of ``value`` (a leaf of :data:`MIN_LEAF` characters or more
        with a blank in it: ids, URLs and names are no text) is in the step; a text the step
        holds in another form (an unparsed repr, other escaping) counts when most of its
        words are the step's."""
        leaves: set[str] = set()
        _leaves(value, leaves)
        for leaf in leaves:
            if len(leaf) < MIN_LEAF or " " not in leaf or leaf in self.texts or leaf in self.joined:
                continue
            words = [w for w in _WORD.findall(leaf) if len(w) >= 4]
            if not words:
                continue
            if self.words is None:
                self.words = set(_WORD.findall(self.joined))
            if sum(w in self.words for w in words) < 0.8 * len(words):
                return False
        return True


def _leaves(value: Any, out: set[str], level: int = 0) -> None:
    """The text leaves of ``value`` (stripped), JSON and repr text parsed, into ``out``."""
    if value is None or level > MAX_DEPTH + 4:
        return
    if isinstance(value, str):
        parsed = parse(value) if _may_hold(value) else None
        if parsed is None:
            out.add(value.strip())
            return
        value = parsed
    if isinstance(value, dict):
        for item in value.values():
            _leaves(item, out, level + 1)
    elif isinstance(value, list):
        for item in value:
            _leaves(item, out, level + 1)


def holding_text(
    mapped: MappedSpan, keys: Sequence[str], span: SpanFrame, logs: Sequence[LogFrame] = ()
) -> list[str]:
    """Of ``keys`` (attribute names, or event names standing for every span event and log
    record of that name), those whose values hold text ``mapped`` does not hold.

    A producer recording with content capture off keeps a message's skeleton and drops its
    text: the v1.28 events keep an empty body, a role, the tool calls' names, ids and
    ``type``, a finish reason; an indexed attribute keeps a role or a finish reason. Such a
    value holds nothing the step does not already hold (its roles, names, call ids, finish
    reason, model, provider…), so its content was *not captured*, not left unread. Every
    other string leaf counts, whatever its length (``"Hi"`` is a message); a ``type`` field
    (``function``, ``text``, ``tool_use``) names its object's kind and is no text."""
    skeleton: set[str] | None = None
    out = []
    for key in keys:
        leaves: set[str] = set()
        for value in _named_values(key, span, logs):
            _text_leaves(value, leaves)
        if not leaves:
            continue
        if skeleton is None:
            skeleton = _skeleton(mapped)
            held = _Held([mapped])
        if any(
            leaf not in skeleton
            and normalize_finish_reason(leaf) not in skeleton
            and normalize_role(leaf) not in skeleton
            and leaf not in held.texts
            and leaf not in held.joined
            for leaf in leaves
        ):
            out.append(key)
    return out


def _named_values(key: str, span: SpanFrame, logs: Sequence[LogFrame]) -> Iterator[Any]:
    """The values under ``key``: a span attribute, or the attributes of the span events and
    the bodies and attributes of the log records named ``key``."""
    if key in span.attributes:
        yield span.attributes[key]
        return
    for event in span.events:
        if event.get("name") == key:
            for name, value in (event.get("attributes") or {}).items():
                if not name.startswith(NOT_CONTENT):
                    yield value
    for log in logs:
        if log.event_name == key:
            yield log.body
            for name, value in log.attributes.items():
                if not name.startswith(NOT_CONTENT) and name != "event.name":
                    yield value


def _text_leaves(value: Any, out: set[str], level: int = 0) -> None:
    """The non-empty string leaves of ``value`` (JSON and repr text parsed) but ``type``
    fields, into ``out``."""
    if value is None or level > MAX_DEPTH + 4:
        return
    if isinstance(value, str):
        parsed = parse(value) if _may_hold(value) else None
        if parsed is None:
            if value.strip():
                out.add(value.strip())
            return
        value = parsed
    if isinstance(value, dict):
        for name, item in value.items():
            if name != "type":
                _text_leaves(item, out, level + 1)
    elif isinstance(value, list):
        for item in value:
            _text_leaves(item, out, level + 1)


def _skeleton(mapped: MappedSpan) -> set[str]:
    """The strings a step holds besides its content: its text fields (names, ids, models,
    provider, finish reason…) and its messages' roles, names, call ids and tool names."""
    out = {value for name in _TEXT_FIELDS if isinstance(value := getattr(mapped, name), str)}
    messages = [*(mapped.input_messages or ()), *([mapped.output] if mapped.output else ())]
    for message in [*messages, *mapped.alternates]:
        out.update(s for s in (message.role, message.name, message.tool_call_id) if s)
        for call in message.tool_calls:
            out.update(s for s in (call.name, call.id) if s)
    return out


#: The prefix of the note on a dialect's ``other`` step whose values hold messages.
KEPT = "content kept in attributes: "


def check_claimed(
    mapped: MappedSpan, span: SpanFrame, logs: Sequence[LogFrame], unread: list[str]
) -> MappedSpan:
    """Say what content a dialect mapper left in a span it claimed (``unread``: keys it
    already knows are unread). An LLM or tool step gets *content unread* naming the values
    holding messages, tool calls or results it neither consumed nor holds
    (:func:`unread_keys`); an ``other`` step whose values carry content gets a note that they are
    kept in its attributes (a chain's or a task's payloads: the mapper's choice, said). Agent
    steps are left as they are: their payloads are their children's calls."""
    if mapped.kind == "llm":
        _system_fallback(mapped, span, logs)
    if mapped.kind in ("llm", "tool"):
        keys = list(dict.fromkeys([*unread, *unread_keys(mapped, span, logs)]))
        if keys:
            mapped.issues.append(
                f"{UNREAD}{_named(keys)} carry content {mapped.source!r} did not read"
            )
    elif mapped.kind == "other":
        keys = [
            key
            for key, value in _values(span, logs)
            if key not in mapped.consumed and key not in mapped.kept and carries_content(value)
        ]
        if keys:
            mapped.issues.append(
                f"{KEPT}{_named(keys)} hold content of this {mapped.source!r} step (not a "
                "model or tool call); kept as they are"
            )
    return mapped


def drop_notes_held_by_calls(
    mapped: Mapping[str, MappedSpan],
    spans: Mapping[str, SpanFrame],
    logs: Mapping[str, Sequence[LogFrame]],
) -> None:
    """Take the *content kept in attributes* note (:func:`check_claimed`) off the ``other``
    steps of one trace whose kept values hold nothing its model and tool steps do not: a
    chain's or a graph node's input and output are then the calls' messages seen again (a
    LangGraph node's state, a prompt template's filled messages), not content kept only in
    attributes. Run once per trace, after every span is mapped; a trace without such notes
    costs one pass over its steps."""
    noted = [
        span_id
        for span_id, step in mapped.items()
        if step.kind == "other" and any(i.startswith(KEPT) for i in step.issues)
    ]
    calls = [step for step in mapped.values() if step.kind in ("llm", "tool")]
    if not noted or not calls:
        return
    held = _Held(calls)
    for span_id in noted:
        step = mapped[span_id]
        values = [
            value
            for key, value in _values(spans[span_id], logs.get(span_id, ()))
            if key not in step.consumed and key not in step.kept and carries_content(value)
        ]
        if all(held.covers(value) for value in values):
            step.issues = [i for i in step.issues if not i.startswith(KEPT)]


def _system_fallback(mapped: MappedSpan, span: SpanFrame, logs: Sequence[LogFrame]) -> None:
    """An LLM step a mapper built without a system message takes the system instructions
    its span records apart from the messages under a key the mapper did not read (a
    producer's own spelling, ``gen_ai.system.instructions``), as text parts, with an issue."""
    if any(m.role == "system" for m in mapped.input_messages or ()):
        return
    for key, value in _values(span, logs):
        if key in mapped.consumed or not _SYSTEM_KEY.search(key) or not _may_hold(value):
            continue
        text = _system_text(parse(value))
        if text is not None:
            system = Message(role="system", content=text)
            mapped.input_messages = [system, *(mapped.input_messages or ())]
            mapped.consumed.add(key)
            mapped.issues.append(f"system instructions read by shape from {key}")
            return
