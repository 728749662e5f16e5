"""Table schemas: the steps table (DESIGN.md §4) and the store's tables, as ``pl.Schema``.

``schemas/steps.schema.json`` and ``schemas/message.schema.json`` are generated from this
module (``python -m otelcar.schema schemas/``) and a test checks they match the code.
"""

from __future__ import annotations

from typing import Annotated, Any

import polars as pl

from otelcar.messages import MESSAGE_DTYPE, MessageDocument
from otelcar.typeschema import Extra, document_schema

SCHEMA_VERSION = 1

PARAMS_DTYPE = pl.Struct(
    {
        "temperature": pl.Float64,
        "top_p": pl.Float64,
        "top_k": pl.Float64,
        "max_tokens": pl.Int64,
        "seed": pl.Int64,
        "stop": pl.List(pl.String),
        "n": pl.Int64,
        "frequency_penalty": pl.Float64,
        "presence_penalty": pl.Float64,
    }
)
USAGE_DTYPE = pl.Struct(
    {
        "input_tokens": pl.Int64,
        "output_tokens": pl.Int64,
        "cache_read_tokens": pl.Int64,
        "reasoning_tokens": pl.Int64,
        "total_tokens": pl.Int64,
    }
)
TOOL_DEFINITION_DTYPE = pl.Struct(
    {"type": pl.String, "name": pl.String, "description": pl.String, "parameters": pl.String}
)

#: One row per step (LLM call, tool call, agent span, other span) of a trace.
STEPS_SCHEMA = pl.Schema(
    {
        "trace_id": pl.String,
        "step": pl.Int64,
        "span_id": pl.String,
        "parent_span_id": pl.String,
        "episode_id": pl.String,
        "kind": pl.String,
        "name": pl.String,
        "agent_name": pl.String,
        "operation": pl.String,
        "start_ns": pl.Int64,
        "end_ns": pl.Int64,
        "status": pl.String,
        "error": pl.String,
        "provider": pl.String,
        "request_model": pl.String,
        "response_model": pl.String,
        "params": PARAMS_DTYPE,
        "input_messages": pl.List(MESSAGE_DTYPE),
        "tools_available": pl.List(TOOL_DEFINITION_DTYPE),
        "tool_choice": pl.String,
        "output": MESSAGE_DTYPE,
        "alternates": pl.List(MESSAGE_DTYPE),
        "n_choices": pl.Int64,
        "finish_reason": pl.String,
        "tool_name": pl.String,
        "tool_call_id": pl.String,
        "tool_args": pl.String,
        "tool_result": pl.String,
        "call_step": pl.Int64,
        "usage": USAGE_DTYPE,
        "response_id": pl.String,
        "conversation_id": pl.String,
        "source": pl.String,
        "content_captured": pl.Boolean,
        "content_truncated": pl.Boolean,
        "link_inferred": pl.Boolean,
        "synthesized": pl.Boolean,
        "merged_span_ids": pl.List(pl.String),
        "issues": pl.List(pl.String),
        "attributes": pl.String,
    }
)

