"""Trace sources other than the local store: where spans already live (ClickHouse).

A :class:`TraceSource` lists traces with filters pushed down to where the spans are, and loads
one trace's spans and log records into the same :class:`~otelcar.ingest.frames.SpanFrame` /
:class:`~otelcar.ingest.frames.LogFrame` records the file import decodes, so the same dialect
mappers and the same trajectory builder (:mod:`otelcar.trajectory`) make its steps. Nothing is
copied into the local store.

```python
from otelcar.sources import SourceSettings, TraceFilter, open_source

with open_source(SourceSettings("clickhouse://otel:secret@ch.internal:8123/otel")) as source:
    page = source.traces(TraceFilter(service="refund-agent", limit=20))
    trace = source.load(source.resolve("4bf92f"))      # trace.steps: otelcar.STEPS_SCHEMA
```

URL forms: ``clickhouse://user:pass@host:port/db``, ``clickhouses://…`` (TLS) and
``chdb://PATH`` (in-process ClickHouse over a local database directory); see
``docs/clickhouse.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import polars as pl

DEFAULT_TABLE = "otel_traces"
DEFAULT_LOGS_TABLE = "otel_logs"
DEFAULT_LIST_LIMIT = 100


@dataclass(frozen=True)
class SourceSettings:
    """Where traces are read from: ``[source]`` in ``otelcar.toml`` or ``--source URL``.

    ``database`` overrides the URL's database (default ``default``); ``logs_table`` names the
    exporter's logs table (GenAI content events); ``None`` reads no logs.
    """

    url: str
    table: str = DEFAULT_TABLE
    logs_table: str | None = DEFAULT_LOGS_TABLE
    database: str | None = None


@dataclass(frozen=True)
class TraceFilter:
    """Which traces to list. Every field is pushed down into the source's query.

    ``service``: traces with a span of this service; ``since_ns``/``until_ns``: traces with a
    span starting in ``[since, until)`` (Unix nanoseconds); ``trace_ids``: only these;
    ``prefix``: ids starting with it; ``limit``: the newest N (default
    :data:`DEFAULT_LIST_LIMIT`).
    """

    service: str | None = None
    since_ns: int | None = None
    until_ns: int | None = None
    trace_ids: tuple[str, ...] = ()
    prefix: str | None = None
    limit: int | None = None


@dataclass(frozen=True)
class LoadedTrace:
    """One trace read from a source: its steps (:data:`otelcar.schema.STEPS_SCHEMA`), its
    summary (a :data:`otelcar.schema.TRACES_SCHEMA` row) and the rows the source read."""

    trace_id: str
    steps: pl.DataFrame
    summary: dict[str, Any]
    rows_read: int


class TraceSource(Protocol):
    """A place traces are read from. Use as a context manager (``close`` on exit)."""

    where: str

    def traces(self, filter: TraceFilter | None = None) -> pl.DataFrame:
        """Trace summaries (:data:`otelcar.schema.TRACES_SCHEMA`, ``build_id`` null) of the
        traces matching ``filter``, oldest first."""
        ...

    def resolve(self, prefix: str) -> str:
        """The full id of the one trace whose id starts with ``prefix``; raises
        :class:`~otelcar.errors.TraceNotFound` for none or several."""
        ...

    def load(self, trace_id: str) -> LoadedTrace:
        """One trace's steps and summary; raises :class:`~otelcar.errors.TraceNotFound` when
        the source holds no span of it."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> TraceSource: ...

    def __exit__(self, *exc: object) -> None: ...


def open_source(settings: SourceSettings) -> TraceSource:
    """Open the source ``settings.url`` names; raises :class:`~otelcar.errors.SourceError`
    when it cannot be reached or is not shaped as the Collector's exporter makes it."""
    from otelcar.sources.clickhouse import ClickHouseSource

    return ClickHouseSource(settings)


__all__ = [
    "DEFAULT_LIST_LIMIT",
    "DEFAULT_LOGS_TABLE",
    "DEFAULT_TABLE",
    "LoadedTrace",
    "SourceSettings",
    "TraceFilter",
    "TraceSource",
    "open_source",
]
