"""Pieces of a decision's context, and how to remove them (``otelcar why``, ``otelcar fix``).

A context is split hierarchically:

- **top level**: every message with text — the system prompt, each user turn, each tool
  result, each assistant text (tool calls themselves are not pieces: removing them would
  break the call/result pairing);
- **below a message or JSON item**: if the text is a JSON object or array, its items
  (single-key wrappers such as ``{"results": [...]}`` and one-element lists are collapsed;
  string values longer than 40 characters are split further as text); otherwise paragraphs
  (blank-line separated), else lines (list items), else sentences (split after ``.!?``
  before a capital, digit, quote, bracket or tag; abbreviations, initials and lone list
  enumerators are not boundaries). HTML comments, fenced code blocks and HTML/XML elements
  are atomic at every level: never split inside, never fused with the prose around them
  (:func:`atomic_spans`). Pieces under 2 characters are ignored.

A set of pieces is removed through the replay plan's context edits
(:mod:`otelcar.replay.plan`), never by a second implementation of context editing:

- a whole message → :class:`~otelcar.replay.plan.ReplaceMessage` with a marker (its role,
  tool calls and tool-call id stay, so call/result pairing stays valid);
- a JSON item → :class:`~otelcar.replay.plan.RemoveJsonItem` (deleted, the document
  re-serialized), or :class:`~otelcar.replay.plan.ReplaceJsonItem` with the fill text;
- text inside a JSON string → one :class:`~otelcar.replay.plan.ReplaceJsonItem` per string;
- text of a plain message → one :class:`~otelcar.replay.plan.ReplaceText` per message, over
  the shortest window that occurs exactly once in the message (so a repeated sentence is cut
  where it was found, not at its first occurrence).

``fill``: ``cut`` (spans cut out with one adjoining separator, items deleted, whole messages
replaced by the marker), ``marker`` (everything replaced by ``[content removed]``),
``neutral`` (replaced by a neutral sentence), ``empty`` or ``text:<your text>``.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, get_args

from otelcar.attribution.context.documents import Level, PieceDocument
from otelcar.errors import OtelcarError
from otelcar.messages import Message
from otelcar.replay.plan import (
    Edit,
    RemoveJsonItem,
    ReplaceJsonItem,
    ReplaceMessage,
    ReplaceText,
)

MARKER = "[content removed]"
NEUTRAL = "This part contains no further information."
FILLS = ("cut", "marker", "neutral", "empty")
LEVELS: tuple[str, ...] = get_args(Level)
MIN_CHARS = 2
JSON_TEXT_MIN = 40
ABBREVIATIONS = frozenset(
    ("e.g", "i.e", "etc", "vs", "mr", "mrs", "ms", "dr", "no", "st", "inc", "ltd", "jr", "sr")
)
Path = tuple[str | int, ...]


class PieceError(OtelcarError):
    """A piece cannot be located or removed in the context it came from."""


@dataclass(frozen=True, slots=True)
class Piece:
    """One removable part of a context.

    ``message``: index in the context; ``path``: JSON path inside the message (empty for the
    message itself); ``span``: character span inside the text at ``path`` (``None``: the
    whole message or item); ``cut``: the region removed when cutting (the span plus one
    adjoining separator).
    """

    message: int
    path: Path = ()
    span: tuple[int, int] | None = None
    cut: tuple[int, int] | None = None
    level: str = "message"
    text: str = ""
    label: str = ""
    role: str = ""
    source: str | None = None  # the tool whose result holds the piece
    origin: str = ""  # the label of the message the piece is part of

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.message, self.path, self.span)

    @property
    def whole(self) -> bool:
        return not self.path and self.span is None

    def contains(self, other: Piece) -> bool:
        """Whether ``other`` lies inside this piece (or is it)."""
        if other.message != self.message:
            return False
        if self.whole:
            return True
        if other.path[: len(self.path)] != self.path:
            return False
        if self.span is None:
            return True
        if other.path != self.path or other.span is None:
            return False
        return self.span[0] <= other.span[0] and other.span[1] <= self.span[1]

    def to_dict(self) -> PieceDocument:
        return {
            "label": self.label,
            "level": self.level,
            "message": self.message,
            "role": self.role,
            "source": self.source,
            "path": list(self.path),
            "span": list(self.span) if self.span else None,
            "text": self.text,
        }


# -- splitting ---------------------------------------------------------------------------------
def top_level(context: Sequence[Message]) -> list[Piece]:
    """Every message of ``context`` with text, as a piece."""
    tools: dict[str, str] = {}
    for message in context:
        for call in message.tool_calls:
            if call.id and call.name:
                tools[call.id] = call.name
    pieces = []
    for index, message in enumerate(context):
        text = message.content or ""
        if len(text.strip()) < MIN_CHARS:
            continue
        source = tools.get(message.tool_call_id or "") if message.role == "tool" else None
        if message.role in ("system", "developer"):
            what = "system prompt"
        elif message.role == "tool":
            what = f"{source or 'tool'} result"
        else:
            what = message.role
        pieces.append(
            Piece(
                index,
                level="message",
                text=text,
                label=f"#{index} {what}",
                origin=f"#{index} {what}",
                role=message.role,
                source=source,
            )
        )
    return pieces


def children(piece: Piece, context: Sequence[Message]) -> list[Piece]:
    """The next level of ``piece`` (empty at a sentence or a short JSON value)."""
    content = context[piece.message].content or ""
    if piece.span is not None:
        base = _string_at(content, piece.path)
        return _text_children(piece, base, piece.span[0], base[piece.span[0] : piece.span[1]])
    if not piece.path:
        document = parse_json(content)
        if document is not None:
            return _json_children(piece, document, ())
        return _text_children(piece, content, 0, content)
    value = value_at(parse_json(content), piece.path)
    if isinstance(value, dict | list):
        return _json_children(piece, value, piece.path)
    if isinstance(value, str) and len(value) > JSON_TEXT_MIN:
        return _text_children(piece, value, 0, value)
    return []


def parse_json(text: str) -> Any:
    """The JSON object or array ``text`` holds, else ``None``."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{":
        return None
    try:
        document = json.loads(stripped)
    except ValueError:
        return None
    return document if isinstance(document, dict | list) else None


