"""The dialect-mapper interface: one span (and its log events) in, one mapped step out.

Each dialect (OTel GenAI, OpenLLMetry, OpenInference, Langfuse, …) is one module with one
:class:`DialectMapper`. A mapper never raises for bad content: it records an issue on the
:class:`MappedSpan` and leaves the attribute unconsumed, so the raw value stays visible in the
step's ``attributes``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from otelcar.ingest.frames import LogFrame, SpanFrame
from otelcar.messages import Arguments, Message

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
        except (TypeError, ValueError):
            return None

    def float(self, *keys: str) -> float | None:
        value = self.first(*keys)
        try:
            return None if value is None else float(value)
        except (TypeError, ValueError):
            return None

    def json(self, key: str, issues: list[str]) -> Any:
        """A structured attribute: JSON strings are decoded; an undecodable one is reported
        and left unconsumed (its raw value stays in the step's attributes)."""
        value = self._attributes.get(key)
        if value is None:
            return None
        if isinstance(value, str):
            try:
                decoded = json.loads(value)
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
