"""Langfuse export files → one span per observation (``reference/exports.md`` §2).

Accepted records (camelCase API/UI fields or snake_case blob/``model_dump`` fields, one alias
table; ``""`` counts as missing):

- one observation row, or a JSON array of rows: UI Observations export (JSON, JSONL), SDK
  object dumps, blob-storage ``observations_v2``/``observations`` JSON(L) → layout ``rows``
  (camelCase) or ``snake-rows``;
- CSV with an observation header: UI Observations export, blob-storage CSV → ``csv``;
- ``{"observations": [...], "scores": [...]}``: the UI's "Download JSON" of one trace
  (server route) → ``trace-download``;
- ``{"trace": {...}, "observations": [...]}``: the older, client-side download →
  ``trace-object``;
- a trace with its ``observations`` inline: ``GET /api/public/traces/{id}``
  (``TraceWithFullDetails``) → ``api-trace``;
- ``{"data": [...], "meta": {...}}``: ``GET /api/public/observations`` (v1) and
  ``/api/public/v2/observations`` → ``api-page``.

The layout is kept as the attribute ``langfuse.export.format``.

Trace rows (UI Traces export, blob ``traces/``, ``GET /api/public/traces`` pages) are
recognised but hold no observations, so they give no span: the record is kept with that
reason. Inside an envelope that has both, the trace's session, user, name and tags are
copied onto its observations.

Each observation becomes a :class:`SpanFrame`: trace and span ids via
:func:`~otelcar.ingest.formats.derived_id` (OTel-era hex ids stay as they are, so an export
and the SDK's own spans of one run share ids; v2-SDK UUIDs are hashed), parent from
``parentObservationId`` (``""`` is a root), times from ISO/blob/epoch timestamps (no zone
means UTC), status ``ERROR`` with ``statusMessage`` when ``level`` is ``ERROR``. Fields go
under the SDK's own attribute names, so :mod:`otelcar.conventions.langfuse` maps exports and
OTel spans alike: ``type`` → ``langfuse.observation.type`` (lower-cased), ``input``,
``output``, ``model``/``providedModelName`` → ``….model.name``, ``modelParameters`` →
``….model.parameters``, ``usageDetails`` → ``….usage_details``, ``costDetails``,
``completionStartTime``, ``level``, ``statusMessage``, ``promptName``/``promptVersion``,
metadata keys → ``langfuse.observation.metadata.<key>``, ``sessionId`` → ``session.id``,
``userId`` → ``user.id``, ``traceName`` → ``langfuse.trace.name``, ``tags`` →
``langfuse.trace.tags``, ``environment``/``release``/``version`` → ``langfuse.<field>``.
Every other field is kept as ``langfuse.export.<snake_case name>`` (``tool_definitions``,
``tool_calls``, ``latency``, costs, …). OTel-era metadata's ``resourceAttributes`` and
``scope`` become the span's resource and instrumentation scope. Values are kept as found
(JSON-in-string columns stay strings; the mapper decodes them), except that CSV cells
holding a JSON object or array other than ``input``/``output`` are decoded.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from typing import Any

import polars as pl

from otelcar.errors import FormatError
from otelcar.ingest import jsontext
from otelcar.ingest.exports.timestamps import time_ns
from otelcar.ingest.formats import ExportFormat, derived_id
from otelcar.ingest.frames import Decoded, SpanFrame, check_time

FORMAT_JSON = "langfuse"
FORMAT_CSV = "langfuse-csv"
SCOPE = "langfuse-export"
OBSERVATION_TYPES = frozenset(
    {
        "SPAN",
        "GENERATION",
        "EVENT",
        "AGENT",
        "TOOL",
        "CHAIN",
        "RETRIEVER",
        "EMBEDDING",
        "EVALUATOR",
        "GUARDRAIL",
    }
)
#: Keys that mark another format's record (LangSmith runs, Who&When logs, OTLP).
FOREIGN_KEYS = frozenset(
    {"run_type", "dotted_order", "history", "mistake_agent", "resourceSpans", "resource_spans"}
)
#: Canonical (snake_case) field → its spellings in the exports.
ALIASES: dict[str, tuple[str, ...]] = {
    "trace_id": ("traceId", "trace_id"),
    "parent_observation_id": ("parentObservationId", "parent_observation_id"),
    "start_time": ("startTime", "start_time"),
    "end_time": ("endTime", "end_time"),
    "completion_start_time": ("completionStartTime", "completion_start_time"),
    "model": ("model", "providedModelName", "provided_model_name"),
    "model_parameters": ("modelParameters", "model_parameters"),
    "usage_details": ("usageDetails", "usage_details"),
    "cost_details": ("costDetails", "cost_details"),
    "status_message": ("statusMessage", "status_message"),
    "prompt_name": ("promptName", "prompt_name"),
    "prompt_version": ("promptVersion", "prompt_version"),
    "session_id": ("sessionId", "session_id"),
    "user_id": ("userId", "user_id"),
    "trace_name": ("traceName", "trace_name"),
    "tags": ("tags", "traceTags", "trace_tags"),
}
_CANONICAL = {spelling: key for key, spellings in ALIASES.items() for spelling in spellings}
OBS = "langfuse.observation."
#: Canonical field → the span attribute the Langfuse SDK itself uses for it.
ATTRIBUTE_OF = {
    "input": OBS + "input",
    "output": OBS + "output",
    "model": OBS + "model.name",
    "model_parameters": OBS + "model.parameters",
    "usage_details": OBS + "usage_details",
    "cost_details": OBS + "cost_details",
    "completion_start_time": OBS + "completion_start_time",
    "level": OBS + "level",
    "status_message": OBS + "status_message",
    "prompt_name": OBS + "prompt.name",
    "prompt_version": OBS + "prompt.version",
    "session_id": "session.id",
    "user_id": "user.id",
    "trace_name": "langfuse.trace.name",
    "tags": "langfuse.trace.tags",
    "environment": "langfuse.environment",
    "release": "langfuse.release",
    "version": "langfuse.version",
}
EXPORT = "langfuse.export."
_STRUCTURAL = frozenset(
    {"id", "trace_id", "parent_observation_id", "type", "name", "start_time", "end_time"}
)
_TRACE_CONTEXT = {"session_id": "sessionId", "user_id": "userId", "tags": "tags"}


class _RowError(ValueError):
    """One row that is not a usable observation (reported, the others still decode)."""


# --------------------------------------------------------------------------------------
# Detection
# --------------------------------------------------------------------------------------


def _field(row: dict[str, Any], key: str) -> Any:
    """A row's field under any of its spellings; ``""`` and ``None`` count as missing."""
    for spelling in ALIASES.get(key, (key,)):
        value = row.get(spelling)
        if value is not None and value != "":
            return value
    return None


