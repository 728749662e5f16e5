"""LangSmith runs: every on-disk shape of the real SDK's runs maps to the refund agent's steps.

Fixtures: ``fixtures/langsmith`` (made by ``make_fixtures.py`` with langsmith 0.15.1 /
0.4.60, LangGraph 1.2 / 0.6, see its README).
"""

from __future__ import annotations

import datetime as dt
import gzip
import io
import json
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from otelcar import Store, import_files, read_traces
from otelcar.conventions import map_span
from otelcar.conventions.langsmith import (
    input_messages,
    normalize_message,
    read_output,
    tool_arguments,
    tool_result,
)
from otelcar.errors import FormatError
from otelcar.ingest.exports import langsmith as ls
from otelcar.ingest.exports.timestamps import time_ns
from otelcar.ingest.files import read_records
from otelcar.ingest.formats import derived_id, detect_json
from otelcar.ingest.raw import decode_record
from otelcar.messages import Message, ToolCall, decode_arguments
from otelcar.trajectory import build_trace
from tests.conftest import OTLP, ROOT
from tests.equivalence import comparable
from tests.helpers.refund_fixture import CALLS_1, CALLS_2, EXPECTED_CONTEXTS, FINAL, TOOLS

LS = ROOT / "fixtures" / "langsmith"
SDK_TRACE = "cdb307065cc941c0858c242b96206470"
LANGGRAPH_TRACE = "52d65a1b8012434e801b19e6ba3cdc0e"
LANGGRAPH_OLD_TRACE = "8ee2242cf705452eb68d93c61cde1553"
SDK_SHAPES = {
    "sdk.list_runs.jsonl": ("langsmith-runs", 7, "list_runs"),
    "sdk.dict_default_str.jsonl": ("langsmith-runs", 7, "list_runs"),
    "sdk.read_run.json": ("langsmith-runs", 1, "read_run"),
    "sdk.rest_runs_query.json": ("langsmith-runs", 1, "rest"),
    "sdk.rest_v2_runs_query.json": ("langsmith-runs", 1, "rest v2"),
    "sdk.trace_export.jsonl": ("langsmith-cli", 7, "cli"),
    "sdk.bulk_export.parquet": ("langsmith-parquet", 1, "bulk export"),
}
LANGGRAPH_KINDS = [
    "agent",
    *["other"] * 4,
    "llm",
    "other",
    "other",
    "tool",
    "other",
    "tool",
    *["other"] * 4,
    "llm",
    "other",
    "other",
    "tool",
    *["other"] * 4,
    "llm",
    "other",
]
LANGGRAPH_NAMES = [
    "support_agent",
    "agent",
    "call_model",
    "RunnableSequence",
    "Prompt",
    "gpt-4o-mini-2024-07-18",
    "should_continue",
    "tools",
    "lookup_order",
    "tools",
    "get_refund_policy",
    "agent",
    "call_model",
    "RunnableSequence",
    "Prompt",
    "gpt-4o-mini-2024-07-18",
    "should_continue",
    "tools",
    "issue_refund",
    "agent",
    "call_model",
    "RunnableSequence",
    "Prompt",
    "gpt-4o-mini-2024-07-18",
    "should_continue",
]


def _lines(name: str) -> list[dict]:
    path = LS / name
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _ns(text: str) -> int:
    value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return int(value.timestamp()) * 1_000_000_000 + value.microsecond * 1000


def _calls(message: dict) -> list[tuple]:
    return [(c["id"], c["name"], decode_arguments(c["arguments"])) for c in message["tool_calls"]]


def _context(message: dict) -> tuple:
    return (message["role"], message["content"], _calls(message), message["tool_call_id"])


