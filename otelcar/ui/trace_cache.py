"""The traces the console read last, and the listed traces' totals, kept while they are
unchanged.

Paging through a long trace reads the same trace for every page: its steps table (about half
of a page's CPU on a 500-step trace). :class:`TraceCache` keeps the last few loaded traces by
``(trace id, build id)``: the build id is the store's stamp of the derivation that last wrote
the trace (in its index row), so a trace that received new spans is read again. A source
without build ids (a remote one) is always read.

The list shows each listed trace's tokens, cost and session, read from its steps
(:func:`otelcar.ui.totals.page_totals`): most of the list's work when it is drawn anew after a
trace arrived, though only the new trace changed. :class:`TotalsCache` keeps them by
``(trace id, build id, prices)``, and reads only the listed traces it does not hold.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from otelcar.sources import TraceFilter
from otelcar.store.stamp import StampedCache
from otelcar.ui.totals import TraceTotals, page_totals

#: Traces kept.
SIZE = 4
#: Traces' totals kept (a few pages of the largest list page, 200 rows).
TOTALS = 1000


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


class TotalsCache:
    """``totals(source, rows, prices)``: :func:`~otelcar.ui.totals.page_totals` of the
    listed ``rows`` (trace index rows), each trace's kept by ``(trace id, build id,
    prices)`` (module docstring); only the rows it does not hold are read, in one scan. Rows
    without a build id (a remote source) are always read; ``None`` when ``source`` cannot
    scan steps, as ``page_totals``."""

    def __init__(self, size: int = TOTALS) -> None:
        self._kept = StampedCache(size)

    def totals(
        self,
        source: Any,
        rows: list[dict[str, Any]],
        prices: Mapping[str, tuple[float, float]],
    ) -> dict[str, TraceTotals] | None:
        priced = tuple(sorted(prices.items()))
        out: dict[str, TraceTotals] = {}
        keys: dict[str, tuple[Any, ...] | None] = {}
        for row in rows:
            build = row.get("build_id")
            key = None if build is None else (row["trace_id"], build, priced)
            known, value = (False, None) if key is None else self._kept.known(key)
            if known:
                if value is not None:  # None kept: the trace has no steps to total
                    out[row["trace_id"]] = value
            else:
                keys[row["trace_id"]] = key
        if not keys:
            return out
        read = page_totals(source, list(keys), prices)
        if read is None:
            return None
        for trace_id, key in keys.items():
            if key is not None:
                self._kept.put(key, read.get(trace_id))
        return {**out, **read}