def is_observation(value: Any) -> bool:
    """A Langfuse observation row: id, trace id, a known ``type`` and a start time."""
    if not isinstance(value, dict) or FOREIGN_KEYS & value.keys():
        return False
    kind = value.get("type")
    return (
        isinstance(kind, str)
        and kind.upper() in OBSERVATION_TYPES
        and value.get("id") is not None
        and _field(value, "trace_id") is not None
        and _field(value, "start_time") is not None
    )


def is_trace(value: Any) -> bool:
    """A Langfuse trace row: id, timestamp, user/session fields and the UI flags."""
    if not isinstance(value, dict) or FOREIGN_KEYS & value.keys() or "type" in value:
        return False
    has_people = any(k in value for k in ("sessionId", "session_id", "userId", "user_id"))
    has_flags = any(k in value for k in ("bookmarked", "public", "htmlPath"))
    return "id" in value and "timestamp" in value and has_people and has_flags


def _is_row(value: Any) -> bool:
    return is_observation(value) or is_trace(value)


def detect(value: Any) -> bool:
    """Whether a JSON value is a Langfuse export record (see the module docstring)."""
    if isinstance(value, list):
        return bool(value) and _is_row(value[0])
    if not isinstance(value, dict) or FOREIGN_KEYS & value.keys():
        return False
    observations = value.get("observations")
    if isinstance(observations, list):
        if "trace" in value or "scores" in value:
            return True
        return is_trace({**value, "observations": None}) or (
            bool(observations) and _is_row(observations[0])
        )
    data = value.get("data")
    if isinstance(data, list) and isinstance(value.get("meta"), dict):
        return bool(data) and _is_row(data[0])
    return _is_row(value)