def _check_refund_agent(steps: pl.DataFrame) -> None:
    """The LLM and tool rows every LangSmith producer of the refund agent must give."""
    llm = steps.filter(pl.col("kind") == "llm").to_dicts()
    tools = steps.filter(pl.col("kind") == "tool").to_dicts()
    assert len(llm) == 3 and len(tools) == 3
    for row, expected in zip(llm, EXPECTED_CONTEXTS, strict=True):
        assert [_context(m) for m in row["input_messages"]] == expected
    assert _calls(llm[0]["output"]) == CALLS_1 and llm[0]["finish_reason"] == "tool_call"
    assert _calls(llm[1]["output"]) == CALLS_2 and llm[1]["finish_reason"] == "tool_call"
    assert llm[2]["output"]["content"] == FINAL and llm[2]["finish_reason"] == "stop"
    assert [r["response_id"] for r in llm] == [f"chatcmpl-fixture-{i}" for i in (1, 2, 3)]
    for row in llm:
        assert row["name"] == row["response_model"] == "gpt-4o-mini-2024-07-18"
        assert row["request_model"] == "gpt-4o-mini" and row["provider"] == "openai"
        params = {k: v for k, v in row["params"].items() if v is not None}
        assert params == {"temperature": 0.2, "max_tokens": 256, "seed": 7}
        assert row["content_captured"] is True and row["output"]["role"] == "assistant"
        assert [t["name"] for t in row["tools_available"]] == [
            "lookup_order",
            "get_refund_policy",
            "issue_refund",
        ]
    assert [(r["usage"]["input_tokens"], r["usage"]["output_tokens"]) for r in llm] == [
        (158, 51),
        (247, 27),
        (281, 19),
    ]
    assert [r["usage"]["total_tokens"] for r in llm] == [209, 274, 300]
    got_tools = [
        (t["tool_name"], t["tool_call_id"], decode_arguments(t["tool_args"]), t["tool_result"])
        for t in tools
    ]
    assert got_tools == TOOLS
    assert [t["call_step"] for t in tools] == [llm[0]["step"], llm[0]["step"], llm[1]["step"]]
    assert not steps["synthesized"].any()
    assert set(steps["status"]) == {"OK"} and steps["error"].is_null().all()
    assert steps["issues"].to_list() == [[]] * steps.height


# --------------------------------------------------------------------------------------
# Fixtures: exact rows
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SDK_SHAPES))
def test_each_shape_is_detected_and_decoded(name: str):
    fmt, n_records, shape = SDK_SHAPES[name]
    records = list(read_records(LS / name))
    assert [r.format for r in records] == [fmt] * n_records
    spans = [span for r in records for span in decode_record(r)[0].spans]
    assert len(spans) == 7
    assert {s.attributes[ls.EXPORT_ATTR] for s in spans} == {shape}
    assert {s.trace_id for s in spans} == {SDK_TRACE}


def test_sdk_wrap_openai_list_runs_rows():
    runs = _lines("sdk.list_runs.jsonl")
    steps = read_traces(LS / "sdk.list_runs.jsonl")
    assert steps["kind"].to_list() == ["other", "llm", "tool", "tool", "llm", "tool", "llm"]
    assert steps["name"].to_list()[0] == "support_agent"
    assert steps["source"].to_list() == [
        "langsmith list_runs traceable",
        "langsmith list_runs wrap_openai",
        "langsmith list_runs traceable",
        "langsmith list_runs traceable",
        "langsmith list_runs wrap_openai",
        "langsmith list_runs traceable",
        "langsmith list_runs wrap_openai",
    ]
    # ids: trace = the trace_id UUID's hex; span = derived_id(run id); parent from the run
    assert set(steps["trace_id"]) == {SDK_TRACE} == {runs[0]["trace_id"].replace("-", "")}
    assert steps["span_id"].to_list() == [derived_id(r["id"], size=8) for r in runs]
    root = derived_id(runs[0]["id"], size=8)
    assert steps["parent_span_id"].to_list() == [None] + [root] * 6
    assert steps["episode_id"].to_list() == [root] * 7
    assert steps["start_ns"].to_list() == [_ns(r["start_time"]) for r in runs]
    assert steps["end_ns"].to_list() == [_ns(r["end_time"]) for r in runs]
    assert steps["operation"].to_list() == [r["run_type"] for r in runs]
    _check_refund_agent(steps)
    # @traceable tools carry no call id: linked by name and order, the id comes from the call
    tools = steps.filter(pl.col("kind") == "tool")
    assert tools["link_inferred"].to_list() == [True] * 3
    # what the mapper did not read stays in the attributes
    llm_attrs = json.loads(steps.filter(pl.col("kind") == "llm")["attributes"][0])
    assert set(llm_attrs) == {
        "langsmith.run.attachments",
        "langsmith.run.events",
        "langsmith.run.session_id",
        "langsmith.run.tags",
    }


