"""LangSmith run dumps → span frames (``reference/exports.md`` §1).

One LangSmith *run* becomes one :class:`~otelcar.ingest.frames.SpanFrame`:

- ``trace_id`` = the run's ``trace_id`` UUID as hex (else the first ``dotted_order``
  segment's UUID, else the run's own id);
- ``span_id`` = :func:`~otelcar.ingest.formats.derived_id` of the run id (8 bytes), the
  parent from ``parent_run_id``, else the second-to-last ``dotted_order`` segment, else the
  last of ``parent_run_ids`` (the v2 API has no ``parent_run_id``), else the enclosing run of
  a nested ``child_runs`` tree;
- times from ``start_time``/``end_time`` in every spelling seen (``Z``, ``+00:00``, a space
  for ``T``, naive = UTC, RFC3339Nano, Parquet timestamps), ``end_time`` missing → start +
  ``duration_ms`` or the start;
- status ``ERROR`` when ``error`` is set or ``status`` says so (message = ``error``), ``OK``
  on success, else ``UNSET``;
- attributes ``langsmith.run.<field>`` for every run field (``inputs``, ``outputs``,
  ``extra``, ``events`` … as JSON-compatible values; JSON-string columns decoded), and
  ``langsmith.export`` naming the on-disk shape.

Formats registered (the JSON ones share one decoder; detection looks at the first run):

- ``langsmith-runs``: ``Client.list_runs()`` dumps (pydantic-v1 ``run.json()``, v2
  ``run.model_dump(mode="json")``, ``json.dumps(run.dict(), default=str)``), one run per
  line or a JSON array; ``read_run(load_child_runs=True)`` nested trees (``child_runs``);
  REST ``{"runs": [...], "cursors": ...}`` and v2 ``{"items": [...], "next_cursor": ...}``
  pages; batch-ingest bodies ``{"post": [...], "patch": [...]}`` (what the SDKs send to
  ``/runs/batch``, as a proxy or a test capture records them), each run merged with its
  patches as the server stores it;
- ``langsmith-cli``: ``langsmith trace export`` / ``run export`` JSONL (``run_id``,
  flattened fields) and ``trace get`` ``{"trace_id", "run_count", "runs"}``;
- ``langsmith-parquet``: bulk data export Parquet (magic ``PAR1``), one file = one record.

The dialect mapper for these spans is :mod:`otelcar.conventions.langsmith`.
"""

from __future__ import annotations

import datetime as dt
import io
import math
import re
import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from otelcar.errors import FormatError
from otelcar.ingest import jsontext
from otelcar.ingest.exports.timestamps import time_ns
from otelcar.ingest.formats import ExportFormat, derived_id
from otelcar.ingest.frames import MAX_TIME_NS, Decoded, SpanFrame, check_time

FORMAT_RUNS = "langsmith-runs"
FORMAT_CLI = "langsmith-cli"
FORMAT_PARQUET = "langsmith-parquet"

ATTR_PREFIX = "langsmith.run."
EXPORT_ATTR = "langsmith.export"
SCOPE_NAME = "langsmith"

RUN_TYPES = frozenset({"llm", "chain", "tool", "retriever", "prompt", "parser", "embedding"})
#: Run fields that bulk exports (and some REST clients) carry as JSON-encoded strings.
JSON_FIELDS = frozenset(
    {"inputs", "outputs", "extra", "events", "tags", "parent_run_ids", "feedback_stats"}
)
#: Envelope keys that hold a list of runs (REST v1, API v2, CLI ``trace get``).
ENVELOPE_KEYS = ("runs", "items")
#: The keys of a batch-ingest body (``POST /runs/batch``).
BATCH_KEYS = ("post", "patch")

_DOTTED = re.compile(r"^(\d{8})T(\d{6})(\d{0,9})Z(.+)$")


# --------------------------------------------------------------------------------------
# Detection
# --------------------------------------------------------------------------------------


def _is_run(value: Any) -> bool:
    """A LangSmith run: a known ``run_type`` plus an id and a trace id or dotted order."""
    if not isinstance(value, dict):
        return False
    run_type = value.get("run_type")
    if not isinstance(run_type, str) or run_type.lower() not in RUN_TYPES:
        return False
    has_id = bool(value.get("id") or value.get("run_id"))
    return has_id and bool(value.get("trace_id") or value.get("dotted_order"))