def claims_head(head: bytes) -> bool:
    """Whether a file's first bytes are a CSV header of Langfuse observations or traces."""
    line = head.split(b"\n", 1)[0].decode("utf-8-sig", errors="replace").strip()
    if "," not in line or line[:1] in ("{", "["):
        return False
    columns = set(next(csv.reader([line]), []))
    if "run_type" in columns:
        return False
    camel = {"id", "traceId", "type", "startTime"} <= columns
    snake = {"id", "trace_id", "type", "start_time"} <= columns
    return camel or snake or is_trace(dict.fromkeys(columns, ""))


# --------------------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------------------


def decode_json(payload: bytes) -> Decoded:
    """One JSON record (a row, a list of rows, or an envelope) → spans."""
    return decode_value(*jsontext.loads(payload))


def decode_value(value: Any, replaced: int) -> Decoded:
    """:func:`decode_json` of a record already parsed (``replaced``: surrogates replaced)."""
    decoded = _decode_rows(_rows_of(value))
    if replaced:
        decoded.problems.append(jsontext.surrogate_note(replaced))
    return decoded


def decode_csv(payload: bytes) -> Decoded:
    """A CSV export (header row + one row per observation or trace) → spans."""
    try:
        table = pl.read_csv(io.BytesIO(payload), infer_schema=False, encoding="utf8-lossy")
        rows = [{k: _csv_cell(k, v) for k, v in row.items()} for row in table.iter_rows(named=True)]
    # A panic of polars on a corrupt file is a BaseException, not an Exception.
    except (pl.exceptions.PolarsError, ValueError, pl.exceptions.PanicException) as exc:
        raise FormatError(f"unreadable CSV: {exc}") from None
    return _decode_rows(iter([(rows, "csv", None)]))


def _csv_cell(key: str, value: str | None) -> Any:
    """A CSV cell: empty → missing; JSON objects/arrays decoded except input/output, which
    the UI exports as the raw stored text."""
    if value is None or value == "":
        return None
    if key not in ("input", "output") and value.lstrip()[:1] in ("{", "["):
        try:
            return jsontext.loads_value(value)
        except ValueError:
            return value
    return value


def _rows_of(value: Any) -> Iterator[tuple[list[Any], str, dict[str, Any] | None]]:
    """``(rows, layout, trace)`` groups of a decoded JSON record."""
    if isinstance(value, list):
        yield value, _row_layout(value[0] if value else None), None
        return
    if not isinstance(value, dict):
        raise FormatError(f"JSON is a {type(value).__name__}, not a Langfuse export")
    observations = value.get("observations")
    if isinstance(observations, list):
        if isinstance(value.get("trace"), dict):
            yield observations, "trace-object", value["trace"]
        elif "id" in value and "timestamp" in value:
            yield observations, "api-trace", value
        else:
            yield observations, "trace-download", None
        return
    if isinstance(value.get("data"), list):
        yield value["data"], "api-page", None
        return
    yield [value], _row_layout(value), None


def _row_layout(row: Any) -> str:
    return "snake-rows" if isinstance(row, dict) and "trace_id" in row else "rows"


def _decode_rows(groups: Iterator[tuple[list[Any], str, dict[str, Any] | None]]) -> Decoded:
    decoded = Decoded()
    traces = 0
    for rows, layout, trace in groups:
        for index, row in enumerate(rows):
            if is_trace(row):
                traces += 1
                continue
            try:
                decoded.spans.append(observation_span(row, layout, trace))
            except _RowError as exc:
                decoded.problems.append(f"row {index}: {exc}")
    if traces:
        decoded.problems.append(
            f"{traces} Langfuse trace row(s) hold no observations, so no steps: export the "
            "Observations table, or download the trace as JSON, for its steps"
        )
    if not decoded.spans and not decoded.problems:
        raise FormatError("no Langfuse observations in this record")
    return decoded


