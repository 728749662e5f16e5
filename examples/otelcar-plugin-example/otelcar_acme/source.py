"""``--source dumpdir://PATH``: traces read from a directory of dump files, nothing imported.

Every dump file under ``PATH`` that ``otelcar import`` would take (OTLP JSON or protobuf,
LangSmith, Langfuse, ``acme-jsonl``, … any registered format) is decoded when the source
opens, and its traces built with the same mappers and trajectory builder as the store's
(:func:`otelcar.trajectory.build_traces`), so ``otelcar traces``, ``show``, ``attribute``, …
work on a folder of dumps as they do on the store. Records that do not decode are skipped and
counted in ``skipped``. Made for small folders: everything is read at once, into memory.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from otelcar.errors import FormatError, SourceError, TraceNotFound
from otelcar.importer import collect_paths, iter_file_records
from otelcar.ingest.frames import LogFrame, SpanFrame
from otelcar.ingest.raw import decode_record
from otelcar.schema import STEPS_SCHEMA, TRACES_SCHEMA
from otelcar.sources import LoadedTrace, SourceSettings, TraceFilter
from otelcar.trajectory import TraceBuild, build_traces

SCHEME = "dumpdir://"


class DumpDirectorySource:
    """The traces of the dump files under ``settings.url``'s path (module docstring)."""

    def __init__(self, settings: SourceSettings) -> None:
        path = Path(settings.url.removeprefix(SCHEME)).expanduser()
        if not path.is_dir():
            raise SourceError(f"{settings.url}: no directory at {path}")
        self.where = f"{SCHEME}{path}"
        self.skipped = 0
        self._builds = {build.summary["trace_id"]: build for build in self._read(path)}

    def _read(self, path: Path) -> list[TraceBuild]:
        files, _ = collect_paths([path])
        spans: list[SpanFrame] = []
        logs: list[LogFrame] = []
        for record in iter_file_records(files):
            try:
                decoded, _ = decode_record(record)
            except FormatError:
                self.skipped += 1
                continue
            for frame in [*decoded.spans, *decoded.logs]:
                frame.seq = len(spans) + len(logs)
                (spans if isinstance(frame, SpanFrame) else logs).append(frame)
        return [build for build in build_traces(spans, logs) if build.steps]

    def traces(self, filter: TraceFilter | None = None) -> pl.DataFrame:
        """Summaries of the matching traces, oldest first (the newest ``limit``)."""
        filter = filter or TraceFilter()
        rows = []
        for build in self._builds.values():
            summary = {**build.summary, "build_id": None}
            start = summary["start_ns"] or 0
            if (
                (filter.service and summary["service"] != filter.service)
                or (filter.since_ns is not None and start < filter.since_ns)
                or (filter.until_ns is not None and start >= filter.until_ns)
                or (filter.trace_ids and summary["trace_id"] not in filter.trace_ids)
                or (filter.prefix and not summary["trace_id"].startswith(filter.prefix.lower()))
            ):
                continue
            rows.append(summary)
        rows.sort(key=lambda row: row["start_ns"] or 0)
        if filter.limit is not None:
            rows = rows[-filter.limit :] if filter.limit else []
        return pl.DataFrame(rows, schema=TRACES_SCHEMA, orient="row")

    def resolve(self, prefix: str) -> str:
        text = prefix.strip().lower()
        matches = [trace_id for trace_id in self._builds if text and trace_id.startswith(text)]
        if len(matches) != 1:
            found = "no trace id" if not matches else f"{len(matches)} trace ids"
            raise TraceNotFound(f"{found} starting with {prefix!r} in {self.where}")
        return matches[0]

    def load(self, trace_id: str) -> LoadedTrace:
        full_id = self.resolve(trace_id)
        build = self._builds[full_id]
        steps = pl.DataFrame(build.steps, schema=STEPS_SCHEMA, orient="row")
        summary = {**build.summary, "build_id": None}
        return LoadedTrace(full_id, steps, summary, rows_read=summary["n_spans"])

    def close(self) -> None:
        self._builds.clear()

    def __enter__(self) -> DumpDirectorySource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