@pytest.mark.parametrize("name", sorted(set(SDK_SHAPES) - {"sdk.list_runs.jsonl"}))
def test_every_sdk_shape_gives_the_list_runs_steps(name: str):
    reference = read_traces(LS / "sdk.list_runs.jsonl")
    steps = read_traces(LS / name)
    _, _, shape = SDK_SHAPES[name]
    assert set(steps["source"].str.replace(f"langsmith {shape} ", "")) == {
        "traceable",
        "wrap_openai",
    }
    ignore = ["source", "attributes"]
    if name == "sdk.trace_export.jsonl":
        # Go's json.Marshal sorts map keys: argument and schema objects come back in another
        # key order; as values they are equal.
        for column in ("tool_args", "tools_available"):
            assert steps[column].to_list() != reference[column].to_list()
        assert [decode_arguments(a) for a in steps["tool_args"]] == [
            decode_arguments(a) for a in reference["tool_args"]
        ]
        tools = [
            [{**t, "parameters": json.loads(t["parameters"])} for t in row or ()]
            for row in steps["tools_available"].to_list()
        ]
        assert tools == [
            [{**t, "parameters": json.loads(t["parameters"])} for t in row or ()]
            for row in reference["tools_available"].to_list()
        ]
        ignore += ["tool_args", "tools_available"]
    assert_frame_equal(steps.drop(ignore), reference.drop(ignore))


def test_langgraph_react_agent_rows():
    steps = read_traces(LS / "langgraph.list_runs.jsonl.gz")
    assert steps["kind"].to_list() == LANGGRAPH_KINDS
    assert steps["name"].to_list() == LANGGRAPH_NAMES
    assert set(steps["trace_id"]) == {LANGGRAPH_TRACE}
    root = steps["span_id"][0]
    assert set(steps["episode_id"]) == {root} and set(steps["agent_name"]) == {"support_agent"}
    assert set(steps["source"]) == {"langsmith list_runs langgraph"}
    _check_refund_agent(steps)
    # LangChain tools in a ToolNode: the call id is in extra.tool_call_id, linked by id
    tools = steps.filter(pl.col("kind") == "tool")
    assert tools["link_inferred"].to_list() == [False] * 3
    # each tool runs in its own `tools` node (Send), under the graph root
    parents = dict(zip(steps["span_id"], steps["parent_span_id"], strict=True))
    for span_id in tools["span_id"]:
        node = parents[span_id]
        assert steps.filter(pl.col("span_id") == node)["name"].item() == "tools"
        assert parents[node] == root


def test_langgraph_old_stack_rows():
    """langchain-core 0.3: Python-repr tool inputs, raw calls repeated in additional_kwargs,
    the call id only in the ToolMessage output; langsmith 0.4: pydantic-v1 ``run.json()``."""
    runs = _lines("langgraph_old.list_runs_v1.jsonl.gz")
    assert runs[0]["start_time"].endswith("+00:00")
    tool_inputs = [r["inputs"] for r in runs if r["run_type"] == "tool"]
    assert tool_inputs[0] == {"input": "{'order_id': 'A-1001'}"}
    steps = read_traces(LS / "langgraph_old.list_runs_v1.jsonl.gz")
    assert steps["kind"].to_list() == LANGGRAPH_KINDS
    assert steps["name"].to_list() == LANGGRAPH_NAMES
    assert set(steps["trace_id"]) == {LANGGRAPH_OLD_TRACE}
    assert set(steps["source"]) == {"langsmith list_runs langgraph"}
    _check_refund_agent(steps)
    assert not steps.filter(pl.col("kind") == "tool")["link_inferred"].any()


# --------------------------------------------------------------------------------------
# Cross-dialect equivalence
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [*sorted(SDK_SHAPES), "langgraph.list_runs.jsonl.gz", "langgraph_old.list_runs_v1.jsonl.gz"],
)
def test_same_steps_as_the_otlp_recording(name: str):
    reference = read_traces([OTLP / "new_content.traces.jsonl"])
    assert comparable(read_traces(LS / name)) == comparable(reference)


