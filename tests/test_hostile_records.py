"""One bad record never bricks the store (#15, first part).

The reproducers seen by hand: a span whose start time does not fit the store's 64-bit times
(``startTimeUnixNano`` ≥ 2^63), JSON whose resource level has the wrong types, and JSON
nested 10,000 deep. Each must be kept apart with its reason, the good records of the same file
imported, and every later import, ``reindex`` and derivation must work; over OTLP/HTTP the bad
span is counted in ``partial_success`` (never acknowledged and dropped later), a body that
cannot be decoded gets 400, and good batches after them are stored.
"""

from __future__ import annotations

import http.client
import json
import time
from pathlib import Path

import pytest

from otelcar import Store, import_files
from otelcar.receiver import Receiver, ReceiverConfig
from tests.conftest import LEGACY_CONTENT, NEW_CONTENT, OTLP

TRACE_JSON = json.loads((OTLP / "new_content.traces.json").read_text())
HUGE_TIME = {
    "resourceSpans": [
        {
            "scopeSpans": [
                {
                    "spans": [
                        {
                            "traceId": "0102030405060708090a0b0c0d0e0f10",
                            "spanId": "0102030405060708",
                            "name": "x",
                            "startTimeUnixNano": "18446744073707551616",
                            "endTimeUnixNano": "18446744073708551616",
                        }
                    ]
                }
            ]
        }
    ]
}
WRONG_TYPES = {"resourceSpans": [{"resource": "not an object", "scopeSpans": 5}, 7]}
DEEP = "{" + '"resourceSpans": ' + "[" * 10_000 + "]" * 10_000 + "}"


def _hostile_lines() -> list[str]:
    return [json.dumps(HUGE_TIME), json.dumps(WRONG_TYPES), DEEP, json.dumps(TRACE_JSON)]


def test_bad_records_are_kept_apart_and_the_store_keeps_building(tmp_path: Path):
    dump = tmp_path / "hostile.jsonl"
    dump.write_text("\n".join(_hostile_lines()) + "\n")
    store = Store(tmp_path / "store")
    report = import_files([dump], store=store)
    assert NEW_CONTENT in store.traces()["trace_id"].to_list()  # the good line of the file
    reasons = " | ".join(str(r) for r in store.records()["reason"].to_list() if r is not None)
    assert "startTimeUnixNano 18446744073707551616 is out of range" in reasons
    assert "resourceSpans[0].resource is the string 'not an object', not an object" in reasons
    assert "nested too deeply" in reasons
    assert report.imported >= 1
    # Later data still arrives, and everything rebuilds from the raw records.
    import_files([OTLP / "legacy_content.traces.jsonl"], store=store)
    assert LEGACY_CONTENT in store.traces()["trace_id"].to_list()
    store.reindex()
    traces = store.traces()["trace_id"].to_list()
    assert NEW_CONTENT in traces and LEGACY_CONTENT in traces
    reopened = Store(tmp_path / "store")
    assert set(reopened.traces()["trace_id"].to_list()) == set(traces)


@pytest.fixture
def receiver(tmp_path: Path):
    running = Receiver(
        Store(tmp_path / "store"),
        ReceiverConfig(grpc_port=None, http_port=0, materialize_every_s=0.1),
    )
    running.start()
    try:
        yield running
    finally:
        running.stop()


def _post(port: int, body: bytes) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request(
            "POST", "/v1/traces", body=body, headers={"Content-Type": "application/json"}
        )
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_the_receiver_answers_every_hostile_body_and_keeps_storing(receiver):
    status, data = _post(receiver.http_port, json.dumps(HUGE_TIME).encode())
    assert status == 200
    partial = json.loads(data)["partialSuccess"]
    assert partial["rejectedSpans"] == "1" and "out of range" in partial["errorMessage"]
    status, data = _post(receiver.http_port, DEEP.encode())
    assert status == 400 and b"nested too deeply" in data
    status, data = _post(receiver.http_port, json.dumps(WRONG_TYPES).encode())
    assert status == 400, data  # no request at all, not a request with a rejected span
    assert "resourceSpans[0].resource is the string 'not an object'" in json.loads(data)["message"]
    status, _ = _post(receiver.http_port, json.dumps(TRACE_JSON).encode())
    assert status == 200
    start = time.monotonic()
    while NEW_CONTENT not in receiver.sink.traces()["trace_id"].to_list():
        assert time.monotonic() - start < 60, "the good batch never reached the store"
        time.sleep(0.2)
    assert receiver.sink.steps(NEW_CONTENT).height == 7


def test_protobuf_spans_the_store_cannot_hold_are_rejected_in_partial_success(receiver):
    """A time past 2^63 ns and a link with a malformed id are counted as rejected when the
    batch is acknowledged, so nothing acknowledged is dropped later; the rest is stored."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
        ExportTraceServiceResponse,
    )

    request = ExportTraceServiceRequest.FromString((OTLP / "new_content.traces.pb").read_bytes())
    spans = request.resource_spans[0].scope_spans[0].spans
    total = len(spans)
    spans[0].start_time_unix_nano = 2**64 - 1
    spans[1].links.add(trace_id=b"\x01\x02", span_id=b"\x03" * 8)
    connection = http.client.HTTPConnection("127.0.0.1", receiver.http_port, timeout=30)
    try:
        connection.request(
            "POST",
            "/v1/traces",
            body=request.SerializeToString(),
            headers={"Content-Type": "application/x-protobuf"},
        )
        response = connection.getresponse()
        reply = ExportTraceServiceResponse.FromString(response.read())
    finally:
        connection.close()
    assert response.status == 200
    assert reply.partial_success.rejected_spans == 2, reply.partial_success.error_message
    assert "out of range" in reply.partial_success.error_message
    start = time.monotonic()
    while NEW_CONTENT not in receiver.sink.traces()["trace_id"].to_list():
        assert time.monotonic() - start < 60, "the accepted spans never reached the store"
        time.sleep(0.2)
    spans_stored = receiver.sink.records()["n_spans"].sum()
    assert spans_stored == total - 2