def value_at(document: Any, path: Path) -> Any:
    node = document
    try:
        for key in path:
            node = node[key]
    except (KeyError, IndexError, TypeError):
        raise PieceError(f"JSON path {list(path)} not found") from None
    return node


def canonical_json(text: str) -> bool:
    """Whether a JSON edit leaves the rest of ``text`` byte-identical (the edits re-serialize
    with ``json.dumps(..., ensure_ascii=False)``)."""
    document = parse_json(text)
    return document is not None and json.dumps(document, ensure_ascii=False) == text


def _string_at(content: str, path: Path) -> str:
    if not path:
        return content
    value = value_at(parse_json(content), path)
    if not isinstance(value, str):
        raise PieceError(f"JSON path {list(path)} is not a string")
    return value


def _path_label(path: Path) -> str:
    return "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in path)


def _json_children(parent: Piece, value: Any, path: Path) -> list[Piece]:
    node = value
    while True:  # collapse single-key wrappers and one-element lists
        if isinstance(node, dict) and len(node) == 1:
            ((key, inner),) = node.items()
            if isinstance(inner, dict | list) and inner:
                node, path = inner, (*path, key)
                continue
        if isinstance(node, list) and len(node) == 1 and isinstance(node[0], dict | list):
            node, path = node[0], (*path, 0)
            continue
        break
    items = node.items() if isinstance(node, dict) else enumerate(node)
    out = []
    for key, item in items:
        text = item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)
        if len(text.strip()) < MIN_CHARS:
            continue
        out.append(
            replace(
                parent,
                path=(*path, key),
                span=None,
                cut=None,
                level="item",
                text=text,
                label=f"{parent.origin}{_path_label((*path, key))}",
            )
        )
    return out


