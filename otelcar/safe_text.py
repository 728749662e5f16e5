"""Untrusted text made safe to show: nothing from a trace can act on a terminal or hide.

Trace content is written by whoever produced the trace (a tool result can hold anything a
web page held). Shown raw, an escape sequence retitles the window, clears the screen or
writes the clipboard (OSC 52), and bidirectional overrides or zero-width characters make a
tool named ``lookup_order‮gpj.exe‬`` read "lookup_orderexe.jpg". :func:`visible` turns every
such character into a visible escape (``\\x1b``, ``\\u202e``); the terminal views and the
HTML report show trace text only through it (the HTML marks the escapes as well).
"""

from __future__ import annotations

import re

#: C0 controls but tab and newline, DEL and C1 controls (ESC, CSI, OSC, …), and the
#: invisible formatting characters: zero-width space/joiners, LRM/RLM, bidi embeddings,
#: overrides and isolates, the Arabic letter mark, word joiner and invisible operators, BOM,
#: line and paragraph separators.
INVISIBLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]"
)


def escape_char(char: str) -> str:
    """One character as its visible escape: ``\\x1b`` below U+0100, else ``\\u202e``."""
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` with every control, escape, bidi and zero-width character as a visible
    escape; tabs and newlines are kept."""
    return INVISIBLE.sub(lambda match: escape_char(match.group()), text)
