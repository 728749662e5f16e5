"""Values read from the store, kept while the store (and the files they came from) are
unchanged: what the front ends answer again and again (issue 39).

The console's traces list reads the whole trace index, the listed traces' steps (for tokens
and cost) and ``otelcar.toml`` on every request, and the MCP server's ``list_traces`` checks
its page against the tool's schema: about 10 ms of work each, the same every time until a
trace arrives, and several times as long while a long trace's page is built on another
thread of the same interpreter. :class:`StampedCache` keeps a few computed values by a
*stamp* of what they were computed from:

- :func:`store_stamp`: the local store's ``derived/state.json`` (its modification time, size
  and inode), which every build of the derived tables rewrites last, so a trace that arrives
  (``otelcar collect``, ``otelcar import``) makes a new stamp. A source that is not the local
  store (a remote ``--source``) has no stamp: nothing is kept, every request reads it.
- :func:`file_stamp`: a file such as ``otelcar.toml`` (absent is a stamp too).

A value computed while the store changed is kept under the stamp read before it: the next
request sees the new stamp and computes again, so nothing stale outlives one request.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any, TypeVar

from otelcar.store.store import Store

T = TypeVar("T")

#: Values kept by default (the last pages of a list asked for).
SIZE = 16

Stamp = tuple[Any, ...]


def file_stamp(path: Path) -> Stamp:
    """``path``'s modification time, size and inode; ``("absent",)`` when it does not
    exist."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return ("absent",)
    return (stat.st_mtime_ns, stat.st_size, stat.st_ino)


def store_stamp(source: Any) -> Stamp | None:
    """The stamp of the traces ``source`` holds: the local store's ``derived/state.json``
    (rewritten by every build, module docstring) with its root; ``None`` for any other source
    (nothing of it is kept)."""
    if not isinstance(source, Store):
        return None
    return (str(source.root), file_stamp(source.root / "derived" / "state.json"))


class StampedCache:
    """``get(key, compute)``: ``compute()``'s value for ``key``, kept while ``key`` (which
    holds the stamps of what the value was computed from) is asked again; the least recently
    used of more than ``size`` values is dropped. A ``None`` key (a source with no stamp)
    always computes. Thread-safe; two requests that miss at once both compute."""

    def __init__(self, size: int = SIZE) -> None:
        self.size = size
        self._kept: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable | None, compute: Callable[[], T]) -> T:
        if key is None:
            return compute()
        with self._lock:
            if key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key]
        value = compute()
        self.put(key, value)
        return value

    def known(self, key: Hashable) -> tuple[bool, Any]:
        """``(True, value)`` when a value is kept for ``key`` (now the most recently used),
        else ``(False, None)``; nothing is computed."""
        with self._lock:
            if key not in self._kept:
                return False, None
            self._kept.move_to_end(key)
            return True, self._kept[key]

    def put(self, key: Hashable, value: Any) -> None:
        """Keep ``value`` for ``key`` (computed by the caller, as several at once)."""
        with self._lock:
            self._kept[key] = value
            self._kept.move_to_end(key)
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)

    def __len__(self) -> int:
        return len(self._kept)