def _text_children(parent: Piece, base: str, offset: int, segment: str) -> list[Piece]:
    start_level = LEVELS.index(parent.level)
    for level, split in (("paragraph", paragraphs), ("line", lines), ("sentence", sentences)):
        if LEVELS.index(level) <= start_level:
            continue
        units = split(segment)
        if len(units) < 2:
            continue
        out = []
        for number, (s, e, cs, ce) in enumerate(units, 1):
            text = segment[s:e]
            if len(text.strip()) < MIN_CHARS:
                continue
            out.append(
                replace(
                    parent,
                    span=(offset + s, offset + e),
                    cut=(offset + cs, offset + ce),
                    level=level,
                    text=text,
                    label=f"{parent.label} {level} {number}",
                )
            )
        if len(out) >= 2:
            return out
    return []


Unit = tuple[int, int, int, int]  # span start, end, cut start, end


def _units(text: str, bounds: list[tuple[int, int]]) -> list[Unit]:
    """Spans stripped of surrounding whitespace, each with its cut region: up to the next
    unit's start (the last unit: from the previous unit's end)."""
    spans = []
    for s, e in bounds:
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            spans.append((s, e))
    out = []
    for i, (s, e) in enumerate(spans):
        if i + 1 < len(spans):
            out.append((s, e, s, spans[i + 1][0]))
        elif i > 0:
            out.append((s, e, spans[i - 1][1], e))
        else:
            out.append((s, e, s, e))
    return out


#: Spans a reader keeps whole and apart from the prose around them: HTML comments (the
#: classic injection form), fenced code blocks, and HTML/XML elements with their closing tag
#: (inline formatting — ``<b>``, ``<em>``, ``<code>``, ``<a>`` … — stays part of its sentence).
_ATOMIC = re.compile(
    r"<!--.*?-->"
    r"|```.*?```"
    r"|~~~.*?~~~"
    r"|<(?P<tag>(?!(?:a|b|i|u|s|em|strong|code|span|sub|sup|small|mark|kbd|q|abbr)\b)"
    r"[A-Za-z][\w:.-]*)(?:\s[^<>]*)?>.*?</(?P=tag)\s*>",
    re.DOTALL,
)
#: A list enumerator standing alone before a sentence ("1.", "b)", "iv."): part of it.
_ENUMERATOR = re.compile(r"^\s*(?:\d{1,3}|[a-z]|[ivxlc]{1,5})[.)]?\s*$", re.IGNORECASE)


def atomic_spans(text: str) -> list[tuple[int, int]]:
    """Where ``text`` holds HTML comments, fenced code blocks and HTML/XML elements: units
    that are never split inside and never fused with their neighbours."""
    return [match.span() for match in _ATOMIC.finditer(text)]


def _outside(spans: list[tuple[int, int]], start: int, end: int) -> bool:
    return not any(s < end and start < e for s, e in spans)


def _split_at(text: str, pattern: str) -> list[Unit]:
    """Units between the matches of ``pattern`` that lie outside every atomic span."""
    atomic = atomic_spans(text)
    bounds, start = [], 0
    for match in re.finditer(pattern, text):
        if _outside(atomic, match.start(), match.end()):
            bounds.append((start, match.start()))
            start = match.end()
    bounds.append((start, len(text)))
    return _units(text, bounds)


def paragraphs(text: str) -> list[Unit]:
    """Blank-line separated blocks (a code block or comment with blank lines stays whole)."""
    return _split_at(text, r"\n[ \t]*\n\s*")


def lines(text: str) -> list[Unit]:
    """Lines (list items among them); a code block, comment or element stays whole."""
    return _split_at(text, r"\n")


_SENTENCE_END = re.compile(r"([.!?]+[\"'”’)\]]*)(\s+)(?=[\"'“‘(\[<`]?[A-Z0-9<`]|[a-z][.)]\s)")


