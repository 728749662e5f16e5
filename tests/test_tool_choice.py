"""A recorded tool choice, read from every form producers write (OpenAI, Anthropic, the Vercel
AI SDK; objects or JSON text), into the steps table's one form, and never an exception."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from otelcar.conventions.openai_shapes import tool_choice_text

NAMED = json.dumps(
    {"type": "function", "function": {"name": "lookup"}}, sort_keys=True, separators=(",", ":")
)


@pytest.mark.parametrize(
    ("recorded", "read"),
    [
        ("auto", "auto"),
        ("REQUIRED", "required"),
        ("none", "none"),
        ({"type": "function", "function": {"name": "lookup"}}, NAMED),  # OpenAI
        ('{"type": "function", "function": {"name": "lookup"}}', NAMED),  # as JSON text
        ({"name": "lookup"}, NAMED),  # the legacy function_call
        ({"type": "any"}, "required"),  # Anthropic
        ({"type": "tool", "name": "lookup"}, NAMED),
        ('{"type":"tool","toolName":"lookup"}', NAMED),  # the Vercel AI SDK
        ({"type": "auto"}, "auto"),
        (None, None),
        ("sometimes", None),
        ({"type": "function"}, None),  # named form without a name
        ("{not json", None),
        (3, None),
    ],
)
def test_every_form_reads_as_one(recorded: object, read: str | None) -> None:
    assert tool_choice_text(recorded) == read


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)


@given(json_values | json_values.map(json.dumps))
def test_any_value_gives_a_known_form_or_none(value: object) -> None:
    read = tool_choice_text(value)
    assert read is None or read in ("auto", "none", "required") or json.loads(read)["function"]
