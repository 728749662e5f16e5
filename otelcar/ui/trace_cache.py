"""The traces the console read last, kept while they are unchanged.

Paging through a long trace reads the same trace for every page: its steps table (about half
of a page's CPU on a 500-step trace). :class:`TraceCache` keeps the last few loaded traces by
``(trace id, build id)``: the build id is the store's stamp of the derivation that last wrote
the trace (in its index row), so a trace that received new spans is read again. A source
without build ids (a remote one) is always read.
"""

from __future__ import annotations

from typing import Any

from otelcar.sources import TraceFilter
from otelcar.store.stamp import StampedCache

#: Traces kept.
SIZE = 4


class TraceCache:
    """``load(source, trace_id)``: the source's ``LoadedTrace``, from the cache when the
    trace's build id is the one it was read at (module docstring)."""

    def __init__(self, size: int = SIZE) -> None:
        self._kept = StampedCache(size)

    def load(self, source: Any, trace_id: str) -> Any:
        full = source.resolve(trace_id)
        row = source.traces(TraceFilter(trace_ids=(full,)))
        build = row["build_id"][0] if row.height and "build_id" in row.columns else None
        if isinstance(build, float) and build != build:  # NaN: no build id either
            build = None
        return self._kept.get(None if build is None else (full, build), lambda: source.load(full))

    def __len__(self) -> int:
        return len(self._kept)
