"""JSON Schemas of the results otelcar writes (``schemas/*.schema.json``, ``otelcar schema``):
the report side of each estimator's result, kept apart from the estimators that compute it."""

from __future__ import annotations

from typing import Any

from otelcar.attribution.aggregate import AGGREGATE_VERSION, CLASSES, TRACE_STATUSES
from otelcar.attribution.context.documents import WhyDocument
from otelcar.attribution.fixes.documents import FixDocument
from otelcar.report.documents import AttributionReportDocument
from otelcar.typeschema import document_schema


def attribution_schema_document() -> dict[str, Any]:
    """JSON Schema of an attribution result (``schemas/attribution.schema.json``), generated
    from :class:`~otelcar.report.documents.AttributionReportDocument`: ``timeline`` and
    ``alternatives`` are optional report sections that result writers add
    (:func:`otelcar.report.with_report_sections`) so the result can be drawn again."""
    return document_schema(
        AttributionReportDocument, name="attribution.schema.json", title="otelcar attribute --json"
    )


def why_schema_document() -> dict[str, Any]:
    """JSON Schema of ``otelcar why --json`` (``schemas/why.schema.json``), generated from
    :class:`~otelcar.attribution.context.documents.WhyDocument`."""
    return document_schema(WhyDocument, name="why.schema.json", title="otelcar why --json")


def fix_schema_document() -> dict[str, Any]:
    """JSON Schema of ``otelcar fix --json`` (``schemas/fix.schema.json``), generated from
    :class:`~otelcar.attribution.fixes.documents.FixDocument`."""
    return document_schema(FixDocument, name="fix.schema.json", title="otelcar fix --json")


def aggregate_schema_document() -> dict[str, Any]:
    """JSON Schema of ``otelcar aggregate --json`` (``schemas/aggregate.schema.json``)."""
    interval = {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2}
    nullable_interval = {"oneOf": [{"type": "null"}, interval]}
    step = {
        "type": "object",
        "required": [
            "identity",
            "traces",
            "culprit",
            "share",
            "share_ci",
            "expected",
            "p_value",
            "p_adjusted",
            "mean_delta",
            "mean_delta_ci",
            "classification",
        ],
        "properties": {
            "identity": {"type": "string"},
            "traces": {"type": "integer"},
            "decisions": {"type": "integer"},
            "culprit": {"type": "integer"},
            "share": {"type": "number"},
            "share_ci": interval,
            "expected": {"type": "number"},
            "p_value": {"type": "number"},
            "p_adjusted": {"type": "number"},
            "mean_delta": {"type": ["number", "null"]},
            "mean_delta_ci": nullable_interval,
            "delta_sd": {"type": ["number", "null"]},
            "effect_traces": {"type": "integer"},
            "classification": {"enum": list(CLASSES)},
        },
    }
    trace = {
        "type": "object",
        "required": ["trace_id", "status"],
        "properties": {
            "trace_id": {"type": "string"},
            "status": {"enum": list(TRACE_STATUSES)},
            "verdict": {"enum": ["culprit", "locked-in", "undecided", None]},
            "culprit_step": {"type": ["integer", "null"]},
            "culprit_identity": {"type": ["string", "null"]},
            "delta": {"type": ["number", "null"]},
            "delta_ci": nullable_interval,
            "p_adjusted": {"type": ["number", "null"]},
            "headline": {"type": ["string", "null"]},
            "reason": {"type": ["string", "null"]},
            "effects": {"type": "object", "additionalProperties": {"type": "number"}},
            "decisions": {"type": "object", "additionalProperties": {"type": "integer"}},
            "cost": {"type": "object"},
        },
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "otelcar/aggregate.schema.json",
        "title": "otelcar aggregate --json",
        "type": "object",
        "required": ["version", "kind", "confidence", "headline", "counts", "steps", "traces"],
        "properties": {
            "version": {"const": AGGREGATE_VERSION},
            "kind": {"const": "aggregate"},
            "service": {"type": ["string", "null"]},
            "since": {"type": ["string", "null"]},
            "confidence": {"type": "number"},
            "headline": {"type": "string"},
            "counts": {
                "type": "object",
                "properties": {s: {"type": "integer"} for s in TRACE_STATUSES},
            },
            "method": {"type": "object"},
            "steps": {"type": "array", "items": step},
            "traces": {"type": "array", "items": trace},
            "cost": {"type": "object"},
            "notes": {"type": "array", "items": {"type": "string"}},
        },
    }
