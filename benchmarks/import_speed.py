"""Import-speed benchmark for ``otelcar import``.

Generates N realistic GenAI agent spans (deterministic from ``--seed``), writes them as
OTLP/JSON lines and as a length-prefixed binary protobuf stream, and measures in the same run:

1. the floor: ``ExportTraceServiceRequest.FromString`` of every protobuf frame (bytes already
   in memory), and ``json.loads`` of every JSON line; for reference also ``FromString`` plus
   turning every span into Python values;
2. ``otelcar import`` of the JSON-lines file into a fresh store (a child process);
3. ``otelcar import`` of the protobuf stream into another fresh store (a child process);
4. the store's own floor, for reference: what keeping the protobuf stream costs with no
   decoding or mapping at all (a sha256 and a crc32 of every record, the records appended to a
   file and fsync-ed, and the Parquet parts that import wrote, written again from memory),
   and the bytes on disk of the raw segments and of each table's parts.

Each import runs in its own child process, started by a small launcher process, so that its
peak RSS (``ru_maxrss`` from ``os.wait4``) is the import's alone (see :data:`LAUNCHER`).
After each import the ``--json`` report and ``otelcar traces --json`` are checked: trace,
span, LLM, tool and agent counts must equal what was generated, else the benchmark fails.
Timings are printed, never asserted.

Run ``python benchmarks/import_speed.py`` (20 000 spans) or ``--spans 200000`` (full size).
See ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import base64
import cProfile
import hashlib
import importlib.metadata
import io
import json
import math
import os
import platform
import pstats
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import polars as pl
from google.protobuf.internal import api_implementation
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1 import trace_pb2

MS = 1_000_000  # nanoseconds per millisecond
SPAN_FLAGS = 0x100  # SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK, as the Python SDK sets it
KIND_INTERNAL = trace_pb2.Span.SPAN_KIND_INTERNAL
KIND_CLIENT = trace_pb2.Span.SPAN_KIND_CLIENT
EPOCH_NS = 1_795_945_625_000_000_000  # a fixed start time keeps the files deterministic
CONCURRENT_TRACES = 4  # agent runs in flight at once (their spans interleave in batches)
FULL_BATCH_SHARE = 0.8  # the rest are timer flushes of a partly filled queue
PARALLEL_TOOLS_SHARE = 0.35  # LLM steps whose tool calls run concurrently
BUSY_RATIO = 1.15  # wall/CPU of an import above this: other load on the machine
_WORDS_TEXT = (
    "order refund policy customer account invoice shipment delivery warehouse tracking "
    "status pending approved rejected escalate ticket priority billing address payment "
    "card balance credit debit transaction receipt product category electronics apparel "
    "furniture damaged missing late replacement exchange return label carrier window days "
    "within after before eligible not the a of to and for with on in is was has been will "
    "please confirm verify summary note record history previous latest region store online"
)
WORDS = tuple(_WORDS_TEXT.split())


@dataclass(frozen=True)
class Tool:
    """A tool an agent can call: its name, description and argument keys."""

    name: str
    description: str
    arg_keys: tuple[str, ...]


@dataclass(frozen=True)
class Agent:
    """An agent persona: name, model, system prompt (about 400 chars) and tools."""

    name: str
    model: str
    system_prompt: str
    tools: tuple[Tool, ...]


def _prompt(role: str, duties: str) -> str:
    """A system prompt of about 400 characters."""
    text = (
        f"You are {role}. {duties} Always look up the facts with the tools before you answer; "
        "never guess order numbers, amounts or dates. Quote the relevant policy text when you "
        "refuse a request, keep answers short and polite, and escalate to a human when the "
        "customer asks for it or when the tools disagree with each other. "
    )
    return (text * 2)[:400]


AGENTS = (
    Agent(
        "support_agent",
        "gpt-4o-mini",
        _prompt("a refund support agent", "Handle refund and exchange requests."),
        (
            Tool("lookup_order", "Look up an order by its id.", ("order_id",)),
            Tool("get_refund_policy", "Return the refund policy text.", ("category",)),
            Tool("issue_refund", "Issue a refund for an order.", ("order_id", "amount")),
            Tool("search_tickets", "Search earlier support tickets.", ("query", "limit")),
        ),
    ),
    Agent(
        "billing_agent",
        "gpt-4o",
        _prompt("a billing assistant", "Explain invoices, charges and payment failures."),
        (
            Tool("get_invoice", "Fetch an invoice with its line items.", ("invoice_id",)),
            Tool("list_payments", "List the payments of an account.", ("account_id", "days")),
            Tool("retry_payment", "Retry a failed card payment.", ("payment_id",)),
        ),
    ),
    Agent(
        "logistics_agent",
        "gpt-4.1",
        _prompt("a logistics coordinator", "Track shipments and arrange replacements."),
        (
            Tool("track_shipment", "Tracking events of a shipment.", ("tracking_id",)),
            Tool("warehouse_stock", "Stock of a product per warehouse.", ("sku", "region")),
            Tool("create_label", "Create a return label.", ("order_id", "carrier")),
        ),
    ),
)


# -- content ----------------------------------------------------------------------------------
class Content:
    """Deterministic filler text: slices of one pre-generated word corpus (fast to cut)."""

    def __init__(self, rng: random.Random, size: int = 1 << 18) -> None:
        words: list[str] = []
        length = 0
        while length < size:
            word = rng.choice(WORDS)
            words.append(word)
            length += len(word) + 1
        self.corpus = " ".join(words)
        self.rng = rng

    def text(self, n: int) -> str:
        """About ``n`` characters of words."""
        start = self.corpus.find(" ", self.rng.randrange(len(self.corpus) - n - 64)) + 1
        return self.corpus[start : start + n].strip()

    def token(self, prefix: str, n: int) -> str:
        """An id like ``call_3kQ...`` (``n`` random letters and digits)."""
        alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
        return prefix + "".join(self.rng.choices(alphabet, k=n))

    def arguments(self, tool: Tool) -> dict[str, Any]:
        """Tool-call arguments (a small JSON object)."""
        args: dict[str, Any] = {}
        for key in tool.arg_keys:
            if key == "amount":
                args[key] = round(self.rng.uniform(5, 900), 2)
            elif key in ("limit", "days"):
                args[key] = self.rng.randint(1, 90)
            elif key.endswith("_id"):
                args[key] = self.token(key[0].upper() + "-", 8)
            else:
                args[key] = self.text(self.rng.randint(8, 60))
        return args

    def tool_result(self) -> str:
        """A tool result of 200..2000 characters: a JSON document or plain text."""
        size = self.rng.randint(200, 2000)
        if self.rng.random() < 0.5:
            return self.text(size)
        doc = {
            "id": self.token("R-", 10),
            "status": self.rng.choice(("ok", "pending", "delivered", "rejected")),
            "amount": round(self.rng.uniform(1, 2000), 2),
            "notes": self.text(max(size - 90, 20)),
        }
        return json.dumps(doc)


# -- spans ------------------------------------------------------------------------------------
def _kv(key: str, value: str | int | float | bool | list[str]) -> KeyValue:
    """An OTLP attribute."""
    item = KeyValue(key=key)
    if isinstance(value, bool):
        item.value.bool_value = value
    elif isinstance(value, int):
        item.value.int_value = value
    elif isinstance(value, float):
        item.value.double_value = value
    elif isinstance(value, list):
        item.value.array_value.values.extend(AnyValue(string_value=v) for v in value)
    else:
        item.value.string_value = value
    return item


def _random_id(rng: random.Random, size: int) -> bytes:
    """A random non-zero trace id (16 bytes) or span id (8 bytes)."""
    while True:
        value = rng.getrandbits(8 * size)
        if value:
            return value.to_bytes(size, "big")


def _dumps(value: Any) -> str:
    """Compact JSON, as util-genai writes message attributes."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@dataclass