def sentences(text: str) -> list[Unit]:
    """Sentences, and the atomic spans (:func:`atomic_spans`) as units of their own.

    In the prose between atomic spans, a boundary follows ``.!?`` (and closing quotes or
    brackets) and whitespace, before a capital, digit, quote, bracket, tag, backtick or a
    letter enumerator (``b)``); not
    after a known abbreviation, an initial (one capital letter: "J. Doe"), or a list
    enumerator standing alone ("1. Check the order." is one sentence).
    """
    bounds: list[tuple[int, int]] = []
    position = 0
    for start, end in [*atomic_spans(text), (len(text), len(text))]:
        bounds += _prose_sentences(text, position, start)
        if end > start:
            bounds.append((start, end))
        position = end
    return _units(text, [b for b in bounds if b[1] > b[0]])


def _prose_sentences(text: str, begin: int, finish: int) -> list[tuple[int, int]]:
    bounds, start = [], begin
    for match in _SENTENCE_END.finditer(text, begin, finish):
        before = text[start : match.start(1)]
        word = re.search(r"([A-Za-z.]+)$", before)
        token = (word.group(1) if word else "").rstrip(".")
        if match.group(1).startswith(".") and (
            token.lower() in ABBREVIATIONS or (len(token) == 1 and token.isupper())
        ):
            continue
        if _ENUMERATOR.match(before):
            continue
        bounds.append((start, match.end(1)))
        start = match.end(2)
    bounds.append((start, finish))
    return bounds


# -- removal -----------------------------------------------------------------------------------
def fill_text(fill: str) -> str | None:
    """The text a removed piece is replaced by (``None``: cut out)."""
    if fill == "cut":
        return None
    if fill == "marker":
        return MARKER
    if fill == "neutral":
        return NEUTRAL
    if fill == "empty":
        return ""
    if fill.startswith("text:"):
        return fill[5:]
    raise PieceError(f"unknown fill {fill!r}; use cut, marker, neutral, empty or text:<text>")


def other_fill(fill: str) -> str:
    """The fill a confirmed cause is rechecked with (does the replacement itself matter?)."""
    return {"cut": "neutral", "marker": "empty", "neutral": "cut", "empty": "marker"}.get(
        fill, "cut"
    )


def outermost(pieces: Iterable[Piece]) -> list[Piece]:
    """The pieces not inside another piece of the set (duplicates dropped)."""
    unique = list({p.key: p for p in pieces}.values())
    return [p for p in unique if not any(q is not p and q.contains(p) for q in unique)]


