"""Import dump files into the store (:func:`import_files`); :mod:`otelcar.readers` reads them
straight to a steps table, with no store involved."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from otelcar.errors import FormatError
from otelcar.ingest.files import read_records
from otelcar.ingest.raw import RawRecord
from otelcar.store import ImportReport, Store
from otelcar.store.report import RecordProblem


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
    names not ending in one of :data:`DUMP_SUFFIXES` (optionally ``.gz``) are skipped).

    Raises :class:`FormatError` for the first named path that cannot be read;
    :func:`collect_paths` reports every problem instead."""
    files, skipped = collect_paths(paths)
    for problem in skipped:
        if problem.position == "named":
            raise FormatError(f"{problem.source}: {problem.reason}")
    return files


def collect_paths(paths: Iterable[str | Path]) -> tuple[list[Path], list[RecordProblem]]:
    """The files to import, and every path that will not be, with why.

    A named path that is missing, unreadable, not a regular file or a symbolic link that
    leads nowhere (or in a loop) is reported with position ``named``; while a named directory
    is walked, unreadable directories, symbolic links to directories (not followed), broken
    or looping links and empty files are reported with position ``walked``. Files named
    explicitly are read whatever their name; a walk takes the :data:`DUMP_SUFFIXES` only.
    """
    files: list[Path] = []
    skipped: list[RecordProblem] = []
    for item in paths:
        path = Path(item)
        problem = _unreadable(path)
        if problem is not None:
            skipped.append(RecordProblem(str(path), "named", problem))
        elif path.is_dir():
            files.extend(_walk(path, skipped))
        else:
            files.append(path)
    return files, skipped


def _unreadable(path: Path) -> str | None:
    """Why ``path`` (named by the user) cannot be read, or ``None``."""
    try:
        path.stat()
    except FileNotFoundError:
        if path.is_symlink():
            return "symbolic link to nothing"
        return "no such file or directory"
    except OSError as exc:  # a symlink loop (ELOOP), a permission problem on the way
        return f"cannot be read ({exc.strerror or exc})"
    if path.is_dir():
        return None if os.access(path, os.R_OK | os.X_OK) else "directory cannot be read"
    if not path.is_file():
        return "not a regular file"
    if not os.access(path, os.R_OK):
        return "cannot be read (permission denied)"
    return None


def _walk(root: Path, skipped: list[RecordProblem]) -> list[Path]:
    """The dump files under ``root`` (sorted), noting in ``skipped`` what is left out."""
    found: list[Path] = []

    def unreadable(error: OSError) -> None:
        where = error.filename or str(root)
        skipped.append(RecordProblem(where, "walked", f"directory cannot be read ({error})"))

    for folder, dirs, names in os.walk(root, onerror=unreadable):
        base = Path(folder)
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in list(dirs):
            if (base / name).is_symlink():
                dirs.remove(name)
                skipped.append(
                    RecordProblem(
                        str(base / name), "walked", "symbolic link to a directory (not followed)"
                    )
                )
        for name in sorted(names):
            path = base / name
            if name.startswith(".") or not _is_dump_name(path):
                continue
            problem = _unreadable(path)
            if problem is None and path.stat().st_size == 0:
                problem = "empty file"
            if problem is not None:
                skipped.append(RecordProblem(str(path), "walked", problem))
            else:
                found.append(path)
    return found


def iter_file_records(
    paths: Iterable[Path],
    *,
    format: str = "auto",
    on_bytes: Callable[[Path, int], None] | None = None,
    counts: dict[str, int] | None = None,
) -> Iterator[RawRecord]:
    """Records of several files in order; ``on_bytes(path, consumed)`` reports progress;
    ``counts`` (when given) is filled with the number of records each file gave."""
    for path in paths:
        callback = (lambda n, p=path: on_bytes(p, n)) if on_bytes else None
        for record in read_records(path, format=format, progress=callback):
            if counts is not None:
                counts[str(path)] = counts.get(str(path), 0) + 1
            yield record


def note_unread_files(
    report: ImportReport, counts: dict[str, int], named: Iterable[str | Path]
) -> None:
    """A file the user named of which no record could be decoded (a file that is not a
    dump, or unreadable past its first bytes) is a path not read: listed in the report's
    ``skipped_paths`` (position ``named``, so the import is not :attr:`complete`) with the
    first reason, while the other files are imported."""
    named_files = {str(Path(p)) for p in named if not Path(p).is_dir()}
    reasons: dict[str, list[str]] = {}
    for problem in report.unparsed:
        reasons.setdefault(problem.source, []).append(problem.reason)
    for source, count in counts.items():
        failed = reasons.get(source, [])
        if source in named_files and count and len(failed) >= count:
            more = f" (and {len(failed) - 1} more problems)" if len(failed) > 1 else ""
            report.skipped_paths.append(
                RecordProblem(source, "named", f"nothing in it could be read: {failed[0]}{more}")
            )


def import_files(
    paths: Iterable[str | Path],
    *,
    store: Store | None = None,
    format: str = "auto",
    on_bytes: Callable[[Path, int], None] | None = None,
    on_total: Callable[[int], None] | None = None,
) -> ImportReport:
    """Import dump files into ``store`` (the default store when ``None``); a path that
    cannot be read, or a named file nothing in which could be decoded, is listed in the
    report's ``skipped_paths`` (:func:`note_unread_files`) and the others are imported.
    Progress: ``on_total(bytes)`` once, with the size of every file to read, then
    ``on_bytes(path, consumed)`` as each is read."""
    store = store or Store()
    paths = list(paths)
    files, skipped = collect_paths(paths)
    if on_total is not None:
        on_total(sum(p.stat().st_size for p in files))
    counts: dict[str, int] = {}
    records = iter_file_records(files, format=format, on_bytes=on_bytes, counts=counts)
    report = store.import_records(records)
    report.skipped_paths.extend(skipped)
    note_unread_files(report, counts, paths)
    return report
