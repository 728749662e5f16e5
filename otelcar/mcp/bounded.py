"""Keeping every MCP result under a byte cap: sizes, clipped text, pages of items, cursors.

The server never answers more than :data:`DEFAULT_MAX_RESULT_BYTES` (``otelcar mcp
--max-result-bytes``): a list is cut at an item boundary (:func:`fit_items`) and a text
longer than what fits is clipped with a marker that says how much was left out and where to
read the rest (:func:`clip_strings`). A page that stops early carries a cursor
(:func:`encode_cursor`): an opaque string the client passes back to continue where it
stopped. Nothing here reads the store; :mod:`.pages` and :mod:`.queries` use it.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from typing import Any

from otelcar.errors import OtelcarError

#: The default cap on one tool result (structured content and text summary together).
DEFAULT_MAX_RESULT_BYTES = 256 * 1024
#: The smallest cap the server takes (a step's fields must fit with room to spare).
MIN_MAX_RESULT_BYTES = 16 * 1024
#: What the JSON-RPC envelope and the text summary may add to the structured content.
ENVELOPE_BYTES = 2048
#: Clip limits tried in turn (characters per text) when one item does not fit as it is.
CLIP_LIMITS = (65536, 16384, 4096, 1024, 256, 64)


class CursorError(OtelcarError):
    """A cursor is not one this server made for this call (edited, or from another tool)."""


def size(value: Any) -> int:
    """Bytes of ``value`` as compact UTF-8 JSON (what the wire carries, give or take the
    envelope)."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def encode_cursor(tool: str, state: dict[str, Any]) -> str:
    """An opaque cursor for ``tool`` that holds ``state`` (small JSON)."""
    raw = json.dumps({"tool": tool, **state}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, *tools: str) -> dict[str, Any]:
    """The state of ``cursor``; a :class:`CursorError` unless one of ``tools`` made it."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        state = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise CursorError(
            "cursor: not a cursor this server made (pass next_cursor as is)"
        ) from None
    if not isinstance(state, dict) or state.get("tool") not in tools:
        raise CursorError(f"cursor: not a cursor of {' or '.join(tools)} (pass next_cursor as is)")
    return state


def _marker(total: int, kept: int, where: str | None) -> str:
    how = f"; read_text {where} reads it whole" if where else ""
    return f"… [clipped: {kept:,} of {total:,} chars{how}]"


def clip_text(text: str, limit: int, where: str | None = None) -> str:
    """``text`` itself when at most ``limit`` characters, else its first ``limit`` with a
    marker naming how long it is and (``where``) how to read it whole."""
    if len(text) <= limit:
        return text
    return text[:limit] + _marker(len(text), limit, where)


def clip_strings(
    value: Any,
    limit: int | None,
    where: Callable[[str], str | None] = lambda _path: None,
    path: str = "",
    counter: list[int] | None = None,
) -> Any:
    """``value`` with every string longer than ``limit`` characters clipped
    (:func:`clip_text`; ``None``: none clipped). ``where(path)`` names how to read the text at
    ``path`` (dotted: ``input_messages.3.content``) whole; ``counter[0]`` counts the clips.
    A dict or list nested in a text field (decoded tool arguments) is clipped inside."""
    if limit is None:
        return value
    if isinstance(value, str):
        if len(value) > limit:
            if counter is not None:
                counter[0] += 1
            return clip_text(value, limit, where(path))
        return value
    if isinstance(value, dict):
        return {
            k: clip_strings(v, limit, where, f"{path}.{k}" if path else str(k), counter)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [
            clip_strings(v, limit, where, f"{path}.{i}" if path else str(i), counter)
            for i, v in enumerate(value)
        ]
    return value


def clip_to_fit(
    value: Any,
    budget: int,
    where: Callable[[str], str | None] = lambda _path: None,
    counter: list[int] | None = None,
    limits: Sequence[int] = CLIP_LIMITS,
) -> Any:
    """``value`` as it is when it fits ``budget`` bytes, else clipped at the largest of
    ``limits`` that makes it fit (the smallest when none does)."""
    if size(value) <= budget:
        return value
    clipped, count = value, [0]
    for limit in limits:
        count = [0]
        clipped = clip_strings(value, limit, where, counter=count)
        if size(clipped) <= budget:
            break
    if counter is not None:
        counter[0] += count[0]
    return clipped


def fit_items(items: Sequence[Any], budget: int, *, at_least_one: bool = True) -> int:
    """How many of ``items``, from the first, fit in ``budget`` bytes as a JSON list (each
    item's size and a comma); at least one when ``at_least_one`` and there is one (the page
    must move on)."""
    used, count = 2, 0
    for item in items:
        used += size(item) + 1
        if used > budget and (count or not at_least_one):
            break
        count += 1
    return count


def text_chunk(text: str, offset: int, budget: int) -> str:
    """The longest piece of ``text`` from ``offset`` whose JSON form fits ``budget`` bytes
    (JSON escapes and UTF-8 can make a character take up to 6 bytes)."""
    low, high = 0, min(len(text) - offset, budget)
    while low < high:  # the longest length whose encoded size fits
        middle = (low + high + 1) // 2
        if size(text[offset : offset + middle]) <= budget:
            low = middle
        else:
            high = middle - 1
    return text[offset : offset + max(low, 1)]


def _lists(value: Any, path: str = "") -> list[tuple[str, list[Any]]]:
    """Every list in ``value`` with its dotted path, outermost first."""
    found: list[tuple[str, list[Any]]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _lists(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        found.append((path, value))
        for i, item in enumerate(value):
            found += _lists(item, f"{path}.{i}" if path else str(i))
    return found


def _replace(value: Any, path: str, new: Any) -> Any:
    """``value`` with the node at dotted ``path`` replaced by ``new`` (copies on the way)."""
    if not path:
        return new
    head, _, rest = path.partition(".")
    if isinstance(value, list):
        out = list(value)
        out[int(head)] = _replace(value[int(head)], rest, new)
        return out
    return {**value, head: _replace(value[head], rest, new)}


def cut_to_fit(
    document: dict[str, Any], budget: int, starts: dict[str, int] | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``document`` within ``budget`` bytes, for a result with no paging of its own (a run's
    result, a kept record, a diff): the lists at the paths of ``starts`` begin at those items
    (a continued page), then the largest list is cut at an item boundary, again until the
    document fits (a single item that cannot fit is clipped, :func:`clip_to_fit`).
    Returns the document and ``left_out``: per cut list its ``path``, the items ``shown``
    (``[from, to)``) and its ``total``."""
    left_out: list[dict[str, Any]] = []
    for path, start in (starts or {}).items():
        found = dict(_lists(document)).get(path)
        if found is not None:
            document = _replace(document, path, found[start:])
            left_out.append({"path": path, "shown": [start, len(found)], "total": len(found)})
    cut: set[str] = set()
    while (over := size(document) - budget) > 0:
        lists = [(p, v) for p, v in _lists(document) if len(v) > 1 and p not in cut]
        if not lists:
            return clip_to_fit(document, budget), left_out
        path, items = max(lists, key=lambda pv: size(pv[1]))
        keep = fit_items(items, max(size(items) - over, 0), at_least_one=True)
        keep = min(keep, len(items) - 1)
        offset = next((e["shown"][0] for e in left_out if e["path"] == path), 0)
        left_out = [e for e in left_out if e["path"] != path]
        total = offset + len(items)
        left_out.append({"path": path, "shown": [offset, offset + keep], "total": total})
        document = _replace(document, path, items[:keep])
        cut.add(path)
    return document, left_out
