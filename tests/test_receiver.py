"""The OTLP receiver against real clients: the official SDK exporters, raw HTTP and gRPC."""

from __future__ import annotations

import gzip
import http.client
import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from polars.testing import assert_frame_equal

from otelcar import Store, import_files
from otelcar.receiver import Receiver, ReceiverConfig
from tests.conftest import NEW_CONTENT, OTLP
from tests.helpers.otlp_agent import run_sdk_agent

ROOT = Path(__file__).resolve().parents[1]
TRACE_PB = (OTLP / "new_content.traces.pb").read_bytes()
TRACE_JSON = (OTLP / "new_content.traces.json").read_bytes()
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


@pytest.fixture
def receiver(tmp_path: Path):
    running = Receiver(
        Store(tmp_path / "store"), ReceiverConfig(grpc_port=0, http_port=0, materialize_every_s=0.1)
    )
    running.start()
    yield running
    running.stop()


def _post(
    port: int,
    body: bytes,
    *,
    path: str = "/v1/traces",
    content_type: str = "application/x-protobuf",
    headers: dict | None = None,
):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request(
        "POST", path, body=body, headers={"Content-Type": content_type, **(headers or {})}
    )
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response, data


def _wait_for(predicate, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("protocol", "compression"),
    [
        ("grpc", "none"),
        ("grpc", "gzip"),
        ("http/protobuf", "none"),
        ("http/protobuf", "gzip"),
    ],
)
def test_instrumented_agent_via_sdk_exporters_equals_file_import(
    receiver, tmp_path, protocol, compression
):
    port = receiver.grpc_port if protocol == "grpc" else receiver.http_port
    out = tmp_path / "agent"
    trace_id = run_sdk_agent(port, protocol, out, compression=compression)
    _wait_for(
        lambda: (
            trace_id in receiver.sink.traces()["trace_id"].to_list()
            and receiver.sink.traces().filter(receiver.sink.traces()["trace_id"] == trace_id)[
                "n_logs"
            ][0]
            == 3
        )
    )
    received = receiver.sink.steps(trace_id)
    from_file = Store(tmp_path / "file")
    import_files([out / "agent.traces.jsonl", out / "agent.logs.jsonl"], store=from_file)
    assert_frame_equal(received, from_file.steps(trace_id))
    assert received["kind"].to_list() == ["agent", "llm", "tool", "tool", "llm", "tool", "llm"]
    assert received["content_captured"].to_list()[1:] == [True] * 6


def test_http_json_and_protobuf_bodies_and_partial_success(receiver):
    response, data = _post(receiver.http_port, TRACE_JSON, content_type="application/json")
    assert response.status == 200 and json.loads(data) == {}
    bad_span = json.loads(TRACE_JSON)
    spans = bad_span["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[0]["spanId"] = "not-hex!"
    response, data = _post(
        receiver.http_port,
        json.dumps(bad_span).encode(),
        content_type="application/json; charset=utf-8",
    )
    assert response.status == 200
    partial = json.loads(data)["partialSuccess"]
    assert partial["rejectedSpans"] == "1" and "not-hex!" in partial["errorMessage"]
    response, data = _post(receiver.http_port, TRACE_PB)
    assert response.status == 200
    assert ExportTraceServiceResponse.FromString(data).partial_success.rejected_spans == 0
    _wait_for(lambda: NEW_CONTENT in receiver.sink.traces()["trace_id"].to_list())
    assert receiver.sink.steps(NEW_CONTENT).height == 7


JSON = {"Content-Type": "application/json"}


@pytest.mark.parametrize(
    ("body", "headers", "status", "fragment"),
    [
        (b"\x0a\xff\xff\xff", {}, 400, "does not parse"),
        (b'{"resourceSpans": [', {"Content-Type": "application/json"}, 400, "invalid JSON"),
        # an envelope of the wrong JSON types is no request: 400 with where and why
        (b'{"resourceSpans": "oops"}', JSON, 400, "resourceSpans is the string 'oops'"),
        (b'{"resourceSpans": 5}', JSON, 400, "resourceSpans is the number 5, not an array"),
        (b'{"resourceSpans": [{"resource": "r"}]}', JSON, 400, "resource is the string 'r'"),
        (b'{"resourceSpans": [7]}', JSON, 400, "resourceSpans[0] is the number 7"),
        (
            b'{"resourceSpans": [{"scopeSpans": [{"spans": {"a": 1}}]}]}',
            JSON,
            400,
            "scopeSpans[0].spans is an object, not an array",
        ),
        (b'{"resourceLogs": [{"scopeLogs": "x"}]}', JSON, 400, "scopeLogs is the string 'x'"),
        (TRACE_PB, {"Content-Type": "text/plain"}, 415, "unsupported Content-Type"),
        (TRACE_PB, {"Content-Encoding": "br"}, 415, "Content-Encoding"),
        (b"not gzip", {"Content-Encoding": "gzip"}, 400, "bad gzip body"),
        (gzip.compress(b"\x00" * (3 * 1024 * 1024)), {"Content-Encoding": "gzip"}, 413, "exceeds"),
        (b"x" * (2 * 1024 * 1024 + 1), {}, 413, "exceeds the limit"),
    ],
)
def test_http_bad_input_gets_the_right_status(tmp_path, body, headers, status, fragment):
    small = Receiver(
        Store(tmp_path / "s"),
        ReceiverConfig(grpc_port=None, http_port=0, max_request_bytes=2 * 1024 * 1024),
    )
    small.start()
    try:
        headers = dict(headers)
        content_type = headers.pop("Content-Type", "application/x-protobuf")
        response, data = _post(small.http_port, body, content_type=content_type, headers=headers)
        assert response.status == status
        assert fragment in data.decode("utf-8", "replace")
        ok, _ = _post(small.http_port, TRACE_PB)  # and it keeps serving
        assert ok.status == 200
        assert small.stats.requests == 1
    finally:
        small.stop()


def test_http_wrong_path_method_and_logs_body_on_traces_path(receiver):
    response, _ = _post(receiver.http_port, TRACE_PB, path="/v1/metrics")
    assert response.status == 404
    connection = http.client.HTTPConnection("127.0.0.1", receiver.http_port, timeout=10)
    connection.request("GET", "/v1/traces")
    assert connection.getresponse().status == 405
    connection.close()
    logs_json = (OTLP / "new_content.logs.jsonl").read_bytes()
    response, data = _post(receiver.http_port, logs_json, content_type="application/json")
    assert response.status == 400 and b"sent to the traces endpoint" in data
    response, _ = _post(
        receiver.http_port, logs_json, path="/v1/logs", content_type="application/json"
    )
    assert response.status == 200


def test_client_disconnecting_mid_body_is_survived(receiver):
    with socket.create_connection(("127.0.0.1", receiver.http_port)) as sock:
        sock.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/x-protobuf\r\nContent-Length: 5000\r\n\r\n" + TRACE_PB[:100]
        )
    response, _ = _post(receiver.http_port, TRACE_PB)
    assert response.status == 200
    assert receiver.stats.requests == 1


