"""``otelcar collect`` against careless and hostile clients, at a larger size than the tests.

Three phases, each against a real ``otelcar collect`` child process with its default limits:

1. **Slowloris.** ``--good`` clients (half OTLP/HTTP protobuf, half OTLP/gRPC) export unique
   batches for ``--seconds``, first alone (the baseline of the same run), then while
   ``--slow`` raw connections trickle requests one byte every ``--trickle-s`` seconds (half
   stuck in their headers, half in their body) and reconnect whenever they are cut. Printed:
   the good clients' success rate and p50/p99 latency in both runs, and how the slow
   connections ended (408, closed).
2. **Side by side with an import.** ``otelcar import`` of a generated OTLP/JSON file of
   ``--import-mb`` MB runs; ``collect`` is started during it. Printed: time from launch to
   listening (next to the same on an idle store), batches acknowledged while the import ran,
   and whether every record of both writers is in the store afterwards.
3. **SIGTERM with requests in flight.** The store's raw lock is held (a slow disk), ``--inflight``
   requests are sent, the receiver gets SIGTERM, the lock is released. Printed: requests
   answered OK, exit status, and acknowledged batches missing from the store (must be 0).

Inputs come from this script's own generator. Timings are printed, never asserted; the exit
status is 1 when an acknowledged batch is missing or the receiver does not exit 0.
Run ``python benchmarks/receiver_hostile.py``; see ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otelcar import Store
from otelcar.receiver.child import start_collect

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def batch(seed: int, spans: int = 10) -> bytes:
    rng = random.Random(seed)
    request = ExportTraceServiceRequest()
    resource = request.resource_spans.add()
    attr = resource.resource.attributes.add(key="service.name")
    attr.value.string_value = "hostile-bench"
    scope = resource.scope_spans.add()
    trace_id = rng.randbytes(16)
    for n in range(spans):
        span = scope.spans.add(
            trace_id=trace_id,
            span_id=rng.randbytes(8),
            name="chat model",
            start_time_unix_nano=1_700_000_000_000_000_000 + n,
            end_time_unix_nano=1_700_000_000_000_000_100 + n,
        )
        item = span.attributes.add(key="gen_ai.operation.name")
        item.value.string_value = "chat"
    return request.SerializeToString()


def post(port: int, body: bytes) -> bool:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request(
            "POST", "/v1/traces", body=body, headers={"Content-Type": "application/x-protobuf"}
        )
        response = connection.getresponse()
        response.read()
        return response.status == 200
    except OSError:
        return False
    finally:
        connection.close()


def export_grpc(channel: grpc.Channel, body: bytes) -> bool:
    try:
        channel.unary_unary(EXPORT)(body, timeout=30)
        return True
    except grpc.RpcError:
        return False


class GoodClients:
    """``n`` clients exporting unique batches until stopped; latencies and outcomes kept."""

    def __init__(self, ports: dict[str, int], n: int, seed: int) -> None:
        self.ports, self.n, self.seed = ports, n, seed
        self.latencies: list[float] = []
        self.outcomes: Counter[bool] = Counter()
        self.acked: set[str] = set()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(i,)) for i in range(n)]

    def _run(self, index: int) -> None:
        channel = grpc.insecure_channel(f"127.0.0.1:{self.ports['grpc_port']}")
        sent = 0
        while not self._stop.is_set():
            body = batch(self.seed * 1_000_000 + index * 10_000 + sent)
            sent += 1
            started = time.perf_counter()
            ok = post(self.ports["http_port"], body) if index % 2 else export_grpc(channel, body)
            elapsed = time.perf_counter() - started
            with self._lock:
                self.latencies.append(elapsed)
                self.outcomes[ok] += 1
                if ok:
                    self.acked.add(hashlib.sha256(body).hexdigest())
            time.sleep(0.02)
        channel.close()

    def run_for(self, seconds: float) -> None:
        for thread in self._threads:
            thread.start()
        time.sleep(seconds)
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def summary(self) -> str:
        total = sum(self.outcomes.values())
        ok = self.outcomes[True]
        ordered = sorted(self.latencies)
        p50 = ordered[len(ordered) // 2] * 1000 if ordered else float("nan")
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000 if ordered else 0
        return (
            f"{ok}/{total} batches acknowledged ({100 * ok / max(total, 1):.1f} %), "
            f"p50 {p50:.0f} ms, p99 {p99:.0f} ms"
        )


class Slowloris:
    """``n`` connections trickling a byte every ``every_s``; reconnecting when cut."""

    def __init__(self, port: int, n: int, every_s: float) -> None:
        self.port, self.n, self.every_s = port, n, every_s
        self.ends: Counter[str] = Counter()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(i,)) for i in range(n)]

    def _run(self, index: int) -> None:
        head = (
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
            b"Content-Length: 1000000\r\n\r\n"
        )
        while not self._stop.is_set():
            try:
                sock = socket.create_connection(("127.0.0.1", self.port), timeout=60)
            except OSError:
                time.sleep(0.5)
                continue
            end = "still open at the end"
            try:
                if index % 2:
                    sock.sendall(head)
                trickle = head if index % 2 == 0 else b"\x00" * 1000
                try:
                    for byte in trickle:
                        if self._stop.wait(self.every_s):
                            break
                        sock.sendall(bytes([byte]))
                except OSError:
                    pass
                if not self._stop.is_set():
                    sock.settimeout(5)
                    answer = sock.recv(64)
                    end = answer.split(b"\r\n", 1)[0].decode(errors="replace") or "closed"
            except OSError as exc:
                end = f"closed ({type(exc).__name__})"
            finally:
                sock.close()
            with self._lock:
                self.ends[end] += 1

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()


def stop_collect(process: subprocess.Popen) -> tuple[int, str]:
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=120)
    return process.returncode, output or ""


def missing(store: Path, acked: set[str]) -> int:
    return len(acked - set(Store(store).records()["record_id"].to_list()))


def phase_slowloris(work: Path, args: argparse.Namespace) -> bool:
    store = work / "slowloris-store"
    process, ports = start_collect(store, work / "ready1.json", stdout=subprocess.PIPE, text=True)
    baseline = GoodClients(ports, args.good, seed=1)
    baseline.run_for(args.seconds)
    slow = Slowloris(ports["http_port"], args.slow, args.trickle_s)
    slow.start()
    time.sleep(2.0)  # every slow connection is open and mid-request
    attacked = GoodClients(ports, args.good, seed=2)
    attacked.run_for(args.seconds)
    slow.stop()
    status, _output = stop_collect(process)
    lost = missing(store, baseline.acked | attacked.acked)
    print("1. slowloris")
    print(f"   good clients alone:                  {baseline.summary()}")
    print(f"   with {args.slow} slow connections:     {attacked.summary()}")
    ends = ", ".join(f"{count} {end}" for end, count in slow.ends.most_common())
    print(f"   how the slow requests ended: {ends}")
    print(f"   acknowledged batches missing from the store: {lost}; collect exit {status}")
    return lost == 0 and status == 0


def write_import_file(path: Path, megabytes: int) -> int:
    rng = random.Random(7)
    written, lines = 0, 0
    with path.open("w", encoding="utf-8") as handle:
        while written < megabytes * 1024 * 1024:
            trace_id = rng.randbytes(16).hex()
            spans = [
                {
                    "traceId": trace_id,
                    "spanId": rng.randbytes(8).hex(),
                    "name": "chat model",
                    "startTimeUnixNano": str(1_700_000_000_000_000_000 + n),
                    "endTimeUnixNano": str(1_700_000_000_000_000_500 + n),
                    "attributes": [
                        {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                        {"key": "gen_ai.prompt", "value": {"stringValue": "x" * 400}},
                    ],
                }
                for n in range(20)
            ]
            line = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}) + "\n"
            handle.write(line)
            written += len(line)
            lines += 1
    return lines


def time_to_ready(
    store: Path, ready: Path
) -> tuple[subprocess.Popen, dict[str, int], float, float]:
    """The child, its ports, seconds from launch to listening, and of those the seconds
    from the receiver's start() to listening (the rest is the interpreter and imports)."""
    started = time.monotonic()
    process, ports = start_collect(store, ready, stdout=subprocess.PIPE, text=True)
    launch = time.monotonic() - started
    return process, ports, launch, float(json.loads(ready.read_text())["start_s"])


