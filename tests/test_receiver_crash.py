"""Durability of `otelcar collect`: SIGKILL mid-stream loses no acknowledged batch; SIGTERM
drains. A real client streams batches over HTTP while the receiver process is killed."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import polars as pl
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otelcar import Store
from otelcar.receiver.child import CollectorStartError, start_collect

SPANS_PER_BATCH = 20


def _batch(rng: random.Random, index: int) -> tuple[bytes, str, list[str]]:
    request = ExportTraceServiceRequest()
    resource = request.resource_spans.add()
    attr = resource.resource.attributes.add(key="service.name")
    attr.value.string_value = "crash-test"
    scope = resource.scope_spans.add()
    trace_id = rng.randbytes(16)
    span_ids = []
    for n in range(SPANS_PER_BATCH):
        span = scope.spans.add(
            trace_id=trace_id,
            span_id=rng.randbytes(8),
            name=f"batch {index} span {n}",
            start_time_unix_nano=index,
            end_time_unix_nano=index + 1,
        )
        span_ids.append(span.span_id.hex())
    return request.SerializeToString(), trace_id.hex(), span_ids


def _start(store: Path, ready: Path) -> subprocess.Popen:
    process, _ = start_collect(store, ready, stdout=subprocess.PIPE, text=True, timeout_s=30)
    return process


def _stream(
    port: int, acked: dict[str, tuple[str, list[str]]], stop: threading.Event, seed: int
) -> None:
    rng = random.Random(seed)
    index = 0
    while not stop.is_set():
        body, trace_id, span_ids = _batch(rng, index)
        index += 1
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            connection.request(
                "POST", "/v1/traces", body=body, headers={"Content-Type": "application/x-protobuf"}
            )
            status = connection.getresponse().status
            connection.close()
        except OSError:
            return  # the receiver is gone: this batch was never acknowledged
        if status == 200:
            acked[hashlib.sha256(body).hexdigest()] = (trace_id, span_ids)


def _check_all_acknowledged_are_stored(store_path: Path, acked: dict) -> None:
    store = Store(store_path)
    records = set(store.records()["record_id"].to_list())
    assert set(acked) <= records
    spans = store.derived.scan("spans").select("trace_id", "span_id", "name").collect()
    stored = {(t, s) for t, s in zip(spans["trace_id"], spans["span_id"], strict=True)}
    for trace_id, span_ids in acked.values():
        assert {(trace_id, s) for s in span_ids} <= stored
    traces = store.traces().filter(pl.col("trace_id").is_in([t for t, _ in acked.values()]))
    assert traces.height == len(acked)
    assert set(traces["n_spans"].to_list()) == {SPANS_PER_BATCH}


def test_sigkill_loses_no_acknowledged_batch(tmp_path: Path):
    store, ready = tmp_path / "store", tmp_path / "ready.json"
    process = _start(store, ready)
    acked: dict = {}
    stop = threading.Event()
    client = threading.Thread(
        target=_stream, args=(json.loads(ready.read_text())["http_port"], acked, stop, 1)
    )
    client.start()
    deadline = time.monotonic() + 30
    while len(acked) < 30:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    os.kill(process.pid, signal.SIGKILL)
    process.wait(10)
    stop.set()
    client.join(15)
    assert len(acked) >= 30

    restarted = _start(store, ready)  # recovers, then derives what was pending
    restarted.send_signal(signal.SIGTERM)
    output, _ = restarted.communicate(timeout=60)
    assert restarted.returncode == 0, output
    _check_all_acknowledged_are_stored(store, acked)


def test_sigterm_drains_and_exits_cleanly(tmp_path: Path):
    store, ready = tmp_path / "store", tmp_path / "ready.json"
    process = _start(store, ready)
    acked: dict = {}
    stop = threading.Event()
    client = threading.Thread(
        target=_stream, args=(json.loads(ready.read_text())["http_port"], acked, stop, 2)
    )
    client.start()
    while len(acked) < 20:
        time.sleep(0.01)
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=60)
    stop.set()
    client.join(15)
    assert process.returncode == 0, output
    assert "stopped;" in output
    _check_all_acknowledged_are_stored(store, acked)


def test_a_collector_that_cannot_start_is_a_clear_error(tmp_path: Path):
    not_a_store = tmp_path / "file"
    not_a_store.write_text("not a directory")
    with pytest.raises(CollectorStartError, match="exited with status") as caught:
        start_collect(not_a_store, tmp_path / "ready.json", stdout=subprocess.PIPE)
    assert "file" in str(caught.value)


# Starts a derivation child on a store, prints its pid, then waits to be killed.
ORPHAN_PARENT = """
import sys, time
from otelcar import Store
from otelcar.receiver.derivation import Derivation
derivation = Derivation(Store(sys.argv[1]), every_s=0.1)
derivation.start()
print(derivation._worker.pid, flush=True)
time.sleep(600)
"""


def test_a_derivation_child_stops_when_its_receiver_is_killed(tmp_path: Path):
    """SIGKILL gives the receiver no chance to stop its child: the child notices that its
    parent is gone and exits (it used to derive on, an orphan, until the machine stopped)."""
    parent = subprocess.Popen(
        [sys.executable, "-c", ORPHAN_PARENT, str(tmp_path / "store")],
        stdout=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    child = int(parent.stdout.readline())
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait(timeout=10)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and _alive(child):
        time.sleep(0.1)
    alive = _alive(child)
    if alive:
        os.kill(child, signal.SIGKILL)
    assert not alive, "the derivation child outlived its killed receiver"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False
