"""Langfuse: the SDK's OTel spans and every export layout map to the same, exact steps.

Fixtures: ``fixtures/langfuse`` (one real run of the refund agent under langfuse 5.0.4;
export files rebuilt from that run, see its README).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from otelcar import import_files, read_traces
from otelcar.conventions import map_span
from otelcar.ingest.exports import langfuse as lf_export
from otelcar.ingest.exports.timestamps import time_ns
from otelcar.ingest.files import read_records
from otelcar.ingest.raw import decode_record
from otelcar.messages import decode_arguments
from otelcar.trajectory import build_trace
from tests.conftest import NEW_CONTENT, OTLP, ROOT
from tests.equivalence import comparable
from tests.helpers.refund_fixture import (
    CALLS_1,
    CALLS_2,
    EXPECTED_CONTEXTS,
    FINAL,
    ORDER,
    POLICY,
    REFUND,
)
from tests.synth import TRACE, span

LANGFUSE = ROOT / "fixtures" / "langfuse"
EXPORT = LANGFUSE / "export"
SDK_TRACE = "cdb307065cc9a1c0058c242b96206470"
ROOT_SPAN = "1634651c0d7d616d"
SPAN_IDS = [
    ROOT_SPAN,
    "99fa798ba6b145c1",
    "cd6110ebf350f315",
    "0af8629197db07fd",
    "ef7fb0ca91a3f056",
    "b3e19698bedb53bf",
    "2b98cca7a0afebfa",
]
KINDS = ["agent", "llm", "tool", "tool", "llm", "tool", "llm"]
MODEL = "gpt-4o-mini-2024-07-18"
NAMES = ["support_agent", MODEL, "lookup_order", "get_refund_policy", MODEL, "issue_refund", MODEL]
DEFAULTS_ISSUE = (
    "model.parameters top_p=1, frequency_penalty=0, presence_penalty=0 equal the defaults "
    "Langfuse's OpenAI wrapper records for parameters not sent; left out of params (raw value "
    "kept in attributes)"
)
PARAMS = {
    "temperature": 0.2,
    "top_p": None,
    "top_k": None,
    "max_tokens": 256,
    "seed": 7,
    "stop": None,
    "n": None,
    "frequency_penalty": None,
    "presence_penalty": None,
}
USAGE = [(158, 51, 209), (247, 27, 274), (281, 19, 300)]
TOOLS = [
    ("lookup_order", "call_lookup_1", {"order_id": "A-1001"}, ORDER, 1),
    ("get_refund_policy", "call_policy_1", {"category": "electronics"}, POLICY, 1),
    ("issue_refund", "call_refund_1", {"order_id": "A-1001", "amount": 129.99}, REFUND, 4),
]
#: Every export file, its layout and whether its rows carry the session id.
EXPORTS = [
    ("ui_observations.json", "rows", False),
    ("ui_observations.jsonl", "rows", False),
    ("ui_observations.csv", "csv", False),
    (f"trace-{SDK_TRACE}.json", "trace-download", True),
    ("trace_client_download.json", "trace-object", True),
    ("api_trace.json", "api-trace", True),
    ("api_observations.json", "api-page", False),
    ("api_v2_observations.json", "api-page", True),
    ("blob_observations_v2.jsonl", "snake-rows", True),
]


def _sdk_steps() -> pl.DataFrame:
    return read_traces(LANGFUSE / "sdk.traces.jsonl").sort("step")


def _calls(message: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(c["id"], c["name"], decode_arguments(c["arguments"])) for c in message["tool_calls"]]


def _context(message: dict[str, Any]) -> tuple[Any, ...]:
    return (message["role"], message["content"], _calls(message), message["tool_call_id"])


# --------------------------------------------------------------------------------------
# The SDK's own spans (real run)
# --------------------------------------------------------------------------------------


def test_sdk_spans_give_the_exact_steps():
    steps = _sdk_steps()
    assert steps["trace_id"].unique().to_list() == [SDK_TRACE]
    assert steps["span_id"].to_list() == SPAN_IDS
    assert steps["parent_span_id"].to_list() == [None] + [ROOT_SPAN] * 6
    assert steps["kind"].to_list() == KINDS and steps["name"].to_list() == NAMES
    assert set(steps["episode_id"]) == {ROOT_SPAN} and set(steps["agent_name"]) == {"support_agent"}
    assert set(steps["source"]) == {"langfuse 5.0.4"}
    assert set(steps["conversation_id"]) == {"session-refund-1"}
    assert set(steps["status"]) == {"UNSET"} and steps["error"].null_count() == 7
    assert not steps["synthesized"].any()

    llm = steps.filter(pl.col("kind") == "llm").to_dicts()
    for row, context in zip(llm, EXPECTED_CONTEXTS, strict=True):
        assert [_context(m) for m in row["input_messages"]] == context
        assert [t["name"] for t in row["tools_available"]] == [
            "lookup_order",
            "get_refund_policy",
            "issue_refund",
        ]
        assert row["provider"] == "openai" and row["response_model"] == MODEL
        assert row["request_model"] is None  # the wrapper overwrites it with the response's
        assert row["params"] == PARAMS
        assert row["finish_reason"] is None  # not recorded by the wrapper (non-streaming)
        assert row["issues"] == [DEFAULTS_ISSUE]
        assert row["content_captured"] is True and row["operation"] == "generation"
        raw = json.loads(json.loads(row["attributes"])["langfuse.observation.model.parameters"])
        assert raw["top_p"] == 1 and raw["service_tier"] == "default"
    assert _calls(llm[0]["output"]) == CALLS_1 and _calls(llm[1]["output"]) == CALLS_2
    assert llm[2]["output"]["content"] == FINAL and llm[2]["output"]["tool_calls"] == []
    assert [
        (r["usage"]["input_tokens"], r["usage"]["output_tokens"], r["usage"]["total_tokens"])
        for r in llm
    ] == USAGE

    tools = steps.filter(pl.col("kind") == "tool").to_dicts()
    got = [
        (t["tool_name"], t["tool_call_id"], decode_arguments(t["tool_args"]), t["tool_result"])
        for t in tools
    ]
    assert got == [t[:4] for t in TOOLS]
    assert [t["call_step"] for t in tools] == [t[4] for t in TOOLS]
    # @observe tools carry no call id: linked by name and order, the id comes from the call.
    assert all(t["link_inferred"] and t["issues"] == [] for t in tools)
    agent = steps.row(0, named=True)
    assert agent["content_captured"] is None and agent["issues"] == []


def test_sdk_run_matches_the_otlp_reference_run():
    langfuse = _sdk_steps()
    otlp = read_traces(OTLP / "new_content.traces.jsonl").filter(pl.col("trace_id") == NEW_CONTENT)
    assert comparable(langfuse) == comparable(otlp)
    # What Langfuse cannot record, exactly: the wrapper reports only the response's model
    # (no request model) and no finish reason; @observe tools have no call id, so every
    # tool link is inferred; the wrapper's defaulted top_p / penalties are not reported as
    # sent (openai-v2 does not record them either, so params agree).
    columns = ["kind", "request_model", "finish_reason", "link_inferred", "params", "usage"]
    ours = langfuse.select(columns).to_dicts()
    theirs = otlp.sort("step").select(columns).to_dicts()
    differences = {
        (index, key, str(mine[key]), str(other[key]))
        for index, (mine, other) in enumerate(zip(ours, theirs, strict=True))
        for key in columns
        if mine[key] != other[key] and key != "usage"
    }
    expected = set()
    for index, kind in enumerate(KINDS):
        if kind == "llm":
            reason = "stop" if index == 6 else "tool_call"
            expected |= {
                (index, "request_model", "None", "gpt-4o-mini"),
                (index, "finish_reason", "None", reason),
            }
        if kind == "tool":
            expected.add((index, "link_inferred", "True", "False"))
    assert differences == expected
    # Langfuse also records total tokens; input/output agree.
    for mine, other in zip(ours, theirs, strict=True):
        if mine["kind"] == "llm":
            assert mine["usage"]["input_tokens"] == other["usage"]["input_tokens"]
            assert mine["usage"]["output_tokens"] == other["usage"]["output_tokens"]


# --------------------------------------------------------------------------------------
# Export files (rebuilt from the same run)
# --------------------------------------------------------------------------------------

_SAME = [
    "trace_id",
    "step",
    "span_id",
    "parent_span_id",
    "episode_id",
    "kind",
    "name",
    "agent_name",
    "operation",
    "status",
    "error",
    "provider",
    "request_model",
    "response_model",
    "params",
    "input_messages",
    "tools_available",
    "output",
    "n_choices",
    "finish_reason",
    "tool_name",
    "tool_call_id",
    "tool_args",
    "tool_result",
    "call_step",
    "usage",
    "content_captured",
    "content_truncated",
    "link_inferred",
    "synthesized",
    "issues",
]


@pytest.mark.parametrize(("name", "layout", "has_session"), EXPORTS)
def test_every_export_layout_gives_the_sdk_steps(name: str, layout: str, has_session: bool):
    path = EXPORT / name
    expected_format = "langfuse-csv" if name.endswith(".csv") else "langfuse"
    assert {r.format for r in read_records(path)} == {expected_format}
    steps = read_traces(path).sort("step")
    sdk = _sdk_steps()
    assert steps.select(_SAME).to_dicts() == sdk.select(_SAME).to_dicts()
    # Langfuse keeps milliseconds.
    assert steps["start_ns"].to_list() == [t // 1_000_000 * 1_000_000 for t in sdk["start_ns"]]
    assert steps["end_ns"].to_list() == [t // 1_000_000 * 1_000_000 for t in sdk["end_ns"]]
    assert set(steps["source"]) == {f"langfuse 5.0.4 ({layout} export)"}
    session = "session-refund-1" if has_session else None
    assert set(steps["conversation_id"]) == {session}
    assert comparable(steps) == comparable(sdk)


def test_export_rows_keep_every_other_field_in_attributes():
    steps = read_traces(EXPORT / "blob_observations_v2.jsonl").sort("step")
    llm = json.loads(steps["attributes"][1])
    assert llm["langfuse.observation.model.parameters"].startswith('{"temperature": 0.2')
    assert llm["langfuse.export.tool_call_names"] == ["lookup_order", "get_refund_policy"]
    assert llm["langfuse.export.project_id"] == "project-fixture"
    assert llm["langfuse.trace.name"] == "support_agent" and llm["user.id"] == "user-dana"


def test_trace_rows_are_kept_with_a_reason(tmp_path: Path):
    (record,) = read_records(EXPORT / "ui_traces.csv")
    decoded, _ = decode_record(record)
    assert decoded.spans == [] and "trace row(s) hold no observations" in decoded.problems[0]
    from otelcar import Store

    report = import_files([EXPORT / "ui_traces.csv"], store=Store(tmp_path / "s"))
    assert report.imported == 1 and "hold no observations" in report.partial[0].reason


def test_csv_export_imports_into_the_store(tmp_path: Path):
    from otelcar import Store

    store = Store(tmp_path / "s")
    report = import_files([EXPORT / "ui_observations.csv"], store=store)
    assert report.imported == 1 and report.spans == 7
    assert store.steps(SDK_TRACE)["kind"].to_list() == KINDS


def test_csv_cells_spanning_lines_do_not_look_like_json_lines(tmp_path: Path):
    # A quoted input cell whose second line starts with '{"' (a user pasting JSON).
    path = tmp_path / "observations.csv"
    path.write_text(
        "id,traceId,type,startTime,input\n"
        'o1,t1,GENERATION,2026-01-01T00:00:00Z,"Check this:\n{""order"": 1}"\n'
    )
    (record,) = read_records(path)
    assert record.format == "langfuse-csv"
    (frame,) = decode_record(record)[0].spans
    assert frame.attributes["langfuse.observation.input"] == 'Check this:\n{"order": 1}'
    mapped = map_span(frame)
    assert mapped.input_messages[0].content == 'Check this:\n{"order": 1}'


# --------------------------------------------------------------------------------------
# Detection stays specific
# --------------------------------------------------------------------------------------


def test_other_formats_are_not_claimed():
    assert not lf_export.detect({"resourceSpans": []})
    run = {"id": "r", "trace_id": "t", "run_type": "llm", "dotted_order": "x", "start_time": "t"}
    assert not lf_export.detect(run) and not lf_export.detect([run])
    assert not lf_export.detect({"history": [{"content": "", "role": "a"}], "mistake_agent": "a"})
    assert not lf_export.detect({"data": [{"id": 1}], "meta": {}})
    assert not lf_export.claims_head(b"id,name,run_type,trace_id,start_time\n")
    assert lf_export.claims_head(b"id,trace_id,type,start_time,name\n")
    assert lf_export.claims_head(b'"id","timestamp","name","userId","sessionId","public"\n')
    assert {r.format for r in read_records(OTLP / "new_content.traces.jsonl")} == {"otlp-json"}
    for fixture in sorted((ROOT / "fixtures").glob("*/*.json*")):
        if "langfuse" not in fixture.parts:
            assert not {r.format for r in read_records(fixture)} & {"langfuse", "langfuse-csv"}


def test_envelopes_and_rows_are_detected():
    row = {"id": "o1", "traceId": "t1", "type": "GENERATION", "startTime": "2026-01-01T00:00:00Z"}
    assert lf_export.detect(row) and lf_export.detect([row])
    assert lf_export.detect({"observations": [], "scores": []})
    assert lf_export.detect({"data": [row], "meta": {"cursor": None}})
    trace = {"id": "t1", "timestamp": "x", "sessionId": None, "bookmarked": False}
    assert lf_export.detect(trace) and lf_export.detect({"data": [trace], "meta": {"page": 1}})


# --------------------------------------------------------------------------------------
# Pitfalls, on synthetic spans and rows
# --------------------------------------------------------------------------------------


def _observation(span_id: str, kind: str, name: str, attributes: dict[str, Any], **kw: Any):
    attrs = {"langfuse.observation.type": kind, **attributes}
    return span(span_id, name, attrs, **kw)


def _generation(span_id: str, messages: Any, output: Any, **attributes: Any):
    return _observation(
        span_id,
        "generation",
        "OpenAI-generation",
        {
            "langfuse.observation.input": json.dumps(messages),
            "langfuse.observation.output": json.dumps(output),
            "langfuse.observation.model.name": "m",
            **attributes,
        },
    )


def _assistant_calls(*calls: tuple[str | None, str, str]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in calls
        ],
    }


def test_wrapper_defaults_are_not_presented_as_sent():
    parameters = {
        "temperature": 1,
        "max_tokens": "Infinity",
        "top_p": 1,
        "frequency_penalty": 0,
        "presence_penalty": 0.5,
        "seed": 3,
    }
    mapped = map_span(
        _generation(
            "1", [], "hi", **{"langfuse.observation.model.parameters": json.dumps(parameters)}
        )
    )
    assert mapped.params["temperature"] is None and mapped.params["max_tokens"] is None
    assert mapped.params["presence_penalty"] == 0.5 and mapped.params["seed"] == 3
    assert mapped.issues == [
        'model.parameters temperature=1, top_p=1, max_tokens="Infinity", frequency_penalty=0 '
        "equal the defaults Langfuse's OpenAI wrapper records for parameters not sent; left out "
        "of params (raw value kept in attributes)"
    ]
    assert "langfuse.observation.model.parameters" not in mapped.consumed
    # Parameters of other producers (here LangChain's invocation params) are taken as sent.
    other = {"temperature": 1, "max_tokens": 100, "stop": "END", "n": "2"}
    mapped = map_span(
        _generation("2", [], "hi", **{"langfuse.observation.model.parameters": json.dumps(other)})
    )
    assert mapped.issues == []
    assert (mapped.params["temperature"], mapped.params["max_tokens"]) == (1.0, 100)
    assert (mapped.params["stop"], mapped.params["n"]) == (["END"], 2)


@pytest.mark.parametrize(
    ("recorded", "arguments"),
    [
        ({"args": [], "kwargs": {"city": "Paris"}}, {"city": "Paris"}),
        (
            {"args": ["Paris", 2], "kwargs": {"unit": "C"}},
            {"arg0": "Paris", "arg1": 2, "unit": "C"},
        ),
        ({"city": "Paris"}, {"city": "Paris"}),
        ("{'city': 'Paris'}", {"city": "Paris"}),  # v2 LangChain handler: a Python repr
        ("Paris", "Paris"),
    ],
)
def test_tool_input_wrappings(recorded: Any, arguments: Any):
    text = recorded if isinstance(recorded, str) else json.dumps(recorded)
    mapped = map_span(
        _observation(
            "1",
            "tool",
            "get_weather",
            {"langfuse.observation.input": text, "langfuse.observation.output": "rainy, 57F"},
        )
    )
    assert mapped.kind == "tool" and mapped.tool_name == "get_weather"
    assert mapped.tool_args == arguments and mapped.tool_result == "rainy, 57F"
    assert mapped.tool_call_id is None


def test_tool_results_are_kept_verbatim_and_toolmessages_unwrapped():
    compact = '{"a":1}'
    mapped = map_span(
        _observation("1", "tool", "t", {"langfuse.observation.output": compact}),
    )
    assert mapped.tool_result == compact  # not re-serialized
    message = {"content": "18C", "tool_call_id": "call_9", "type": "tool", "status": "success"}
    mapped = map_span(
        _observation(
            "1",
            "tool",
            "t",
            {"langfuse.observation.output": json.dumps(message)},
        )
    )
    assert (mapped.tool_result, mapped.tool_call_id) == ("18C", "call_9")
    v5_metadata = {"langfuse.observation.metadata.tool_call_id": json.dumps("call_7")}
    mapped = map_span(_observation("1", "tool", "t", v5_metadata))
    assert mapped.tool_call_id == "call_7"


def test_error_level_and_status():
    attributes = {
        "langfuse.observation.level": "ERROR",
        "langfuse.observation.status_message": "order not found",
        "langfuse.observation.input": '{"args": [1], "kwargs": {}}',
    }
    failed = _observation("1", "tool", "boom", attributes, status="ERROR")
    failed.status_message = "order not found"
    steps = build_trace(TRACE, [failed]).steps
    assert (steps[0]["status"], steps[0]["error"], steps[0]["issues"]) == (
        "ERROR",
        "order not found",
        [],
    )
    assert decode_arguments(steps[0]["tool_args"]) == {"arg0": 1}
    # level=ERROR set by span.update() alone leaves the OTel status unset: said so.
    mapped = map_span(_observation("2", "span", "step", attributes))
    assert mapped.error == "order not found"
    assert mapped.issues == ["Langfuse level is ERROR but the span status is not"]
    warning = {"langfuse.observation.level": "WARNING"}
    assert map_span(_observation("3", "span", "s", warning)).issues == [
        "Langfuse level WARNING: no status message"
    ]


def test_tools_without_ids_link_by_name_and_order():
    first = _generation(
        "1",
        [{"role": "user", "content": "weather in Paris and Rome?"}],
        _assistant_calls(
            ("c1", "get_weather", '{"city":"Paris"}'), ("c2", "get_weather", '{"city":"Rome"}')
        ),
    )
    tool_a = _observation(
        "2",
        "tool",
        "get_weather",
        {"langfuse.observation.input": '{"args": [], "kwargs": {"city": "Paris"}}'},
        start=20,
    )
    tool_b = _observation(
        "3",
        "tool",
        "get_weather",
        {"langfuse.observation.output": "sunny"},
        start=30,
    )
    first.start_ns, first.end_ns = 0, 10
    steps = build_trace(TRACE, [tool_b, first, tool_a]).steps
    tools = [s for s in steps if s["kind"] == "tool"]
    assert [t["tool_call_id"] for t in tools] == ["c1", "c2"]
    assert all(t["link_inferred"] for t in tools) and not any(t["synthesized"] for t in tools)
    # The second tool recorded no input: its arguments come from the call.
    assert decode_arguments(tools[1]["tool_args"]) == {"city": "Rome"}
    assert tools[1]["issues"] == ["arguments backfilled from the assistant tool call"]


def test_langchain_handler_fake_tool_messages_are_tool_definitions():
    definition = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather of a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"name": "get_weather", "args": {"city": "Paris"}, "id": "c1", "type": "tool_call"}
            ],
        },
        {"role": "tool", "content": "18C", "tool_call_id": "c1"},
        {"role": "tool", "content": definition},
    ]
    mapped = map_span(
        _generation(
            "1",
            messages,
            {"role": "assistant", "content": "It is 18C."},
            **{"langfuse.observation.metadata.ls_model_name": json.dumps("gpt-4o-mini")},
        )
    )
    assert [(m.role, m.content) for m in mapped.input_messages] == [
        ("system", "Be brief."),
        ("user", "Weather in Paris?"),
        ("assistant", ""),
        ("tool", "18C"),
    ]
    assert mapped.input_messages[2].tool_calls[0].arguments == {"city": "Paris"}
    assert mapped.input_messages[3].tool_call_id == "c1"
    assert mapped.tools_available == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Weather of a city",
            "parameters": '{"type": "object", "properties": {"city": {"type": "string"}}}',
        }
    ]
    assert mapped.output.content == "It is 18C." and mapped.request_model == "gpt-4o-mini"


def test_truncated_json_is_reported_and_kept_raw():
    cut = json.dumps([{"role": "user", "content": "I want a refund"}])[:20]
    mapped = map_span(
        _observation(
            "1",
            "generation",
            "g",
            {
                "langfuse.observation.input": cut,
                "langfuse.observation.output": "The answer is...[truncated]",
            },
        )
    )
    assert mapped.input_messages is None and mapped.output is None
    assert mapped.content_truncated is True and len(mapped.issues) == 2
    assert "langfuse.observation.input is not valid JSON" in mapped.issues[0]
    assert "'...[truncated]' marker" in mapped.issues[1]
    assert not {"langfuse.observation.input", "langfuse.observation.output"} & mapped.consumed


def test_truncated_tool_result_is_backfilled_from_the_next_input():
    call = _generation(
        "1",
        [{"role": "user", "content": "order?"}],
        _assistant_calls(("c1", "lookup_order", '{"order_id":"A"}')),
    )
    tool = _observation(
        "2", "tool", "lookup_order", {"langfuse.observation.output": '{"order_id": "A", "cu'}
    )
    answer = _generation(
        "3",
        [
            {"role": "user", "content": "order?"},
            _assistant_calls(("c1", "lookup_order", '{"order_id":"A"}')),
            {"role": "tool", "tool_call_id": "c1", "content": '{"order_id": "A", "customer": 1}'},
        ],
        {"role": "assistant", "content": "done"},
    )
    call.start_ns, tool.start_ns, answer.start_ns = 0, 20, 40
    steps = build_trace(TRACE, [call, tool, answer]).steps
    (row,) = [s for s in steps if s["kind"] == "tool"]
    assert row["tool_result"] == '{"order_id": "A", "customer": 1}'
    assert row["content_truncated"] is True
    assert "result backfilled from the next LLM input" in row["issues"]


def test_usage_vocabularies():
    mapped = map_span(
        _generation(
            "1",
            [],
            "x",
            **{
                "langfuse.observation.usage_details": json.dumps(
                    {"input": 100, "input_cached_tokens": 20, "output": 10, "total": 130}
                )
            },
        )
    )
    # Server-normalised input excludes cached tokens; total shows it, so they are added back.
    assert mapped.usage == {
        "input_tokens": 120,
        "output_tokens": 10,
        "cache_read_tokens": 20,
        "reasoning_tokens": None,
        "total_tokens": 130,
    }
    openai = {
        "prompt_tokens": 50,
        "completion_tokens": 9,
        "total_tokens": 59,
        "prompt_tokens_details": {"cached_tokens": 5},
        "completion_tokens_details": {"reasoning_tokens": 4},
    }
    mapped = map_span(
        _generation("1", [], "x", **{"langfuse.observation.usage_details": json.dumps(openai)})
    )
    assert mapped.usage == {
        "input_tokens": 50,
        "output_tokens": 9,
        "cache_read_tokens": 5,
        "reasoning_tokens": 4,
        "total_tokens": 59,
    }


def test_langfuse_wins_over_genai_and_choices_become_alternates():
    both = _generation(
        "1",
        {"messages": [{"role": "user", "content": "hi"}], "tools": []},
        [{"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"}],
        **{"gen_ai.input.messages": "[]", "gen_ai.operation.name": "chat"},
    )
    mapped = map_span(both)
    assert mapped.source == "langfuse" and mapped.kind == "llm"
    assert mapped.output.content == "a" and [m.content for m in mapped.alternates] == ["b"]
    assert mapped.n_choices == 2


@pytest.mark.parametrize(
    ("kind", "step_kind"),
    [
        ("GENERATION", "llm"),
        ("embedding", "llm"),
        ("TOOL", "tool"),
        ("agent", "agent"),
        ("chain", "other"),
        ("SPAN", "other"),
        ("event", "other"),
        ("retriever", "other"),
    ],
)
def test_observation_types(kind: str, step_kind: str):
    mapped = map_span(_observation("1", kind, "x", {}))
    assert mapped.kind == step_kind and mapped.episode_boundary is (step_kind == "agent")


def test_prompt_inputs_and_observe_wrapped_generations():
    prompt = map_span(_generation("1", "Say hi", "hi"))
    assert [(m.role, m.content) for m in prompt.input_messages] == [("user", "Say hi")]
    wrapped = map_span(
        _generation(
            "2",
            {"args": [], "kwargs": {"messages": [{"role": "user", "content": "hi"}]}},
            "hello",
        )
    )
    assert [(m.role, m.content) for m in wrapped.input_messages] == [("user", "hi")]
    responses = map_span(
        _generation(
            "3",
            {"instructions": "Be brief.", "input": "hi"},
            {"output": [{"type": "function_call", "name": "f", "arguments": "{}", "call_id": "c"}]},
        )
    )
    assert [m.role for m in responses.input_messages] == ["system", "user"]
    assert responses.output.tool_calls[0].id == "c"


def test_json_in_string_blob_row():
    row = {
        "id": "0190f5a2-7c1e-7b3a-9d2e-4f5a6b7c8d9e",
        "trace_id": "0190f5a2-0000-7b3a-9d2e-4f5a6b7c8d9e",
        "type": "GENERATION",
        "parent_observation_id": "",
        "start_time": "2026-01-01 00:00:00.123000",
        "end_time": "2026-01-01 00:00:01.500000",
        "name": "ChatOpenAI",
        "input": json.dumps([{"role": "user", "content": "hi"}]),
        "output": json.dumps({"role": "assistant", "content": "hello"}),
        "model_parameters": json.dumps({"temperature": "0.3", "max_tokens": "Infinity"}),
        "metadata": {"ls_provider": "openai", "ls_model_name": "gpt-4o-mini", "n": "123"},
        "usage_details": {"input": 3, "output": 1, "total": 4},
        "level": "ERROR",
        "status_message": "rate limited",
        "session_id": "s1",
    }
    decoded = lf_export.decode_json(json.dumps(row).encode())
    (frame,) = decoded.spans
    assert frame.parent_span_id is None and frame.status_code == "ERROR"
    assert frame.start_ns == 1767225600123000000 and frame.end_ns == 1767225601500000000
    assert frame.trace_id == "0190f5a200007b3a9d2e4f5a6b7c8d9e"  # a UUID keeps its hex
    assert frame.attributes["langfuse.observation.metadata.n"] == "123"
    mapped = map_span(frame)
    assert mapped.params["temperature"] == 0.3 and mapped.params["max_tokens"] is None
    assert (mapped.provider, mapped.request_model) == ("openai", "gpt-4o-mini")
    assert mapped.error == "rate limited" and mapped.conversation_id == "s1"
    assert [(m.role, m.content) for m in mapped.input_messages] == [("user", "hi")]
    assert mapped.source == "langfuse (snake-rows export)"


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("2026-01-01T00:00:00.123Z", 1767225600123000000),
        ("2026-01-01T00:00:00.123456789+00:00", 1767225600123456789),
        ("2026-01-01T01:00:00+01:00", 1767225600000000000),
        ("2026-01-01 00:00:00.5", 1767225600500000000),
        (1767225600123, 1767225600123000000),
        ("1767225600", 1767225600000000000),
        ("yesterday", None),
        ("", None),
    ],
)
def test_timestamps(text: Any, ns: int | None):
    assert time_ns(text) == ns


def test_bad_rows_are_reported_not_fatal():
    good = {"id": "a", "traceId": "t", "type": "SPAN", "startTime": "2026-01-01T00:00:00Z"}
    bad = {"id": "b", "traceId": "t", "type": "SPAN", "startTime": "soon"}
    decoded = lf_export.decode_json(json.dumps([good, bad, "c"]).encode())
    assert len(decoded.spans) == 1
    assert decoded.problems == [
        "row 1: observation b: no readable startTime",
        "row 2: observation 'c' is listed by id only; its fields are not here",
    ]
    assert decoded.spans[0].attributes["langfuse.export.end_time_missing"] is True