def observation_span(row: Any, layout: str, trace: dict[str, Any] | None = None) -> SpanFrame:
    """One observation row as a span (see the module docstring for the field mapping)."""
    if isinstance(row, str):
        raise _RowError(f"observation {row!r} is listed by id only; its fields are not here")
    if not isinstance(row, dict):
        raise _RowError(f"a {type(row).__name__}, not an observation object")
    obs_id, trace_id = row.get("id"), _field(row, "trace_id")
    obs_type = row.get("type")
    if obs_id in (None, "") or trace_id is None or not isinstance(obs_type, str):
        raise _RowError("not a Langfuse observation (no id, traceId or type)")
    try:
        jsontext.check_depth(row, f"observation {str(obs_id)[:80]!r}")
        start = time_ns(_field(row, "start_time"))
        if start is None:
            raise _RowError(f"observation {str(obs_id)[:80]}: no readable startTime")
        end = time_ns(_field(row, "end_time"))
        check_time(start, "startTime")
        if end is not None:
            check_time(end, "endTime")
    except _RowError:
        raise
    except ValueError as exc:
        raise _RowError(str(exc)) from None
    attributes: dict[str, Any] = {OBS + "type": obs_type.lower(), EXPORT + "format": layout}
    if end is None:
        end = start
        attributes[EXPORT + "end_time_missing"] = True
    resource, scope = _fields_to_attributes(row, attributes)
    _add_trace_context(trace, attributes)
    parent = _field(row, "parent_observation_id")
    level = str(row.get("level") or "").upper()
    message = _field(row, "status_message")
    return SpanFrame(
        trace_id=derived_id(str(trace_id), size=16),
        span_id=derived_id(str(obs_id), size=8),
        parent_span_id=derived_id(str(parent), size=8) if parent is not None else None,
        name=str(row.get("name") or obs_type.lower()),
        kind="INTERNAL",
        start_ns=start,
        end_ns=max(start, end),
        status_code="ERROR" if level == "ERROR" else "UNSET",
        status_message=str(message) if level == "ERROR" and message is not None else None,
        attributes=attributes,
        resource=resource,
        scope_name=_text(scope.get("name")) or SCOPE,
        scope_version=_text(scope.get("version")),
    )


def _fields_to_attributes(
    row: dict[str, Any], attributes: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Copy a row's fields into span attributes; returns the resource and scope found in
    OTel-era metadata."""
    resource: dict[str, Any] = {}
    scope: dict[str, Any] = {}
    for key, value in row.items():
        canonical = _CANONICAL.get(key, key)
        if canonical in _STRUCTURAL or value is None or value == "":
            continue
        if canonical == "metadata":
            resource, scope = _metadata(value, attributes)
            continue
        attribute = ATTRIBUTE_OF.get(canonical) or EXPORT + _snake(canonical)
        attributes.setdefault(attribute, value)
    return resource, scope


def _metadata(value: Any, attributes: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Metadata keys → ``langfuse.observation.metadata.<key>``; resource and scope lifted."""
    value = _loose(value)
    if not isinstance(value, dict):
        attributes[OBS + "metadata"] = value
        return {}, {}
    resource = _loose(value.get("resourceAttributes"))
    scope = _loose(value.get("scope"))
    for key, item in value.items():
        if key not in ("resourceAttributes", "scope") and item is not None:
            attributes[f"{OBS}metadata.{key}"] = item
    return (
        resource if isinstance(resource, dict) else {},
        scope if isinstance(scope, dict) else {},
    )


def _add_trace_context(trace: dict[str, Any] | None, attributes: dict[str, Any]) -> None:
    """Copy an enclosing trace's session, user, tags and name onto its observation."""
    if not trace:
        return
    for canonical in _TRACE_CONTEXT:
        value = _field(trace, canonical)
        if value is not None:
            attributes.setdefault(ATTRIBUTE_OF[canonical], value)
    if trace.get("name"):
        attributes.setdefault(ATTRIBUTE_OF["trace_name"], trace["name"])


def _loose(value: Any) -> Any:
    """JSON text of an object or array decoded; anything else as it is."""
    if isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
        try:
            return jsontext.loads_value(value)
        except ValueError:
            return value
    return value


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


#: The formats of this module, registered by the built-in plugin (:mod:`otelcar.plugins`).
FORMATS = (
    ExportFormat(
        FORMAT_JSON,
        "Langfuse exports: UI observation/trace exports (JSON, JSONL), trace downloads, "
        "public API answers, blob-storage JSON/JSONL",
        decode_json,
        detect=detect,
        decode_value=decode_value,
    ),
    ExportFormat(
        FORMAT_CSV,
        "Langfuse CSV exports (UI Observations/Traces tables, blob storage)",
        decode_csv,
        claims_head=claims_head,
    ),
)