def merged_regions(regions: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """``regions`` sorted, with every two that overlap merged into one (their union)."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(regions):
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _cut(text: str, pieces: Sequence[Piece], fill: str) -> str:
    """``text`` with ``pieces`` cut out (their cut regions) or replaced by the fill (their
    spans). Regions that overlap — the last unit's cut starts at the previous unit's end, and
    a line's cut can share a separator with a sentence of the next line — are merged first:
    removing them one by one shifted the text under the second, which then deleted
    characters outside both."""
    replacement = fill_text(fill)
    regions = []
    for piece in pieces:
        assert piece.span is not None and piece.cut is not None
        regions.append(piece.cut if replacement is None else piece.span)
    for start, end in reversed(merged_regions(regions)):
        text = text[:start] + (replacement or "") + text[end:]
    return text


def _path_key(path: Path) -> tuple[tuple[int, Any], ...]:
    return tuple((0, k) if isinstance(k, int) else (1, k) for k in path)


def _unique_window(content: str, start: int, end: int) -> tuple[int, int]:
    """The shortest widening of ``content[start:end]`` that occurs exactly once."""

    def unique(a: int, b: int) -> bool:
        window = content[a:b]
        return content.find(window) == a and content.find(window, a + 1) == -1

    while not unique(start, end) and (start > 0 or end < len(content)):
        start, end = max(0, start - 1), min(len(content), end + 1)
    return start, end


def edits_for(pieces: Iterable[Piece], context: Sequence[Message], fill: str = "cut") -> list[Edit]:
    """Context edits that remove ``pieces`` (see the module docstring for the rules)."""
    replacement = fill_text(fill)
    whole_fill = MARKER if replacement is None else replacement
    by_message: dict[int, list[Piece]] = {}
    for piece in outermost(pieces):
        by_message.setdefault(piece.message, []).append(piece)
    edits: list[Edit] = []
    for index in sorted(by_message):
        group = by_message[index]
        message = context[index]
        content = message.content or ""
        if any(p.whole for p in group):
            edits.append(ReplaceMessage(index, replace(message, content=whole_fill)))
            continue
        text_pieces = [p for p in group if not p.path]
        if text_pieces:
            new = _cut(content, text_pieces, fill)
            if not new.strip():
                edits.append(ReplaceMessage(index, replace(message, content=whole_fill)))
                continue
            low = min(p.cut[0] if replacement is None else p.span[0] for p in text_pieces)  # type: ignore[index]
            high = max(p.cut[1] if replacement is None else p.span[1] for p in text_pieces)  # type: ignore[index]
            low, high = _unique_window(content, low, high)
            shifted = [
                replace(
                    p,
                    span=(p.span[0] - low, p.span[1] - low),  # type: ignore[index]
                    cut=(p.cut[0] - low, p.cut[1] - low),  # type: ignore[index]
                )
                for p in text_pieces
            ]
            edits.append(
                ReplaceText(index, content[low:high], _cut(content[low:high], shifted, fill))
            )
        json_pieces = [p for p in group if p.path]
        if not json_pieces:
            continue
        document = parse_json(content)
        strings: dict[Path, list[Piece]] = {}
        for piece in json_pieces:
            if piece.span is not None:
                strings.setdefault(piece.path, []).append(piece)
        for path, members in strings.items():
            value = _cut(value_at(document, path), members, fill)
            edits.append(ReplaceJsonItem(index, path, value if value.strip() else whole_fill))
        items = sorted(
            (p for p in json_pieces if p.span is None),
            key=lambda p: _path_key(p.path),
            reverse=True,
        )
        for piece in items:
            if replacement is None:
                edits.append(RemoveJsonItem(index, piece.path))
            else:
                edits.append(ReplaceJsonItem(index, piece.path, replacement))
    return edits


def apply_edits(context: Sequence[Message], edits: Iterable[Edit]) -> list[Message]:
    """``context`` with ``edits`` applied in order (each edit's own ``apply``)."""
    messages = list(context)
    for edit in edits:
        messages = edit.apply(messages)
    return messages


# -- suspicion ---------------------------------------------------------------------------------
_STOP = (
    "a an and are as at be been but by can could do does for from had has have he her his i if "
    "in into is it its me my no not of on or our she so than that the their them then there "
    "these they this to was we were what when which who will with would you your"
)
STOPWORDS = frozenset(_STOP.split())


def tokens(text: str) -> list[str]:
    return [t for t in re.findall(r"[a-z0-9]+", text.lower()) if t not in STOPWORDS]


def action_text(action: Message | None) -> str:
    """The decision as text: its reply and every call as ``name {arguments}``."""
    if action is None:
        return ""
    parts = [action.content or ""]
    for call in action.tool_calls:
        arguments = (
            call.arguments
            if isinstance(call.arguments, str)
            else json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)
        )
        parts.append(f"{call.name} {arguments}")
    return " ".join(p for p in parts if p)


def overlap(text: str, decision: str) -> float:
    """Wording overlap of ``text`` with the decision: (3 × shared bigrams + shared words) /
    (√|decision words| + 1), stop words removed. A ranking heuristic only (zero calls)."""
    target = tokens(decision)
    words = tokens(text)
    if not target or not words:
        return 0.0
    unigrams = set(words) & set(target)
    bigrams = set(itertools.pairwise(words)) & set(itertools.pairwise(target))
    return (3 * len(bigrams) + len(unigrams)) / (math.sqrt(len(set(target))) + 1)


def rank(pieces: Sequence[Piece], decision: str) -> list[Piece]:
    """Most suspicious first: wording overlap with the decision, then recency."""
    return sorted(
        pieces,
        key=lambda p: (-overlap(p.text, decision), -p.message, -(p.span or (0, 0))[0]),
    )
