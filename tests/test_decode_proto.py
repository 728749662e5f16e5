"""Binary OTLP decoding and signal detection, against the real exporter's bytes."""

from __future__ import annotations

import json

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otelcar.errors import FormatError
from otelcar.ingest import otlp_json, otlp_proto
from tests.conftest import OTLP


def _by_id(spans):
    return {s.span_id: s for s in spans}


def test_protobuf_body_from_the_http_exporter_decodes_like_its_json_lines():
    proto = otlp_proto.decode_traces((OTLP / "new_content.traces.pb").read_bytes())
    lines = (OTLP / "new_content.traces.jsonl").read_text().splitlines()
    from_json = [s for line in lines for s in otlp_json.decode_traces(json.loads(line)).spans]
    assert proto.problems == []
    a, b = _by_id(proto.spans), _by_id(from_json)
    assert set(a) == set(b) and len(a) == 7
    for span_id, span in a.items():
        other = b[span_id]
        for field in (
            "trace_id",
            "parent_span_id",
            "name",
            "kind",
            "start_ns",
            "end_ns",
            "status_code",
            "attributes",
            "resource",
            "scope_name",
        ):
            assert getattr(span, field) == getattr(other, field), field


def test_detect_signal_of_trace_and_log_requests():
    assert otlp_proto.detect_signal((OTLP / "new_content.traces.pb").read_bytes()) == "traces"
    assert otlp_proto.detect_signal((OTLP / "new_content.logs.pb").read_bytes()) == "logs"
    assert otlp_proto.detect_signal(ExportTraceServiceRequest().SerializeToString()) is None


def test_logs_request_decodes_with_structured_bodies_and_attributes():
    decoded = otlp_proto.decode_logs((OTLP / "new_content.logs.pb").read_bytes())
    assert len(decoded.logs) == 3
    first = decoded.logs[0]
    assert first.event_name == "gen_ai.client.inference.operation.details"
    messages = first.attributes["gen_ai.input.messages"]
    assert messages[0]["role"] == "system"
    assert (
        messages[1]["parts"][0]["content"] == "I want a refund for order A-1001, it arrived broken."
    )


def test_garbage_is_a_format_error_not_a_crash():
    garbage = (OTLP / "bad" / "garbage.pb").read_bytes()
    with pytest.raises(FormatError):
        otlp_proto.detect_signal(garbage)
    with pytest.raises(FormatError):
        otlp_proto.wire_fields(b"\x0a\x05ab")  # length runs past the end


def test_survey_counts_and_reports_exactly_what_decoding_would():
    request = ExportTraceServiceRequest.FromString((OTLP / "new_content.traces.pb").read_bytes())
    spans = request.resource_spans[0].scope_spans[0].spans
    spans[0].span_id = b"\x01\x02"  # wrong length
    data = request.SerializeToString()
    count, problems, trace_ids = otlp_proto.survey(data, "traces")
    decoded = otlp_proto.decode_traces(data)
    assert count == len(decoded.spans) and problems == decoded.problems
    assert trace_ids == {s.trace_id for s in decoded.spans}
    logs = (OTLP / "new_content.logs.pb").read_bytes()
    assert otlp_proto.survey(logs, "logs")[0] == len(otlp_proto.decode_logs(logs).logs)