def _is_batch(value: Any) -> bool:
    """A batch-ingest body (``POST /runs/batch``, what the SDKs send):
    ``{"post": [runs…], "patch": [updates…]}`` with at least one run."""
    if not isinstance(value, dict) or not value or not set(value) <= set(BATCH_KEYS):
        return False
    if not all(isinstance(value[key], list) for key in value):
        return False
    return any(_is_run(run) for key in BATCH_KEYS for run in value.get(key) or ())


def _merge_batch(value: dict[str, Any]) -> list[Any]:
    """The runs of a batch body as LangSmith stores them: each posted run updated by the
    patches for it (the same ``id``, else the same ``dotted_order`` — the JS SDK's patches
    may have no id), later patches last; a patch whose run was not posted stays on its own."""
    runs: list[Any] = [
        dict(run) if isinstance(run, dict) else run for run in value.get("post") or ()
    ]
    by_id = {str(r["id"]): r for r in runs if isinstance(r, dict) and r.get("id")}
    by_order = {
        str(r["dotted_order"]): r for r in runs if isinstance(r, dict) and r.get("dotted_order")
    }
    for patch in value.get("patch") or ():
        if not isinstance(patch, dict):
            runs.append(patch)
            continue
        target = by_id.get(str(patch.get("id"))) if patch.get("id") else None
        if target is None and patch.get("dotted_order"):
            target = by_order.get(str(patch["dotted_order"]))
        if target is None:
            runs.append(dict(patch))
            continue
        target.update({key: v for key, v in patch.items() if v is not None})
    return runs


def _first_run(value: Any) -> dict[str, Any] | None:
    """The first run of a JSON value (a run, a list, a ``runs``/``items`` envelope, or a
    batch-ingest body)."""
    if _is_batch(value):
        value = [run for key in BATCH_KEYS for run in value.get(key) or ()]
    for _ in range(4):
        if _is_run(value):
            return value
        if isinstance(value, list) and value:
            value = value[0]
        elif isinstance(value, dict):
            value = next((value[k] for k in ENVELOPE_KEYS if isinstance(value.get(k), list)), None)
        else:
            return None
    return None


def _is_cli_run(run: dict[str, Any]) -> bool:
    return "run_id" in run and "id" not in run


def detect_runs(value: Any) -> bool:
    """Whether a JSON value is a LangSmith run dump with ``id`` keys (SDK or REST)."""
    run = _first_run(value)
    if run is not None:
        return not _is_cli_run(run)
    return _is_empty_page(value)


def detect_cli(value: Any) -> bool:
    """Whether a JSON value is ``langsmith`` CLI output (flattened runs keyed ``run_id``)."""
    run = _first_run(value)
    return run is not None and _is_cli_run(run)


def _is_empty_page(value: Any) -> bool:
    """An empty REST page: ``{"runs": [], "cursors": ...}`` or ``{"items": [], "next_cursor"}``."""
    if not isinstance(value, dict):
        return False
    if value.get("runs") == [] and "cursors" in value:
        return True
    return value.get("items") == [] and "next_cursor" in value and len(value) <= 3


# --------------------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------------------


def decode_json(payload: bytes) -> Decoded:
    """Decode one JSON record (a line, or a whole document) holding LangSmith runs.

    Raises :class:`FormatError` when the bytes are not JSON or hold no run at all; a run
    that cannot be turned into a span (no id) is reported in ``problems``.
    """
    return decode_value(*jsontext.loads(payload))


def decode_value(value: Any, replaced: int) -> Decoded:
    """:func:`decode_json` of a record already parsed (``replaced``: surrogates replaced)."""
    runs = list(_runs_of(value))
    if all(shape == _NOT_A_RUN for _, shape, _ in runs) and not _is_empty_page(value):
        raise FormatError("no LangSmith run in this record (no run_type with an id)")
    decoded = _frames(runs)
    if replaced:
        decoded.problems.append(jsontext.surrogate_note(replaced))
    return decoded


def decode_parquet(payload: bytes) -> Decoded:
    """Decode a bulk-export Parquet file (every row one run; JSON-string columns decoded).

    Raises :class:`FormatError` when the file is not readable Parquet or lacks the run
    columns (``id``/``run_id`` and ``run_type``).
    """
    import polars as pl
    from polars.exceptions import PanicException

    try:
        frame = pl.read_parquet(io.BytesIO(payload))
        if "run_type" not in frame.columns or not {"id", "run_id"} & set(frame.columns):
            raise FormatError(
                f"Parquet file has no LangSmith run columns (id, run_type); columns: "
                f"{', '.join(frame.columns[:8])}"
            )
        conversions = []
        for name, dtype in frame.schema.items():
            if isinstance(dtype, pl.Datetime):
                conversions.append(pl.col(name).dt.epoch("ns"))
            elif isinstance(dtype, pl.Decimal):
                conversions.append(pl.col(name).cast(pl.String))
        if conversions:
            frame = frame.with_columns(conversions)
        runs = [(row, "bulk export", None) for row in frame.iter_rows(named=True)]
    except FormatError:
        raise
    # polars raises several error types for a bad file, and on some corrupt ones panics
    # (a PanicException is a BaseException: it would escape `except Exception` and stop
    # every later build of the store, since the raw record stays).
    except (Exception, PanicException) as exc:
        raise FormatError(f"not a readable Parquet file: {type(exc).__name__}: {exc}") from None
    return _frames(runs)


