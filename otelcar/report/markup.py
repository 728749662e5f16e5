"""A tiny HTML builder that escapes by default.

Every string handed to :func:`el` as a child or attribute value is escaped with
:func:`html.escape` unless it is :class:`Safe` (markup this module or its callers built).
Values from traces are plain strings, so they can only ever appear as text: a
``</script>`` or ``<img onerror=…>`` in a tool result renders as those characters.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Iterable
from typing import Any

from otelcar.safe_text import INVISIBLE, escape_char, visible


class Safe(str):
    """Markup that is already safe to insert (built by :func:`el`, :func:`esc`, :func:`join`)."""

    __slots__ = ()


def esc(value: Any) -> Safe:
    """``value`` as HTML text (escaped; ``None`` → empty). Control, escape, bidi and
    zero-width characters become visible escapes marked ``<span class="ctl">``
    (:mod:`otelcar.safe_text`), so hidden text cannot hide or reorder what a page shows."""
    if isinstance(value, Safe):
        return value
    if value is None:
        return Safe("")
    return Safe(INVISIBLE.sub(_marked, html.escape(str(value), quote=True)))


def attr(value: Any) -> str:
    """``value`` as an attribute value (escaped; invisible characters as visible escapes)."""
    if isinstance(value, Safe):
        return value
    return html.escape(visible(str(value)), quote=True)


def _marked(match: re.Match[str]) -> str:
    char = match.group()
    return f'<span class="ctl" title="U+{ord(char):04X}">{escape_char(char)}</span>'


def join(items: Iterable[Any], sep: str = "") -> Safe:
    """Children joined; plain strings are escaped."""
    return Safe(esc(sep).join(esc(item) for item in items))


def _attr_name(name: str) -> str:
    name = name.rstrip("_")
    return name.replace("_", "-")


def el(tag: str, *children: Any, **attrs: Any) -> Safe:
    """``<tag attrs>children</tag>``; ``class_="x"`` → ``class="x"``, ``data_step=1`` →
    ``data-step="1"``; ``True`` → a bare attribute, ``None``/``False`` → left out."""
    parts = [tag]
    for name, value in attrs.items():
        if value is None or value is False:
            continue
        if value is True:
            parts.append(_attr_name(name))
        else:
            parts.append(f'{_attr_name(name)}="{attr(value)}"')
    head = "<" + " ".join(parts) + ">"
    if tag in ("br", "hr", "meta", "img", "input", "link"):
        return Safe(head)
    return Safe(head + join(children) + f"</{tag}>")


def _finite(value: Any) -> Any:
    """NaN and infinities (not JSON) → ``None``, recursively."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def script_json(value: Any) -> Safe:
    """JSON that is safe inside ``<script type="application/json">``: ``<``, ``>`` and ``&``
    become ``\\u003c`` …, so neither ``</script>`` nor ``<!--`` can end or change the script
    element, and U+2028/U+2029 are escaped too. ``JSON.parse`` reads it back unchanged."""
    text = json.dumps(_finite(value), ensure_ascii=False, default=str, allow_nan=False)
    for char, code in (
        ("&", "\\u0026"),
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, code)
    return Safe(text)


def highlight(text: str, needles: Iterable[str | tuple[str, str]], *, css: str = "cause") -> Safe:
    """``text`` escaped, with every occurrence of each needle wrapped in ``<mark>``.

    A needle is a string (marked with class ``css``) or ``(string, class)``; where marks
    overlap, the earlier needle's class wins.
    """
    spans: list[tuple[int, int, int, str]] = []  # start, end, priority, class
    for rank, needle in enumerate(needles):
        word, kind = (needle, css) if isinstance(needle, str) else needle
        if not word:
            continue
        start = text.find(word)
        while start >= 0:
            spans.append((start, start + len(word), rank, kind))
            start = text.find(word, start + len(word))
    if not spans:
        return esc(text)
    spans.sort()
    merged: list[list[Any]] = []
    for start, end, rank, kind in spans:
        if merged and start < merged[-1][1]:
            last = merged[-1]
            last[1] = max(last[1], end)
            if rank < last[2]:
                last[2], last[3] = rank, kind
        else:
            merged.append([start, end, rank, kind])
    out: list[Safe] = []
    at = 0
    for start, end, _, kind in merged:
        out.append(esc(text[at:start]))
        out.append(el("mark", text[start:end], class_=kind))
        at = end
    out.append(esc(text[at:]))
    return join(out)


def clip_label(text: str | None, limit: int) -> str:
    """A label on one line, cut to ``limit`` characters with an ellipsis (still unescaped)."""
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
