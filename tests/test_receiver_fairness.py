"""A receiver no client can wedge: slow clients, draining on stop, writing beside an import.

Slow clients are raw sockets (what a slowloris is); good clients are ``http.client`` and a
gRPC channel; the stop and side-by-side tests hold the store's locks from the test the way a
slow disk or a long ``otelcar import`` would, so requests are really in flight.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import random
import signal
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otelcar import Store
from otelcar.receiver import Receiver, ReceiverConfig
from otelcar.receiver.child import start_collect
from otelcar.receiver.connections import Deadlines, Permits

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def _batch(seed: int) -> tuple[bytes, str]:
    rng = random.Random(seed)
    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    trace_id = rng.randbytes(16)
    for n in range(5):
        scope.spans.add(
            trace_id=trace_id,
            span_id=rng.randbytes(8),
            name=f"span {n}",
            start_time_unix_nano=1_000 + n,
            end_time_unix_nano=2_000 + n,
        )
    return request.SerializeToString(), trace_id.hex()


def _post(port: int, body: bytes, timeout_s: float = 30) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        connection.request(
            "POST", "/v1/traces", body=body, headers={"Content-Type": "application/x-protobuf"}
        )
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def _grpc_export(port: int, body: bytes, timeout_s: float = 30) -> grpc.StatusCode:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(EXPORT)
        try:
            call(body, timeout=timeout_s)
            return grpc.StatusCode.OK
        except grpc.RpcError as exc:
            return exc.code()


def _slow_client(port: int, *, headers_done: bool, stop: threading.Event, result: list) -> None:
    """A slowloris: a request sent one byte every 0.2 s, headers first or body."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    head = (
        b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
        b"Content-Length: 100000\r\n\r\n"
    )
    try:
        if headers_done:
            sock.sendall(head)
            trickle = b"\x00" * 100000
        else:
            trickle = head
        try:
            for byte in trickle:
                if stop.is_set():
                    break
                sock.sendall(bytes([byte]))
                time.sleep(0.2)
        except OSError:
            pass  # the receiver answered and closed: read what it said
        answer = sock.recv(4096)
        result.append(answer.split(b"\r\n", 1)[0].decode(errors="replace"))
    except OSError as exc:
        result.append(f"closed: {type(exc).__name__}")
    finally:
        sock.close()


def _receiver(tmp_path: Path, **overrides) -> Receiver:
    # Deriving on a thread: these tests time HTTP handling on 2 cores, and a derivation
    # child's start-up (its imports) would compete with the clients for no purpose here.
    overrides.setdefault("derive", "thread")
    config = ReceiverConfig(grpc_port=0, http_port=0, materialize_every_s=0.1, **overrides)
    running = Receiver(Store(tmp_path / "store"), config)
    running.start()
    return running


def test_slow_clients_hold_no_permit_and_are_cut_at_their_deadline(tmp_path: Path):
    # 8 permits and 60 slow clients: if a slow upload held a permit (as it once did), every
    # good batch would get 503 until the slow ones timed out.
    deadlines = Deadlines(header_timeout_s=2.0, body_timeout_s=2.0, min_upload_bytes_per_s=1024)
    receiver = _receiver(tmp_path, max_in_flight=8, deadlines=deadlines)
    port = receiver.http_port
    stop, results = threading.Event(), []
    slow = [
        threading.Thread(
            target=_slow_client,
            args=(port,),
            kwargs={"headers_done": n % 2 == 0, "stop": stop, "result": results},
        )
        for n in range(60)
    ]
    try:
        for thread in slow:
            thread.start()
        time.sleep(0.5)  # every slow client is connected and mid-request
        started = time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            statuses = list(pool.map(lambda n: _post(port, _batch(n)[0]), range(16)))
        served_in = time.monotonic() - started
        assert statuses == [200] * 16
        assert served_in < 10, served_in  # not waiting for the slow clients' deadlines
        for thread in slow:
            thread.join(20)
        assert not any(thread.is_alive() for thread in slow)
    finally:
        stop.set()
        receiver.stop()
    # Cut at their deadline with an answer saying so (headers ones get it too).
    assert len(results) == 60
    assert sum("408" in line for line in results) >= 55, results
    spans = Store(receiver.sink.root).derived.scan("spans").collect()
    assert spans.height == 16 * 5  # the good batches, and nothing from the slow ones


def test_permits_keep_one_busy_client_from_taking_them_all():
    permits = Permits(8)
    taken = sum(permits.try_acquire("10.0.0.1") for _ in range(20))
    assert taken == 8  # alone, a client may use every permit
    for _ in range(8):
        permits.release("10.0.0.1")
    assert sum(permits.try_acquire("10.0.0.1") for _ in range(20)) == 8
    permits.release("10.0.0.1")
    permits.release("10.0.0.1")
    # Busy (6 of 8 taken) and a second client asks: it gets in, the first may not grow.
    assert permits.try_acquire("10.0.0.2")
    assert not permits.try_acquire("10.0.0.1")
    assert permits.try_acquire("10.0.0.2")
    assert permits.held("10.0.0.1") == 6 and permits.held() == 8
    assert not permits.try_acquire("10.0.0.3")  # full is full


def test_too_many_connections_makes_room_from_idle_ones(tmp_path: Path):
    receiver = _receiver(tmp_path, max_connections=4)
    port = receiver.http_port
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
    try:
        time.sleep(0.3)
        assert _post(port, _batch(1)[0]) == 200  # an idle connection was closed for it
        closed = 0
        for sock in idle:
            sock.settimeout(2)
            with contextlib.suppress(TimeoutError):
                closed += sock.recv(1) == b""
        assert closed >= 1
    finally:
        for sock in idle:
            sock.close()
        receiver.stop()


