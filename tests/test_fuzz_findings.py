"""Regression tests for what ``tests/test_fuzz_decoders.py`` found (#15).

Each input below once did one of: raised something other than ``FormatError`` out of a
decoder (``OverflowError``, ``RecursionError``, ``decimal.Overflow``, a polars panic), hung
(``int()`` of a 10-million-digit number), decoded into frames or steps the store's tables
cannot hold, which stopped every later build of the store (the raw record stays, so each
import re-derived it and failed again), or lost spans without a reason. Now each is imported,
or kept unparsed or partial with a reason, and the store keeps importing.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from otelcar import Store, import_files
from otelcar.errors import FormatError
from otelcar.ingest.files import read_records
from otelcar.ingest.raw import FORMAT_JSON, FORMAT_PROTO, RawRecord, decode_record
from otelcar.receiver.intake import accept
from tests.conftest import NEW_CONTENT, OTLP

TRACE = "0102030405060708090a0b0c0d0e0f10"
SPAN = "0102030405060708"
ROOT = Path(__file__).resolve().parents[1]


def otlp(span: dict[str, Any] | None = None, **fields: Any) -> bytes:
    base = {
        "traceId": TRACE,
        "spanId": SPAN,
        "name": "chat m",
        "startTimeUnixNano": "1",
        "endTimeUnixNano": "2",
    }
    body = {"resourceSpans": [{"scopeSpans": [{"spans": [{**base, **(span or {}), **fields}]}]}]}
    return json.dumps(body).encode()


def kv(key: str, value: Any) -> dict[str, Any]:
    return {"key": key, "value": value}


def deep_any_value(depth: int) -> bytes:
    """A span whose one attribute is an array nested ``depth`` levels (built as text:
    ``json.dumps`` itself cannot write it)."""
    value = '{"arrayValue":{"values":[' * depth + '{"stringValue":"x"}' + "]}}" * depth
    return otlp(attributes=["@"]).replace(b'"@"', b'{"key":"a","value":' + value.encode() + b"}")


INF = b"1e999"  # json.loads reads it as float infinity
RUN = {
    "id": "5a1f2b3c-0000-4000-8000-000000000001",
    "trace_id": "5a1f2b3c-0000-4000-8000-000000000001",
    "run_type": "llm",
    "name": "n",
    "start_time": "2024-01-01T00:00:00Z",
    "end_time": "2024-01-01T00:00:01Z",
}
OBSERVATION = {
    "id": "o1",
    "traceId": "t1",
    "type": "GENERATION",
    "startTime": "2024-01-01T00:00:00Z",
    "endTime": "2024-01-01T00:00:01Z",
}
# A GENERATION of the committed Langfuse export, its fourth input message answering a tool
# call whose id is a list.
GENERATION = next(
    {k: row[k] for k in ("id", "traceId", "type", "startTime", "endTime", "model", "output")}
    for row in json.loads(
        (ROOT / "fixtures" / "langfuse" / "export" / "ui_observations.json").read_text()
    )
    if row["type"] == "GENERATION" and len(row["input"]["messages"]) > 3
)
TOOL_ID_A_LIST = [
    {"role": "system", "content": "You are a refund agent."},
    {"role": "user", "content": "Refund A-1001."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": [], "content": "{}"},
]
MESSAGES_WITH_SURROGATE = json.dumps(
    [{"role": "user", "parts": [{"type": "text", "content": "\ud800"}]}]
)

#: (name, record format, payload, what must come of it: "imported" | "partial" | "unparsed").
CASES = [
    (
        "intValue infinity",
        FORMAT_JSON,
        otlp(attributes=["@"]).replace(b'"@"', b'{"key":"a","value":{"intValue":' + INF + b"}}"),
        "partial",
    ),
    ("time infinity", FORMAT_JSON, otlp(startTimeUnixNano="@").replace(b'"@"', INF), "partial"),
    (
        "droppedAttributesCount past int64",
        FORMAT_JSON,
        otlp(droppedAttributesCount=10**30),
        "partial",
    ),
    (
        "severityNumber past int64",
        FORMAT_JSON,
        json.dumps(
            {
                "resourceLogs": [
                    {
                        "scopeLogs": [
                            {
                                "logRecords": [
                                    {"traceId": TRACE, "severityNumber": "INFO" + "9" * 30}
                                ]
                            }
                        ]
                    }
                ]
            }
        ).encode(),
        "partial",
    ),
    ("status.message an object", FORMAT_JSON, otlp(status={"message": {"a": 1}}), "partial"),
    (
        "scope.name a list",
        FORMAT_JSON,
        json.dumps(
            {
                "resourceSpans": [
                    {
                        "scopeSpans": [
                            {
                                "scope": {"name": ["x"]},
                                "spans": [
                                    json.loads(otlp())["resourceSpans"][0]["scopeSpans"][0][
                                        "spans"
                                    ][0]
                                ],
                            }
                        ]
                    }
                ]
            }
        ).encode(),
        "partial",
    ),
    (
        "stringValue nested",
        FORMAT_JSON,
        otlp(attributes=[kv("a", {"stringValue": [[1]]})]),
        "partial",
    ),
    ("attribute nested 300 deep", FORMAT_JSON, deep_any_value(300), "partial"),
    ("id 0x-prefixed", FORMAT_JSON, otlp(spanId="0x02030405060708"), "partial"),
    ("surrogate escape in a name", FORMAT_JSON, otlp(name="a\ud800b"), "partial"),
    (
        "surrogate bytes in a name",
        FORMAT_JSON,
        otlp(name="@").replace(b'"@"', b'"\xed\xa0\x80"'),
        "partial",
    ),
    ("surrogate key, not OTLP", FORMAT_JSON, json.dumps({"\ud800": 1}).encode(), "unparsed"),
    (
        "surrogate in JSON-in-string messages",
        FORMAT_JSON,
        otlp(
            kind=3,
            attributes=[
                kv("gen_ai.operation.name", {"stringValue": "chat"}),
                kv("gen_ai.request.model", {"stringValue": "m"}),
                kv("gen_ai.input.messages", {"stringValue": MESSAGES_WITH_SURROGATE}),
            ],
        ),
        "imported",
    ),
    (
        "LangSmith year 9999",
        "langsmith-runs",
        json.dumps({**RUN, "start_time": "9999-12-31T23:59:59Z"}).encode(),
        "partial",
    ),
    (
        "LangSmith year 1000",
        "langsmith-runs",
        json.dumps({**RUN, "start_time": "1000-01-01T00:00:00Z"}).encode(),
        "partial",
    ),
    (
        "LangSmith epoch 1e30",
        "langsmith-runs",
        json.dumps({**RUN, "start_time": 1e30}).encode(),
        "partial",
    ),
    (
        "LangSmith epoch infinity",
        "langsmith-runs",
        json.dumps({**RUN, "start_time": "@"}).replace('"@"', "1e999").encode(),
        "partial",
    ),
    (
        "LangSmith epoch 1e9999999 (hung)",
        "langsmith-runs",
        json.dumps({**RUN, "start_time": "1e9999999"}).encode(),
        "partial",
    ),
    (
        "LangSmith epoch 1e1000000 (decimal.Overflow)",
        "langsmith-runs",
        json.dumps({**RUN, "start_time": "1e1000000"}).encode(),
        "partial",
    ),
    (
        "LangSmith duration_ms 1e300",
        "langsmith-runs",
        json.dumps({**RUN, "end_time": None, "duration_ms": 1e300}).encode(),
        "partial",
    ),
    (
        "LangSmith tokens infinity",
        "langsmith-runs",
        json.dumps({**RUN, "total_tokens": "@", "prompt_tokens": 10**30})
        .replace('"@"', "1e999")
        .encode(),
        "imported",
    ),
    (
        "LangSmith list with a non-run",
        "langsmith-runs",
        json.dumps([RUN, {"name": "not a run"}]).encode(),
        "partial",
    ),
    (
        "LangSmith surrogate",
        "langsmith-runs",
        json.dumps({**RUN, "name": "\udfff"}).encode(),
        "partial",
    ),
    (
        "Langfuse epoch 1e30",
        "langfuse",
        json.dumps({**OBSERVATION, "startTime": 1e30}).encode(),
        "partial",
    ),
    (
        "Langfuse year 9999",
        "langfuse",
        json.dumps({**OBSERVATION, "startTime": "9999-12-31T23:59:59Z"}).encode(),
        "partial",
    ),
    (
        "Langfuse epoch 1e1000000",
        "langfuse",
        json.dumps({**OBSERVATION, "startTime": "1e1000000"}).encode(),
        "partial",
    ),
    (
        "Langfuse usage 1e300",
        "langfuse",
        json.dumps({**GENERATION, "usageDetails": {"input": 1e300, "output": 5}}).encode(),
        "imported",
    ),
    (
        "Langfuse usage infinity",
        "langfuse",
        json.dumps({**GENERATION, "usageDetails": {"input": "@"}}).replace('"@"', "1e999").encode(),
        "imported",
    ),
    (
        "Langfuse tool_call_id a list",
        "langfuse",
        json.dumps({**GENERATION, "input": {"messages": TOOL_ID_A_LIST}}).encode(),
        "imported",
    ),
    (
        "Who&When surrogate",
        "whowhen",
        json.dumps(
            {"history": [{"role": "user", "content": "\ud83d"}], "mistake_agent": "a"}
        ).encode(),
        "partial",
    ),
]

CASES_BY_NAME = {c[0]: {"fmt": c[1], "payload": c[2]} for c in CASES}


def outcome(record: RawRecord, root: Path) -> str:
    """What a fresh store made of one record; checks that the store still takes a good
    import, lists its trace and rebuilds from raw afterwards."""
    store = Store(root / "store")
    report = store.import_records([record])
    (row,) = store.records().iter_rows(named=True)
    assert report.records == 1
    if row["status"] != "imported":
        assert row["reason"], row
    failed = [i for step in store.steps().iter_rows(named=True) for i in step["issues"]]
    assert not [i for i in failed if i.startswith("mapper ")], failed
    assert import_files([OTLP / "new_content.traces.jsonl"], store=store).ok
    assert NEW_CONTENT in set(store.traces()["trace_id"])
    store.reindex()
    store.steps()
    return row["status"]


@pytest.mark.parametrize(("name", "fmt", "payload", "expected"), CASES, ids=[c[0] for c in CASES])
def test_hostile_value_is_kept_with_a_reason(
    name: str, fmt: str, payload: bytes, expected: str, tmp_path: Path
):
    record = RawRecord(payload, fmt, "finding", name)
    started = time.monotonic()
    try:
        decode_record(record)
    except FormatError as exc:
        assert str(exc)
    assert time.monotonic() - started < 5, "decoding took too long (a hang?)"
    if fmt == FORMAT_JSON:  # the receiver's intake check answers too
        for signal in ("traces", "logs"):
            try:
                accept(payload, signal=signal, encoding="json", source="finding").response_proto()
            except FormatError as exc:
                assert str(exc)
    assert outcome(record, tmp_path) == expected


def test_surrogates_become_the_replacement_character_and_are_noted(tmp_path: Path):
    store = Store(tmp_path / "store")
    report = store.import_records([RawRecord(otlp(name="a\ud800b"), FORMAT_JSON, "f", "1")])
    assert "U+FFFD" in report.partial[0].reason
    assert store.spans(TRACE)["name"].to_list() == ["a\ufffdb"]


def test_surrogates_inside_json_text_attributes_reach_steps_replaced(tmp_path: Path):
    store = Store(tmp_path / "store")
    payload = CASES_BY_NAME["surrogate in JSON-in-string messages"]["payload"]
    store.import_records([RawRecord(payload, FORMAT_JSON, "f", "1")])
    (step,) = store.steps(TRACE).iter_rows(named=True)
    assert step["input_messages"][0]["content"] == "\ufffd"


def test_out_of_range_usage_is_left_out_with_an_issue(tmp_path: Path):
    store = Store(tmp_path / "store")
    store.import_records(
        [RawRecord(CASES_BY_NAME["Langfuse usage 1e300"]["payload"], "langfuse", "f", "1")]
    )
    (step,) = store.steps().iter_rows(named=True)
    assert step["usage"]["input_tokens"] is None and step["usage"]["output_tokens"] == 5
    assert any("does not fit the steps table" in issue for issue in step["issues"])


def test_a_json_key_left_out_is_the_empty_key():
    """The OTLP/JSON mapping leaves out default values, so an attribute whose key is ""
    has no "key" at all; it used to reject every span of its resource."""
    body = {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"value": {"stringValue": "v"}}]},
                "scopeSpans": [
                    {"spans": [json.loads(otlp())["resourceSpans"][0]["scopeSpans"][0]["spans"][0]]}
                ],
            }
        ]
    }
    decoded, _ = decode_record(RawRecord(json.dumps(body).encode(), FORMAT_JSON, "f", "1"))
    assert not decoded.problems
    assert decoded.spans[0].resource == {"": "v"}


def test_a_logs_request_with_an_empty_first_scope_is_logs():
    """Signal detection looked only at the first scope; an empty one made a logs request
    decode as traces and be kept unparsed."""
    request = ExportLogsServiceRequest()
    resource = request.resource_logs.add()
    resource.scope_logs.add()
    record = resource.scope_logs.add().log_records.add()
    record.time_unix_nano = 1_700_000_000_000_000_000
    record.trace_id = bytes(range(1, 17))
    decoded, signal = decode_record(RawRecord(request.SerializeToString(), FORMAT_PROTO, "f", "1"))
    assert signal == "logs" and len(decoded.logs) == 1


def test_a_corrupt_parquet_file_that_makes_polars_panic_is_kept_unparsed(tmp_path: Path):
    data = bytearray((ROOT / "fixtures" / "langsmith" / "sdk.bulk_export.parquet").read_bytes())
    data[9690] ^= 1  # found by the fuzzer: polars panics reading this file
    record = RawRecord(bytes(data), "langsmith-parquet", "f", "file")
    with pytest.raises(FormatError, match="not a readable Parquet file"):
        decode_record(record)
    assert outcome(record, tmp_path) == "unparsed"


def test_a_json_file_nested_too_deeply_is_read_and_kept_unparsed(tmp_path: Path):
    """Sniffing a file raised RecursionError out of read_records, which stopped the import."""
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    (record,) = read_records(path)
    with pytest.raises(FormatError, match="nested too deeply"):
        decode_record(record)
    lines = tmp_path / "deep.jsonl"
    lines.write_text('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}\n" + '{"b": 1}\n')
    assert len(list(read_records(lines))) == 2


def test_a_phoenix_span_with_attributes_or_events_of_the_wrong_type_is_a_stated_problem():
    """Found by ``test_mutated_phoenix_span_exports``: ``"events": -1`` or ``"attributes": 5``
    raised a TypeError out of the decoder; now that span is skipped with a problem saying
    why, and the other spans decode."""
    from otelcar.ingest.exports import phoenix

    good = {
        "name": "chat",
        "context": {"trace_id": "t1", "span_id": "s1"},
        "span_kind": "LLM",
        "start_time": "2026-07-09T00:00:01+00:00",
        "end_time": "2026-07-09T00:00:02+00:00",
        "attributes": {"llm.model_name": "m"},
        "events": [],
    }
    bad_events = {**good, "context": {"trace_id": "t1", "span_id": "s2"}, "events": -1}
    bad_attributes = {**good, "context": {"trace_id": "t1", "span_id": "s3"}, "attributes": 5}
    decoded = phoenix.decode(json.dumps([good, bad_events, bad_attributes]).encode())
    assert len(decoded.spans) == 1
    assert any("events is a int, not a list" in p for p in decoded.problems)
    assert any("attributes is a int, not an object" in p for p in decoded.problems)


def test_a_langsmith_tool_call_whose_id_or_name_is_not_a_string_is_read():
    """Found by ``test_mutated_langsmith_files`` (scaled run): a tool call whose ``id`` was a
    list made the mapper fail on the whole span (``unhashable type: 'list'``); the id and
    name are now read as text."""
    from otelcar.conventions.langsmith import _calls_of, _merge_calls

    calls = _calls_of([{"id": ["a", 1], "name": 7, "args": {"q": 1}}, {"id": "b", "name": "x"}])
    assert [(c.id, c.name) for c in calls] == [("['a', 1]", "7"), ("b", "x")]
    assert len(_merge_calls(calls, calls)) == 2


def test_a_message_or_block_whose_type_is_a_list_is_read_not_raised():
    """Found by ``test_the_normaliser_never_raises_on_any_json``: a content block whose
    ``type`` was a list raised ``unhashable type: 'list'`` out of the normaliser; MLflow's
    LangChain message check had the same look-up. Such a block is now an issue, and such a
    message is read as any other item."""
    from otelcar.conventions import map_span
    from otelcar.conventions.normalize import messages
    from otelcar.ingest.frames import SpanFrame

    issues: list[str] = []
    read = messages({"role": "user", "content": [{"type": []}, "hello"]}, issues)
    assert [m.content for m in read] == ["hello"]
    assert any("content block type []" in i for i in issues)
    inputs = {"messages": [{"type": ["human"], "content": "hi"}, {"role": "user", "content": "q"}]}
    outputs = {"generations": [[{"message": {"type": {}}, "text": "answer"}]]}
    span = SpanFrame(
        trace_id="t" * 32, span_id="s" * 16, parent_span_id=None, name="ChatModel",
        kind="INTERNAL", start_ns=1, end_ns=2,
        attributes={
            "mlflow.spanType": json.dumps("CHAT_MODEL"),
            "mlflow.spanInputs": json.dumps(inputs),
            "mlflow.spanOutputs": json.dumps(outputs),
        },
    )  # fmt: skip
    mapped = map_span(span)
    assert mapped.kind == "llm" and mapped.source == "mlflow", mapped.issues
    assert mapped.output is not None and mapped.output.content == "answer"
