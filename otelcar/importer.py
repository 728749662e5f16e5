"""Import dump files: into the store (:func:`import_files`) or straight to a steps table
(:func:`read_otlp`, no store involved)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import polars as pl

from otelcar.errors import FormatError
from otelcar.ingest.files import read_records
from otelcar.ingest.frames import LogFrame, SpanFrame
from otelcar.ingest.raw import RawRecord, decode_record
from otelcar.schema import STEPS_SCHEMA
from otelcar.store import ImportReport, Store
from otelcar.trajectory import build_traces


class UndecodedRecordWarning(UserWarning):
    """A record of a dump could not be decoded (the message says where and why)."""


#: File name endings taken from a directory walk (files named explicitly are always read).
DUMP_SUFFIXES = (
    ".json",
    ".jsonl",
    ".ndjson",
    ".pb",
    ".binpb",
    ".bin",
    ".otlp",
    ".protobuf",
    ".parquet",
    ".csv",
)


def _is_dump_name(path: Path) -> bool:
    name = path.name.lower().removesuffix(".gz")
    return name.endswith(DUMP_SUFFIXES)


def expand_paths(paths: Iterable[str | Path]) -> list[Path]:
    """Files named, and the dump files under named directories (sorted; hidden files and
    names not ending in one of :data:`DUMP_SUFFIXES` (optionally ``.gz``) are skipped)."""
    out: list[Path] = []
    for item in paths:
        path = Path(item)
        if path.is_dir():
            out.extend(
                sorted(
                    p
                    for p in path.rglob("*")
                    if p.is_file()
                    and _is_dump_name(p)
                    and not any(part.startswith(".") for part in p.relative_to(path).parts)
                )
            )
        elif path.exists():
            out.append(path)
        else:
            raise FormatError(f"{path}: no such file or directory")
    return out


def iter_file_records(
    paths: Iterable[Path],
    *,
    format: str = "auto",
    on_bytes: Callable[[Path, int], None] | None = None,
) -> Iterator[RawRecord]:
    """Records of several files in order; ``on_bytes(path, consumed)`` reports progress."""
    for path in paths:
        callback = (lambda n, p=path: on_bytes(p, n)) if on_bytes else None
        yield from read_records(path, format=format, progress=callback)


def import_files(
    paths: Iterable[str | Path],
    *,
    store: Store | None = None,
    format: str = "auto",
    on_bytes: Callable[[Path, int], None] | None = None,
) -> ImportReport:
    """Import dump files into ``store`` (the default store when ``None``)."""
    store = store or Store()
    files = expand_paths(paths)
    return store.import_records(iter_file_records(files, format=format, on_bytes=on_bytes))


def read_otlp(paths: str | Path | Iterable[str | Path], *, format: str = "auto") -> pl.DataFrame:
    """The steps table of OTLP dump files, in memory (no store).

    A record that does not decode is skipped with an :class:`UndecodedRecordWarning` naming
    it and the reason; use :func:`import_files` to keep such records.
    """
    if isinstance(paths, str | Path):
        paths = [paths]
    spans: list[SpanFrame] = []
    logs: list[LogFrame] = []
    seq = 0
    for record in iter_file_records(expand_paths(paths), format=format):
        try:
            decoded, _ = decode_record(record)
        except FormatError as exc:
            warnings.warn(
                f"{record.source} {record.position}: {exc}", UndecodedRecordWarning, stacklevel=2
            )
            continue
        for item in [*decoded.spans, *decoded.logs]:
            item.seq = seq
            seq += 1
        spans.extend(decoded.spans)
        logs.extend(decoded.logs)
    rows = [step for built in build_traces(spans, logs) for step in built.steps]
    return pl.DataFrame(rows, schema=STEPS_SCHEMA)
