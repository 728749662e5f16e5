"""JSON Schemas of the results otelcar writes (``schemas/*.schema.json``, ``otelcar schema``):
the report side of each estimator's result, kept apart from the estimators that compute it."""

from __future__ import annotations

from typing import Any

from otelcar.attribution.aggregate import AGGREGATE_VERSION, CLASSES, TRACE_STATUSES
from otelcar.attribution.context.result import TEST_VERDICTS, WHY_VERDICTS, WHY_VERSION
from otelcar.attribution.fixes.result import FIX_KINDS, FIX_VERDICTS, FIX_VERSION
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
    """JSON Schema of ``otelcar why --json`` (``schemas/why.schema.json``)."""
    interval = _interval()
    number_or_null = {"type": ["number", "null"]}
    strings = {"type": "array", "items": {"type": "string"}}
    counts = {"type": "object", "additionalProperties": {"type": "integer"}}
    test = _why_test()
    piece = _why_piece()
    cause = _why_cause(piece)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "otelcar/why.schema.json",
        "title": "otelcar why --json",
        "type": "object",
        "$defs": {"test": test, "piece": piece, "cause": cause},
        "required": [
            "version",
            "kind",
            "trace_id",
            "step",
            "verdict",
            "headline",
            "cause",
            "causes",
            "base",
            "tests",
            "cost",
        ],
        "properties": {
            "version": {"const": WHY_VERSION},
            "kind": {"const": "why"},
            "trace_id": {"type": "string"},
            "step": {"type": "integer"},
            "step_reason": {"type": "string"},
            "decision": {"type": "string"},
            "same": {"type": "string"},
            "same_spec": {"type": "string"},
            "policy": {"type": "string"},
            "verdict": {"enum": list(WHY_VERDICTS)},
            "headline": {"type": "string"},
            "cause": {"oneOf": [{"$ref": "#/$defs/cause"}, {"type": "null"}]},
            "causes": {"type": "array", "items": {"$ref": "#/$defs/cause"}},
            "base": {
                "type": "object",
                "required": ["bad", "n", "rate", "ci", "intermittent"],
                "properties": {
                    "bad": {"type": "integer"},
                    "n": {"type": "integer"},
                    "rate": number_or_null,
                    "ci": interval,
                    "intermittent": {"type": "boolean"},
                    "instead": counts,
                    "alternative": {"type": ["string", "null"]},
                },
            },
            "tests": {"type": "array", "items": {"$ref": "#/$defs/test"}},
            "untested": strings,
            "alpha": {"type": "number"},
            "min_drop": {"type": "number"},
            "confidence": {"type": "number"},
            "correction": {"type": "string"},
            "fill": {"type": "string"},
            "samples": {"type": "integer"},
            "stopped": {"enum": ["done", "budget", "max-tests"]},
            "cost": {"type": "object"},
            "notes": strings,
        },
    }


def _interval() -> dict[str, Any]:
    """A confidence interval: two numbers."""
    return {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2}


def _why_test() -> dict[str, Any]:
    """One test of ``why``: what was removed, the arm's counts and its verdict."""
    interval = _interval()
    number_or_null = {"type": ["number", "null"]}
    strings = {"type": "array", "items": {"type": "string"}}
    counts = {"type": "object", "additionalProperties": {"type": "integer"}}
    return {
        "type": "object",
        "required": ["t", "purpose", "removed", "level", "bad", "n", "p", "verdict"],
        "properties": {
            "t": {"type": "integer"},
            "purpose": {"enum": ["screen", "drill", "joint", "needed", "recheck"]},
            "reference": {"type": ["array", "null"], "items": {"type": "string"}},
            "removed": strings,
            "texts": strings,
            "fill": {"type": "string"},
            "level": {"type": "number"},
            "base": {"type": "object"},
            "bad": {"type": "integer"},
            "n": {"type": "integer"},
            "rate": number_or_null,
            "rate_ci": interval,
            "effect": {"type": "number"},
            "effect_ci": interval,
            "p": number_or_null,
            "p_paired": number_or_null,
            "verdict": {"enum": list(TEST_VERDICTS)},
            "instead": counts,
            "alternative": {"type": ["string", "null"]},
            "plan": {"type": "object"},
            "lost": {
                "type": "object",
                "description": "re-decisions that errored, left out of the counts",
                "properties": {"base": {"type": "integer"}, "arm": {"type": "integer"}},
            },
        },
    }


def _why_piece() -> dict[str, Any]:
    """One piece of a decision's context that ``why`` removes."""
    return {
        "type": "object",
        "required": ["label", "level", "message", "text"],
        "properties": {
            "label": {"type": "string"},
            "level": {"enum": ["message", "item", "paragraph", "line", "sentence"]},
            "message": {"type": "integer"},
            "role": {"type": "string"},
            "source": {"type": ["string", "null"]},
            "path": {"type": "array", "items": {"type": ["string", "integer"]}},
            "span": {"type": ["array", "null"], "items": {"type": "integer"}},
            "text": {"type": "string"},
        },
    }