def test_grpc_errors_are_otlp_status_codes(tmp_path):
    small = Receiver(
        Store(tmp_path / "s"),
        ReceiverConfig(grpc_port=0, http_port=None, max_request_bytes=64 * 1024),
    )
    small.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{small.grpc_port}") as channel:
            export = channel.unary_unary(EXPORT)
            with pytest.raises(grpc.RpcError) as bad:
                export(b"\x0a\xff\xff\xff", timeout=10)
            assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            big = ExportTraceServiceRequest()
            big.resource_spans.add().scope_spans.add().spans.add(name="x" * 100_000)
            with pytest.raises(grpc.RpcError) as large:
                export(big.SerializeToString(), timeout=10)
            assert large.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            reply = ExportTraceServiceResponse.FromString(export(TRACE_PB, timeout=10))
            assert reply.partial_success.rejected_spans == 0
        assert small.stats.spans == 7 and small.stats.bad_requests == 1
    finally:
        small.stop()


def test_backpressure_answers_retryable_codes(tmp_path, monkeypatch):
    store = Store(tmp_path / "s")
    gate, writing = threading.Event(), threading.Event()
    real_append = store.append

    def slow_append(records):
        writing.set()
        gate.wait(120)
        real_append(records)

    monkeypatch.setattr(store, "append", slow_append)
    busy = Receiver(
        store, ReceiverConfig(grpc_port=0, http_port=0, max_pending=1, ack_timeout_s=300)
    )
    busy.start()
    try:
        with ThreadPoolExecutor(4) as pool:
            first = pool.submit(_post, busy.http_port, TRACE_PB)  # taken by the writer
            _wait_for(writing.is_set)  # the writer holds the first batch
            second = pool.submit(
                _post, busy.http_port, TRACE_JSON, content_type="application/json"
            )  # queued
            _wait_for(lambda: busy._writer.pending() == 1)
            response, data = _post(busy.http_port, TRACE_PB)  # no room: refused
            assert response.status == 503 and response.getheader("Retry-After") == "1"
            assert b"retry later" in data
            with (
                grpc.insecure_channel(f"127.0.0.1:{busy.grpc_port}") as channel,
                pytest.raises(grpc.RpcError) as refused,
            ):
                channel.unary_unary(EXPORT)(TRACE_PB, timeout=10)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
            gate.set()
            assert first.result()[0].status == 200 and second.result()[0].status == 200
        assert busy.stats.refused == 2
    finally:
        gate.set()
        busy.stop()


