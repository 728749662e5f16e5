"""The contracts in schemas/ are generated from the code and must match it."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from otelcar.contracts import render_schema_files
from otelcar.messages import MESSAGE_DTYPE, TOOL_CALL_DTYPE, Message, ToolCall
from otelcar.schema import STEP_COLUMN_DOCS, STEPS_SCHEMA

SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"


def test_committed_schema_files_match_the_code():
    for name, text in render_schema_files().items():
        committed = (SCHEMAS / name).read_text(encoding="utf-8")
        assert committed == text, f"schemas/{name} is stale: run `otelcar schema --write schemas`"


def test_every_step_column_is_documented():
    assert list(STEP_COLUMN_DOCS) == list(STEPS_SCHEMA.names())


def test_message_dtype_and_json_schema_agree():
    schema = json.loads((SCHEMAS / "message.schema.json").read_text())
    assert list(schema["properties"]) == [f.name for f in MESSAGE_DTYPE.fields]
    call = schema["properties"]["tool_calls"]["items"]
    assert sorted(call["properties"]) == sorted(f.name for f in TOOL_CALL_DTYPE.fields)
    message = Message("assistant", None, (ToolCall("f", {"a": 1}, "c"), ToolCall("g", "{bad")))
    jsonschema.validate(message.to_dict(), schema)
    assert Message.from_row(message.to_row()) == message


def test_cli_reference_is_current():
    from otelcar.cli.reference import render

    committed = (SCHEMAS.parent / "docs" / "cli.md").read_text(encoding="utf-8")
    assert committed == render(), "docs/cli.md is stale: python -m otelcar.cli.reference"
