"""One trace's content decoded once: a memo scoped to the build of one trace.

Chat spans carry the whole conversation so far, so a trace of ``n`` calls repeats its first
messages ``n`` times: decoding every history from scratch makes a build grow with the square
of the trace's length. Within :func:`trace_memo` (which :func:`otelcar.trajectory.build_trace`
opens around one trace) the mappers and the step builder share one :class:`TraceMemo`:

* :meth:`TraceMemo.loads_value` decodes a JSON attribute. Text seen before gives the value
  decoded then; a JSON array whose text extends an array decoded before (the text of its
  items, then ``,`` and more items) decodes only the new items and reuses the earlier ones.
* :meth:`TraceMemo.derived_each` computes a value from each object of a list once per object
  (identity) and position: a history item's normalized messages, a message made storable,
  a message's table row. A list that extends the last one of its kind reuses its results.

The contract: with or without a memo, every result is equal (the memo changes only the time).
Shared values are never modified by their readers: decoded containers are handed out as
fresh shallow copies, and the objects inside them are shared read-only. Outside a memo
(:func:`current` is ``None``) every reader decodes as before.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from operator import is_
from typing import Any, TypeVar

from otelcar.ingest.jsontext import loads_value

T = TypeVar("T")
S = TypeVar("S")

#: Arrays decoded last that a new array's text is tried against (most recent first).
RECENT_ARRAYS = 8

_CURRENT: ContextVar[TraceMemo | None] = ContextVar("otelcar_trace_memo", default=None)


class TraceMemo:
    """Decoded values and derived objects of one trace's build (see the module docstring)."""

    def __init__(self) -> None:
        self._texts: dict[str, Any] = {}
        self._arrays: list[tuple[str, list[Any]]] = []
        # (kind, position, id) → (the source, held so that its id stays unique; the result)
        self._derived: dict[tuple[Hashable, int, int], tuple[Any, Any]] = {}
        self._last: dict[Hashable, tuple[list[Any], list[Any]]] = {}

    def loads_value(self, text: str) -> Any:
        """``jsontext.loads_value(text)``, decoding each distinct array item once."""
        if text in self._texts:
            return _fresh(self._texts[text])
        value = self._extended_array(text)
        if value is None:
            value = loads_value(text)
        self._texts[text] = value
        if isinstance(value, list) and value:
            self._arrays.append((_body(text), value))
            del self._arrays[:-RECENT_ARRAYS]
        return _fresh(value)

    def derived_each(
        self,
        kind: Hashable,
        sources: Sequence[S],
        compute: Callable[[int, S], T],
    ) -> list[T]:
        """``[compute(i, s) for i, s in enumerate(sources)]``, computing once per
        (``kind``, position, ``source`` object) in this memo.

        The last list of each kind is kept: a list that starts with the very objects of the
        last one (a history one turn longer) reuses its results without a lookup per item.
        """
        out: list[T] = []
        last = self._last.get(kind)
        start = 0
        if last is not None and len(sources) >= len(last[0]) and all(map(is_, sources, last[0])):
            out.extend(last[1])
            start = len(last[0])
        held = self._derived
        for index in range(start, len(sources)):
            source = sources[index]
            key = (kind, index, id(source))
            entry = held.get(key)
            if entry is None or entry[0] is not source:
                entry = held[key] = (source, compute(index, source))
            out.append(entry[1])
        self._last[kind] = (list(sources), list(out))
        return out

    def _extended_array(self, text: str) -> list[Any] | None:
        """The value of ``text`` when it is an array decoded before plus more items."""
        for body, items in reversed(self._arrays):
            if len(text) <= len(body) or not text.startswith(body):
                continue
            rest = text[len(body) :].lstrip()
            if rest.startswith(","):
                try:
                    more = loads_value("[" + rest[1:])
                except ValueError:
                    return None  # decoded whole, so that the error names its true place
                if isinstance(more, list) and more:  # "[1,]" is no array: decoded whole
                    return [*items, *more]
            elif rest.rstrip() == "]":
                return list(items)
        return None


def _body(text: str) -> str:
    """An array's text less its closing bracket and the blanks around it."""
    return text.rstrip()[:-1].rstrip()


def _fresh(value: Any) -> Any:
    """A new top-level container over the same items (readers may reorder or extend it)."""
    if isinstance(value, list):
        return list(value)
    if isinstance(value, dict):
        return dict(value)
    return value


def current() -> TraceMemo | None:
    """The memo of the trace being built, if any."""
    return _CURRENT.get()


def decode_json(text: str) -> Any:
    """JSON inside an attribute (``jsontext.loads_value``), through the current memo if any."""
    memo = _CURRENT.get()
    return loads_value(text) if memo is None else memo.loads_value(text)


def derived_each(kind: Hashable, sources: Sequence[S], compute: Callable[[int, S], T]) -> list[T]:
    """``[compute(i, s) for i, s in enumerate(sources)]``, through the current memo if any
    (:meth:`TraceMemo.derived_each`). ``compute`` must be a pure function of the position
    and the object."""
    memo = _CURRENT.get()
    if memo is None:
        return [compute(index, source) for index, source in enumerate(sources)]
    return memo.derived_each(kind, sources, compute)


@contextmanager
def trace_memo() -> Iterator[TraceMemo]:
    """A fresh memo for the reads inside the ``with`` block (one trace's build)."""
    token = _CURRENT.set(TraceMemo())
    try:
        yield _CURRENT.get()  # type: ignore[misc]
    finally:
        _CURRENT.reset(token)
