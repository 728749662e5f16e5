"""Readers: dump files straight to a steps table, in memory, with no store involved.

Each reader is named for what it reads, like Polars' ``read_csv``/``read_parquet``:

* :func:`read_otlp` — OTLP dumps (JSON, JSONL, protobuf, length-delimited protobuf);
* :func:`read_langsmith` — LangSmith exports (``list_runs`` dumps, CLI exports, Parquet);
* :func:`read_langfuse` — Langfuse exports (JSON, JSONL, CSV);
* :func:`read_phoenix` — Arize Phoenix span exports;
* :func:`read_whowhen` — Who&When failure-attribution logs;
* :func:`read_traces` — any of these, sniffed file by file.

Every reader takes a path, a directory (walked for dump files) or a list of them, and
returns a DataFrame of :data:`otelcar.STEPS_SCHEMA`. A file of another family than the
reader's raises :class:`~otelcar.errors.FormatError` naming the file, what it is and the
reader that reads it. A record that does not decode is skipped with an
:class:`~otelcar.importer.UndecodedRecordWarning` naming it and the reason; use
:func:`otelcar.import_files` to keep such records in a store.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path

import polars as pl

from otelcar.errors import FormatError
from otelcar.importer import UndecodedRecordWarning, expand_paths, iter_file_records
from otelcar.ingest.files import FILE_FORMATS
from otelcar.ingest.raw import FORMAT_UNKNOWN, RawRecord
from otelcar.store.decoding import derive
from otelcar.store.report import ImportReport
from otelcar.store.tables import steps_frame
from otelcar.trajectory import build_traces

Paths = str | Path | Iterable[str | Path]

#: Reader name → the formats (``otelcar import --format`` names) it reads. Formats of
#: plugins belong to :func:`read_traces` only.
FAMILIES: dict[str, tuple[str, ...]] = {
    "read_otlp": tuple(f for f in FILE_FORMATS if f != "auto"),
    "read_langsmith": ("langsmith-runs", "langsmith-cli", "langsmith-parquet"),
    "read_langfuse": ("langfuse", "langfuse-csv"),
    "read_phoenix": ("phoenix-spans",),
    "read_whowhen": ("whowhen",),
}


def read_traces(paths: Paths, *, format: str = "auto") -> pl.DataFrame:
    """The steps table of dump files of any known format (``format="auto"``: sniffed per
    file; else one of ``otelcar import --format``'s names, plugins' formats included)."""
    return _read(paths, format=format, family=None, reader="read_traces")


def read_otlp(paths: Paths, *, format: str = "auto") -> pl.DataFrame:
    """The steps table of OTLP dump files (``format``: ``auto``, ``otlp-json``,
    ``otlp-jsonl``, ``otlp-proto``, ``otlp-proto-stream``)."""
    return _read(paths, format=format, family=FAMILIES["read_otlp"], reader="read_otlp")


def read_langsmith(paths: Paths) -> pl.DataFrame:
    """The steps table of LangSmith exports (runs dumps and REST pages, ``langsmith``
    CLI exports, bulk Parquet exports); see ``docs/import.md``."""
    return _read(paths, format="auto", family=FAMILIES["read_langsmith"], reader="read_langsmith")


def read_langfuse(paths: Paths) -> pl.DataFrame:
    """The steps table of Langfuse exports (UI and API JSON/JSONL, CSV tables)."""
    return _read(paths, format="auto", family=FAMILIES["read_langfuse"], reader="read_langfuse")


def read_phoenix(paths: Paths) -> pl.DataFrame:
    """The steps table of Arize Phoenix span exports (REST pages, client span lists)."""
    return _read(paths, format="auto", family=FAMILIES["read_phoenix"], reader="read_phoenix")


def read_whowhen(paths: Paths) -> pl.DataFrame:
    """The steps table of Who&When failure-attribution logs (one run per JSON document)."""
    return _read(paths, format="auto", family=FAMILIES["read_whowhen"], reader="read_whowhen")


def _reader_of(fmt: str) -> str:
    for reader, family in FAMILIES.items():
        if fmt in family:
            return reader
    return "read_traces"


def _read(
    paths: Paths, *, format: str, family: tuple[str, ...] | None, reader: str
) -> pl.DataFrame:
    if family is not None and format != "auto" and format not in family:
        raise FormatError(
            f"{reader} reads {', '.join(family)}, not {format!r} (use {_reader_of(format)})"
        )
    if isinstance(paths, str | Path):
        paths = [paths]
    records = iter_file_records(expand_paths(paths), format=format)
    if family is not None:
        records = _of_family(records, family, reader)
    report = ImportReport()
    done = derive(records, report)
    for problem in report.unparsed:
        warnings.warn(
            f"{problem.source} {problem.position}: {problem.reason}",
            UndecodedRecordWarning,
            stacklevel=3,
        )
    return steps_frame(build_traces(done.spans, done.logs))


def _of_family(
    records: Iterable[RawRecord], family: tuple[str, ...], reader: str
) -> Iterator[RawRecord]:
    """``records``, until one of a format outside ``family``: a :class:`FormatError` naming
    the reader that reads it."""
    for record in records:
        if record.format not in (*family, FORMAT_UNKNOWN):
            raise FormatError(
                f"{record.source}: a {record.format} file, which {reader} does not read "
                f"(use {_reader_of(record.format)}, or read_traces for any format)"
            )
        yield record
