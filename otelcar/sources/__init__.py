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

Built-in URL forms: ``clickhouse://user:pass@host:port/db``, ``clickhouses://…`` (TLS) and
``chdb://PATH`` (in-process ClickHouse over a local database directory); see
``docs/clickhouse.md``. Sources are a registry of URL schemes (:func:`register_source`),
filled through the ``register_sources`` plugin hook (:mod:`otelcar.plugins`) the first time
it is consulted, so a plugin adds a scheme exactly as the built-ins do.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

import polars as pl

from otelcar.errors import SourceError
from otelcar.plugins.door import RegistryHook

#: A trace index, eager or lazy.
Frame = TypeVar("Frame", pl.DataFrame, pl.LazyFrame)

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
    ``prefix``: ids starting with it; ``limit``: the newest N (``None``: the source's
    default, :data:`DEFAULT_LIST_LIMIT` for a remote source, every match for the local
    store).
    """

    service: str | None = None
    since_ns: int | None = None
    until_ns: int | None = None
    trace_ids: tuple[str, ...] = ()
    prefix: str | None = None
    limit: int | None = None


def filter_index(index: Frame, filter: TraceFilter) -> Frame:
    """``index`` (a trace index, :data:`otelcar.schema.TRACES_SCHEMA`, eager or lazy, oldest
    first) cut to what ``filter`` selects, for a source whose index is a frame (the local
    store) or a caller filtering one again: ``service`` the trace's service, ``since_ns`` /
    ``until_ns`` bound its start, ``trace_ids`` and ``prefix`` its id (case-insensitive),
    ``limit`` keeps the newest N (``None``: every match)."""
    if filter.service is not None:
        index = index.filter(pl.col("service") == filter.service)
    if filter.since_ns is not None:
        index = index.filter(pl.col("start_ns") >= filter.since_ns)
    if filter.until_ns is not None:
        index = index.filter(pl.col("start_ns") < filter.until_ns)
    if filter.trace_ids:
        index = index.filter(pl.col("trace_id").is_in([t.lower() for t in filter.trace_ids]))
    if filter.prefix:
        index = index.filter(pl.col("trace_id").str.starts_with(filter.prefix.lower()))
    return index if filter.limit is None else index.tail(max(filter.limit, 0))


#: Age units of :func:`parse_time`: seconds, minutes, hours, days, weeks.
AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_AGE = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])", re.IGNORECASE)


def parse_time(text: str, *, now_ns: int | None = None) -> int:
    """A point in time as Unix nanoseconds, in the one grammar every front end takes (the
    CLI's ``--since``/``--until``, the console's filters, the MCP tools): ISO 8601
    (``2026-11-29``, ``2026-11-29T10:00Z``; UTC when no offset is given) or an age (``90s``,
    ``30m``, ``1.5h``, ``7d``, ``2w``: that long before ``now_ns``, default now). Raises
    :class:`ValueError` for anything else."""
    import time
    from datetime import UTC, datetime, timedelta

    text = text.strip()
    age = _AGE.fullmatch(text)
    if age:
        now = time.time_ns() if now_ns is None else now_ns
        seconds = float(age.group(1)) * AGE_UNITS[age.group(2).lower()]
        return now - round(seconds * 10**9)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{text!r}: use ISO 8601 (2026-11-29, 2026-11-29T10:00:00Z) or an age "
            "(30m, 1.5h, 7d, 2w)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    return (moment - epoch) // timedelta(microseconds=1) * 1000


@dataclass(frozen=True)
class LoadedTrace:
    """One trace read from a source: its steps (:data:`otelcar.schema.STEPS_SCHEMA`), its
    summary (a :data:`otelcar.schema.TRACES_SCHEMA` row) and the rows the source read."""

    trace_id: str
    steps: pl.DataFrame
    summary: dict[str, Any]
    rows_read: int


@runtime_checkable
class TraceSource(Protocol):
    """A place traces are read from (ClickHouse, a plugin's source, and the local
    :class:`~otelcar.store.Store`). Use as a context manager (``close`` on exit)."""

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


#: ``factory(settings) -> TraceSource``: opens the source ``settings.url`` names.
SourceFactory = Callable[[SourceSettings], TraceSource]
_FACTORIES: dict[str, SourceFactory] = {}


def _add(scheme: str, factory: SourceFactory) -> None:
    if not scheme or not scheme.replace("+", "").replace("-", "").replace(".", "").isalnum():
        raise SourceError(f"{scheme!r} is not a URL scheme (letters, digits, + - .)")
    if not callable(factory):
        raise SourceError(f"source {scheme}://: the factory is not callable")
    _FACTORIES[scheme.lower()] = factory


_PLUGINS = RegistryHook("register_sources", _add)


def register_source(scheme: str, factory: SourceFactory) -> None:
    """Make ``--source SCHEME://…`` and ``[source] url = "SCHEME://…"`` usable: ``factory``
    gets the :class:`SourceSettings` and returns an open :class:`TraceSource`. Replaces the
    factory of the same scheme (the plugins' are registered first)."""
    _PLUGINS.ensure()
    _add(scheme, factory)


def source_schemes() -> list[str]:
    """The registered URL schemes, in registration order."""
    _PLUGINS.ensure()
    return list(_FACTORIES)


def open_source(settings: SourceSettings) -> TraceSource:
    """Open the source ``settings.url`` names, by its scheme; raises
    :class:`~otelcar.errors.SourceError` for a scheme no source is registered for, and when
    the source cannot be reached or is not shaped as expected (for ClickHouse: as the
    Collector's exporter makes it)."""
    _PLUGINS.ensure()
    scheme, sep, _ = settings.url.partition("://")
    factory = _FACTORIES.get(scheme.lower()) if sep else None
    if factory is None:  # the URL itself is not shown: it may hold a password
        why = f"no source is registered for {scheme}://" if sep else "no SCHEME:// in it"
        known = ", ".join(f"{s}://" for s in _FACTORIES)
        raise SourceError(
            f"the --source/[source] url is not a trace source URL ({why}); known: {known}"
        )
    return factory(settings)


def _clickhouse(settings: SourceSettings) -> TraceSource:
    from otelcar.sources.clickhouse import ClickHouseSource

    return ClickHouseSource(settings)


#: The built-in sources ``(scheme, factory)``, registered by the built-in plugin.
BUILTIN_SOURCES: tuple[tuple[str, SourceFactory], ...] = tuple(
    (scheme, _clickhouse) for scheme in ("clickhouse", "clickhouses", "chdb")
)


__all__ = [
    "DEFAULT_LIST_LIMIT",
    "DEFAULT_LOGS_TABLE",
    "DEFAULT_TABLE",
    "LoadedTrace",
    "SourceFactory",
    "SourceSettings",
    "TraceFilter",
    "TraceSource",
    "filter_index",
    "open_source",
    "parse_time",
    "register_source",
    "source_schemes",
]