def test_stop_finishes_requests_in_flight_on_both_transports(tmp_path: Path):
    receiver = _receiver(tmp_path)
    store = receiver.sink
    bodies = [_batch(n) for n in range(6)]
    outcomes: dict[int, object] = {}
    with store.lock("raw"):  # the writer blocks: every request below stays in flight
        threads = [
            threading.Thread(
                target=lambda n=n: outcomes.__setitem__(
                    n,
                    _post(receiver.http_port, bodies[n][0])
                    if n % 2
                    else _grpc_export(receiver.grpc_port, bodies[n][0]),
                )
            )
            for n in range(6)
        ]
        for thread in threads:
            thread.start()
        # One more client is mid-upload when the stop begins: it may finish.
        sock = socket.create_connection(("127.0.0.1", receiver.http_port), timeout=30)
        late, late_trace = _batch(99)
        sock.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
            + f"Content-Length: {len(late)}\r\n\r\n".encode()
            + late[:10]
        )
        time.sleep(0.5)
        stopping = threading.Thread(target=receiver.stop, kwargs={"grace_s": 15})
        stopping.start()
        time.sleep(0.5)
        sock.sendall(late[10:])
        time.sleep(0.5)
        with pytest.raises(OSError):  # no new connections once stopping
            _post(receiver.http_port, _batch(7)[0], timeout_s=2)
    stopping.join(30)
    for thread in threads:
        thread.join(30)
    answer = sock.recv(4096)
    sock.close()
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    assert b"Connection: close" in answer
    assert outcomes == {n: 200 if n % 2 else grpc.StatusCode.OK for n in range(6)}
    traces = set(Store(store.root).traces()["trace_id"].to_list())
    assert {trace for _, trace in bodies} | {late_trace} <= traces


def test_collect_listens_and_stores_while_another_writer_derives(tmp_path: Path):
    store_path, ready = tmp_path / "store", tmp_path / "ready.json"
    store = Store(store_path)
    with store.lock("derived"):  # what a long `otelcar import` holds from start to end
        started = time.monotonic()
        process, ports = start_collect(store_path, ready, stdout=subprocess.PIPE, text=True)
        ready_after = time.monotonic() - started
        body, trace_id = _batch(5)
        assert _post(ports["http_port"], body) == 200  # durable although nothing derives
        assert _grpc_export(ports["grpc_port"], _batch(6)[0]) == grpc.StatusCode.OK
    assert ready_after < 20  # the interpreter start; no lock wait (was: exit 2 "locked")
    deadline = time.monotonic() + 20
    while trace_id not in set(Store(store_path).traces()["trace_id"].to_list()):
        assert time.monotonic() < deadline, "collect did not derive once the lock was free"
        time.sleep(0.1)
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 0, output
    assert "error" not in output.lower(), output


def test_sigterm_answers_requests_in_flight_and_exits_0(tmp_path: Path):
    store_path, ready = tmp_path / "store", tmp_path / "ready.json"
    process, ports = start_collect(store_path, ready, stdout=subprocess.PIPE, text=True)
    store = Store(store_path)
    bodies = [_batch(100 + n)[0] for n in range(6)]
    outcomes: dict[int, object] = {}
    with store.lock("raw"):  # the child's writer waits: its requests are in flight
        threads = [
            threading.Thread(
                target=lambda n=n: outcomes.__setitem__(
                    n,
                    _post(ports["http_port"], bodies[n])
                    if n % 2
                    else _grpc_export(ports["grpc_port"], bodies[n]),
                )
            )
            for n in range(6)
        ]
        for thread in threads:
            thread.start()
        time.sleep(1.0)
        process.send_signal(signal.SIGTERM)
        time.sleep(1.0)
    for thread in threads:
        thread.join(30)
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 0, output
    assert outcomes == {n: 200 if n % 2 else grpc.StatusCode.OK for n in range(6)}, output
    stored = set(Store(store_path).records()["record_id"].to_list())
    assert {hashlib.sha256(body).hexdigest() for body in bodies} <= stored


def test_a_writer_killed_mid_append_cannot_hide_later_records(tmp_path: Path):
    """Another process died with half a frame written: the next append (from a writer that
    kept running) quarantines that tail first, so its own frames stay readable."""
    store = Store(tmp_path / "store")
    from otelcar.ingest.raw import FORMAT_PROTO, RawRecord

    first, _ = _batch(1)
    store.append([RawRecord(first, FORMAT_PROTO, "test", "1", signal="traces")])
    segment = store.raw.segments()[-1]
    size = store.raw.size(segment)
    # What `kill -9` in the middle of an import's append leaves behind:
    (store.raw.directory / "appending.json").write_text(
        json.dumps({"segment": segment, "offset": size})
    )
    with (store.raw.directory / segment).open("ab") as handle:
        handle.write(b"OCR1\x00\x00\x00\x10half a frame")
    later, later_trace = _batch(2)
    store.append([RawRecord(later, FORMAT_PROTO, "test", "2", signal="traces")])
    assert [q.offset for q in store.raw.recovered] == [size]
    assert not (store.raw.directory / "appending.json").exists()
    report = store.catch_up()
    assert report.imported == 2 and later_trace in set(store.traces()["trace_id"].to_list())
    assert list((store.raw.directory / "quarantine").iterdir())