def test_what_langgraph_records_differently_from_otlp():
    """LangGraph's prebuilt agent adds no message of its own here (the system prompt is the
    agent's ``prompt``; LangChain's ``""`` content beside tool calls reads as no content),
    so the comparable rows are equal. What differs lies outside them, and is exactly this."""
    otlp = read_traces([OTLP / "new_content.traces.jsonl"])
    graph = read_traces(LS / "langgraph.list_runs.jsonl.gz")
    # 1. the graph's own runs (nodes, the prompt template, the routing edge) are extra rows
    assert otlp["kind"].to_list() == ["agent", "llm", "tool", "tool", "llm", "tool", "llm"]
    assert graph["kind"].value_counts().sort("kind").rows() == [
        ("agent", 1),
        ("llm", 3),
        ("other", 18),
        ("tool", 3),
    ]
    # 2. OTel's openai-v2 records no tool definitions; LangChain offers the schemas it derives
    #    from the Python signatures (no per-parameter descriptions, no additionalProperties)
    assert otlp.filter(pl.col("kind") == "llm")["tools_available"].is_null().all()
    offered = graph.filter(pl.col("kind") == "llm")["tools_available"][0].to_list()
    assert json.loads(offered[0]["parameters"]) == {
        "properties": {"order_id": {"type": "string"}},
        "required": ["order_id"],
        "type": "object",
    }
    # 3. langchain-openai 1.x sends max_completion_tokens (read as max_tokens); same values
    llm_params = graph.filter(pl.col("kind") == "llm")["params"].to_list()
    assert {p["max_tokens"] for p in llm_params} == {256}
    # 4. the episode is the graph root (named by run_name), as the OTLP agent span is
    assert graph["episode_id"].unique().to_list() == [graph["span_id"][0]]


# --------------------------------------------------------------------------------------
# Message forms
# --------------------------------------------------------------------------------------


def _lc(cls: str, **kwargs) -> dict:
    return {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain", "schema", "messages", cls],
        "kwargs": kwargs,
    }


def test_langchain_constructor_messages_in_a_batch():
    issues: list[str] = []
    inputs = {
        "messages": [
            [
                _lc("SystemMessage", content="sys", type="system"),
                _lc("HumanMessage", content=[{"type": "text", "text": "hi"}], type="human"),
                _lc(
                    "AIMessageChunk",
                    content="",
                    type="AIMessageChunk",
                    tool_calls=[{"name": "f", "args": {"a": 1}, "id": "c1", "type": "tool_call"}],
                    additional_kwargs={
                        "tool_calls": [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "f", "arguments": '{"a": 1}'},
                            }
                        ]
                    },
                ),
                _lc("ToolMessage", content="r", tool_call_id="c1", name="f", type="tool"),
                _lc("ChatMessage", content="note", role="critic", type="chat"),
                _lc("FunctionMessage", content="old", name="g", type="function"),
            ],
            [_lc("HumanMessage", content="second batch element", type="human")],
        ]
    }
    assert input_messages(inputs, issues) == [
        Message("system", "sys"),
        Message("user", "hi"),
        Message("assistant", None, (ToolCall("f", {"a": 1}, "c1"),)),  # not counted twice
        Message("tool", "r", tool_call_id="c1", name="f"),
        Message("critic", "note"),
        Message("tool", "old", name="g"),
    ]
    assert issues == ["batch of 2 message lists; the first is used"]


def test_model_dump_dicts_tuples_and_raw_tool_calls():
    issues: list[str] = []
    messages = [
        ("user", "hi"),
        {"type": "human", "content": "again"},
        {
            "type": "ai",
            "content": "",
            # langchain-core 0.3 without parsed tool_calls: fall back to the raw ones
            "additional_kwargs": {
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "f", "arguments": '{"a": 1}'},
                    }
                ]
            },
            "invalid_tool_calls": [{"name": "g", "args": "{bad", "id": "c2", "error": "x"}],
        },
        {"type": "tool", "content": "r", "tool_call_id": "c1"},
    ]
    assert input_messages({"messages": messages}, issues) == [
        Message("user", "hi"),
        Message("user", "again"),
        Message("assistant", None, (ToolCall("f", {"a": 1}, "c1"), ToolCall("g", "{bad", "c2"))),
        Message("tool", "r", tool_call_id="c1"),
    ]
    assert issues == ["1 invalid tool call(s) kept with their raw arguments"]
    # a LangGraph root input: one (role, text) pair, not a batch
    assert input_messages({"messages": [["user", "hello"]]}, []) == [Message("user", "hello")]


def test_raw_openai_request_and_response():
    inputs = {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "developer", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "done"},
        ],
    }
    assert input_messages(inputs, []) == [
        Message("developer", "be brief"),
        Message("user", "hi"),
        Message("assistant", None, (ToolCall("f", {}, "c1"),)),
        Message("tool", "done", tool_call_id="c1"),
    ]
    outputs = {
        "id": "chatcmpl-1",
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "a"}},
            {"index": 1, "finish_reason": "stop", "message": {"role": "assistant", "content": "b"}},
        ],
        "usage_metadata": {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5},
    }
    result = read_output(outputs, [])
    assert result.choices == [Message("assistant", "a"), Message("assistant", "b")]
    assert (result.finish_reason, result.model, result.response_id) == (
        "stop",
        "gpt-4o-mini-2024-07-18",
        "chatcmpl-1",
    )
    assert result.usage["input_tokens"] == 3


