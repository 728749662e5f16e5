"""A trace source over steps a test already holds (:class:`StepsSource`): what a front end
reads a run from when the trace is not in a store."""

from __future__ import annotations

from typing import Any

import polars as pl

from otelcar.errors import TraceNotFound
from otelcar.sources import LoadedTrace, TraceFilter


class StepsSource:
    """One trace, ``trace_id`` with ``steps``, as a :class:`~otelcar.sources.TraceSource`:
    a unique prefix resolves to it, anything else is a :class:`TraceNotFound`; ``opened``
    counts how often it was used as a context manager."""

    where = "test steps"

    def __init__(self, trace_id: str, steps: pl.DataFrame) -> None:
        self.trace_id, self.steps = trace_id, steps
        self.opened = 0

    def traces(self, filter: TraceFilter | None = None) -> pl.DataFrame:
        raise AssertionError("not used")

    def resolve(self, prefix: str) -> str:
        if prefix and self.trace_id.startswith(prefix.lower()):
            return self.trace_id
        raise TraceNotFound(f"no trace id starts with {prefix!r} in {self.where}")

    def load(self, trace_id: str) -> LoadedTrace:
        full = self.resolve(trace_id)
        summary: dict[str, Any] = {"trace_id": full}
        return LoadedTrace(full, self.steps, summary, self.steps.height)

    def close(self) -> None:
        pass

    def __enter__(self) -> StepsSource:
        self.opened += 1
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