@pytest.mark.parametrize("mode", ["process", "thread"])
def test_derivation_backlog_past_its_bound_slows_intake(tmp_path, mode):
    """While derivation cannot keep up (here: an import holds the store's derivation lock),
    batches past ``max_lag_bytes`` of backlog are refused as busy; once derivation catches
    up, intake resumes and every accepted batch is derived."""
    store = Store(tmp_path / "s")
    config = ReceiverConfig(
        grpc_port=0,
        http_port=0,
        materialize_every_s=0.05,
        derive=mode,
        max_lag_bytes=len(TRACE_PB) // 2,
    )
    lagging = Receiver(store, config)
    lagging.start()
    try:
        with store.lock("derived"):  # derivation is held back meanwhile
            first, _ = _post(lagging.http_port, TRACE_PB)
            assert first.status == 200
            assert store.pending_bytes() > len(TRACE_PB)
            time.sleep(0.15)  # the backlog figure is at most 0.1 s old
            refused, data = _post(lagging.http_port, TRACE_JSON, content_type="application/json")
            assert refused.status == 503 and b"behind intake" in data
            with (
                grpc.insecure_channel(f"127.0.0.1:{lagging.grpc_port}") as channel,
                pytest.raises(grpc.RpcError) as busy,
            ):
                channel.unary_unary(EXPORT)(TRACE_PB, timeout=10)
            assert busy.value.code() == grpc.StatusCode.UNAVAILABLE
            assert lagging.stats.refused == 2
        _wait_for(lambda: store.pending_bytes() == 0)
        time.sleep(0.15)
        again, _ = _post(lagging.http_port, TRACE_JSON, content_type="application/json")
        assert again.status == 200
    finally:
        lagging.stop()
    assert store.pending_bytes() == 0
    assert len(store.traces()) == 1 and len(store.records()) == 2
    assert lagging.materialize_errors == 0


def test_many_concurrent_connections_are_all_answered(receiver):
    def one(i: int) -> int:
        response, _ = _post(receiver.http_port, TRACE_PB)
        return response.status

    with ThreadPoolExecutor(64) as pool:
        statuses = list(pool.map(one, range(400)))
    assert set(statuses) <= {200, 503} and statuses.count(200) > 0
    assert receiver.stats.requests == statuses.count(200)
    response, _ = _post(receiver.http_port, TRACE_PB)
    assert response.status == 200


def _pieces(body: bytes, size: int = 700):
    return (body[i : i + size] for i in range(0, len(body), size))


def test_http_chunked_bodies_are_read_whole_plain_and_gzip(receiver):
    """``Transfer-Encoding: chunked`` (what the OpenTelemetry JavaScript exporters send): the
    chunks make the body, gzip or not, and the connection serves the next request."""
    connection = http.client.HTTPConnection("127.0.0.1", receiver.http_port, timeout=30)
    for body, headers in (
        (TRACE_PB, {}),
        (gzip.compress(TRACE_PB), {"Content-Encoding": "gzip"}),
    ):
        connection.request(
            "POST",
            "/v1/traces",
            body=_pieces(body),
            headers={"Content-Type": "application/x-protobuf", **headers},
            encode_chunked=True,
        )
        response = connection.getresponse()
        response.read()
        assert response.status == 200
    connection.close()
    assert receiver.stats.requests == 2
    _wait_for(lambda: NEW_CONTENT in receiver.sink.traces()["trace_id"].to_list())
    assert receiver.sink.steps(NEW_CONTENT).height == 7


@pytest.mark.parametrize(
    ("chunks", "status", "fragment"),
    [
        (b"zz\r\nabc\r\n0\r\n\r\n", 400, "bad chunk size line"),
        (b"3\r\nabcdef\r\n0\r\n\r\n", 400, "not followed by CRLF"),
        (b"300000\r\n", 413, "at least 3145728 bytes exceeds"),
        (b"5\r\nab", None, "the client stops sending mid-chunk: nothing stored, no answer"),
    ],
)
def test_http_bad_chunked_bodies_get_the_right_status(tmp_path, chunks, status, fragment):
    small = Receiver(
        Store(tmp_path / "s"),
        ReceiverConfig(grpc_port=None, http_port=0, max_request_bytes=2 * 1024 * 1024),
    )
    small.start()
    try:
        with socket.create_connection(("127.0.0.1", small.http_port), timeout=10) as sock:
            sock.sendall(
                b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n" + chunks
            )
            if status is None:
                sock.shutdown(socket.SHUT_WR)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        if status is None:
            assert answer == b""
        else:
            assert answer.startswith(f"HTTP/1.1 {status}".encode()), answer[:200]
            assert fragment.encode() in answer, answer
        ok, _ = _post(small.http_port, TRACE_PB)  # and it keeps serving
        assert ok.status == 200
    finally:
        small.stop()
