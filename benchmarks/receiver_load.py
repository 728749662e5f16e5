"""Load benchmark for the OTLP receiver (``otelcar collect``).

N concurrent clients (half OTLP/gRPC, half OTLP/HTTP protobuf) send pre-built GenAI span
batches to a receiver running as a child process, for a fixed time. The script prints, per
protocol and in total: batches and spans acknowledged, accepted spans/s, p50/p99 export
latency, rejected (HTTP 503 / gRPC UNAVAILABLE or RESOURCE_EXHAUSTED) and failed requests,
the receiver's peak RSS, and the ratio of the accepted rate to the bare
``ExportTraceServiceRequest.FromString`` decode rate of the same batches, measured in the
same run before the load starts (single-threaded, bytes in memory).

Every sent body is unique: a pool of ``--pool`` batches is built up front, each with its own
8-byte trace-id prefix, and every send replaces that prefix with a fresh one (one
``bytes.replace``), so each request is a distinct record with its own traces. A body is a
pure function of its sequence number, so sha256 ids are computed after the timed phase
rather than on the clients' clock.

After the timed phase the receiver gets SIGTERM; it drains, derives and exits. The store is
then opened with :class:`otelcar.Store` and checked: every acknowledged body's sha256 must be
a raw frame and a ``records()`` row with the acknowledged span count, its spans must be in
the spans table, and no refused body may have been stored. ``stored == acknowledged: YES/NO``
is printed; the exit status is 1 on NO. Timings are printed, never asserted.

Run ``python benchmarks/receiver_load.py`` (8 clients, 10 s); see ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import importlib.metadata
import itertools
import json
import os
import platform
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import grpc
import polars as pl
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1 import trace_pb2

from otelcar import Store
from otelcar.receiver.child import CollectorStartError, start_collect
from otelcar.receiver.intake import accept

GRPC_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
HTTP_PATH = "/v1/traces"
HTTP_HEADERS = {"Content-Type": "application/x-protobuf"}
REQUEST_TIMEOUT_S = 60.0
REJECT_BACKOFF_S = 0.05  # pause after a refused request (the exporters back off for longer)
STAMP_PREFIX = b"oc"  # stamped trace-id prefixes start with this; pool tags never do
TAG_BYTES = 8
MS = 1_000_000
EPOCH_NS = 1_795_945_625_000_000_000
KIND_INTERNAL = trace_pb2.Span.SPAN_KIND_INTERNAL
KIND_CLIENT = trace_pb2.Span.SPAN_KIND_CLIENT
SAMPLE_EVERY_S = 0.05
LOG_EXAMPLES, MAX_LOG_CHARS = 3, 240  # receiver log lines quoted per kind, and their length
_WORDS_TEXT = (
    "order refund policy customer account invoice shipment delivery warehouse tracking status "
    "pending approved rejected escalate ticket priority billing address payment card balance "
    "credit debit transaction receipt product category damaged missing late replacement "
    "exchange return label carrier window days within after before eligible not the a of to "
    "and for with on in is was has been will please confirm verify summary note record"
)
WORDS = tuple(_WORDS_TEXT.split())
TOOLS = (
    ("lookup_order", ("order_id",)),
    ("get_refund_policy", ("category",)),
    ("issue_refund", ("order_id", "amount")),
    ("track_shipment", ("tracking_id",)),
    ("search_tickets", ("query", "limit")),
)
MODELS = ("gpt-4o-mini", "gpt-4o", "gpt-4.1")


# -- batches ----------------------------------------------------------------------------------
class Text:
    """Deterministic filler text: slices of one pre-generated word corpus."""

    def __init__(self, rng: random.Random, size: int = 1 << 17) -> None:
        self.rng = rng
        self.corpus = " ".join(rng.choice(WORDS) for _ in range(size // 6))

    def words(self, n: int) -> str:
        """About ``n`` characters of words."""
        start = self.rng.randrange(len(self.corpus) - n - 1)
        return self.corpus[start : start + n]

    def token(self, prefix: str, n: int) -> str:
        """An id like ``call_3kQ…``."""
        alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
        return prefix + "".join(self.rng.choices(alphabet, k=n))


def _kv(key: str, value: str | int | float | list[str]) -> KeyValue:
    """An OTLP attribute."""
    item = KeyValue(key=key)
    if isinstance(value, int):
        item.value.int_value = value
    elif isinstance(value, float):
        item.value.double_value = value
    elif isinstance(value, list):
        item.value.array_value.values.extend(AnyValue(string_value=v) for v in value)
    else:
        item.value.string_value = value
    return item


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _span(
    trace_id: bytes, parent: bytes, name: str, kind: int, times: tuple[int, int], rng: random.Random
) -> trace_pb2.Span:
    span = trace_pb2.Span(
        trace_id=trace_id,
        span_id=(rng.getrandbits(64) | 1).to_bytes(8, "big"),  # never all zero
        parent_span_id=parent,
        flags=0x100,
        name=name,
        kind=kind,
        start_time_unix_nano=times[0],
        end_time_unix_nano=times[1],
    )
    span.status.SetInParent()
    return span


def _chat_span(
    text: Text, trace_id: bytes, parent: bytes, model: str, history: list[dict], end: bool
) -> tuple[trace_pb2.Span, list[dict]]:
    """A ``chat`` span (util-genai style, content on the span) and its tool calls."""
    rng = text.rng
    if end:
        parts: list[dict] = [{"type": "text", "content": text.words(rng.randint(80, 800))}]
    else:
        parts = []
        for name, keys in rng.sample(TOOLS, rng.randint(1, 2)):
            args = {k: text.token("", 8) if k.endswith("_id") else text.words(30) for k in keys}
            parts.append(
                {
                    "type": "tool_call",
                    "id": text.token("call_", 24),
                    "name": name,
                    "arguments": args,
                }
            )
    finish = "stop" if end else "tool_calls"
    inputs, outputs = _dumps(history), _dumps([{"role": "assistant", "parts": parts}])
    start = EPOCH_NS + rng.randint(0, 10**6) * MS
    span = _span(trace_id, parent, f"chat {model}", KIND_CLIENT, (start, start + 900 * MS), rng)
    span.attributes.extend(
        [
            _kv("gen_ai.operation.name", "chat"),
            _kv("gen_ai.provider.name", "openai"),
            _kv("gen_ai.request.model", model),
            _kv("gen_ai.response.model", f"{model}-2024-07-18"),
            _kv("gen_ai.response.id", text.token("chatcmpl-", 29)),
            _kv("gen_ai.response.finish_reasons", [finish]),
            _kv("gen_ai.request.temperature", 0.2),
            _kv("gen_ai.usage.input_tokens", len(inputs) // 4),
            _kv("gen_ai.usage.output_tokens", len(outputs) // 4),
            _kv("gen_ai.input.messages", inputs),
            _kv("gen_ai.output.messages", outputs),
            _kv("server.address", "api.openai.com"),
        ]
    )
    return span, [p for p in parts if p["type"] == "tool_call"]


def _tool_span(
    text: Text, trace_id: bytes, parent: bytes, call: dict
) -> tuple[trace_pb2.Span, str]:
    """An ``execute_tool`` span and its result (200..2000 characters)."""
    rng = text.rng
    result = text.words(rng.randint(200, 2000))
    start = EPOCH_NS + rng.randint(0, 10**6) * MS
    name = f"execute_tool {call['name']}"
    span = _span(trace_id, parent, name, KIND_INTERNAL, (start, start + 40 * MS), rng)
    span.attributes.extend(
        [
            _kv("gen_ai.operation.name", "execute_tool"),
            _kv("gen_ai.tool.name", call["name"]),
            _kv("gen_ai.tool.call.id", call["id"]),
            _kv("gen_ai.tool.type", "function"),
            _kv("gen_ai.tool.call.arguments", _dumps(call["arguments"])),
            _kv("gen_ai.tool.call.result", result),
        ]
    )
    return span, result


def agent_trace(text: Text, trace_id: bytes) -> list[trace_pb2.Span]:
    """One agent run in end order: 2..5 chat spans, 1..2 tools after each but the last,
    then the ``invoke_agent`` root. Chat input messages hold the conversation so far."""
    rng = text.rng
    model = rng.choice(MODELS)
    root = _span(trace_id, b"", "invoke_agent support_agent", KIND_INTERNAL, (EPOCH_NS,) * 2, rng)
    root.attributes.extend(
        [_kv("gen_ai.operation.name", "invoke_agent"), _kv("gen_ai.agent.name", "support_agent")]
    )
    history: list[dict] = [
        {"role": "system", "parts": [{"type": "text", "content": text.words(400)}]},
        {"role": "user", "parts": [{"type": "text", "content": text.words(rng.randint(40, 400))}]},
    ]
    spans: list[trace_pb2.Span] = []
    steps = rng.randint(2, 5)
    for step in range(steps):
        chat, calls = _chat_span(text, trace_id, root.span_id, model, history, step == steps - 1)
        spans.append(chat)
        if calls:
            history.append({"role": "assistant", "parts": calls})
        for call in calls:
            tool, result = _tool_span(text, trace_id, root.span_id, call)
            spans.append(tool)
            part = {"type": "tool_call_response", "id": call["id"], "response": result}
            history.append({"role": "tool", "parts": [part]})
    spans.append(root)
    return spans


@dataclass(frozen=True)
class Batch:
    """A pre-built ``ExportTraceServiceRequest``; every trace id starts with ``tag``."""

    body: bytes
    tag: bytes
    spans: int

    def stamped(self, seq: int) -> bytes:
        """This batch with fresh trace ids: a body unique to ``seq``."""
        return self.body.replace(self.tag, stamp(seq))


def stamp(seq: int) -> bytes:
    """The trace-id prefix of send number ``seq``."""
    return STAMP_PREFIX + seq.to_bytes(TAG_BYTES - len(STAMP_PREFIX), "big")


def build_batch(text: Text, n_spans: int) -> Batch:
    """``n_spans`` spans of whole agent runs; the last run is cut where the batch is full,
    as a BatchSpanProcessor cuts its queue. One resource, one scope."""
    rng = text.rng
    while True:
        tag = rng.getrandbits(8 * TAG_BYTES).to_bytes(TAG_BYTES, "big")
        if not tag.startswith(STAMP_PREFIX) and tag != bytes(TAG_BYTES):
            break
    spans: list[trace_pb2.Span] = []
    while len(spans) < n_spans:
        spans.extend(agent_trace(text, tag + rng.getrandbits(64).to_bytes(8, "big")))
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.attributes.extend(
        [_kv("service.name", "support-bot"), _kv("telemetry.sdk.language", "python")]
    )
    scope_spans = resource_spans.scope_spans.add()
    scope_spans.scope.name = "opentelemetry.instrumentation.openai_v2"
    scope_spans.spans.extend(spans[:n_spans])
    body = request.SerializeToString()
    if body.count(tag) != n_spans:  # the tag must occur in the trace ids only
        return build_batch(text, n_spans)
    return Batch(body, tag, n_spans)


def build_pool(size: int, n_spans: int, seed: int) -> list[Batch]:
    """``size`` distinct batches of ``n_spans`` spans each (deterministic from ``seed``)."""
    text = Text(random.Random(seed))
    return [build_batch(text, n_spans) for _ in range(size)]


# -- baselines --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rate:
    """A single-threaded in-memory rate over the pool."""

    label: str
    spans: int
    seconds: float

    @property
    def spans_per_s(self) -> float:
        return self.spans / self.seconds


def measure_rate(label: str, pool: Sequence[Batch], work: Callable[[bytes], object]) -> Rate:
    """Apply ``work`` to every pool body, repeating the pool for at least a second."""
    spans, started = 0, time.perf_counter()
    while True:
        for batch in pool:
            work(batch.body)
            spans += batch.spans
        elapsed = time.perf_counter() - started
        if elapsed >= 1.0:
            return Rate(label, spans, elapsed)


def baselines(pool: Sequence[Batch]) -> list[Rate]:
    """Bare protobuf decode, and the receiver's own per-request check (``intake.accept``)."""

    def otelcar_accept(body: bytes) -> object:
        return accept(body, signal="traces", encoding="proto", source="benchmark")

    return [
        measure_rate(
            "ExportTraceServiceRequest.FromString", pool, ExportTraceServiceRequest.FromString
        ),
        measure_rate("otelcar intake.accept (decode + check)", pool, otelcar_accept),
    ]