def phase_side_by_side(work: Path, args: argparse.Namespace) -> bool:
    data = work / "big.jsonl"
    lines = write_import_file(data, args.import_mb)
    idle_process, _, idle_ready, idle_start = time_to_ready(
        work / "idle-store", work / "ready2.json"
    )
    stop_collect(idle_process)
    store = work / "shared-store"
    Store(store)
    importer = subprocess.Popen(
        [sys.executable, "-m", "otelcar.cli", "--store", str(store), "import", str(data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    time.sleep(1.0)  # the import is under way
    process, ports, ready_in, start_s = time_to_ready(store, work / "ready3.json")
    import_running_when_ready = "yes" if importer.poll() is None else "no (make --import-mb larger)"
    during = GoodClients(ports, 2, seed=3)
    threading.Thread(target=during.run_for, args=(3600,), daemon=True).start()
    import_output, _ = importer.communicate(timeout=1800)
    during._stop.set()
    time.sleep(0.5)
    acked_during = len(during.acked)
    status, output = stop_collect(process)
    stored = Store(store).records()
    from_file = stored.filter(stored["source"].str.contains("big.jsonl")).height
    lost = missing(store, during.acked)
    print(f"2. collect beside an import of {args.import_mb} MB ({lines} lines)")
    print(
        f"   collect listening {ready_in:.2f} s after launch, {start_s:.3f} s after its "
        f"receiver started (idle store: {idle_ready:.2f} s, {idle_start:.3f} s); "
        f"import still running then: {import_running_when_ready}"
    )
    print(
        f"   import exit {importer.returncode}; collect exit {status}; batches acknowledged "
        f"during the import: {acked_during}, missing from the store: {lost}"
    )
    print(f"   records from the file in the store: {from_file} of {lines}")
    ok = importer.returncode == 0 and status == 0 and lost == 0 and from_file == lines
    if not ok:
        print(import_output[-2000:], output[-2000:])
    return ok


def phase_sigterm(work: Path, args: argparse.Namespace) -> bool:
    store = work / "sigterm-store"
    process, ports = start_collect(store, work / "ready4.json", stdout=subprocess.PIPE, text=True)
    bodies = [batch(9_000_000 + n) for n in range(args.inflight)]
    results: dict[int, bool] = {}
    channel = grpc.insecure_channel(f"127.0.0.1:{ports['grpc_port']}")

    def send(n: int) -> None:
        body = bodies[n]
        results[n] = post(ports["http_port"], body) if n % 2 else export_grpc(channel, body)

    with Store(store).lock("raw"):
        threads = [threading.Thread(target=send, args=(n,)) for n in range(args.inflight)]
        for thread in threads:
            thread.start()
        time.sleep(1.5)
        process.send_signal(signal.SIGTERM)
        time.sleep(1.0)
    for thread in threads:
        thread.join()
    _output, _ = process.communicate(timeout=120)
    channel.close()
    acked = {hashlib.sha256(bodies[n]).hexdigest() for n, ok in results.items() if ok}
    lost = missing(store, acked)
    print("3. SIGTERM with requests in flight")
    print(
        f"   {sum(results.values())}/{args.inflight} in-flight requests answered OK; "
        f"exit {process.returncode}; acknowledged missing from the store: {lost}"
    )
    return process.returncode == 0 and lost == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--good", type=int, default=8, help="good clients")
    parser.add_argument("--slow", type=int, default=260, help="slow connections")
    parser.add_argument("--trickle-s", type=float, default=2.0, help="seconds between bytes")
    parser.add_argument("--seconds", type=float, default=15.0, help="each good-client run")
    parser.add_argument("--import-mb", type=int, default=150, help="size of the import file")
    parser.add_argument("--inflight", type=int, default=32, help="requests in flight at SIGTERM")
    parser.add_argument("--phases", default="123", help="which phases to run (default: all, '123')")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory(prefix="otelcar-hostile-") as tmp:
        work = Path(tmp)
        ok = True
        for number, phase in (
            ("1", phase_slowloris),
            ("2", phase_side_by_side),
            ("3", phase_sigterm),
        ):
            if number in args.phases:
                ok &= phase(work, args)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