STEP_COLUMN_DOCS: dict[str, str] = {
    "trace_id": "32 lower-case hex digits",
    "step": "0-based order of the step within its trace (depth-first, siblings by start, "
    "end, input order)",
    "span_id": "16 hex digits; null for a tool step synthesized from an assistant tool call",
    "parent_span_id": "parent span (null for a root)",
    "episode_id": "span id of the nearest enclosing invoke_agent span, else of the root",
    "kind": "llm | tool | agent | other",
    "name": "model (llm), tool name (tool), agent name (agent), else the span name",
    "agent_name": "the agent this step belongs to (its own attribute or the enclosing agent)",
    "operation": "gen_ai.operation.name or the dialect's equivalent",
    "start_ns": "span start, ns since the epoch",
    "end_ns": "span end, ns since the epoch",
    "status": "UNSET | OK | ERROR",
    "error": "status message or error.type",
    "provider": "gen_ai.provider.name (or the dialect's equivalent)",
    "request_model": "the model asked for",
    "response_model": "the model that answered",
    "params": "sampling parameters as recorded (null where not recorded)",
    "input_messages": "the full context sent to the model, as normalized messages",
    "tools_available": "tool definitions sent with the request (parameters as JSON text)",
    "tool_choice": "the request's tool choice as recorded: auto | none | required, or the JSON "
    'of a named tool ({"type": "function", "function": {"name": …}}); null: not recorded',
    "output": "the chosen (first) choice as a normalized assistant message",
    "alternates": "the other choices when n > 1",
    "n_choices": "number of choices returned",
    "finish_reason": "stop | length | tool_call | content_filter | error | ...",
    "tool_name": "tool steps: the tool called",
    "tool_call_id": "tool steps: the id of the assistant tool call this step executes",
    "tool_args": "tool steps: arguments as JSON text (an object, or a JSON string when the "
    "recorded arguments were not a JSON object)",
    "tool_result": "tool steps: the result as the model saw it (text)",
    "call_step": "tool steps: the step of the LLM call that requested this call",
    "usage": "token counts",
    "response_id": "provider response id (chatcmpl-...)",
    "conversation_id": "gen_ai.conversation.id",
    "source": "dialect and convention version the row was mapped from",
    "content_captured": "false when the step has no content: capture was off, or its span "
    "carried content no mapper read (an issue 'content unread: …'); null for agent/other",
    "content_truncated": "content was recorded but cut (attribute length limit): not usable",
    "link_inferred": "tool steps linked to their call by name and order, not by id",
    "synthesized": "tool step made from an assistant tool call (no tool span was recorded)",
    "merged_span_ids": "stacked instrumentation spans of the same call merged into this row",
    "issues": "what could not be mapped or looked wrong, in words",
    "attributes": "the span attributes the mapper did not consume, as a JSON object",
}

#: Raw records: one row per verbatim record in the store's raw segments.
RECORDS_SCHEMA = pl.Schema(
    {
        "record_id": pl.String,
        "segment": pl.String,
        "offset": pl.Int64,
        "length": pl.Int64,
        "format": pl.String,
        "signal": pl.String,
        "source": pl.String,
        "position": pl.String,
        "status": pl.String,
        "reason": pl.String,
        "n_spans": pl.Int64,
        "n_logs": pl.Int64,
        "n_rejected": pl.Int64,
        "received_ns": pl.Int64,
        "build_id": pl.Int64,
    }
)

#: Decoded spans, one row per span occurrence (duplicates are resolved when steps are built).
SPANS_SCHEMA = pl.Schema(
    {
        "trace_id": pl.String,
        "span_id": pl.String,
        "parent_span_id": pl.String,
        "name": pl.String,
        "kind": pl.String,
        "start_ns": pl.Int64,
        "end_ns": pl.Int64,
        "status_code": pl.String,
        "status_message": pl.String,
        "attributes": pl.String,
        "events": pl.String,
        "links": pl.String,
        "resource": pl.String,
        "service_name": pl.String,
        "scope_name": pl.String,
        "scope_version": pl.String,
        "dropped_attributes_count": pl.Int64,
        "seq": pl.Int64,
        "record_id": pl.String,
    }
)

#: Decoded log records (GenAI content events among them).
LOGS_SCHEMA = pl.Schema(
    {
        "trace_id": pl.String,
        "span_id": pl.String,
        "time_ns": pl.Int64,
        "observed_time_ns": pl.Int64,
        "event_name": pl.String,
        "body": pl.String,
        "attributes": pl.String,
        "severity_number": pl.Int64,
        "severity_text": pl.String,
        "resource": pl.String,
        "scope_name": pl.String,
        "seq": pl.Int64,
        "record_id": pl.String,
    }
)

#: One row per trace: the listing behind ``otelcar traces``.
TRACES_SCHEMA = pl.Schema(
    {
        "trace_id": pl.String,
        "service": pl.String,
        "root_name": pl.String,
        "start_ns": pl.Int64,
        "end_ns": pl.Int64,
        "n_spans": pl.Int64,
        "n_steps": pl.Int64,
        "n_llm": pl.Int64,
        "n_tool": pl.Int64,
        "n_agent": pl.Int64,
        "n_errors": pl.Int64,
        "n_logs": pl.Int64,
        "n_unlinked_logs": pl.Int64,
        "n_issues": pl.Int64,
        "dialects": pl.List(pl.String),
        "content_captured": pl.String,
        "build_id": pl.Int64,
    }
)


