"""The dialect-mapper interface: one span (and its log events) in, one mapped step out.

Each dialect (OTel GenAI, OpenLLMetry, OpenInference, Langfuse, …) is one module with one
:class:`DialectMapper`. A mapper never raises for bad content: it records an issue on the
:class:`MappedSpan` and leaves the attribute unconsumed, so the raw value stays visible in the
step's ``attributes``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from itertools import chain
from operator import itemgetter
from typing import Any, Protocol

from otelcar.conventions.memo import decode_json, derived_each
from otelcar.ingest.frames import LogFrame, SpanFrame
from otelcar.ingest.jsontext import MAX_DEPTH, depth
from otelcar.messages import Arguments, Message, ToolCall, text_of

STEP_KINDS = ("llm", "tool", "agent", "other")
PARAM_KEYS = (
    "temperature",
    "top_p",
    "top_k",
    "max_tokens",
    "seed",
    "stop",
    "n",
    "frequency_penalty",
    "presence_penalty",
)
USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "reasoning_tokens",
    "total_tokens",
)
#: Parameters stored as integers (the rest but ``stop`` are floats); see ``schema.py``.
INT_PARAMS = frozenset({"max_tokens", "seed", "n"})
INT64 = (-(2**63), 2**63 - 1)
_TEXT_FIELDS = (
    "name",
    "operation",
    "provider",
    "request_model",
    "response_model",
    "finish_reason",
    "tool_name",
    "tool_call_id",
    "tool_result",
    "agent_name",
    "response_id",
    "conversation_id",
    "error",
)


@dataclass(slots=True)
class MappedSpan:
    """What a mapper read from one span; the trajectory builder turns it into a step row."""

    kind: str
    name: str
    source: str
    operation: str | None = None
    provider: str | None = None
    request_model: str | None = None
    response_model: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    input_messages: list[Message] | None = None
    tools_available: list[dict[str, Any]] | None = None
    tool_choice: str | None = None  # openai_shapes.tool_choice_text's form
    output: Message | None = None
    alternates: list[Message] = field(default_factory=list)
    n_choices: int | None = None
    finish_reason: str | None = None
    tool_name: str | None = None
    tool_call_id: str | None = None
    tool_args: Arguments = None
    tool_result: str | None = None
    usage: dict[str, int | None] = field(default_factory=dict)
    agent_name: str | None = None
    episode_boundary: bool = False
    response_id: str | None = None
    conversation_id: str | None = None
    error: str | None = None
    content_truncated: bool = False
    consumed: set[str] = field(default_factory=set)
    #: keys the mapper leaves in the step's attributes on purpose (labels, metadata that a
    #: later reader takes from there): not content it failed to read, so never reported as
    #: unread or kept content
    kept: set[str] = field(default_factory=set)
    issues: list[str] = field(default_factory=list)

    def has_content(self) -> bool:
        """Whether any content (messages, output, tool arguments or result) was captured."""
        if self.kind == "tool":
            return self.tool_args is not None or self.tool_result is not None
        messages = [*(self.input_messages or ()), *([self.output] if self.output else ())]
        return any(m.has_content() for m in messages)


class DialectMapper(Protocol):
    """One dialect. ``claim`` returns a priority (lower wins) or ``None`` to pass."""

    name: str

    def claim(self, span: SpanFrame) -> int | None: ...

    def map(self, span: SpanFrame, logs: Sequence[LogFrame]) -> MappedSpan: ...


class Attrs:
    """Read-tracking view of span attributes: every key read is marked consumed."""

    def __init__(self, attributes: dict[str, Any], consumed: set[str]) -> None:
        self._attributes = attributes
        self.consumed = consumed
        self.truncated: list[str] = []

    def get(self, key: str) -> Any:
        value = self._attributes.get(key)
        if value is not None:
            self.consumed.add(key)
        return value

    def first(self, *keys: str) -> Any:
        for key in keys:
            value = self.get(key)
            if value is not None:
                return value
        return None

    def text(self, *keys: str) -> str | None:
        value = self.first(*keys)
        return None if value is None else str(value)

    def int(self, *keys: str) -> int | None:
        value = self.first(*keys)
        try:
            return None if value is None else int(value)
        except (TypeError, ValueError, OverflowError):  # int(inf)
            return None

    def float(self, *keys: str) -> float | None:
        value = self.first(*keys)
        try:
            return None if value is None else float(value)
        except (TypeError, ValueError, OverflowError):  # float(10**400)
            return None

    def json(self, key: str, issues: list[str]) -> Any:
        """A structured attribute: JSON strings are decoded; an undecodable one is reported
        and left unconsumed (its raw value stays in the step's attributes)."""
        value = self._attributes.get(key)
        if value is None:
            return None
        if isinstance(value, str):
            try:
                decoded = decode_json(value)
            except ValueError as exc:
                self.truncated.append(key)
                issues.append(
                    f"{key} is not valid JSON ({len(value)} chars; cut by an attribute "
                    f"length limit?): {exc}; raw value kept in attributes"
                )
                return None
            self.consumed.add(key)
            return decoded
        self.consumed.add(key)
        return value

    def rest(self) -> dict[str, Any]:
        return {k: v for k, v in self._attributes.items() if k not in self.consumed}


#: The prefix of the issue on a step whose span carries content no mapper read.
UNREAD = "content unread: "


def span_error(span: SpanFrame) -> str | None:
    """The error of a span whose status is ERROR: its status message, else its exception
    event's message or type, else ``"status ERROR"``; ``None`` for any other status."""
    if span.status_code != "ERROR":
        return None
    if span.status_message:
        return span.status_message
    for event in span.events:
        if event.get("name") == "exception":
            found = event.get("attributes") or {}
            text = found.get("exception.message") or found.get("exception.type")
            if text:
                return str(text)
    return "status ERROR"


def storable(mapped: MappedSpan) -> MappedSpan:
    """``mapped`` with every value the steps table could not hold taken out, each with an
    issue (the raw value stays in the span's attributes): integers past int64 and numbers
    that are not numbers in ``params``, ``usage`` and ``n_choices``, a ``stop`` that is not a
    list of strings, and text fields that are not text (made text). Every mapper's result
    goes through here (:func:`otelcar.conventions.map_span`), so one mapper's missed range
    check cannot stop a build of the store."""
    for key in list(mapped.params):
        value = mapped.params[key]
        if key == "stop":
            fixed = _stop_list(value)
        elif key in INT_PARAMS:
            fixed = _int64(value)
        else:
            fixed = _float(value)
        if fixed is not value and fixed != value:
            _drop(mapped, f"params.{key}", value)
        mapped.params[key] = fixed
    for key in list(mapped.usage):
        value = mapped.usage[key]
        fixed = _int64(value)
        if fixed != value:
            _drop(mapped, f"usage.{key}", value)
        mapped.usage[key] = fixed
    if mapped.n_choices is not None and _int64(mapped.n_choices) != mapped.n_choices:
        _drop(mapped, "n_choices", mapped.n_choices)
        mapped.n_choices = None
    for name in _TEXT_FIELDS:
        value = getattr(mapped, name)
        if value is not None and not isinstance(value, str):
            setattr(mapped, name, _as_text(value))
            mapped.issues.append(f"{name} was a {type(value).__name__}, not text; kept as text")
    notes: dict[str, None] = {}
    if mapped.input_messages is not None:
        inputs = list(mapped.input_messages)
        results = derived_each("storable-input", inputs, _noted_message)
        mapped.input_messages = list(map(itemgetter(0), results))
        notes.update(dict.fromkeys(chain.from_iterable(map(itemgetter(1), results))))
    if mapped.output is not None:
        mapped.output = _message(mapped.output, "output", notes)
    mapped.alternates = [_message(m, "alternates", notes) for m in mapped.alternates]
    if mapped.tools_available is not None:
        mapped.tools_available = _tools(mapped.tools_available, notes)
    mapped.tool_args = _arguments(mapped.tool_args, "tool_args", notes)
    mapped.issues.extend(notes)
    return mapped


_MESSAGE_TEXT = ("role", "content", "tool_call_id", "name", "reasoning")
_TOOL_TEXT = ("type", "name", "description", "parameters")


def _noted_message(_position: int, message: Any) -> tuple[Message, dict[str, None]]:
    """:func:`_message` of a history message, with the notes it gave (computed once per
    message object in a trace's build: histories repeat their messages)."""
    own: dict[str, None] = {}
    return _message(message, "input_messages", own), own


def _message(message: Any, where: str, notes: dict[str, None]) -> Message:
    """A message whose fields the table can hold (text where text belongs)."""
    if not isinstance(message, Message):
        notes[f"{where}: a {type(message).__name__} where a message belongs; kept as text"] = None
        return Message(role="unknown", content=_as_text(message))
    changes: dict[str, Any] = {}
    for name in _MESSAGE_TEXT:
        value = getattr(message, name)
        if value is not None and not isinstance(value, str):
            changes[name] = _as_text(value)
            notes[f"{where}: message {name} was a {type(value).__name__}, not text"] = None
    calls = []
    for call in message.tool_calls:
        if not isinstance(call, ToolCall):
            notes[f"{where}: a {type(call).__name__} where a tool call belongs; dropped"] = None
            continue
        fixed = {}
        for name in ("id", "name"):
            value = getattr(call, name)
            if value is not None and not isinstance(value, str):
                fixed[name] = _as_text(value)
                notes[f"{where}: tool call {name} was a {type(value).__name__}, not text"] = None
        arguments = _arguments(call.arguments, f"{where}: tool call arguments", notes)
        if arguments is not call.arguments:
            fixed["arguments"] = arguments
        calls.append(replace(call, **fixed) if fixed else call)
    if len(calls) != len(message.tool_calls) or any(
        a is not b for a, b in zip(calls, message.tool_calls, strict=False)
    ):
        changes["tool_calls"] = tuple(calls)
    return replace(message, **changes) if changes else message


def _tools(tools: Any, notes: dict[str, None]) -> list[dict[str, Any]] | None:
    if not isinstance(tools, list):
        notes[f"tools_available was a {type(tools).__name__}, not a list; left out"] = None
        return None
    out = []
    for tool in tools:
        if not isinstance(tool, dict):
            notes[f"tools_available: a {type(tool).__name__} where a tool belongs; dropped"] = None
            continue
        fixed = {key: tool.get(key) for key in _TOOL_TEXT}
        for key, value in fixed.items():
            if value is not None and not isinstance(value, str):
                fixed[key] = _as_text(value)
                notes[f"tools_available: tool {key} was a {type(value).__name__}, not text"] = None
        out.append({**tool, **fixed})
    return out


def _arguments(value: Any, where: str, notes: dict[str, None]) -> Arguments:
    """Tool-call arguments the table can hold: ``None``, text, or an object that is not
    nested too deeply to be written as JSON."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict) and depth(value) <= MAX_DEPTH:
        return value
    notes[f"{where} was a {type(value).__name__} (or nested too deeply); kept as text"] = None
    return _as_text(value)


def _as_text(value: Any) -> str:
    """A value as text: JSON for what JSON can write, else its ``repr``."""
    try:
        return text_of(value) or ""
    except (TypeError, ValueError, RecursionError):
        return repr(value)[:100_000]


def _int64(value: Any) -> int | None:
    """An integer the table can hold: ints in int64, finite whole floats; else ``None``."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            return None
        value = int(value)
    if not isinstance(value, int) or not INT64[0] <= value <= INT64[1]:
        return None
    return value


def _float(value: Any) -> float | None:
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return float(value)
    except OverflowError:
        return None


def _stop_list(value: Any) -> list[str] | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    return None


def _drop(mapped: MappedSpan, name: str, value: Any) -> None:
    if value is None:
        return
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:59] + "…"
    mapped.issues.append(
        f"{name} {shown} does not fit the steps table; left out (raw value kept in attributes)"
    )