_NOT_A_RUN = "not a run"


def _runs_of(value: Any) -> Iterator[tuple[Any, str, str | None]]:
    """``(run, shape, parent id from nesting)`` for every run in a decoded JSON value,
    nested ``child_runs`` flattened (iteratively; trees can be deep). An item of a list of
    runs that is not a run comes with the shape :data:`_NOT_A_RUN` (it is reported)."""
    if _is_batch(value):
        value, shape = _merge_batch(value), "batch"
    else:
        shape = _shape(value)
    stack: list[tuple[Any, str | None, bool]] = [(value, None, False)]
    while stack:
        item, parent, listed = stack.pop()
        if isinstance(item, list):
            stack.extend((x, parent, True) for x in reversed(item))
        elif _is_run(item):
            children = item.get("child_runs")
            yield item, shape, parent
            if isinstance(children, list):
                own = str(item.get("id") or item.get("run_id"))
                stack.extend((child, own, True) for child in reversed(children))
        elif isinstance(item, dict) and any(isinstance(item.get(k), list) for k in ENVELOPE_KEYS):
            key = next(k for k in ENVELOPE_KEYS if isinstance(item.get(k), list))
            stack.append((item[key], parent, False))
        elif listed:
            yield item, _NOT_A_RUN, parent


def _shape(value: Any) -> str:
    """The on-disk shape of a JSON value, for ``langsmith.export``."""
    run = _first_run(value)
    if run is not None and _is_cli_run(run):
        return "cli"
    if run is not None and run.get("child_runs"):
        return "read_run"
    if isinstance(value, dict) and isinstance(value.get("items"), list):
        return "rest v2"
    if isinstance(value, dict) and isinstance(value.get("runs"), list):
        return "rest"
    if run is not None and (str(run.get("run_type")).isupper() or "project_id" in run):
        return "rest v2"
    return "list_runs"


def _frames(runs: list[tuple[dict[str, Any], str, str | None]]) -> Decoded:
    decoded = Decoded()
    for index, (run, shape, nested_parent) in enumerate(runs):
        if shape == _NOT_A_RUN:
            decoded.problems.append(
                f"item {index}: a {type(run).__name__}, not a LangSmith run (no known "
                "run_type with an id and a trace_id or dotted_order); skipped"
            )
            continue
        try:
            decoded.spans.append(run_to_span(run, shape=shape, nested_parent=nested_parent))
        except ValueError as exc:
            decoded.problems.append(f"run {index} ({str(run.get('name'))[:80]!r}): {exc}")
    return decoded


def run_to_span(
    run: dict[str, Any], *, shape: str = "list_runs", nested_parent: str | None = None
) -> SpanFrame:
    """One LangSmith run as a span (see the module docstring). Raises ``ValueError`` when
    the run has no id."""
    run_id = _uuid_text(run.get("id") or run.get("run_id"))
    if not run_id:
        raise ValueError("run has no id (id / run_id); skipped")
    segments = _dotted_segments(run.get("dotted_order"))
    trace = _uuid_text(run.get("trace_id")) or (segments[0][1] if segments else None) or run_id
    parent = _parent_of(run, segments, nested_parent)
    start_ns = time_ns(run.get("start_time"))
    if start_ns is None and segments:
        start_ns = segments[-1][0]
    end_ns = time_ns(run.get("end_time"))
    duration = _number(run.get("duration_ms"))
    if end_ns is None and start_ns is not None and duration is not None:
        if not math.isfinite(duration) or abs(duration) > MAX_TIME_NS / 1e6:
            raise ValueError(f"duration_ms {duration} is out of range")
        end_ns = start_ns + int(duration * 1_000_000)
    for value, name in ((start_ns, "start_time"), (end_ns, "end_time")):
        if value is not None:
            check_time(value, name)
    attributes = {EXPORT_ATTR: shape}
    for key, value in run.items():
        if key == "child_runs" or value is None:
            continue
        attributes[ATTR_PREFIX + key] = _field_value(key, value)
    error = run.get("error")
    status = str(run.get("status") or "").lower()
    if error or status == "error":
        status_code = "ERROR"
    elif status == "success":
        status_code = "OK"
    else:
        status_code = "UNSET"
    run_type = str(run.get("run_type") or "").lower()
    return SpanFrame(
        trace_id=derived_id(trace, size=16),
        span_id=derived_id(run_id, size=8),
        parent_span_id=derived_id(parent, size=8) if parent else None,
        name=str(run.get("name") or run_type or "run"),
        kind="CLIENT" if run_type in ("llm", "embedding", "retriever") else "INTERNAL",
        start_ns=start_ns or 0,
        end_ns=end_ns if end_ns is not None else start_ns or 0,
        status_code=status_code,
        status_message=str(error) if error else None,
        attributes=attributes,
        scope_name=SCOPE_NAME,
    )


