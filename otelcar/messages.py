"""The normalized message: the one shape every dialect maps into and every policy maps out of.

A message is ``{role, content, tool_calls, tool_call_id, name, reasoning}`` (DESIGN.md §4):

- ``role``: ``system`` | ``user`` | ``assistant`` | ``tool`` | any other string (an agent name
  in multi-agent logs); the APIs' synonyms (:data:`ROLE_SYNONYMS`: OpenAI's ``developer``
  and ``function``, Gemini's ``model``, smolagents' ``tool-call``/``tool-response`` …) are
  mapped to these by every mapper (:func:`normalize_role`);
- ``content``: the text, or ``None`` when there is none or it was not captured;
- ``tool_calls``: the calls an assistant message requests, each ``{id, name, arguments}``
  where ``arguments`` is a JSON object when the model's arguments parsed as one, else the
  raw string exactly as recorded (invalid or truncated JSON stays a string);
- ``tool_call_id``: on a ``tool`` message, the id of the call it answers;
- ``name``: an optional participant name;
- ``reasoning``: reasoning text the provider returned separately, if any.

In a Polars table the message is a struct (:data:`MESSAGE_DTYPE`) whose ``arguments`` field
is JSON text: ``{"a": 1}`` for an object, ``"{\\"a\\": 1"`` (a JSON string literal) for a raw
string, so the object/string distinction survives the round trip.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Annotated, Any, TypedDict

import polars as pl

from otelcar.identity import IdentityMemo
from otelcar.ingest.jsontext import loads_value
from otelcar.typeschema import Doc, Extra

Arguments = dict[str, Any] | str | None

TOOL_CALL_DTYPE = pl.Struct({"id": pl.String, "name": pl.String, "arguments": pl.String})
MESSAGE_DTYPE = pl.Struct(
    {
        "role": pl.String,
        "content": pl.String,
        "tool_calls": pl.List(TOOL_CALL_DTYPE),
        "tool_call_id": pl.String,
        "name": pl.String,
        "reasoning": pl.String,
    }
)


class ToolCallDocument(TypedDict):
    """One tool call of a message, its arguments decoded."""

    id: str | None
    name: str | None
    arguments: Annotated[
        dict[str, Any] | str | None,
        Doc(
            "a JSON object, or the raw string when the model's arguments were not a JSON "
            "object; null when not captured"
        ),
    ]


class MessageDocument(TypedDict):
    """A normalized message: one shape for every GenAI dialect."""

    role: Annotated[str, Doc("system | user | assistant | tool | an agent's name")]
    content: str | None
    tool_calls: list[Annotated[ToolCallDocument, Extra(additionalProperties=False)]]
    tool_call_id: str | None
    name: str | None
    reasoning: str | None


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call requested by an assistant message."""

    name: str | None
    arguments: Arguments = None
    id: str | None = None

    def to_row(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": encode_arguments(self.arguments)}

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ToolCall:
        return cls(
            name=row.get("name"), arguments=decode_arguments(row.get("arguments")), id=row.get("id")
        )


@dataclass(frozen=True, slots=True)
class Message:
    """One normalized chat message (see the module docstring for the contract)."""

    role: str
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = field(default_factory=tuple)
    tool_call_id: str | None = None
    name: str | None = None
    reasoning: str | None = None

    def has_content(self) -> bool:
        """True when the message carries any captured content (text, arguments, reasoning)."""
        if self.content is not None or self.reasoning is not None:
            return True
        return any(call.arguments is not None for call in self.tool_calls)

    def to_row(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "content": self.content,
            "tool_calls": [call.to_row() for call in self.tool_calls],
            "tool_call_id": self.tool_call_id,
            "name": self.name,
            "reasoning": self.reasoning,
        }

    def to_dict(self) -> MessageDocument:
        """Plain JSON-able dict with ``arguments`` decoded (``schemas/message.schema.json``)."""
        return {
            "role": self.role,
            "content": self.content,
            "tool_calls": [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in self.tool_calls
            ],
            "tool_call_id": self.tool_call_id,
            "name": self.name,
            "reasoning": self.reasoning,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Message:
        """Inverse of :meth:`to_dict` (arguments as decoded values)."""
        return cls(
            role=data["role"],
            content=data.get("content"),
            tool_calls=tuple(
                ToolCall(c.get("name"), c.get("arguments"), c.get("id"))
                for c in data.get("tool_calls") or ()
            ),
            tool_call_id=data.get("tool_call_id"),
            name=data.get("name"),
            reasoning=data.get("reasoning"),
        )

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Message:
        return cls(
            role=row["role"],
            content=row.get("content"),
            tool_calls=tuple(ToolCall.from_row(c) for c in row.get("tool_calls") or ()),
            tool_call_id=row.get("tool_call_id"),
            name=row.get("name"),
            reasoning=row.get("reasoning"),
        )


def parse_arguments(value: Any) -> Arguments:
    """Normalize recorded tool-call arguments.

    A dict stays a dict; a string holding a JSON object becomes that object; any other
    string (invalid, truncated, or JSON that is not an object) stays the raw string;
    other JSON values are kept as their JSON text.
    """
    if value is None or isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = loads_value(value)
        except ValueError:
            return value
        return parsed if isinstance(parsed, dict) else value
    return json.dumps(value, ensure_ascii=False)


#: Built once: ``json.dumps`` with options builds a new encoder per call.
_ENCODE = json.JSONEncoder(ensure_ascii=False).encode
_CANONICAL_COMPACT = json.JSONEncoder(
    sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str
).encode
#: Canonical texts of argument objects, remembered: the cassette's look-ups and the request
#: digests ask them of the same recorded and re-decided calls again and again.
_ARGUMENT_TEXTS: IdentityMemo[dict[str, Any], str] = IdentityMemo(1 << 15)


def encode_arguments(arguments: Arguments) -> str | None:
    """Arguments as JSON text for a table cell (object → object text, raw str → string literal)."""
    if arguments is None:
        return None
    return _ENCODE(arguments)


def decode_arguments(text: str | None) -> Arguments:
    """Inverse of :func:`encode_arguments`."""
    if text is None:
        return None
    return json.loads(text)


def survives_encoding(arguments: Any) -> bool:
    """Whether ``decode_arguments(encode_arguments(arguments))`` gives back an equal value of
    the same types (so the round trip can be skipped): strings, integers, finite floats,
    booleans and ``None``, in lists and in dicts with string keys, nested. A tuple (read back
    as a list), a non-string key, NaN or another type does not."""
    pending = [arguments]
    while pending:
        value = pending.pop()
        kind = type(value)
        if kind is str or kind is int or kind is bool or value is None:
            continue
        if kind is float:
            if value - value != 0.0:  # inf and NaN are not JSON
                return False
        elif kind is dict:
            for key, item in value.items():
                if type(key) is not str:
                    return False
                pending.append(item)
        elif kind is list:
            pending.extend(value)
        else:
            return False
    return True


def canonical(arguments: Any) -> str:
    """Tool-call arguments as one comparable string: a string as is, anything else as JSON
    with sorted keys."""
    return (
        arguments
        if isinstance(arguments, str)
        else json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    )


def arguments_text(arguments: dict[str, Any]) -> str:
    """An arguments object as canonical JSON: keys sorted, compact, UTF-8 kept, values JSON
    cannot hold as their ``str`` (remembered for the object: arguments are not changed after
    the call is made). Equal objects give equal texts, whatever their keys' order."""
    return _ARGUMENT_TEXTS.get(arguments, _CANONICAL_COMPACT)


def describe_action(action: Message | None) -> str:
    """An action in one line: ``name({arguments})`` per call, else ``answer: "text"`` (the
    text cut at 120 characters)."""
    if action is None:
        return "(no action)"
    if action.tool_calls:
        return "; ".join(f"{c.name}({canonical(c.arguments)})" for c in action.tool_calls)
    text = (action.content or "").strip().replace("\n", " ")
    return f'answer: "{text[:120]}{"…" if len(text) > 120 else ""}"' if text else "(empty reply)"


def text_of(value: Any) -> str | None:
    """A recorded content value as the text a model saw: strings as they are, else JSON."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


#: Roles the providers' APIs and frameworks use for the four normalized ones.
ROLE_SYNONYMS = {
    "developer": "system",
    "model": "assistant",
    "ai": "assistant",
    "human": "user",
    "function": "tool",
    "tool-call": "assistant",
    "tool_call": "assistant",
    "tool-response": "tool",
    "tool_response": "tool",
    "tool-result": "tool",
    "ipython": "tool",
}


def normalize_role(role: str) -> str:
    """``role`` in the normalized vocabulary (case kept for roles that are not synonyms)."""
    return ROLE_SYNONYMS.get(role.lower(), role) if isinstance(role, str) else role