def _why_cause(piece: dict[str, Any]) -> dict[str, Any]:
    """A cause (or prerequisite) ``why`` found, made of ``piece``s, with its effect."""
    interval = _interval()
    number_or_null = {"type": ["number", "null"]}
    counts = {"type": "object", "additionalProperties": {"type": "integer"}}
    return {
        "type": "object",
        "required": ["kind", "joint", "label", "text", "parts", "effect", "chain"],
        "properties": {
            "kind": {"enum": ["cause", "prerequisite"]},
            "joint": {"type": "boolean"},
            "label": {"type": "string"},
            "text": {"type": "string"},
            "parts": {"type": "array", "items": piece},
            "effect": {
                "type": "object",
                "required": ["base_rate", "rate", "difference", "difference_ci", "p", "counts"],
                "properties": {
                    "base_rate": {"type": "number"},
                    "base_ci": interval,
                    "rate": {"type": "number"},
                    "rate_ci": interval,
                    "difference": {"type": "number"},
                    "difference_ci": interval,
                    "p": {"type": "number"},
                    "p_paired": number_or_null,
                    "level": {"type": "number"},
                    "counts": counts,
                },
            },
            "instead": counts,
            "alternative": {"type": ["string", "null"]},
            "chain": {"type": "array", "items": {"type": "object"}},
            "needed": {"type": "array", "items": {"type": "object"}},
            "recheck": {"type": ["object", "null"]},
        },
    }


def fix_schema_document() -> dict[str, Any]:
    """JSON Schema of ``otelcar fix --json`` (``schemas/fix.schema.json``)."""
    interval = {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2}
    number_or_null = {"type": ["number", "null"]}
    verdict = {"enum": list(FIX_VERDICTS)}
    check = {
        "type": "object",
        "required": ["bad", "n", "ci", "p", "p_adjusted", "verdict"],
        "properties": {
            "bad": {"type": "integer"},
            "n": {"type": "integer"},
            "rate": number_or_null,
            "ci": interval,
            "base_bad": {"type": "integer"},
            "base_n": {"type": "integer"},
            "difference": number_or_null,
            "difference_ci": interval,
            "p": {"type": "number"},
            "p_adjusted": {"type": "number"},
            "verdict": verdict,
            "instead": {"type": "object"},
            "alternative": {"type": ["string", "null"]},
            "alternative_action": {
                "type": ["object", "null"],
                "description": "the most common good action under the fix, whole (a message "
                "of schemas/message.schema.json)",
            },
            "lost": {
                "type": "object",
                "description": "re-decisions that errored, left out of the counts",
                "properties": {"base": {"type": "integer"}, "arm": {"type": "integer"}},
            },
        },
    }
    forward = {
        "type": "object",
        "required": ["failed", "n", "base_failed", "base_n", "p", "p_adjusted", "verdict"],
        "properties": {
            "failed": {"type": "integer"},
            "n": {"type": "integer"},
            "rate": number_or_null,
            "ci": interval,
            "base_failed": {"type": "integer"},
            "base_n": {"type": "integer"},
            "base_rate": number_or_null,
            "difference": number_or_null,
            "difference_ci": interval,
            "pairs": {"type": "object"},
            "p": {"type": "number"},
            "p_adjusted": {"type": "number"},
            "verdict": verdict,
            "errors": {"type": "array", "items": {"type": "string"}},
            "rollouts": {"type": "integer"},
            "rate_below_max": {"type": "boolean"},
        },
    }
    candidate = {
        "type": "object",
        "required": ["name", "kind", "description", "plan", "verdict", "decision", "forward"],
        "properties": {
            "name": {"type": "string"},
            "kind": {"enum": list(FIX_KINDS)},
            "description": {"type": "string"},
            "rule": {"type": ["string", "null"]},
            "plan": {"type": "object"},
            "forward_plan": {"type": ["object", "null"]},
            "verdict": verdict,
            "decision": {"oneOf": [check, {"type": "null"}]},
            "forward": {"oneOf": [forward, {"type": "null"}]},
        },
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "otelcar/fix.schema.json",
        "title": "otelcar fix --json",
        "type": "object",
        "required": [
            "version",
            "kind",
            "trace_id",
            "step",
            "base",
            "headline",
            "best",
            "candidates",
            "cost",
        ],
        "properties": {
            "version": {"const": FIX_VERSION},
            "kind": {"const": "fix"},
            "trace_id": {"type": "string"},
            "step": {"type": "integer"},
            "decision": {"type": "string"},
            "same": {"type": "string"},
            "same_spec": {"type": "string"},
            "cause": {"type": ["string", "null"]},
            "cause_label": {"type": ["string", "null"]},
            "base": {"type": "object"},
            "headline": {"type": "string"},
            "best": {"type": ["string", "null"]},
            "candidates": {"type": "array", "items": candidate},
            "max_rate": {"type": "number"},
            "alpha": {"type": "number"},
            "confidence": {"type": "number"},
            "samples": {"type": "integer"},
            "outcome": {"type": ["string", "null"]},
            "cost": {"type": "object"},
            "notes": {"type": "array", "items": {"type": "string"}},
        },
    }


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
