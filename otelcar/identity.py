"""Values derived from objects, remembered by the objects' identity.

Replay and judging derive the same things from the same objects again and again: a recorded
message's digest in every rollout's cache keys, a held action's table form in every
rollout's events, a recorded call's canonical arguments in every cassette look-up. The
objects are immutable by contract (messages and runs are not changed after they are built)
but not hashable (arguments are dicts), so they are remembered by ``id``. Each entry holds
its object, so an ``id`` is never reused while it is remembered.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class IdentityMemo(Generic[K, V]):
    """``compute(obj)`` remembered for up to ``size`` objects by identity (all forgotten at
    once when full: amortized O(1), and no order to keep). Safe to share between threads:
    a race computes a value twice, never returns another object's."""

    __slots__ = ("_entries", "_lock", "_size")

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("an IdentityMemo needs a size of at least 1")
        self._size = size
        self._entries: dict[int, tuple[K, V]] = {}
        self._lock = threading.Lock()

    def get(self, obj: K, compute: Callable[[K], V]) -> V:
        """The value derived from ``obj`` (computed now if it is not remembered)."""
        entry = self._entries.get(id(obj))
        if entry is not None and entry[0] is obj:
            return entry[1]
        value = compute(obj)
        with self._lock:
            if len(self._entries) >= self._size:
                self._entries.clear()
            self._entries[id(obj)] = (obj, value)
        return value

    def __len__(self) -> int:
        return len(self._entries)