def test_anthropic_content_blocks():
    issues: list[str] = []
    inputs = {
        "system": "be kind",
        "messages": [
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "look it up"},
                    {"type": "text", "text": "Let me check."},
                    {
                        "type": "tool_use",
                        "id": "tu1",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "tu1",
                        "content": [{"type": "text", "text": "18C"}],
                    },
                    {"type": "tool_result", "tool_use_id": "tu2", "content": "rain"},
                ],
            },
        ],
    }
    assert input_messages(inputs, issues) == [
        Message("system", "be kind"),
        Message("user", "weather?"),
        Message(
            "assistant",
            "Let me check.",
            (ToolCall("get_weather", {"city": "Paris"}, "tu1"),),
            reasoning="look it up",
        ),
        Message("tool", "18C", tool_call_id="tu1"),
        Message("tool", "rain", tool_call_id="tu2"),
    ]
    assert issues == []
    outputs = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [{"type": "tool_use", "id": "tu3", "name": "f", "input": {}}],
        "stop_reason": "tool_use",
    }
    steps = _steps([_run("llm", outputs=outputs, inputs=inputs)])
    llm = steps[1]
    assert llm["output"]["tool_calls"] == [{"id": "tu3", "name": "f", "arguments": "{}"}]
    assert llm["finish_reason"] == "tool_call" and llm["response_id"] == "msg_1"
    assert llm["source"] == "langsmith list_runs wrap_anthropic"


def test_generation_text_completion_responses_and_traceable_outputs():
    completion = {"prompts": ["Say hi"]}
    assert input_messages(completion, []) == [Message("user", "Say hi")]
    text = read_output({"generations": [[{"text": "hi", "generation_info": None}]]}, [])
    assert text.choices == [Message("assistant", "hi")]
    responses = {
        "object": "response",
        "model": "gpt-4.1",
        "id": "resp_1",
        "output": [
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}]},
            {"type": "function_call", "name": "f", "arguments": '{"x": 1}', "call_id": "call_9"},
        ],
    }
    result = read_output(responses, [])
    assert result.choices == [
        Message("assistant", None, (ToolCall("f", {"x": 1}, "call_9"),), reasoning="think")
    ]
    assert input_messages({"input": "hello", "instructions": "sys"}, []) == [
        Message("system", "sys"),
        Message("user", "hello"),
    ]
    # hand-written @traceable(run_type="llm") outputs
    assert read_output({"output": ["assistant", "ok"]}, []).choices == [Message("assistant", "ok")]
    assert read_output({"role": "assistant", "content": "x"}, []).choices == [
        Message("assistant", "x")
    ]
    assert read_output({"messages": [{"role": "assistant", "content": "y"}]}, []).choices == [
        Message("assistant", "y")
    ]


def test_message_forms_normalize_alike():
    """The same assistant tool call in the four dialects gives one normalized message."""
    expected = [Message("assistant", None, (ToolCall("f", {"a": 1}, "c1"),))]
    forms = [
        _lc("AIMessage", content="", tool_calls=[{"name": "f", "args": {"a": 1}, "id": "c1"}]),
        {"type": "ai", "content": "", "tool_calls": [{"name": "f", "args": {"a": 1}, "id": "c1"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": '{"a": 1}'}}],
        },
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "c1", "name": "f", "input": {"a": 1}}],
        },
    ]
    for form in forms:
        assert normalize_message(form, [], "assistant") == expected


# --------------------------------------------------------------------------------------
# Tool runs
# --------------------------------------------------------------------------------------


def test_python_repr_and_string_tool_inputs():
    assert tool_arguments({"input": "{'city': 'Paris', 'days': 2}"}) == {"city": "Paris", "days": 2}
    assert tool_arguments({"input": '{"city": "Paris"}'}) == {"city": "Paris"}
    assert tool_arguments({"input": "Paris"}) == "Paris"
    assert tool_arguments({"input": "{'when': datetime.date(2024, 1, 1)}"}) == (
        "{'when': datetime.date(2024, 1, 1)}"
    )
    assert tool_arguments({"city": "Paris"}) == {"city": "Paris"}
    assert tool_arguments(None) is None


