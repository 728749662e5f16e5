"""OTLP/JSON decoding: ids, int64, enums, AnyValue, and one bad span among good ones."""

from __future__ import annotations

import base64
import json

import pytest

from otelcar.errors import FormatError
from otelcar.ingest.otlp_json import any_value, decode_logs, decode_traces
from otelcar.ingest.raw import FORMAT_JSON, RawRecord, decode_record

TRACE = "5B8EFFF798038103D269B633813FC60C"
SPAN = "EEE19B7EC3C1B174"


def _request(*spans: dict) -> dict:
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]
                },
                "scopeSpans": [{"scope": {"name": "lib", "version": "1.0"}, "spans": list(spans)}],
            }
        ]
    }


def _span(**extra) -> dict:
    span = {
        "traceId": TRACE,
        "spanId": SPAN,
        "name": "chat m",
        "kind": 3,
        "startTimeUnixNano": "1700000000000000001",
        "endTimeUnixNano": 1700000000000000002,
    }
    span.update(extra)
    return span


def test_hex_ids_are_lowercased_and_int64_accepts_strings_and_numbers():
    decoded = decode_traces(_request(_span(parentSpanId="")))
    (span,) = decoded.spans
    assert span.trace_id == TRACE.lower()
    assert span.span_id == SPAN.lower()
    assert span.parent_span_id is None
    assert span.start_ns == 1700000000000000001
    assert span.end_ns == 1700000000000000002
    assert span.kind == "CLIENT"
    assert span.resource == {"service.name": "svc"}
    assert (span.scope_name, span.scope_version) == ("lib", "1.0")
    assert decoded.problems == []


def test_enum_names_and_status():
    decoded = decode_traces(
        _request(
            _span(
                kind="SPAN_KIND_INTERNAL", status={"code": "STATUS_CODE_ERROR", "message": "boom"}
            )
        )
    )
    (span,) = decoded.spans
    assert span.kind == "INTERNAL"
    assert (span.status_code, span.status_message) == ("ERROR", "boom")


def test_base64_ids_from_a_protobuf_json_dump_are_decoded_and_reported():
    raw_trace = bytes.fromhex(TRACE)
    raw_span = bytes.fromhex(SPAN)
    decoded = decode_traces(
        _request(
            _span(
                traceId=base64.b64encode(raw_trace).decode(),
                spanId=base64.b64encode(raw_span).decode(),
            )
        )
    )
    (span,) = decoded.spans
    assert span.trace_id == TRACE.lower() and span.span_id == SPAN.lower()
    assert any("base64" in p for p in decoded.problems)


def test_a_bad_span_is_skipped_with_its_location_and_the_rest_kept():
    decoded = decode_traces(_request(_span(), _span(traceId="nothex!", spanId="1234")))
    assert len(decoded.spans) == 1
    assert len(decoded.problems) == 1
    assert decoded.problems[0].startswith("resourceSpans[0].scopeSpans[0].spans[1]:")


def test_any_value_forms():
    assert any_value({"stringValue": "a"}) == "a"
    assert any_value({"intValue": "9007199254740993"}) == 9007199254740993
    assert any_value({"doubleValue": "NaN"}) != any_value({"doubleValue": "NaN"})
    assert any_value({"doubleValue": 0.5}) == 0.5
    assert any_value({"boolValue": True}) is True
    assert any_value({"arrayValue": {"values": [{"stringValue": "x"}, {"intValue": 1}]}}) == [
        "x",
        1,
    ]
    assert any_value(
        {"kvlistValue": {"values": [{"key": "k", "value": {"boolValue": False}}]}}
    ) == {"k": False}
    assert any_value({"bytesValue": "AAE="}) == "AAE="
    assert any_value({}) is None
    assert any_value({"string_value": "snake"}) == "snake"


def test_logs_event_name_from_field_or_attribute_and_missing_times():
    obj = {
        "resourceLogs": [
            {
                "scopeLogs": [
                    {
                        "logRecords": [
                            {
                                "eventName": "gen_ai.user.message",
                                "traceId": TRACE,
                                "spanId": SPAN,
                                "observedTimeUnixNano": "5",
                                "body": {
                                    "kvlistValue": {
                                        "values": [
                                            {"key": "content", "value": {"stringValue": "hi"}}
                                        ]
                                    }
                                },
                            },
                            {
                                "attributes": [
                                    {"key": "event.name", "value": {"stringValue": "gen_ai.choice"}}
                                ],
                                "severityNumber": "SEVERITY_NUMBER_INFO",
                                "body": {},
                            },
                        ]
                    }
                ]
            }
        ]
    }
    decoded = decode_logs(obj)
    first, second = decoded.logs
    assert first.event_name == "gen_ai.user.message"
    assert (first.time_ns, first.observed_time_ns) == (None, 5)
    assert first.body == {"content": "hi"}
    assert first.trace_id == TRACE.lower()
    assert second.event_name == "gen_ai.choice"
    assert second.severity_number == 9
    assert second.trace_id is None and second.body is None


def test_decode_record_tells_traces_logs_and_non_otlp_apart():
    record = RawRecord(json.dumps(_request(_span())).encode(), FORMAT_JSON, "x", "line 1")
    decoded, signal = decode_record(record)
    assert signal == "traces" and len(decoded.spans) == 1
    with pytest.raises(FormatError, match="metrics"):
        decode_record(RawRecord(b'{"resourceMetrics": []}', FORMAT_JSON, "x", "line 2"))
    with pytest.raises(FormatError, match="not OTLP/JSON"):
        decode_record(RawRecord(b'{"name": "GET /", "context": {}}', FORMAT_JSON, "x", "l3"))
    with pytest.raises(FormatError, match="invalid JSON"):
        decode_record(RawRecord(b'{"resourceSpans": [', FORMAT_JSON, "x", "line 4"))
