"""One small query interface over the two ClickHouse backends otelcar reads from.

- ``clickhouse://user:password@host:port/database`` (HTTP, port 8123 by default) and
  ``clickhouses://…`` (HTTPS, port 8443 by default): a ClickHouse server, through
  ``clickhouse-connect``'s HTTP client;
- ``chdb://PATH``: the ClickHouse engine in-process (the ``chdb`` package) over the database
  files at ``PATH``, through the chDB backend that ``clickhouse-connect`` ships
  (``interface="chdb"``). Both backends therefore share one client API, one type system and
  one error model; nothing here is specific to either beyond opening the client.

Every value reaches the server as a bound query parameter (``{name:Type}``), identifiers
included (``{table:Identifier}``): a trace id or a service name cannot change a query.

The packages are imported when a source is opened, so otelcar works without them; a missing
one is reported with the extra to install (``pip install 'otelcar[clickhouse]'``).
chDB keeps one database path per process: opening a second path while a client on another
path is open fails (close the first).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from otelcar.errors import SourceError

SCHEMES = ("clickhouse", "clickhouses", "chdb")
INSTALL_HINT = "install the clickhouse extra: pip install 'otelcar[clickhouse]'"


@dataclass(frozen=True)
class ClickHouseURL:
    """A parsed source URL. ``database`` is ``None`` when the URL names none."""

    scheme: str
    host: str | None = None
    port: int | None = None
    username: str | None = None
    password: str = ""
    database: str | None = None
    path: str | None = None

    @classmethod
    def parse(cls, url: str) -> ClickHouseURL:
        """Parse ``clickhouse[s]://[user[:password]@]host[:port][/database]`` or
        ``chdb://PATH``; raises :class:`SourceError` for anything else."""
        scheme, sep, rest = url.partition("://")
        if not sep or scheme not in SCHEMES:
            raise SourceError(
                f"{_redact(url)!r} is not a trace source URL; use clickhouse://user:pass@host:"
                "port/database, clickhouses://… (TLS) or chdb://PATH"
            )
        if scheme == "chdb":
            if not rest:
                raise SourceError("chdb:// needs the path of the chDB database: chdb://PATH")
            return cls(scheme, path=rest)
        parts = urlsplit(url)
        if parts.query or parts.fragment:
            raise SourceError(f"{_redact(url)}: query strings are not supported in source URLs")
        if not parts.hostname:
            raise SourceError(f"{_redact(url)}: no host; use {scheme}://user:pass@host:port/db")
        try:
            port = parts.port
        except ValueError:
            raise SourceError(f"{_redact(url)}: the port is not a number") from None
        database = unquote(parts.path.strip("/")) or None
        if database is not None and "/" in database:
            raise SourceError(f"{_redact(url)}: the path must be just the database name")
        return cls(
            scheme,
            host=parts.hostname,
            port=port,
            username=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password else "",
            database=database,
        )

    def describe(self) -> str:
        """The URL with its password left out (for messages)."""
        if self.scheme == "chdb":
            return f"chdb://{self.path}"
        user = f"{self.username}@" if self.username else ""
        port = f":{self.port}" if self.port else ""
        return f"{self.scheme}://{user}{self.host}{port}/{self.database or ''}"


def _redact(url: str) -> str:
    head, at, tail = url.rpartition("@")
    if not at or "://" not in head:
        return url
    scheme, _, userinfo = head.partition("://")
    return f"{scheme}://{userinfo.split(':', 1)[0]}@{tail}"


@dataclass(frozen=True)
class QueryRows:
    """A query's rows (dicts by column name) and how many table rows the engine read for it:
    from a server, the query summary it sends (``X-ClickHouse-Summary``; 0 when absent); in
    chDB, whose per-result statistic counts result rows instead, the engine's ``SelectedRows``
    profile event around the query (rows selected from MergeTree parts after index analysis)."""

    rows: list[dict[str, Any]]
    read_rows: int


class ClickHouseConnection:
    """An open client on a ClickHouse server or a chDB path; use as a context manager."""

    def __init__(self, url: ClickHouseURL) -> None:
        self.url = url
        self.where = url.describe()
        self._client = _open_client(url)
        self._count_in_engine = url.scheme == "chdb"

    def query(self, sql: str, parameters: Mapping[str, Any] | None = None) -> QueryRows:
        """Run one SELECT with bound ``parameters``; raises :class:`SourceError` with the
        server's message when it fails."""
        from clickhouse_connect.driver.exceptions import ClickHouseError

        try:
            before = self._selected_rows() if self._count_in_engine else 0
            result = self._client.query(sql, parameters=dict(parameters or {}))
            after = self._selected_rows() if self._count_in_engine else 0
        except ClickHouseError as exc:
            raise SourceError(f"{self.where}: {_first_line(exc)}") from exc
        names = result.column_names
        rows = [dict(zip(names, row, strict=True)) for row in result.result_rows]
        if self._count_in_engine:
            return QueryRows(rows, after - before)
        summary = result.summary or {}
        return QueryRows(rows, int(summary.get("read_rows") or 0))

    def _selected_rows(self) -> int:
        result = self._client.query(
            "SELECT value FROM system.events WHERE event = 'SelectedRows'"
        ).result_rows
        return int(result[0][0]) if result else 0

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> ClickHouseConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _open_client(url: ClickHouseURL) -> Any:
    try:
        import clickhouse_connect
        from clickhouse_connect.driver.exceptions import ClickHouseError
    except ImportError:
        raise SourceError(
            f"reading {url.scheme}:// sources needs clickhouse-connect; {INSTALL_HINT}"
        ) from None
    if url.scheme == "chdb":
        try:
            import chdb  # noqa: F401 - clickhouse-connect's chdb interface needs it
        except ImportError:
            raise SourceError(f"chdb:// sources need the chdb package; {INSTALL_HINT}") from None
        path = Path(url.path or "").expanduser()
        if not path.is_dir():
            raise SourceError(f"chdb://{url.path}: no chDB database directory at {path}")
        try:
            return clickhouse_connect.get_client(interface="chdb", path=str(path.resolve()))
        except ClickHouseError as exc:
            raise SourceError(f"cannot open {url.describe()}: {_first_line(exc)}") from exc
    try:
        return clickhouse_connect.get_client(
            host=url.host,
            port=url.port,
            username=url.username,
            password=url.password,
            secure=url.scheme == "clickhouses",
            connect_timeout=10,
        )
    except ClickHouseError as exc:
        where = url.describe()
        raise SourceError(f"cannot reach ClickHouse at {where}: {_first_line(exc)}") from exc