def _parent_of(
    run: dict[str, Any], segments: list[tuple[int | None, str]], nested_parent: str | None
) -> str | None:
    parent = _uuid_text(run.get("parent_run_id"))
    if parent:
        return parent
    if len(segments) > 1:
        return segments[-2][1]
    ancestors = _field_value("parent_run_ids", run.get("parent_run_ids"))
    if isinstance(ancestors, list) and ancestors:
        return _uuid_text(ancestors[-1])
    return _uuid_text(nested_parent)


def _uuid_text(value: Any) -> str | None:
    """A run/trace id in one canonical spelling (lower-case dashed UUID when it is one),
    so the same id hashes to the same span id whichever way a dump wrote it."""
    if value is None or value == "":
        return None
    if isinstance(value, bytes | bytearray) and len(value) == 16:
        return str(uuid.UUID(bytes=bytes(value)))
    text = str(value).strip()
    try:
        return str(uuid.UUID(text))
    except ValueError:
        return text or None


def _dotted_segments(value: Any) -> list[tuple[int | None, str]]:
    """``(start ns, run id)`` per ``dotted_order`` segment, root first ([] if unparseable)."""
    if not isinstance(value, str) or not value:
        return []
    out: list[tuple[int | None, str]] = []
    for part in value.split("."):
        match = _DOTTED.match(part)
        if match is None:
            return []
        date, clock, fraction, run_id = match.groups()
        stamp = f"{date[:4]}-{date[4:6]}-{date[6:]}T{clock[:2]}:{clock[2:4]}:{clock[4:]}"
        if fraction:
            stamp += "." + fraction
        out.append((time_ns(stamp + "Z"), _uuid_text(run_id) or run_id))
    return out


def _field_value(key: str, value: Any) -> Any:
    """A run field as a plain JSON-compatible value; JSON-string columns decoded. Raises
    ``ValueError`` for a value nested more than ``MAX_DEPTH`` levels deep."""
    if key in JSON_FIELDS and isinstance(value, str) and value[:1] in ("{", "["):
        try:
            value = jsontext.loads_value(value)
        except ValueError:
            return value
    try:
        return _plain(value)
    except _TooDeep:
        raise ValueError(f"{key} is nested more than {jsontext.MAX_DEPTH} levels deep") from None


class _TooDeep(ValueError):
    pass


def _plain(value: Any, depth: int = 0) -> Any:
    """Recursively convert SDK/Parquet values (UUID, Decimal, datetime, bytes) to JSON ones."""
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if depth >= jsontext.MAX_DEPTH:
        raise _TooDeep
    if isinstance(value, dict):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v, depth + 1) for v in value]
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, uuid.UUID | Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return _uuid_text(value) if len(value) == 16 else bytes(value).hex()
    return str(value)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


#: The formats of this module, registered by the built-in plugin (:mod:`otelcar.plugins`).
FORMATS = (
    ExportFormat(
        FORMAT_RUNS,
        "LangSmith runs: list_runs dumps (JSONL/JSON), read_run trees, REST v1/v2 pages",
        decode_json,
        detect=detect_runs,
        decode_value=decode_value,
    ),
    ExportFormat(
        FORMAT_CLI,
        "LangSmith CLI: `langsmith trace export` / `run export` JSONL, `trace get` JSON",
        decode_json,
        detect=detect_cli,
        decode_value=decode_value,
    ),
    ExportFormat(
        FORMAT_PARQUET,
        "LangSmith bulk data export (Parquet)",
        decode_parquet,
        magic=b"PAR1",
    ),
)