def test_tool_outputs():
    message = {"content": "18C", "type": "tool", "tool_call_id": "c1", "status": "success"}
    assert tool_result({"output": message}) == ("18C", message)
    lc = _lc("ToolMessage", content=[{"type": "text", "text": "18C"}], tool_call_id="c1")
    assert tool_result({"output": lc})[0] == "18C"
    assert tool_result({"output": "plain"}) == ("plain", {})
    assert tool_result({"output": {"a": 1}}) == ('{"a": 1}', {})
    assert tool_result({"temp": 18}) == ('{"temp": 18}', {})
    assert tool_result(None) == (None, {})


def test_tool_run_with_repr_input_links_by_its_output_call_id():
    steps = _steps(
        [
            _run(
                "llm",
                outputs={
                    "generations": [
                        [
                            {
                                "text": "",
                                "message": _lc(
                                    "AIMessage",
                                    content="",
                                    tool_calls=[{"name": "f", "args": {"a": 1}, "id": "c9"}],
                                ),
                            }
                        ]
                    ]
                },
            ),
            _run(
                "tool",
                name="f",
                inputs={"input": "{'a': 1}"},
                outputs={"output": {"content": "ok", "type": "tool", "tool_call_id": "c9"}},
            ),
        ]
    )
    tool = steps[2]
    assert (tool["tool_name"], tool["tool_call_id"], tool["tool_result"]) == ("f", "c9", "ok")
    assert decode_arguments(tool["tool_args"]) == {"a": 1}
    assert tool["call_step"] == 1 and tool["link_inferred"] is False


# --------------------------------------------------------------------------------------
# Decoding details
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "2024-04-29T00:49:12.090000Z",
        "2024-04-29T00:49:12.090000+00:00",
        "2024-04-29 00:49:12.090000+00:00",
        "2024-04-29T00:49:12.090000",  # naive: UTC
        "2024-04-29 00:49:12.09",
        "2024-04-29T00:49:12.090000000Z",  # RFC3339Nano
        "2024-04-29T02:49:12.09+02:00",
        dt.datetime(2024, 4, 29, 0, 49, 12, 90000),
        1714351752090,  # epoch ms
        "1714351752.09",
    ],
)
def test_timestamp_spellings(text):
    assert time_ns(text) == 1714351752090000000


def test_naive_rest_timestamps_are_utc():
    page = json.loads((LS / "sdk.rest_runs_query.json").read_text())
    assert page["runs"][0]["start_time"][-1].isdigit()  # naive, no zone
    rest = read_traces(LS / "sdk.rest_runs_query.json")
    reference = read_traces(LS / "sdk.list_runs.jsonl")
    assert rest["start_ns"].to_list() == reference["start_ns"].to_list()


def test_parquet_json_string_columns_are_decoded():
    table = pl.read_parquet(LS / "sdk.bulk_export.parquet")
    assert table.schema["inputs"] == pl.String and table.schema["extra"] == pl.String
    (record,) = read_records(LS / "sdk.bulk_export.parquet")
    spans = decode_record(record)[0].spans
    llm = next(s for s in spans if s.attributes["langsmith.run.run_type"] == "llm")
    assert isinstance(llm.attributes["langsmith.run.inputs"], dict)
    assert isinstance(llm.attributes["langsmith.run.extra"], dict)
    assert isinstance(llm.attributes["langsmith.run.parent_run_ids"], list)
    # a hand-made bulk file: naive timestamps, string ids, a JSON-string column holding text
    buffer = io.BytesIO()
    pl.DataFrame(
        {
            "id": ["0190f5a2-7c1e-7b3a-9d2e-4f5a6b7c8d9e"],
            "trace_id": ["0190f5a2-7c1e-7b3a-9d2e-4f5a6b7c8d9e"],
            "run_type": ["tool"],
            "name": ["f"],
            "start_time": [dt.datetime(2024, 4, 29, 0, 49, 12, 90000)],
            "end_time": [None],
            "inputs": ['{"a": 1}'],
            "outputs": ["not json"],
        },
        schema_overrides={"end_time": pl.Datetime("us")},
    ).write_parquet(buffer)
    decoded = ls.decode_parquet(buffer.getvalue())
    (span,) = decoded.spans
    assert span.start_ns == span.end_ns == 1714351752090000000
    assert span.attributes["langsmith.run.inputs"] == {"a": 1}
    assert span.attributes["langsmith.run.outputs"] == "not json"
    with pytest.raises(FormatError, match="no LangSmith run columns"):
        other = io.BytesIO()
        pl.DataFrame({"a": [1]}).write_parquet(other)
        ls.decode_parquet(other.getvalue())
    with pytest.raises(FormatError, match="not a readable Parquet file"):
        ls.decode_parquet(b"PAR1 truncated")


