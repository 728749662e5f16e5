"""JSON as it enters otelcar: decoded with a reason when it cannot be, and made storable.

``json.loads`` accepts two things the store cannot hold, and which would stop every later build
of it (the raw record is kept whatever happens, but its spans could never be derived):

* **unpaired UTF-16 surrogates**: ``"\\ud800"`` in JSON text (a string cut in the middle of
  an emoji by a JavaScript exporter), or the raw bytes of one (Python's JSON reader lets them
  through). A string holding one cannot be written as UTF-8, so Parquet refuses it. Each is
  replaced by U+FFFD (the replacement character) and counted, so the decoder can say so.
* **values nested deeper than the interpreter can walk** again later (``json.dumps`` of a
  span's attributes, a mapper reading them): :func:`check_depth` bounds a value's nesting.

:func:`loads` is for a whole record (raises :class:`FormatError`); :func:`loads_value` for JSON
inside an attribute, a cell or a field (raises ``ValueError``, like ``json.loads``).
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from otelcar.errors import FormatError

#: Deepest nesting of lists and objects kept in a value (an attribute, a field): far beyond
#: any real trace, and far below where walking the value again could exhaust the stack.
MAX_DEPTH = 100
REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")
# A surrogate escape in JSON text (\ud800-\udfff), a Python literal's \U0000d800, or the
# raw UTF-8-style bytes of one (ED A0..BF).
_MAYBE_TEXT = re.compile(r"\\u[dD][89a-fA-F]|\\U0000[dD][89a-fA-F]|[\ud800-\udfff]")
_MAYBE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")


class NestedTooDeep(FormatError):
    """JSON nested too deeply for the JSON reader: JSON all the same (the sniffer counts it as
    such; the record is then kept with this reason)."""


def surrogate_note(count: int) -> str:
    """The problem a decoder reports when it replaced ``count`` surrogates in a record."""
    return (
        f"{count} unpaired UTF-16 surrogate(s) (not valid Unicode; the store cannot hold "
        "them) replaced by U+FFFD; the raw record keeps the original"
    )


def loads(payload: bytes | str) -> tuple[Any, int]:
    """One record's JSON: ``(value, surrogates replaced)``.

    Raises :class:`FormatError` with the reason when it is not JSON or is nested too deeply
    for the JSON reader.
    """
    try:
        value = json.loads(payload)
    except (ValueError, UnicodeDecodeError) as exc:
        raise FormatError(f"invalid JSON: {exc}") from None
    except RecursionError:
        raise NestedTooDeep("JSON nested too deeply to decode") from None
    if _may_hold_surrogates(payload):
        return repair(value)
    return value, 0


def loads_value(text: str | bytes) -> Any:
    """JSON inside a value (an attribute, a cell): like ``json.loads``, raising
    ``ValueError`` for invalid or too deeply nested text, with surrogates replaced."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply to decode") from None
    return repair(value)[0] if _may_hold_surrogates(text) else value


def literal_value(text: str) -> Any:
    """A Python literal (``ast.literal_eval``), with surrogates replaced; ``ValueError`` or
    ``SyntaxError`` when it is not one (too deep included)."""
    try:
        value = ast.literal_eval(text)
    except (RecursionError, MemoryError):
        raise ValueError("literal nested too deeply to decode") from None
    return repair(value)[0] if _may_hold_surrogates(text) else value


def json_or_literal(text: str) -> Any:
    """``text`` as JSON, else as a Python literal (the ``repr`` form some producers write);
    ``ValueError`` when it is neither."""
    for parse in (loads_value, literal_value):
        try:
            return parse(text)
        except (ValueError, SyntaxError):
            continue
    raise ValueError("neither JSON nor a Python literal")


def _may_hold_surrogates(payload: bytes | str) -> bool:
    """Cheap pre-check: could decoding ``payload`` give a string with a surrogate?"""
    if isinstance(payload, str):  # substring tests first: far faster than the pattern
        if "\\u" in payload or "\\U0000" in payload:
            return _MAYBE_TEXT.search(payload) is not None
        return not payload.isascii() and _SURROGATE.search(payload) is not None
    if b"\\u" not in payload and b"\xed" not in payload:
        return False
    return _MAYBE_BYTES.search(payload) is not None


def repair(value: Any) -> tuple[Any, int]:
    """``value`` with every unpaired surrogate in its strings (keys too) replaced by U+FFFD,
    and how many were; lists and dicts are fixed in place (iteratively: any depth)."""
    count = 0

    def fix(text: str) -> str:
        nonlocal count
        if text.isascii():
            return text
        fixed, n = _SURROGATE.subn(REPLACEMENT, text)
        count += n
        return fixed

    if isinstance(value, str):
        return fix(value), count
    if isinstance(value, tuple):
        value = list(value)
    stack = [value] if isinstance(value, dict | list) else []
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if any(isinstance(k, str) and not k.isascii() for k in node):
                items = [(fix(k) if isinstance(k, str) else k, v) for k, v in node.items()]
                node.clear()
                node.update(items)
            keys: Any = list(node)
        else:
            keys = range(len(node))
        for key in keys:
            item = node[key]
            if isinstance(item, str):
                node[key] = fix(item)
            elif isinstance(item, tuple):
                node[key] = list(item)
                stack.append(node[key])
            elif isinstance(item, dict | list):
                stack.append(item)
    return value, count


def depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """How deeply lists and dicts nest in ``value`` (a scalar is 0), counted up to
    ``limit + 1`` (iteratively: any depth)."""
    deepest = 0
    stack = [(value, 1)] if isinstance(value, dict | list | tuple) else []
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        if level > limit:
            return level
        items = node.values() if isinstance(node, dict) else node
        stack.extend((item, level + 1) for item in items if isinstance(item, dict | list | tuple))
    return deepest


def check_depth(value: Any, what: str, limit: int = MAX_DEPTH) -> Any:
    """``value`` when it nests at most ``limit`` levels deep, else ``ValueError`` naming
    ``what``."""
    if depth(value, limit) > limit:
        raise ValueError(f"{what} is nested more than {limit} levels deep")
    return value
