"""JSON Schemas of kept timelines and their diffs: ``otelcar timelines --json``
(``timelines-list.schema.json``), ``otelcar show --timeline --json`` (``timeline.schema.json``)
and ``otelcar diff --json`` (``diff.schema.json``)."""

from __future__ import annotations

from typing import Any

from otelcar.replay.divergence import DIFF_VERSION
from otelcar.replay.timelines import TIMELINE_VERSION

_MESSAGE = {"$ref": "message.schema.json"}
_NULLABLE_STRING = {"type": ["string", "null"]}
_NULLABLE_INT = {"type": ["integer", "null"]}
_NULLABLE_BOOL = {"type": ["boolean", "null"]}


def _info() -> dict[str, Any]:
    rollout = {
        "type": "object",
        "required": ["rollout", "status", "failed", "error"],
        "properties": {
            "rollout": {"type": "integer"},
            "status": {"enum": ["final", "horizon", "truncated", "failed", "budget", "running"]},
            "failed": _NULLABLE_BOOL,
            "error": _NULLABLE_STRING,
            "own_trace": {
                "type": "boolean",
                "description": "the rollout made a trace of its own (a live rollout whose agent "
                "sent its spans): `otelcar show TRACE --timeline NAME --rollout N --own-trace`",
            },
        },
    }
    return {
        "type": "object",
        "required": [
            "version",
            "kind",
            "name",
            "trace_id",
            "plan",
            "plan_text",
            "seed",
            "rollouts",
            "judged",
            "failed",
            "policies",
            "outcome",
            "recorded_failed",
            "cost",
            "created",
        ],
        "properties": {
            "version": {"const": TIMELINE_VERSION},
            "kind": {"const": "timeline"},
            "name": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"},
            "trace_id": {"type": "string"},
            "plan": {
                "type": "object",
                "required": ["interventions"],
                "description": "the plan as Plan.to_dict() (otelcar rollout --plan reads it)",
            },
            "plan_text": {"type": "string"},
            "seed": {"type": "integer"},
            "rollouts": {"type": "array", "items": rollout},
            "judged": {"type": "integer"},
            "failed": {"type": "integer"},
            "policies": {"type": "object", "additionalProperties": {"type": "string"}},
            "outcome": _NULLABLE_STRING,
            "recorded_failed": _NULLABLE_BOOL,
            "cost": {"type": "object", "additionalProperties": {"type": "integer"}},
            "created": {"type": "string"},
            "otelcar_version": {"type": "string"},
            "note": _NULLABLE_STRING,
            "extra": {"type": "object"},
        },
    }


def _decision(*, context: bool) -> dict[str, Any]:
    observation = {
        "type": "object",
        "required": ["name", "arguments", "result", "error", "origin"],
        "properties": {
            "name": _NULLABLE_STRING,
            "arguments": {},
            "result": _NULLABLE_STRING,
            "error": _NULLABLE_STRING,
            "origin": {"type": "string"},
        },
    }
    properties: dict[str, Any] = {
        "index": {"type": "integer"},
        "recorded_step": _NULLABLE_INT,
        "name": {"type": "string"},
        "agent": _NULLABLE_STRING,
        "origin": {
            "type": "string",
            "description": "recorded | do | removed | policy:<name> | cache:<name>",
        },
        "action": {"oneOf": [_MESSAGE, {"type": "null"}]},
        "action_text": {"type": "string"},
        "context_messages": _NULLABLE_INT,
        "observations": {"type": "array", "items": observation},
    }
    required = list(properties)
    if context:
        properties["context"] = {"oneOf": [{"type": "array", "items": _MESSAGE}, {"type": "null"}]}
        required.append("context")
    return {"type": "object", "required": required, "properties": properties}


def timelines_list_schema_document() -> dict[str, Any]:
    """JSON Schema of ``otelcar timelines TRACE --json``."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "otelcar/timelines-list.schema.json",
        "title": "otelcar timelines of one trace",
        "type": "object",
        "required": ["trace_id", "timelines", "problems"],
        "properties": {
            "trace_id": {"type": "string"},
            "timelines": {"type": "array", "items": _info()},
            "problems": {
                "type": "array",
                "items": {"type": "string"},
                "description": "timelines that could not be read, one line each",
            },
        },
    }


def timeline_schema_document() -> dict[str, Any]:
    """JSON Schema of ``otelcar show TRACE --timeline NAME --json``."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "otelcar/timeline.schema.json",
        "title": "otelcar timeline, one rollout",
        "type": "object",
        "required": ["timeline", "rollout", "decisions"],
        "properties": {
            "timeline": _info(),
            "rollout": {"type": "integer"},
            "decisions": {"type": "array", "items": _decision(context=True)},
        },
    }


def diff_schema_document() -> dict[str, Any]:
    """JSON Schema of ``otelcar diff TRACE A [B] --json``."""
    run = {
        "type": "object",
        "required": ["label", "decisions", "status", "failed"],
        "properties": {
            "label": {"type": "string"},
            "decisions": {"type": "integer"},
            "status": {"type": "string"},
            "failed": _NULLABLE_BOOL,
        },
    }
    context = {
        "type": "object",
        "required": ["status", "shared", "a_only", "b_only"],
        "properties": {
            "status": {"enum": ["same", "differs", "unknown"]},
            "shared": {"type": "integer"},
            "a_only": {"type": "array", "items": _MESSAGE},
            "b_only": {"type": "array", "items": _MESSAGE},
        },
    }
    decision = {"oneOf": [_decision(context=False), {"type": "null"}]}
    step = {
        "type": "object",
        "required": ["index", "parts", "context", "same_action", "a", "b"],
        "properties": {
            "index": {"type": "integer"},
            "parts": {"enum": ["context", "action", "length", None]},
            "context": context,
            "same_action": {"type": "boolean"},
            "a": decision,
            "b": decision,
        },
    }
    parting = {
        "type": "object",
        "required": ["rollout", "parted_at", "parted_on", "recorded_step", "failed", "status"],
        "properties": {
            "rollout": {"type": "integer"},
            "parted_at": _NULLABLE_INT,
            "parted_on": {"enum": ["context", "action", "length", None]},
            "recorded_step": _NULLABLE_INT,
            "failed": _NULLABLE_BOOL,
            "status": {"type": "string"},
        },
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "otelcar/diff.schema.json",
        "title": "otelcar diff of two runs of one trace",
        "type": "object",
        "required": [
            "version",
            "kind",
            "trace_id",
            "a",
            "b",
            "headline",
            "detail",
            "rollouts",
            "a_failed",
            "a_judged",
            "never_parted",
        ],
        "properties": {
            "version": {"const": DIFF_VERSION},
            "kind": {"const": "diff"},
            "trace_id": {"type": "string"},
            "a": {"type": "string", "description": "timeline A's name"},
            "b": {"type": "string", "description": "timeline B's name, or 'recorded'"},
            "a_plan": {"type": "string"},
            "b_plan": {"type": "string"},
            "headline": {"type": "string"},
            "detail": {
                "type": "object",
                "required": ["a", "b", "parted_at", "parted_on", "shared_decisions", "steps"],
                "properties": {
                    "a": run,
                    "b": run,
                    "parted_at": _NULLABLE_INT,
                    "parted_on": {"enum": ["context", "action", "length", None]},
                    "shared_decisions": {"type": "integer"},
                    "steps": {"type": "array", "items": step},
                },
            },
            "rollouts": {"type": "array", "items": parting},
            "a_failed": {"type": "integer"},
            "a_judged": {"type": "integer"},
            "never_parted": {"type": "integer"},
        },
    }