def test_nested_child_runs_take_their_parent_from_the_tree():
    tree = json.loads((LS / "sdk.read_run.json").read_text())
    assert len(tree["child_runs"]) == 6
    child = {
        "id": "00000000-0000-4000-8000-000000000002",
        "run_type": "llm",
        "name": "m",
        "trace_id": "00000000-0000-4000-8000-000000000001",
        "start_time": "2024-01-01T00:00:01Z",
    }
    root = {
        "id": "00000000-0000-4000-8000-000000000001",
        "run_type": "chain",
        "name": "r",
        "trace_id": "00000000-0000-4000-8000-000000000001",
        "start_time": "2024-01-01T00:00:00Z",
        "child_runs": [child],
    }
    decoded = ls.decode_json(json.dumps([root]).encode())
    assert [s.name for s in decoded.spans] == ["r", "m"]
    assert decoded.spans[1].parent_span_id == decoded.spans[0].span_id
    assert "langsmith.run.child_runs" not in decoded.spans[0].attributes


def test_parent_from_dotted_order_and_v2_parent_run_ids():
    dotted = (
        "20240101T000000000000Z00000000-0000-4000-8000-000000000001."
        "20240101T000001500000Z00000000-0000-4000-8000-000000000002"
    )
    span = ls.run_to_span(
        {"id": "00000000-0000-4000-8000-000000000002", "run_type": "LLM", "dotted_order": dotted}
    )
    assert span.trace_id == "00000000000040008000000000000001"
    assert span.parent_span_id == derived_id("00000000-0000-4000-8000-000000000001", size=8)
    assert span.start_ns == 1704067201500000000  # from the dotted order's own segment
    v2 = ls.run_to_span(
        {
            "id": "00000000-0000-4000-8000-000000000003",
            "run_type": "TOOL",
            "trace_id": "00000000-0000-4000-8000-000000000001",
            "parent_run_ids": ["00000000-0000-4000-8000-000000000001"],
        }
    )
    assert v2.parent_span_id == span.parent_span_id
    with pytest.raises(ValueError, match="no id"):
        ls.run_to_span({"run_type": "llm", "trace_id": "x"})


def test_truncated_jsonl_line_is_kept_and_the_rest_imported(tmp_path: Path):
    store = Store(tmp_path / "store")
    report = import_files([LS / "bad" / "truncated_line.list_runs.jsonl"], store=store)
    assert report.records == 7 and report.imported == 6 and report.spans == 6
    (problem,) = report.unparsed
    assert problem.position == "line 3" and problem.reason.startswith("invalid JSON")
    steps = store.steps()
    tools = steps.filter(pl.col("kind") == "tool")
    # the cut line was the lookup_order run: its step is synthesized from the call
    assert sorted(tools["name"]) == ["get_refund_policy", "issue_refund", "lookup_order"]
    assert tools.filter(pl.col("name") == "lookup_order")["synthesized"].item() is True


def test_detection_is_specific():
    run = _run("llm")
    assert detect_json(run) == "langsmith-runs"
    assert detect_json([run]) == "langsmith-runs"
    assert detect_json({"runs": [run], "cursors": {"next": None}}) == "langsmith-runs"
    assert detect_json({"items": [], "next_cursor": None}) == "langsmith-runs"
    cli = {"run_id": run["id"], "trace_id": run["trace_id"], "run_type": "llm", "name": "x"}
    assert detect_json(cli) == "langsmith-cli"
    assert detect_json({"trace_id": "t", "run_count": 1, "runs": [cli]}) == "langsmith-cli"
    not_ours = [
        {"resourceSpans": []},
        {"id": "o1", "traceId": "t1", "type": "GENERATION", "name": "x"},  # Langfuse
        {"id": "o1", "trace_id": "t1", "type": "TOOL", "parent_observation_id": ""},
        {"observations": [{"id": "o1", "traceId": "t1", "type": "SPAN"}], "scores": []},
        {
            "history": [{"role": "user", "content": "hi", "name": "Orchestrator"}],
            "question": "q",
            "mistake_agent": "WebSurfer",
        },  # Who&When
        {"run_type": "llm", "id": "x"},  # no trace id or dotted order
        {"run_type": "workflow", "id": "x", "trace_id": "t"},  # not a LangSmith run type
    ]
    for value in not_ours:
        assert not ls.detect_runs(value) and not ls.detect_cli(value), value


# --------------------------------------------------------------------------------------
# Mapper details
# --------------------------------------------------------------------------------------

