"""Tool arguments and results out of the wrappers frameworks record them in.

A tool's result is the text the model read, but frameworks record it inside their own
containers: content-block lists (Strands ``[{"text": …}]``), LangChain ``ToolMessage``
dumps (``{"type": "tool", "data": {"content": …}}``), LlamaIndex ``ToolOutput``
(``{"blocks": […], "raw_output": …}``), a one-key ``{"result": …}`` (Google ADK), or a
JSON-encoded string (CrewAI's ``"\\"18 degrees\\""``). Arguments likewise arrive as a call
record (``{"args": [], "kwargs": {…}}``, smolagents and LlamaIndex). :func:`unwrap_result`
and :func:`unwrap_arguments` return the inner value when the wrapper is one of these, and
the value unchanged otherwise; the raw value always stays in the span's attributes.
"""

from __future__ import annotations

from typing import Any

from otelcar.conventions.blocks import read_blocks
from otelcar.conventions.memo import decode_json
from otelcar.messages import Arguments, text_of

RESULT_KEYS = ("result", "output", "content", "text")
CALL_RECORD_KEYS = frozenset({"args", "kwargs", "sanitize_inputs_outputs"})


def unwrap_result(text: str | None) -> str | None:
    """The result text inside a known wrapper, else ``text``."""
    if text is None or text[:1] not in '[{"':
        return text
    try:
        value = decode_json(text)
    except ValueError:
        return text
    inner = _inner(value, depth=0)
    return text if inner is None else inner


def _inner(value: Any, depth: int) -> str | None:
    if depth > 4:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        blocks = read_blocks(value, parse_json=False)
        if blocks.unknown or blocks.calls:
            return None
        texts = blocks.texts + [t for _, t in blocks.results if t is not None]
        return "\n".join(texts) if texts else None
    if not isinstance(value, dict):
        return None
    data = value.get("data")
    if value.get("type") == "tool" and isinstance(data, dict) and "content" in data:
        return _inner(data["content"], depth + 1) or text_of(data["content"])  # LangChain dump
    if value.get("type") == "tool" and "content" in value:
        return _inner(value["content"], depth + 1) or text_of(value["content"])
    if isinstance(value.get("blocks"), list) and "tool_name" in value:  # LlamaIndex ToolOutput
        return _inner(value["blocks"], depth + 1)
    if len(value) == 1:
        ((key, inner),) = value.items()
        if key in RESULT_KEYS:
            return _inner(inner, depth + 1) or text_of(inner)
    return None


def unwrap_arguments(arguments: Arguments) -> Arguments:
    """The keyword arguments of a call record, else ``arguments``."""
    if not isinstance(arguments, dict) or not isinstance(arguments.get("kwargs"), dict):
        return arguments
    if set(arguments) <= CALL_RECORD_KEYS and not arguments.get("args"):
        return arguments["kwargs"]
    return arguments