def dtype_to_json(dtype: pl.DataType) -> Any:
    """A Polars dtype as a JSON description (nested types spelled out)."""
    if isinstance(dtype, pl.Struct):
        return {"struct": {f.name: dtype_to_json(f.dtype) for f in dtype.fields}}
    if isinstance(dtype, pl.List):
        return {"list": dtype_to_json(dtype.inner)}
    return str(dtype)


def steps_schema_document() -> dict[str, Any]:
    """The steps-table contract as a JSON document (written to ``schemas/steps.schema.json``)."""
    return {
        "title": "otelcar steps table",
        "version": SCHEMA_VERSION,
        "description": "One row per step of a trace; a Polars DataFrame / Parquet file.",
        "columns": [
            {"name": name, "dtype": dtype_to_json(dtype), "description": STEP_COLUMN_DOCS[name]}
            for name, dtype in STEPS_SCHEMA.items()
        ],
    }


def message_schema_document() -> dict[str, Any]:
    """JSON Schema of one normalized message (``schemas/message.schema.json``), generated
    from :class:`~otelcar.messages.MessageDocument`."""
    return document_schema(
        Annotated[MessageDocument, Extra(additionalProperties=False)],
        name="message.schema.json",
        title="otelcar normalized message",
    )


_JSON_TYPES = {
    "String": "string",
    "Int64": "integer",
    "Float64": "number",
    "Boolean": "boolean",
}


def _json_type(dtype: pl.DataType) -> dict[str, Any]:
    if isinstance(dtype, pl.List):
        return {"type": ["array", "null"], "items": _json_type(dtype.inner)}
    if isinstance(dtype, pl.Struct):
        return {
            "type": ["object", "null"],
            "properties": {f.name: _json_type(f.dtype) for f in dtype.fields},
        }
    return {"type": [_JSON_TYPES[str(dtype)], "null"]}


def _trace_item() -> dict[str, Any]:
    """One trace-index row as JSON (:func:`otelcar.views.trace_view`)."""
    properties = {
        name: _json_type(dtype) for name, dtype in TRACES_SCHEMA.items() if name != "build_id"
    }
    properties["duration_ms"] = {"type": ["number", "null"]}
    return {"type": "object", "required": sorted(properties), "properties": properties}


def traces_list_schema_document() -> dict[str, Any]:
    """JSON Schema of ``otelcar traces --json``: the trace rows, each with ``outcome`` when
    the config has an ``[outcome]``."""
    item = _trace_item()
    item["properties"]["outcome"] = {
        "enum": ["fail", "pass", "judge", "agent", "error"],
        "description": "the configured [outcome] on the recorded run, as recorded: judge when "
        "it needs an LLM judge (not run by otelcar traces), agent when it judges the agent's "
        "process (exit status, output: not in a trace), error when it raised",
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "otelcar/traces-list.schema.json",
        "title": "otelcar traces --json",
        "type": "array",
        "items": item,
    }


def show_schema_document() -> dict[str, Any]:
    """JSON Schema of ``otelcar show TRACE --json``: the trace row and its steps, with
    JSON-text cells (arguments, attributes, tool parameters) decoded."""
    message = {"$ref": "message.schema.json"}
    step = {name: _json_type(dtype) for name, dtype in STEPS_SCHEMA.items()}
    step["input_messages"] = {"type": ["array", "null"], "items": message}
    step["alternates"] = {"type": ["array", "null"], "items": message}
    step["output"] = {"anyOf": [message, {"type": "null"}]}
    step["tool_args"] = {"type": ["object", "string", "null"]}
    step["attributes"] = {"type": "object"}
    step["tools_available"] = {"type": ["array", "null"], "items": {"type": "object"}}
    trace = _trace_item()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "otelcar/show.schema.json",
        "title": "otelcar show --json",
        "type": "object",
        "required": ["trace", "steps"],
        "properties": {
            "trace": trace,
            "steps": {
                "type": "array",
                "items": {"type": "object", "required": sorted(step), "properties": step},
            },
        },
    }


def conform(df: pl.DataFrame, schema: pl.Schema) -> pl.DataFrame:
    """Check a table read from disk against its schema; raise ``ValueError`` naming the
    first mismatching column."""
    for name, dtype in schema.items():
        if name not in df.columns:
            raise ValueError(f"column {name!r} is missing")
        if df.schema[name] != dtype:
            raise ValueError(f"column {name!r} is {df.schema[name]}, expected {dtype}")
    return df.select(list(schema.names()))