_TRACE = "00000000-0000-4000-8000-0000000000aa"


def _run(run_type: str, *, name: str | None = None, **fields) -> dict:
    """A minimal run under one root, numbered by call order."""
    _run.count = getattr(_run, "count", 0) + 1  # type: ignore[attr-defined]
    run = {
        "id": f"00000000-0000-4000-8000-{_run.count:012d}",  # type: ignore[attr-defined]
        "trace_id": _TRACE,
        "parent_run_id": _TRACE,
        "run_type": run_type,
        "name": name or run_type,
        "start_time": f"2024-01-01T00:00:{_run.count % 60:02d}Z",  # type: ignore[attr-defined]
        "end_time": f"2024-01-01T00:00:{_run.count % 60:02d}.5Z",  # type: ignore[attr-defined]
        "status": "success",
        "inputs": {},
        "outputs": None,
        "extra": {},
    }
    run.update(fields)
    return run


def _steps(runs: list[dict]) -> list[dict]:
    root = {
        "id": _TRACE,
        "trace_id": _TRACE,
        "run_type": "chain",
        "name": "root",
        "start_time": "2024-01-01T00:00:00Z",
        "end_time": "2024-01-01T00:01:00Z",
    }
    ordered = sorted(runs, key=lambda r: r["start_time"])
    spans = [ls.run_to_span(r) for r in [root, *ordered]]
    for seq, span in enumerate(spans):
        span.seq = seq
    return build_trace(spans[0].trace_id, spans).steps


def test_errors_usage_fallbacks_and_conversation_ids():
    steps = _steps(
        [
            _run(
                "llm",
                inputs={"messages": [{"role": "user", "content": "hi"}]},
                error="RateLimitError('429')\nTraceback ...",
                status="error",
                prompt_tokens=12,
                completion_tokens=0,
                extra={
                    "metadata": {
                        "ls_model_name": "m1",
                        "thread_id": "th-1",
                        "ls_stop": "END",
                        "ls_invocation_params": {"top_p": 0.5},
                    }
                },
            ),
            _run(
                "llm",
                custom_metadata={"ls_provider": "anthropic"},
                token_usage={"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12},
                outputs={"output": "plain text answer"},
            ),
        ]
    )
    failed, cli = steps[1], steps[2]
    assert failed["status"] == "ERROR" and failed["error"].startswith("RateLimitError")
    assert failed["output"] is None and failed["request_model"] == "m1"
    assert failed["usage"]["input_tokens"] == 12 and failed["conversation_id"] == "th-1"
    assert failed["params"]["stop"] == ["END"] and failed["params"]["top_p"] == 0.5
    assert cli["provider"] == "anthropic" and cli["usage"]["total_tokens"] == 12
    assert cli["output"]["content"] == "plain text answer"


def test_unknown_llm_input_shape_stays_in_attributes():
    steps = _steps([_run("llm", inputs={"question": 1, "context": [1, 2]})])
    llm = steps[1]
    assert llm["input_messages"] is None
    assert json.loads(llm["attributes"])["langsmith.run.inputs"] == {
        "question": 1,
        "context": [1, 2],
    }
    assert llm["issues"] == ["llm inputs are in no known message form; kept in attributes"]


@pytest.mark.parametrize(
    ("name", "metadata", "outputs", "kind"),
    [
        ("my_graph", {"ls_integration": "langgraph"}, None, "agent"),
        ("agent", {"ls_integration": "langgraph", "langgraph_node": "agent"}, None, "other"),
        ("LangGraph", {}, None, "agent"),
        ("AgentExecutor", {}, None, "agent"),
        ("RunnableSequence", {}, {"output": "x"}, "other"),
        ("my_fn", {"ls_method": "traceable"}, {"output": "x"}, "other"),
    ],
)
def test_agent_chains(name, metadata, outputs, kind):
    span = ls.run_to_span(_run("chain", name=name, outputs=outputs, extra={"metadata": metadata}))
    mapped = map_span(span)
    assert mapped.kind == kind
    assert mapped.episode_boundary is (kind == "agent")


def test_hidden_io_reads_as_not_captured():
    """``LANGSMITH_HIDE_INPUTS``/``HIDE_OUTPUTS`` leave ``{}``: no content, no issue."""
    llm = _steps([_run("llm", inputs={}, outputs={})])[1]
    assert llm["input_messages"] is None and llm["output"] is None
    assert llm["content_captured"] is False and llm["issues"] == []