class TraceCounts:
    """What was generated (the store is checked against these)."""

    traces: int = 0
    spans: int = 0
    llm: int = 0
    tool: int = 0
    agent: int = 0

    def add(self, other: TraceCounts) -> None:
        self.traces += other.traces
        self.spans += other.spans
        self.llm += other.llm
        self.tool += other.tool
        self.agent += other.agent


def _chat_attributes(
    agent: Agent,
    content: Content,
    inputs: list[dict[str, Any]],
    outputs: list[dict[str, Any]],
    finish: str,
) -> list[KeyValue]:
    """Attributes of a ``chat`` span as util-genai 1.1b0 writes them (content on spans)."""
    input_text = _dumps(inputs)
    output_text = _dumps(outputs)
    rng = content.rng
    return [
        _kv("gen_ai.operation.name", "chat"),
        _kv("gen_ai.request.model", agent.model),
        _kv("gen_ai.provider.name", "openai"),
        _kv("server.address", "api.openai.com"),
        _kv("server.port", 443),
        _kv("gen_ai.request.temperature", 0.2),
        _kv("gen_ai.request.max_tokens", 1024),
        _kv("gen_ai.response.finish_reasons", [finish]),
        _kv("gen_ai.response.model", f"{agent.model}-2024-07-18"),
        _kv("gen_ai.response.id", content.token("chatcmpl-", 29)),
        _kv("gen_ai.usage.input_tokens", len(input_text) // 4 + rng.randint(0, 20)),
        _kv("gen_ai.usage.output_tokens", len(output_text) // 4 + rng.randint(0, 20)),
        _kv("gen_ai.input.messages", input_text),
        _kv("gen_ai.output.messages", output_text),
        _kv("openai.response.service_tier", "default"),
        _kv("openai.response.system_fingerprint", content.token("fp_", 10)),
    ]


def _tool_attributes(tool: Tool, call_id: str, arguments: str, result: str) -> list[KeyValue]:
    """Attributes of an ``execute_tool`` span (arguments and result as JSON strings)."""
    return [
        _kv("gen_ai.operation.name", "execute_tool"),
        _kv("gen_ai.tool.name", tool.name),
        _kv("gen_ai.tool.call.id", call_id),
        _kv("gen_ai.tool.type", "function"),
        _kv("gen_ai.tool.description", tool.description),
        _kv("gen_ai.tool.call.arguments", arguments),
        _kv("gen_ai.tool.call.result", result),
    ]


class AgentRun:
    """The spans of one trace under construction, all children of its ``invoke_agent``."""

    def __init__(self, content: Content) -> None:
        self.content = content
        self.rng = content.rng
        self.trace_id = _random_id(self.rng, 16)
        self.root_id = _random_id(self.rng, 8)
        self.spans: list[trace_pb2.Span] = []
        self.counts = TraceCounts(traces=1, agent=1)

    def add(self, name: str, kind: int, times: tuple[int, int], attributes: list[KeyValue]) -> None:
        """Add a child of the root span (status unset: ``"status": {}`` as the SDK writes)."""
        self._append(_random_id(self.rng, 8), self.root_id, name, kind, times, attributes)

    def finish(self, agent: Agent, times: tuple[int, int]) -> list[trace_pb2.Span]:
        """Add the root ``invoke_agent`` span; the spans in end order (the export order)."""
        attributes = [
            _kv("gen_ai.operation.name", "invoke_agent"),
            _kv("gen_ai.agent.name", agent.name),
            _kv("gen_ai.provider.name", "openai"),
        ]
        name = f"invoke_agent {agent.name}"
        self._append(self.root_id, b"", name, KIND_INTERNAL, times, attributes)
        self.counts.spans = len(self.spans)
        return sorted(self.spans, key=lambda s: s.end_time_unix_nano)

    def _append(
        self,
        span_id: bytes,
        parent: bytes,
        name: str,
        kind: int,
        times: tuple[int, int],
        attributes: list[KeyValue],
    ) -> None:
        span = trace_pb2.Span(
            trace_id=self.trace_id,
            span_id=span_id,
            parent_span_id=parent,
            flags=SPAN_FLAGS,
            name=name,
            kind=kind,
            start_time_unix_nano=times[0],
            end_time_unix_nano=times[1],
        )
        span.attributes.extend(attributes)
        span.status.SetInParent()
        self.spans.append(span)


def generate_trace(content: Content, start_ns: int) -> AgentRun:
    """One agent run: ``invoke_agent`` + k chat spans (2..6) with 1..3 tools between them.

    Each chat span's ``gen_ai.input.messages`` holds the whole conversation so far (system
    prompt, user message, earlier assistant tool calls and tool results).
    """
    rng = content.rng
    agent = rng.choice(AGENTS)
    run = AgentRun(content)
    user = {"content": content.text(rng.randint(40, 400)), "type": "text"}
    messages: list[dict[str, Any]] = [
        {"role": "system", "parts": [{"content": agent.system_prompt, "type": "text"}]},
        {"role": "user", "parts": [user]},
    ]
    steps = rng.randint(2, 6)
    now = start_ns + rng.randint(1, 5) * MS
    for step in range(steps):
        calls: list[tuple[Tool, str, dict[str, Any]]] = []
        if step == steps - 1:
            parts = [{"content": content.text(rng.randint(80, 800)), "type": "text"}]
            finish = "stop"
        else:
            calls = [
                (tool, content.token("call_", 24), content.arguments(tool))
                for tool in rng.choices(agent.tools, k=rng.randint(1, 3))
            ]
            parts = [
                {"arguments": args, "name": tool.name, "id": call_id, "type": "tool_call"}
                for tool, call_id, args in calls
            ]
            finish = "tool_calls"
        outputs = [{"role": "assistant", "parts": parts, "finish_reason": finish}]
        end = now + rng.randint(300, 4000) * MS
        attributes = _chat_attributes(agent, content, messages, outputs, finish)
        run.add(f"chat {agent.model}", KIND_CLIENT, (now, end), attributes)
        run.counts.llm += 1
        now = end
        if calls:
            messages.append({"role": "assistant", "parts": parts})
            now = _tool_spans(run, calls, now, messages)
    run.spans = run.finish(agent, (start_ns, now + rng.randint(1, 20) * MS))
    return run


def _tool_spans(
    run: AgentRun,
    calls: list[tuple[Tool, str, dict[str, Any]]],
    now: int,
    messages: list[dict[str, Any]],
) -> int:
    """The tool spans of one LLM step (sequential, or concurrent); returns when they end.

    Appends each result to ``messages`` as the next chat span's input will show it.
    """
    rng = run.rng
    parallel = len(calls) > 1 and rng.random() < PARALLEL_TOOLS_SHARE
    finished = now
    start = now + rng.randint(1, 3) * MS
    for tool, call_id, args in calls:
        result = run.content.tool_result()
        end = start + rng.randint(5, 900) * MS
        attributes = _tool_attributes(tool, call_id, _dumps(args), result)
        run.add(f"execute_tool {tool.name}", KIND_INTERNAL, (start, end), attributes)
        run.counts.tool += 1
        response = {"response": result, "id": call_id, "type": "tool_call_response"}
        messages.append({"role": "tool", "parts": [response]})
        finished = max(finished, end)
        start = (start + rng.randint(0, 2) * MS) if parallel else end + rng.randint(1, 3) * MS
    return finished + rng.randint(1, 5) * MS


def generate_spans(
    n_spans: int, rng: random.Random
) -> Iterator[tuple[list[trace_pb2.Span], TraceCounts]]:
    """Groups of concurrent agent runs until at least ``n_spans`` spans (whole traces).

    Yields each group's spans in end order (the order a BatchSpanProcessor exports them),
    so the spans of concurrent runs interleave and traces straddle export batches.
    """
    content = Content(rng)
    total = 0
    clock = EPOCH_NS
    while total < n_spans:
        spans: list[trace_pb2.Span] = []
        counts = TraceCounts()
        for _ in range(CONCURRENT_TRACES):
            trace = generate_trace(content, clock + rng.randint(0, 3000) * MS)
            spans.extend(trace.spans)
            counts.add(trace.counts)
            total += trace.counts.spans
            if total >= n_spans:
                break
        spans.sort(key=lambda s: s.end_time_unix_nano)
        clock = max(s.end_time_unix_nano for s in spans)
        yield spans, counts


# -- OTLP/JSON --------------------------------------------------------------------------------
def any_value_json(value: AnyValue) -> dict[str, Any]:
    """An ``AnyValue`` in OTLP/JSON (int64 as decimal strings, bytes as base64)."""
    which = value.WhichOneof("value")
    if which is None:
        return {}
    if which == "string_value":
        return {"stringValue": value.string_value}
    if which == "bool_value":
        return {"boolValue": value.bool_value}
    if which == "int_value":
        return {"intValue": str(value.int_value)}
    if which == "double_value":
        number = value.double_value
        if math.isfinite(number):
            return {"doubleValue": number}
        return {
            "doubleValue": "NaN"
            if math.isnan(number)
            else ("Infinity" if number > 0 else "-Infinity")
        }
    if which == "array_value":
        return {"arrayValue": {"values": [any_value_json(v) for v in value.array_value.values]}}
    if which == "kvlist_value":
        return {"kvlistValue": {"values": key_values_json(value.kvlist_value.values)}}
    if which == "bytes_value":
        return {"bytesValue": base64.b64encode(value.bytes_value).decode("ascii")}
    raise ValueError(f"AnyValue field {which} is not supported")


def key_values_json(items: Sequence[KeyValue]) -> list[dict[str, Any]]:
    """Repeated ``KeyValue`` in OTLP/JSON."""
    return [{"key": item.key, "value": any_value_json(item.value)} for item in items]


def span_json(span: trace_pb2.Span) -> dict[str, Any]:
    """A span in OTLP/JSON: hex ids, int64 as strings, enums as ints, defaults left out."""
    out: dict[str, Any] = {"traceId": span.trace_id.hex(), "spanId": span.span_id.hex()}
    if span.trace_state:
        out["traceState"] = span.trace_state
    if span.parent_span_id:
        out["parentSpanId"] = span.parent_span_id.hex()
    if span.flags:
        out["flags"] = span.flags
    out["name"] = span.name
    if span.kind:
        out["kind"] = span.kind
    out["startTimeUnixNano"] = str(span.start_time_unix_nano)
    out["endTimeUnixNano"] = str(span.end_time_unix_nano)
    if span.attributes:
        out["attributes"] = key_values_json(span.attributes)
    if span.dropped_attributes_count:
        out["droppedAttributesCount"] = span.dropped_attributes_count
    if span.events:
        out["events"] = [
            {
                "timeUnixNano": str(e.time_unix_nano),
                "name": e.name,
                "attributes": key_values_json(e.attributes),
            }
            for e in span.events
        ]
    if span.links:
        out["links"] = [
            {
                "traceId": link.trace_id.hex(),
                "spanId": link.span_id.hex(),
                "attributes": key_values_json(link.attributes),
            }
            for link in span.links
        ]
    status: dict[str, Any] = {}
    if span.status.message:
        status["message"] = span.status.message
    if span.status.code:
        status["code"] = span.status.code
    out["status"] = status
    return out


def scope_json(scope: InstrumentationScope) -> dict[str, Any]:
    """An ``InstrumentationScope`` in OTLP/JSON."""
    out: dict[str, Any] = {"name": scope.name}
    if scope.version:
        out["version"] = scope.version
    if scope.attributes:
        out["attributes"] = key_values_json(scope.attributes)
    return out


def request_json(request: ExportTraceServiceRequest) -> dict[str, Any]:
    """An ``ExportTraceServiceRequest`` in OTLP/JSON (what the Collector file exporter writes)."""
    resource_spans = []
    for rs in request.resource_spans:
        item: dict[str, Any] = {
            "resource": {"attributes": key_values_json(rs.resource.attributes)},
            "scopeSpans": [
                {"scope": scope_json(ss.scope), "spans": [span_json(s) for s in ss.spans]}
                | ({"schemaUrl": ss.schema_url} if ss.schema_url else {})
                for ss in rs.scope_spans
            ],
        }
        if rs.schema_url:
            item["schemaUrl"] = rs.schema_url
        resource_spans.append(item)
    return {"resourceSpans": resource_spans}


# -- writing ----------------------------------------------------------------------------------
@dataclass
class Dataset:
    """The two files of one run and what they hold."""

    json_path: Path
    proto_path: Path
    counts: TraceCounts
    batches: int
    seconds: float


class BatchWriter:
    """Cuts spans into export batches and writes each as a proto frame and a JSON line."""

    def __init__(
        self, proto: BinaryIO, jsonl: BinaryIO, batch_spans: int, rng: random.Random
    ) -> None:
        self.proto = proto
        self.jsonl = jsonl
        self.batch_spans = batch_spans
        self.rng = rng
        self.pending: list[trace_pb2.Span] = []
        self.batches = 0
        self.resource = Resource(
            attributes=[
                _kv("telemetry.sdk.language", "python"),
                _kv("telemetry.sdk.name", "opentelemetry"),
                _kv("telemetry.sdk.version", "1.45.2"),
                _kv("service.instance.id", "53e53936-5cc1-4559-b731-ce32a25775db"),
                _kv("service.name", "support-agents"),
            ]
        )
        self.scope = InstrumentationScope(name="opentelemetry.util.genai.handler", version="1.1b0")
        self.next_size = self._draw_size()

    def _draw_size(self) -> int:
        """A full queue most of the time; otherwise a timer flush of a partial one."""
        if self.rng.random() < FULL_BATCH_SHARE:
            return self.batch_spans
        return self.rng.randint(max(1, self.batch_spans // 4), self.batch_spans)

    def add(self, spans: list[trace_pb2.Span]) -> None:
        self.pending.extend(spans)
        while len(self.pending) >= self.next_size:
            batch, self.pending = self.pending[: self.next_size], self.pending[self.next_size :]
            self._write(batch)
            self.next_size = self._draw_size()

    def close(self) -> None:
        if self.pending:
            self._write(self.pending)
            self.pending = []

    def _write(self, spans: list[trace_pb2.Span]) -> None:
        request = ExportTraceServiceRequest()
        resource_spans = request.resource_spans.add()
        resource_spans.resource.CopyFrom(self.resource)
        scope_spans = resource_spans.scope_spans.add()
        scope_spans.scope.CopyFrom(self.scope)
        scope_spans.spans.extend(spans)
        data = request.SerializeToString()
        self.proto.write(struct.pack(">I", len(data)) + data)
        line = json.dumps(request_json(request), separators=(",", ":"), ensure_ascii=False)
        self.jsonl.write(line.encode("utf-8") + b"\n")
        self.batches += 1


def write_dataset(workdir: Path, n_spans: int, batch_spans: int, seed: int) -> Dataset:
    """Generate the spans and write ``spans.jsonl`` and ``spans.binpb`` under ``workdir``."""
    started = time.perf_counter()
    rng = random.Random(seed)
    json_path, proto_path = workdir / "spans.jsonl", workdir / "spans.binpb"
    counts = TraceCounts()
    with proto_path.open("wb") as proto, json_path.open("wb") as jsonl:
        writer = BatchWriter(proto, jsonl, batch_spans, random.Random(seed + 1))
        for spans, group in generate_spans(n_spans, rng):
            writer.add(spans)
            counts.add(group)
        writer.close()
    return Dataset(json_path, proto_path, counts, writer.batches, time.perf_counter() - started)


# -- floors -----------------------------------------------------------------------------------
@dataclass
class Floor:
    """Decode-only time of one file, spans counted outside the timed region."""

    label: str
    path: Path
    seconds: float
    spans: int


@dataclass
class Floors:
    """The three decode-only measurements of one run."""

    proto: Floor
    json: Floor
    walk: Floor

    def of(self, path: Path) -> Floor:
        """The issue's floor for a file of this format."""
        return self.proto if path == self.proto.path else self.json

    @classmethod
    def measure(cls, data: Dataset) -> Floors:
        floors = cls(
            proto_floor(data.proto_path), json_floor(data.json_path), walk_floor(data.proto_path)
        )
        for floor in (floors.proto, floors.json, floors.walk):
            if floor.spans != data.counts.spans:
                raise BenchmarkError(f"{floor.label} counted {floor.spans} spans")
        return floors


def proto_frames(path: Path) -> Iterator[bytes]:
    """The payloads of a 4-byte big-endian length-prefixed stream."""
    with path.open("rb") as handle:
        while prefix := handle.read(4):
            (length,) = struct.unpack(">I", prefix)
            payload = handle.read(length)
            if len(payload) != length:
                raise RuntimeError(f"{path}: truncated frame")
            yield payload


def proto_floor(path: Path) -> Floor:
    """Time ``ExportTraceServiceRequest.FromString`` of every frame (bytes in memory)."""
    frames = list(proto_frames(path))
    spans = 0
    started = time.perf_counter()
    for payload in frames:
        ExportTraceServiceRequest.FromString(payload)
    seconds = time.perf_counter() - started
    for payload in frames:
        request = ExportTraceServiceRequest.FromString(payload)
        spans += sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
    return Floor("floor: ExportTraceServiceRequest.FromString", path, seconds, spans)


def _python_value(value: AnyValue) -> Any:
    """An ``AnyValue`` as a plain Python value (what any Python importer has to build)."""
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_python_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _python_value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, which) if which else None


def walk_floor(path: Path) -> Floor:
    """Time ``FromString`` plus turning every span into a dict of Python values.

    Not part of the issue's floor: a reference for the least a Python importer must do
    (upb's ``FromString`` alone creates no Python objects).
    """
    frames = list(proto_frames(path))
    spans = 0
    started = time.perf_counter()
    for payload in frames:
        request = ExportTraceServiceRequest.FromString(payload)
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    _walked = (
                        span.trace_id.hex(),
                        span.span_id.hex(),
                        span.parent_span_id.hex(),
                        span.name,
                        span.kind,
                        span.start_time_unix_nano,
                        span.end_time_unix_nano,
                        {kv.key: _python_value(kv.value) for kv in span.attributes},
                    )
                    spans += 1
    seconds = time.perf_counter() - started
    return Floor("reference: FromString + spans as Python values", path, seconds, spans)


def json_floor(path: Path) -> Floor:
    """Time ``json.loads`` of every line (bytes in memory)."""
    lines = path.read_bytes().splitlines()
    started = time.perf_counter()
    for line in lines:
        json.loads(line)
    seconds = time.perf_counter() - started
    spans = 0
    for line in lines:
        obj = json.loads(line)
        spans += sum(len(ss["spans"]) for rs in obj["resourceSpans"] for ss in rs["scopeSpans"])
    return Floor("floor: json.loads", path, seconds, spans)


@dataclass
class StoreFloor(Floor):
    """:func:`store_floor`'s time, with its three phases (seconds each)."""

    hashing: float = 0.0
    raw_write: float = 0.0
    parquet: float = 0.0
    parquet_cpu: float = 0.0

    def phases(self) -> str:
        return (
            f"hashing {self.hashing:.3f} s, raw write and fsync {self.raw_write:.3f} s, "
            f"Parquet writes {self.parquet:.3f} s (CPU {self.parquet_cpu:.3f} s); the floor is "
            f"{self.seconds / self.raw_write:.1f}× the raw write and fsync"
        )


def store_floor(path: Path, store: Path, spans: int) -> StoreFloor:
    """Time what keeping ``path`` costs a store with no decoding or mapping at all.

    ``store`` is the store that ``otelcar import`` made of ``path`` (``spans`` spans, as
    generated and as the import was verified to hold). Timed, each phase on its
    own: a sha256 (the record's content hash) and a crc32 (the frame checksum) of every frame;
    the frames appended to a scratch file and fsync-ed once; the store's Parquet parts (read
    back beforehand, untimed) written again with the store's settings. Not part of the
    issue's floor: a reference for the least this store's durability and tables cost.
    """
    frames = list(proto_frames(path))
    parts = [pl.read_parquet(part) for part in sorted((store / "derived").rglob("*.parquet"))]
    scratch = store.parent / f"{store.name}-floor"
    scratch.mkdir(exist_ok=True)
    try:
        started = time.perf_counter()
        for payload in frames:
            hashlib.sha256(payload).hexdigest()
            zlib.crc32(payload)
        hashed = time.perf_counter()
        with (scratch / "raw").open("wb") as handle:
            for payload in frames:
                handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        written = time.perf_counter()
        cpu = time.process_time()
        for number, part in enumerate(parts):
            part.write_parquet(scratch / f"part-{number}.parquet")
        ended = time.perf_counter()
        cpu = time.process_time() - cpu
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return StoreFloor(
        "reference: the store's own floor (hash, fsync, Parquet)",
        path,
        ended - started,
        spans,
        hashing=hashed - started,
        raw_write=written - hashed,
        parquet=ended - written,
        parquet_cpu=cpu,
    )


def part_sizes(store: Path) -> str:
    """Bytes on disk of a store's raw segments and of each derived table's Parquet parts."""
    sizes = {"raw": sum(p.stat().st_size for p in (store / "raw").glob("segment-*"))}
    for folder in sorted(p for p in (store / "derived").iterdir() if p.is_dir()):
        sizes[folder.name] = sum(p.stat().st_size for p in folder.glob("*.parquet"))
    derived = sum(v for k, v in sizes.items() if k != "raw")
    shown = ", ".join(f"{name} {size / 1e6:.2f}" for name, size in sizes.items())
    return f"bytes on disk (MB): {shown}; derived parts {derived / 1e6:.2f} in all"


# -- child processes --------------------------------------------------------------------------
class BenchmarkError(RuntimeError):
    """The import failed or the store does not hold what was generated."""


@dataclass
class ChildRun:
    """A finished child process: exit code, output, wall and CPU time, peak RSS."""

    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    cpu_s: float
    peak_rss_mb: float


#: Runs ``argv[2:]`` and writes its wall time, own rusage and exit status to ``argv[1]``.
#: Needed because on Linux a child's ``ru_maxrss`` starts at its parent's peak RSS: exec
#: records the peak of the memory map it replaces, which after ``vfork`` (what subprocess
#: uses) is the parent's. This small launcher is that parent instead of the benchmark, whose
#: own peak (generated data, floors) would otherwise show up as the import's.
LAUNCHER = """
import json, os, subprocess, sys, time
started = time.perf_counter()
proc = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(proc.pid, 0)
with open(sys.argv[1], "w") as handle:
    json.dump({"wall_s": time.perf_counter() - started, "maxrss": usage.ru_maxrss,
               "cpu_s": usage.ru_utime + usage.ru_stime,
               "returncode": os.waitstatus_to_exitcode(status)}, handle)
"""


def run_child(argv: list[str]) -> ChildRun:
    """Run ``argv`` (through :data:`LAUNCHER`) and collect its own time and peak RSS."""
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.TemporaryDirectory() as scratch,
    ):
        result = Path(scratch) / "rusage.json"
        launcher = subprocess.run(
            [sys.executable, "-c", LAUNCHER, str(result), *argv],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            check=False,
        )
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace")
        if launcher.returncode != 0 or not result.exists():
            raise BenchmarkError(f"launcher failed ({launcher.returncode}): {stderr[-2000:]}")
        usage = json.loads(result.read_text())
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, else KiB
    return ChildRun(
        returncode=usage["returncode"],
        stdout=stdout,
        stderr=stderr,
        wall_s=usage["wall_s"],
        cpu_s=usage["cpu_s"],
        peak_rss_mb=usage["maxrss"] * scale / 1e6,
    )


def otelcar_argv(store: Path, *args: str) -> list[str]:
    """``python -m otelcar.cli --store STORE ARGS...`` with this interpreter."""
    return [sys.executable, "-m", "otelcar.cli", "--store", str(store), *args]


def _fail(what: str, run: ChildRun) -> BenchmarkError:
    return BenchmarkError(
        f"{what} exited {run.returncode}\n--- stdout ---\n{run.stdout[-4000:]}"
        f"\n--- stderr ---\n{run.stderr[-4000:]}"
    )


def check_report(report: dict[str, Any], expected: TraceCounts, batches: int) -> None:
    """The ``import --json`` report must show every record and span imported cleanly."""
    problems = []
    if report["records"] != batches or report["imported"] != batches:
        problems.append(f"records {report['records']}/imported {report['imported']} != {batches}")
    if report["spans"] != expected.spans:
        problems.append(f"spans {report['spans']} != {expected.spans}")
    for key in ("unparsed", "partial", "quarantined"):
        if report[key]:
            problems.append(f"{key}: {report[key][:3]}")
    if report["rejected_items"]:
        problems.append(f"rejected_items {report['rejected_items']}")
    if problems:
        raise BenchmarkError("import report is wrong: " + "; ".join(problems))


def check_store(store: Path, expected: TraceCounts) -> int:
    """``otelcar traces --json`` must list every generated trace with its spans and steps.

    Returns the number of step issues reported (informational; not a failure).
    """
    run = run_child(otelcar_argv(store, "traces", "--json"))
    if run.returncode != 0:
        raise _fail("otelcar traces --json", run)
    traces = json.loads(run.stdout)
    found = TraceCounts(
        traces=len(traces),
        spans=sum(t["n_spans"] for t in traces),
        llm=sum(t["n_llm"] for t in traces),
        tool=sum(t["n_tool"] for t in traces),
        agent=sum(t["n_agent"] for t in traces),
    )
    if found != expected:
        raise BenchmarkError(f"store {store} holds {found}, generated {expected}")
    return sum(t["n_issues"] for t in traces)


@dataclass
class ImportRun:
    """One measured ``otelcar import``."""

    label: str
    path: Path
    spans: int
    run: ChildRun
    issues: int


def measure_import(label: str, path: Path, store: Path, data: Dataset) -> ImportRun:
    """Import ``path`` into the fresh ``store`` in a child process, then verify the store."""
    if store.exists():
        shutil.rmtree(store)
    run = run_child(otelcar_argv(store, "import", "--json", str(path)))
    if run.returncode != 0:
        raise _fail(f"otelcar import {path.name}", run)
    check_report(json.loads(run.stdout), data.counts, data.batches)
    issues = check_store(store, data.counts)
    return ImportRun(label, path, data.counts.spans, run, issues)


# -- profile ----------------------------------------------------------------------------------
def profile_import(path: Path, store: Path, top: int) -> str:
    """cProfile of an in-process import of ``path`` into the fresh ``store`` (top functions)."""
    from otelcar import Store
    from otelcar.importer import iter_file_records

    if store.exists():
        shutil.rmtree(store)
    profiler = cProfile.Profile()
    profiler.enable()
    Store(store).import_records(iter_file_records([path]))
    profiler.disable()
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text).strip_dirs()
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return text.getvalue()


# -- report -----------------------------------------------------------------------------------
def machine() -> str:
    """CPU count, Python, polars and protobuf versions (and the protobuf backend)."""
    return (
        f"{platform.platform()}; {os.cpu_count()} CPUs ({platform.processor() or 'cpu'}); "
        f"Python {platform.python_version()}; polars {importlib.metadata.version('polars')}; "
        f"protobuf {importlib.metadata.version('protobuf')} ({api_implementation.Type()})"
    )


def _load() -> str:
    """The 1-minute load average (a busy machine makes wall times meaningless)."""
    return f"{os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "n/a"


def _mb(path: Path) -> float:
    return path.stat().st_size / 1e6


def _row(cells: Sequence[object]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _floor_row(floor: Floor, floors: Floors) -> str:
    own = floors.of(floor.path)
    return _row(
        (
            floor.label,
            f"{_mb(floor.path):.1f}",
            floor.spans,
            f"{floor.seconds:.3f}",
            "-",
            f"{floor.spans / floor.seconds:,.0f}",
            "-",
            f"{floor.seconds / floors.proto.seconds:.1f}",
            f"{floor.seconds / own.seconds:.1f}",
            f"{own.spans / own.seconds:,.0f}",
        )
    )


def table(
    floors: Floors, imports: list[ImportRun], startup: ChildRun, kept: StoreFloor | None = None
) -> str:
    """The results as a Markdown table (ratios are wall-time ratios to the floors); ``kept``
    is the store's own floor (:func:`store_floor`), a row after the imports."""
    header = (
        "run",
        "file MB",
        "spans",
        "wall s",
        "CPU s",
        "spans/s",
        "peak RSS MB",
        "× pb floor",
        "× own-format floor",
        "own floor spans/s",
    )
    lines = [_row(header), _row(["---"] * len(header))]
    for floor in (floors.proto, floors.json, floors.walk):
        lines.append(_floor_row(floor, floors))
    for item in imports:
        run, own = item.run, floors.of(item.path)
        lines.append(
            _row(
                (
                    item.label,
                    f"{_mb(item.path):.1f}",
                    item.spans,
                    f"{run.wall_s:.2f}",
                    f"{run.cpu_s:.2f}",
                    f"{item.spans / run.wall_s:,.0f}",
                    f"{run.peak_rss_mb:.0f}",
                    f"{run.wall_s / floors.proto.seconds:.0f}",
                    f"{run.wall_s / own.seconds:.0f}",
                    f"{own.spans / own.seconds:,.0f}",
                )
            )
        )
    if kept is not None:
        lines.append(_floor_row(kept, floors))
    startup_cells = ("-", "-", f"{startup.wall_s:.2f}", f"{startup.cpu_s:.2f}", "-")
    lines.append(
        _row(("startup only: `otelcar --version`", *startup_cells, f"{startup.peak_rss_mb:.0f}"))
        + " - | - | - |"
    )
    return "\n".join(lines)


def summary(data: Dataset) -> str:
    """What was generated."""
    c = data.counts
    return (
        f"generated {c.spans} spans ({c.llm} chat, {c.tool} execute_tool, {c.agent} "
        f"invoke_agent) in {c.traces} traces, {data.batches} export batches, "
        f"in {data.seconds:.1f}s; OTLP/JSON lines {_mb(data.json_path):.1f} MB, "
        f"protobuf stream {_mb(data.proto_path):.1f} MB"
    )


# -- main -------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Import rate and peak memory of `otelcar import` against the decode floor.",
    )
    parser.add_argument(
        "--spans",
        type=int,
        default=20_000,
        help="spans to generate (whole traces, so slightly more); "
        "200000 is the full size (default: %(default)s)",
    )
    parser.add_argument(
        "--batch-spans", type=int, default=512, help="spans per export batch (default: %(default)s)"
    )
    parser.add_argument("--seed", type=int, default=1, help="data seed (default: %(default)s)")
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="parent directory for the run's files (default: system temp)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the generated files and stores")
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="TOP",
        help="also cProfile an in-process import of each file and print the "
        "TOP functions (off by default)",
    )
    args = parser.parse_args(argv)
    if args.spans < 1 or args.batch_spans < 1:
        parser.error("--spans and --batch-spans must be positive")
    return args