# -- the receiver process ---------------------------------------------------------------------
def _proc_status_kb(pid: int, key: str) -> int | None:
    """A kB field (``VmHWM``, ``VmRSS``) of ``/proc/PID/status``; ``None`` once it has exited."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _proc_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of ``pid`` (all threads), from ``/proc/PID/stat``."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    """Child process ids of ``pid`` (from ``/proc/PID/task/*/children``)."""
    out: list[int] = []
    for path in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            out += [int(word) for word in path.read_text().split()]
        except OSError:
            continue
    return out


@dataclass
class Stopped:
    """How the receiver stopped."""

    returncode: int | None
    seconds: float
    hwm_kb_load: int | None  # VmHWM just before SIGTERM
    hwm_kb_final: int | None  # last VmHWM read before it exited (includes drain and derive)


class ReceiverProcess:
    """``python -m otelcar.cli --store DIR collect`` on free ports, output to a log file."""

    def __init__(self, store: Path, workdir: Path, options: Sequence[str] = ()) -> None:
        self.store = store
        self.options = tuple(options)
        self.ready_file = workdir / "ready.json"
        self.log_path = workdir / "receiver.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.grpc_port = self.http_port = 0
        self._hwm_kb: int | None = None
        self._sampler: threading.Thread | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout_s: float = 60.0) -> None:
        with self.log_path.open("wb") as log:
            try:
                self.proc, ports = start_collect(
                    self.store,
                    self.ready_file,
                    stdout=log,
                    timeout_s=timeout_s,
                    options=self.options,
                )
            except CollectorStartError as exc:
                raise RuntimeError(f"{exc}:\n{self.log()}") from None
        self.grpc_port, self.http_port = ports["grpc_port"], ports["http_port"]
        self._sampler = threading.Thread(target=self._sample_hwm, daemon=True)
        self._sampler.start()

    def _sample_hwm(self) -> None:
        """Keep the last VmHWM seen; after exit ``/proc`` has none, so this is the peak up to
        at most ``SAMPLE_EVERY_S`` before exit."""
        while self.proc is not None and self.proc.poll() is None:
            value = _proc_status_kb(self.pid, "VmHWM")
            if value is not None:
                self._hwm_kb = value
            time.sleep(SAMPLE_EVERY_S)

    def cpu_s(self) -> float | None:
        """CPU seconds the receiver and its children (the derivation process) have used
        so far."""
        own = _proc_cpu_s(self.pid)
        if own is None:
            return None
        return own + sum(_proc_cpu_s(child) or 0.0 for child in _children(self.pid))

    def stop(self, timeout_s: float) -> Stopped:
        """SIGTERM, then wait (it drains and derives); SIGKILL after ``timeout_s``."""
        assert self.proc is not None
        hwm_load = _proc_status_kb(self.pid, "VmHWM")
        started = time.perf_counter()
        self.proc.send_signal(signal.SIGTERM)
        try:
            returncode: int | None = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            returncode = None
        seconds = time.perf_counter() - started
        if self._sampler is not None:
            self._sampler.join()
        return Stopped(returncode, seconds, hwm_load, self._hwm_kb)

    def kill(self) -> None:
        """SIGKILL it if it still runs (after an error in the benchmark)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def derived_so_far(store_path: Path) -> tuple[int, int, int]:
    """Records derived so far and the builds that derived them (a read-only look; readers
    never block the receiver)."""
    derived = Store(store_path, create=False).derived
    counts = derived.scan("records").select(pl.len(), pl.col("n_spans").sum()).collect().row(0)
    return int(counts[0]), len(derived.parts("records")), int(counts[1] or 0)


def receiver_log_summary(log: str) -> str:
    """The receiver's last line and a count of its warnings and errors."""
    lines = log.strip().splitlines()
    markers = ("WARNING", "ERROR", "Traceback", "error:")
    kinds = Counter(kind for line in lines for kind in markers if kind in line)
    last = lines[-1] if lines else "(no output)"
    out = [
        f"receiver's last line: {last}",
        f"receiver log: {dict(kinds) or 'no warnings or errors'}",
    ]
    for marker in ("ERROR", "WARNING"):
        examples = [line for line in lines if marker in line][:LOG_EXAMPLES]
        out += [f"  e.g. {line[:MAX_LOG_CHARS]}" for line in examples]
    return "\n".join(out)


# -- clients ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Sent:
    """One request: its sequence number, latency and outcome (ok | rejected | error)."""

    seq: int
    latency_s: float
    outcome: str
    detail: str = ""
    rejected_spans: int = 0  # OTLP partial_success


class Sender(Protocol):
    """One client connection: ``send`` returns ``(outcome, detail, rejected spans)``."""

    protocol: str

    def send(self, body: bytes) -> tuple[str, str, int]: ...

    def close(self) -> None: ...


def _partial(response: bytes) -> int:
    """Spans the receiver rejected (``partial_success``); an empty response means none."""
    if not response:
        return 0
    return ExportTraceServiceResponse.FromString(response).partial_success.rejected_spans


class GrpcSender:
    """A raw unary gRPC call on its own channel and connection, sending serialized bytes."""

    protocol = "grpc"
    REFUSED = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED)

    def __init__(self, port: int) -> None:
        # A local subchannel pool gives each client its own HTTP/2 connection, as separate
        # exporters would have; by default channels to one target share a connection.
        options = [("grpc.use_local_subchannel_pool", 1)]
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=options)
        grpc.channel_ready_future(self.channel).result(timeout=30)
        self.export = self.channel.unary_unary(GRPC_METHOD)  # no serializers: bytes in and out

    def send(self, body: bytes) -> tuple[str, str, int]:
        try:
            response = self.export(body, timeout=REQUEST_TIMEOUT_S)
        except grpc.RpcError as exc:
            code = exc.code()  # type: ignore[attr-defined]
            return ("rejected" if code in self.REFUSED else "error"), code.name, 0
        return "ok", "", _partial(response)

    def close(self) -> None:
        self.channel.close()


class HttpSender:
    """``POST /v1/traces`` on one keep-alive ``http.client`` connection."""

    protocol = "http"

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT_S)
        self.conn.connect()

    def send(self, body: bytes) -> tuple[str, str, int]:
        try:
            self.conn.request("POST", HTTP_PATH, body=body, headers=HTTP_HEADERS)
            response = self.conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as exc:
            self.conn.close()  # reconnects on the next request
            return "error", type(exc).__name__, 0
        if response.status == 200:
            return "ok", "", _partial(data)
        if response.status == 503:
            return "rejected", "HTTP 503", 0
        return "error", f"HTTP {response.status}", 0

    def close(self) -> None:
        self.conn.close()


def client_loop(
    sender: Sender,
    pool: Sequence[Batch],
    counter: Iterator[int],
    start: threading.Event,
    deadline: list[float],
    out: list[Sent],
) -> None:
    """Send unique batches back to back until the deadline (one request in flight)."""
    start.wait()
    while time.perf_counter() < deadline[0]:
        seq = next(counter)
        body = pool[seq % len(pool)].stamped(seq)
        started = time.perf_counter()
        outcome, detail, rejected_spans = sender.send(body)
        out.append(Sent(seq, time.perf_counter() - started, outcome, detail, rejected_spans))
        if outcome == "rejected":
            time.sleep(REJECT_BACKOFF_S)


@dataclass
class LoadRun:
    """What the clients did during the timed phase."""

    sent: dict[str, list[Sent]]  # per protocol
    clients: dict[str, int]
    seconds: float  # from the start signal until the last client finished
    client_cpu_s: float
    receiver_cpu_s: float | None


def run_load(
    receiver: ReceiverProcess, pool: Sequence[Batch], clients: int, seconds: float
) -> LoadRun:
    """Connect ``clients`` senders (gRPC first, alternating), run them for ``seconds``."""
    senders: list[Sender] = [
        GrpcSender(receiver.grpc_port) if i % 2 == 0 else HttpSender(receiver.http_port)
        for i in range(clients)
    ]
    counter = itertools.count()
    start = threading.Event()
    deadline = [0.0]
    outs: list[list[Sent]] = [[] for _ in senders]
    threads = [
        threading.Thread(target=client_loop, args=(s, pool, counter, start, deadline, out))
        for s, out in zip(senders, outs, strict=True)
    ]
    for thread in threads:
        thread.start()
    cpu0, receiver_cpu0 = time.process_time(), receiver.cpu_s()
    started = time.perf_counter()
    deadline[0] = started + seconds
    start.set()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    cpu, receiver_cpu = time.process_time() - cpu0, receiver.cpu_s()
    for sender in senders:
        sender.close()
    sent: dict[str, list[Sent]] = {"grpc": [], "http": []}
    for sender, out in zip(senders, outs, strict=True):
        sent[sender.protocol].extend(out)
    return LoadRun(
        sent,
        dict(Counter(s.protocol for s in senders)),
        elapsed,
        cpu,
        None if receiver_cpu is None or receiver_cpu0 is None else receiver_cpu - receiver_cpu0,
    )


# -- verification -----------------------------------------------------------------------------
@dataclass
class Verification:
    """The store compared with what the clients were told."""

    acked: int = 0
    acked_spans: int = 0
    raw_found: int = 0
    records_found: int = 0
    records_spans: int = 0
    table_spans: int = 0
    not_imported: int = 0  # acknowledged records whose status is not "imported"
    refused_stored: int = 0
    unknown_stored: int = 0  # bodies of failed requests that were stored anyway
    extra_stored: int = 0  # stored records that no request sent
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        lines = [
            f"stored == acknowledged: {'YES' if self.ok else 'NO'} — "
            f"{self.acked} batches / {self.acked_spans} spans acknowledged; "
            f"{self.raw_found} in raw segments, {self.records_found} in records() with "
            f"{self.records_spans} spans, {self.table_spans} in the spans table; "
            f"{self.refused_stored} refused bodies stored, {self.unknown_stored} bodies of "
            f"failed requests stored, {self.extra_stored} unexpected records"
        ]
        return "\n".join(lines + [f"  problem: {p}" for p in self.problems])


def verify(store_path: Path, pool: Sequence[Batch], load: LoadRun) -> Verification:
    """Check the store against every request's outcome (sha256 of the exact body)."""
    result = Verification()
    expected: dict[str, int] = {}  # acknowledged record id -> spans acknowledged
    fate: dict[str, str] = {}
    for sent in itertools.chain.from_iterable(load.sent.values()):
        batch = pool[sent.seq % len(pool)]
        record_id = hashlib.sha256(batch.stamped(sent.seq)).hexdigest()
        fate[record_id] = sent.outcome
        if sent.outcome == "ok":
            expected[record_id] = batch.spans - sent.rejected_spans
    result.acked, result.acked_spans = len(expected), sum(expected.values())

    store = Store(store_path, create=False)
    raw_ids = {
        frame.record.record_id for seg in store.raw.segments() for frame in store.raw.read(seg)
    }
    records = store.records().select("record_id", "status", "n_spans")
    table = store.derived.scan("spans").group_by("record_id").agg(pl.len().alias("n")).collect()
    table_spans = dict(zip(table["record_id"], table["n"], strict=True))
    stored = dict(zip(records["record_id"], records["n_spans"], strict=True))
    status = dict(zip(records["record_id"], records["status"], strict=True))

    result.raw_found = len(raw_ids & expected.keys())
    acked_stored = expected.keys() & stored.keys()
    result.records_found = len(acked_stored)
    result.records_spans = sum(stored[r] for r in acked_stored)
    result.table_spans = sum(table_spans.get(r, 0) for r in expected)
    result.not_imported = sum(status[r] != "imported" for r in acked_stored)
    for record_id in raw_ids | stored.keys():
        outcome = fate.get(record_id)
        if outcome == "rejected":
            result.refused_stored += 1
        elif outcome == "error":
            result.unknown_stored += 1
        elif outcome is None:
            result.extra_stored += 1

    checks = [
        (result.raw_found == result.acked, "acknowledged bodies missing from raw segments"),
        (result.records_found == result.acked, "acknowledged bodies missing from records()"),
        (result.records_spans == result.acked_spans, "records() n_spans != spans acknowledged"),
        (result.table_spans == result.acked_spans, "spans table != spans acknowledged"),
        (result.not_imported == 0, "acknowledged records not fully imported"),
        (result.refused_stored == 0, "refused bodies were stored"),
        (result.extra_stored == 0, "stored records that no client sent"),
    ]
    result.problems = [message for good, message in checks if not good]
    return result


# -- report -----------------------------------------------------------------------------------
def _percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.1f}"


def _mb(kb: int | None) -> str:
    return "-" if kb is None else f"{kb / 1024:.0f}"


def _row(cells: Sequence[object]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def load_rows(load: LoadRun, pool: Sequence[Batch], floor: Rate, peak: str) -> list[str]:
    """One row per protocol and a total row."""
    groups = [(p, load.sent[p], load.clients.get(p, 0)) for p in ("grpc", "http")]
    everything = [s for p in ("grpc", "http") for s in load.sent[p]]
    groups.append(("total", everything, sum(load.clients.values())))
    rows = []
    for name, sent, clients in groups:
        ok = [s for s in sent if s.outcome == "ok"]
        spans = sum(pool[s.seq % len(pool)].spans - s.rejected_spans for s in ok)
        rate = spans / load.seconds
        latencies = [s.latency_s for s in ok]
        rows.append(
            _row(
                [
                    name,
                    clients,
                    len(ok),
                    spans,
                    f"{rate:,.0f}",
                    _ms(_percentile(latencies, 50)),
                    _ms(_percentile(latencies, 99)),
                    sum(s.outcome == "rejected" for s in sent),
                    sum(s.outcome == "error" for s in sent),
                    peak if name == "total" else "",
                    f"{rate / floor.spans_per_s:.4f}",
                ]
            )
        )
    return rows


def report(
    pool: Sequence[Batch],
    rates: list[Rate],
    load: LoadRun,
    stopped: Stopped,
    check: Verification,
) -> str:
    """The printed summary: baselines, the load table, the receiver, the verification."""
    floor = rates[0]
    lines = ["", "baselines (single thread, bodies in memory, same batches):", ""]
    lines += [_row(["decode", "spans/s", "MB/s"]), _row(["---"] * 3)]
    pool_bytes = sum(len(b.body) for b in pool)
    pool_spans = sum(b.spans for b in pool)
    for rate in rates:
        mb_s = rate.spans / pool_spans * pool_bytes / rate.seconds / 1e6
        lines.append(_row([rate.label, f"{rate.spans_per_s:,.0f}", f"{mb_s:,.0f}"]))
    header = [
        "protocol",
        "clients",
        "batches acked",
        "spans acked",
        "spans/s accepted",
        "p50 ms",
        "p99 ms",
        "rejected",
        "errors",
        "receiver peak RSS MB",
        "× FromString rate",
    ]
    peak = f"{_mb(stopped.hwm_kb_load)} (load), {_mb(stopped.hwm_kb_final)} (with shutdown)"
    lines += ["", f"load ({load.seconds:.2f} s):", "", _row(header), _row(["---"] * len(header))]
    lines += load_rows(load, pool, floor, peak)
    failed = [s for sent in load.sent.values() for s in sent if s.outcome != "ok"]
    errors = Counter(s.detail for s in failed)
    failed_ms = [s.latency_s for s in failed]
    cores = os.cpu_count() or 1
    receiver_cpu = "-" if load.receiver_cpu_s is None else f"{load.receiver_cpu_s:.1f}"
    lines += [
        "",
        f"refusals and errors by kind: {dict(errors) or 'none'}"
        + (
            f" (answered in p50 {_ms(_percentile(failed_ms, 50))} ms, max {_ms(max(failed_ms))} ms)"
            if failed_ms
            else ""
        ),
        f"CPU during the load: receiver {receiver_cpu} s, benchmark clients "
        f"{load.client_cpu_s:.1f} s, over {load.seconds:.1f} s wall on {cores} cores",
        f"receiver stop (SIGTERM → exit): {stopped.seconds:.1f} s, exit status "
        f"{stopped.returncode if stopped.returncode is not None else 'killed'}",
        "",
        check.summary(),
    ]
    return "\n".join(lines)


def machine() -> str:
    versions = ", ".join(
        f"{name} {importlib.metadata.version(name)}" for name in ("grpcio", "protobuf", "polars")
    )
    return (
        f"{platform.system()} {platform.release()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; "
        f"Python {platform.python_version()}, {versions}"
    )


# -- main -------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8, help="clients, half gRPC half HTTP")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the load")
    parser.add_argument("--spans-per-batch", type=int, default=256)
    parser.add_argument("--pool", type=int, default=100, help="distinct pre-built batches")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", type=Path, help="parent of the run's temporary directory")
    parser.add_argument("--keep", action="store_true", help="keep the store and receiver log")
    parser.add_argument(
        "--stop-timeout", type=float, default=900.0, help="seconds to wait for the receiver"
    )
    parser.add_argument(
        "--collect-option",
        action="append",
        default=[],
        help="an option for `otelcar collect` (repeatable: --collect-option=--derive=thread)",
    )
    args = parser.parse_args(argv)
    if args.clients < 1 or args.seconds <= 0 or args.spans_per_batch < 1 or args.pool < 1:
        parser.error("--clients, --seconds, --spans-per-batch and --pool must be positive")
    return args


def run(args: argparse.Namespace, workdir: Path) -> bool:
    print(machine())
    started = time.perf_counter()
    pool = build_pool(args.pool, args.spans_per_batch, args.seed)
    pool_mb = sum(len(b.body) for b in pool) / 1e6
    print(
        f"pool: {len(pool)} batches × {args.spans_per_batch} spans, {pool_mb:.1f} MB "
        f"({pool_mb * 1000 / len(pool):.0f} kB a batch), built in "
        f"{time.perf_counter() - started:.1f} s"
    )
    rates = baselines(pool)
    receiver = ReceiverProcess(workdir / "store", workdir, args.collect_option)
    try:
        receiver.start()
        print(
            f"receiver pid {receiver.pid}: gRPC :{receiver.grpc_port}, HTTP :{receiver.http_port}"
        )
        load = run_load(receiver, pool, args.clients, args.seconds)
        derived = derived_so_far(receiver.store)
        print(
            f"load done; SIGTERM (the receiver drains and derives; {args.stop_timeout:.0f} s max)"
        )
        stopped = receiver.stop(args.stop_timeout)
    finally:
        receiver.kill()
    print(receiver_log_summary(receiver.log()))
    check = verify(receiver.store, pool, load)
    print(report(pool, rates, load, stopped, check))
    own_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(
        f"derived before SIGTERM: {derived[0]} records ({derived[2]} spans) in {derived[1]} "
        f"background builds; benchmark process peak RSS {own_mb} MB"
    )
    intake = check.acked_spans
    if intake:
        print(
            f"derivation during the load: {derived[2] / load.seconds:,.0f} spans/s = "
            f"{derived[2] / intake:.2f}× the acknowledged intake ({intake / load.seconds:,.0f} "
            "spans/s); builds are committed whole, so a run shorter than a few builds "
            "understates it"
        )
    if check.raw_found == check.acked > check.records_found:
        recheck_after_catch_up(receiver.store, pool, load)
    return check.ok and stopped.returncode == 0


def recheck_after_catch_up(store_path: Path, pool: Sequence[Batch], load: LoadRun) -> None:
    """Every acknowledged body is in the raw segments but the derived tables disagree:
    derive what is pending here (what the receiver's next start would do) and check again.
    The run still fails; this only tells a lost batch from an unfinished derivation."""
    print(
        "\nraw segments hold every acknowledged body; deriving the rest here with Store.catch_up()"
    )
    started = time.perf_counter()
    Store(store_path, create=False).catch_up(recover=True)
    print(f"catch_up took {time.perf_counter() - started:.1f} s; then:")
    print(verify(store_path, pool, load).summary())


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="otelcar-receiver-load-", dir=args.workdir))
    ok = False
    try:
        ok = run(args, workdir)
    finally:
        if args.keep or not ok:
            print(f"kept {workdir}" + ("" if ok else " (the run failed: store and receiver.log)"))
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