def run(args: argparse.Namespace, workdir: Path) -> None:
    """Generate, measure, verify and print."""
    print(f"date: {time.strftime('%Y-%m-%d %H:%M %Z')}")
    print(f"machine: {machine()}; load average {_load()}")
    print(f"workdir: {workdir}")
    data = write_dataset(workdir, args.spans, args.batch_spans, args.seed)
    print(summary(data), flush=True)
    floors = Floors.measure(data)
    startup = run_child([sys.executable, "-m", "otelcar.cli", "--version"])
    if startup.returncode != 0:
        raise _fail("otelcar --version", startup)
    imports = []
    for label, path, store in (
        ("otelcar import: OTLP/JSON lines", data.json_path, workdir / "store-json"),
        ("otelcar import: protobuf stream", data.proto_path, workdir / "store-proto"),
    ):
        print(f"running {label} …", flush=True)
        imports.append(measure_import(label, path, store, data))
    issues = ", ".join(f"{i.issues} step issues in {i.path.name}" for i in imports)
    print(f"verified: each store holds all {data.counts.traces} traces ({issues})\n")
    kept = store_floor(data.proto_path, workdir / "store-proto", data.counts.spans)
    print(table(floors, imports, startup, kept))
    print(f"\nthe protobuf import's store: {part_sizes(workdir / 'store-proto')}")
    proto_import = imports[-1].run.wall_s
    print(
        f"\nthe store's own floor is {kept.seconds / floors.proto.seconds:.1f}× the protobuf "
        f"decode ({kept.phases()}); the protobuf import is "
        f"{proto_import / kept.seconds:.1f}× that floor"
    )
    busy = [i.label for i in imports if i.run.wall_s > BUSY_RATIO * i.run.cpu_s]
    if busy:
        print(
            f"\nnote: wall time exceeds CPU time by over {BUSY_RATIO - 1:.0%} for "
            f"{', '.join(busy)}: the machine was busy (load average {_load()}); "
            "compare CPU seconds, or rerun on an idle machine."
        )
    if args.profile:
        for path in (data.proto_path, data.json_path):
            print(f"\ncProfile, in-process import of {path.name}:")
            print(profile_import(path, workdir / f"store-profile-{path.suffix[1:]}", args.profile))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="otelcar-import-speed-", dir=args.workdir))
    try:
        run(args, workdir)
    except BenchmarkError as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            print(f"\nkept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
