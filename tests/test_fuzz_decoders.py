"""Property-based fuzzing of every decoder and mapper (#15).

Every input, however broken, must end one of two ways: decoded (its spans and log records
then fit the store's tables and survive the dialect mappers and the trajectory builder), or
refused with :class:`~otelcar.errors.FormatError` and a reason (the store then keeps it
unparsed with that reason). Any other exception, a hang, or a span that goes missing without
a reason is a bug. The inputs:

* OTLP protobuf: requests built with the official ``opentelemetry-proto`` classes from drawn
  fields (every id length, the whole ``fixed64`` time range, open enums, nested ``AnyValue``),
  the committed fixtures, and both of those mutated (bit flips, truncation, insertion,
  deletion, splicing); also plain random bytes. Through
  :func:`otelcar.ingest.raw.decode_record` and the receiver's
  :func:`otelcar.receiver.intake.accept`.
* OTLP/JSON: the same requests in OTLP/JSON, random JSON, and mutations of both (values of
  another JSON type, dropped keys, huge, negative and non-finite numbers, times past 2^63,
  deep nesting, odd strings: lone surrogates, NUL, bidi controls, JSON-in-strings).
* LangSmith runs (all JSON shapes, bulk-export Parquet), Langfuse observations (rows,
  envelopes, CSV) and Who&When logs: drawn from the shapes of ``otelcar/ingest/exports``, the
  committed fixtures and the real files under ``../shared/data`` (read and mutated at test
  time, never copied; tests on them skip when the data is absent).
* A store property: a drawn mix of good and bad records (or files) imported into a fresh store
  is fully accounted for, and the store still imports, lists and reindexes afterwards.

``OTELCAR_FUZZ_SCALE=K`` multiplies every test's example count and ``OTELCAR_FUZZ_EXAMPLES=N``
sets them all to N (``benchmarks/hostile_inputs.py`` runs them at a larger size); by default
the file takes well under a minute. :data:`CASES` counts the inputs tried per target.
"""

from __future__ import annotations

import base64
import copy
import csv
import functools
import io
import json
import math
import os
import random
import re
import struct
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1 import logs_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from otelcar import Store
from otelcar.errors import FormatError
from otelcar.importer import import_files, iter_file_records
from otelcar.ingest.exports.langsmith import _is_run
from otelcar.ingest.files import read_records
from otelcar.ingest.formats import get_format
from otelcar.ingest.frames import MAX_TIME_NS, Decoded
from otelcar.ingest.raw import FORMAT_JSON, FORMAT_PROTO, FORMAT_UNKNOWN, RawRecord, decode_record
from otelcar.receiver.intake import accept
from otelcar.schema import LOGS_SCHEMA, SPANS_SCHEMA, TRACES_SCHEMA
from otelcar.store.derived import STEPS_PART_SCHEMA
from otelcar.store.tables import log_row, span_row
from otelcar.trajectory import build_traces
from tests.conftest import NEW_CONTENT, OTLP
from tests.parts import EXTERNAL, WHOWHEN, need_data

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"

#: Inputs tried per target (read by ``benchmarks/hostile_inputs.py``).
CASES: Counter[str] = Counter()
_EXAMPLES = int(os.environ.get("OTELCAR_FUZZ_EXAMPLES", "0") or 0)
_SCALE = float(os.environ.get("OTELCAR_FUZZ_SCALE", "1") or 1)


def fuzz(examples: int) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Hypothesis settings of one test: ``examples`` by default, times
    ``OTELCAR_FUZZ_SCALE``, or ``OTELCAR_FUZZ_EXAMPLES`` for every test when set; no
    deadline (the machine is shared), no example database in the repository. The default
    run is derandomized (the same inputs every run, so the suite is a stable gate); a scaled
    run (either variable set, as ``benchmarks/hostile_inputs.py`` does) explores new ones."""
    return settings(
        max_examples=_EXAMPLES or max(1, round(examples * _SCALE)),
        derandomize=not (_EXAMPLES or _SCALE != 1),
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


# ------------------------------------------------------------------------------------------
# Odd values
# ------------------------------------------------------------------------------------------

ODD_STRINGS = [
    "",
    "\x00",
    "a\x00b",
    "\ud800",
    "x\udfffy",
    "\ud83d",
    "\u202egpj.exe",
    "\ufeff",
    "🙂",
    "\x1b]52;c;aGk=\x07",
    "NaN",
    "Infinity",
    "-1",
    "1e999",
    "1e9999999",
    "-1e9999999",
    "1e1000000",
    "1e-1000000",
    "18446744073709551616",
    "9223372036854775808",
    "9223372036854775807",
    "2024-01-01T00:00:00Z",
    "2024-01-01 00:00:00.123456789",
    "9999-12-31T23:59:59Z",
    "0001-01-01T00:00:00Z",
    "2024-13-45T99:99:99+99:99",
    "20240101T000000000000Z" + "5a1f2b3c-0000-4000-8000-000000000001",
    "{",
    "[",
    "null",
    '{"a": 1}',
    '[{"role": "user", "content": "\\ud800"}]',
    '[{"role": "user", "parts": [{"type": "text", "content": "\\udc00"}]}]',
    "'\\ud800'",
    "['\\U0000d800']",
    "SEVERITY_NUMBER_INFO99999999999999999999",
    "SPAN_KIND_CLIENT",
    "STATUS_CODE_ERROR",
    "0102030405060708090a0b0c0d0e0f10",
    "0102030405060708",
    "AQIDBAUGBwgJCgsMDQ4PEA==",
    "00000000000000000000000000000000",
    "zz02030405060708090a0b0c0d0e0f10",
]
ODD_NUMBERS = [
    0,
    -1,
    1,
    1.5,
    2**31,
    2**32,
    2**53 + 1,
    2**63 - 1,
    2**63,
    2**64 - 1,
    2**64,
    -(2**63) - 1,
    10**30,
    -(10**30),
    1e18,
    1e19,
    1e300,
    -1e300,
    5e-324,
    math.inf,
    -math.inf,
    math.nan,
    True,
    False,
]

odd_text = st.one_of(
    st.text(max_size=24),
    st.sampled_from(ODD_STRINGS),
    st.text(alphabet=st.characters(min_codepoint=0xD7F0, max_codepoint=0xE010), max_size=4),
)
odd_number = st.one_of(
    st.sampled_from(ODD_NUMBERS),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
)
json_scalars = st.one_of(st.none(), st.booleans(), odd_number, odd_text)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(odd_text, inner, max_size=4)
    ),
    max_leaves=12,
)
id_bytes16 = st.one_of(st.binary(min_size=16, max_size=16), st.binary(max_size=20))
id_bytes8 = st.one_of(st.binary(min_size=8, max_size=8), st.binary(max_size=12))
uint64 = st.one_of(
    st.integers(min_value=1_700_000_000 * 10**9, max_value=1_800_000_000 * 10**9),
    st.integers(min_value=0, max_value=2**64 - 1),
    st.sampled_from([0, 1, MAX_TIME_NS, MAX_TIME_NS + 1, 2**64 - 1]),
)
int32 = st.one_of(st.integers(0, 6), st.integers(min_value=-(2**31), max_value=2**31 - 1))

# Attribute sets that make each dialect mapper claim a span (and then read odd values).
GENAI_KEYS = [
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.system",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.definitions",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.request.max_tokens",
    "gen_ai.request.temperature",
    "gen_ai.request.seed",
    "gen_ai.request.stop_sequences",
    "gen_ai.response.finish_reasons",
    "gen_ai.tool.name",
    "gen_ai.tool.call.id",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "gen_ai.agent.name",
    "gen_ai.prompt",
    "gen_ai.completion",
    "gen_ai.prompt.0.role",
    "gen_ai.prompt.0.content",
    "gen_ai.completion.0.content",
    "gen_ai.completion.0.tool_calls.0.name",
    "llm.request.type",
    "traceloop.span.kind",
    "traceloop.entity.input",
    "traceloop.entity.output",
    "openinference.span.kind",
    "input.value",
    "output.value",
    "llm.input_messages.0.message.role",
    "llm.input_messages.0.message.content",
    "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments",
    "llm.token_count.prompt",
    "llm.invocation_parameters",
    "tool.name",
    "langfuse.observation.type",
    "langfuse.observation.input",
    "langfuse.observation.output",
    "langfuse.observation.model.parameters",
    "langfuse.observation.usage_details",
    "langsmith.run.run_type",
    "langsmith.run.inputs",
    "langsmith.run.outputs",
    "whowhen.entry.index",
    "whowhen.entry.content",
    "whowhen.entry.context",
    "braintrust.span_attributes",
    "braintrust.input_json",
    "braintrust.output_json",
    "braintrust.input",
    "braintrust.output",
    "braintrust.metadata",
    "braintrust.metrics",
    "llm.openai.messages",
    "llm.openai.choices",
    "llm.openai.tools",
    "llm.openai.usage",
    "llm.openai.id",
    "latitude.type",
    "gen_ai.tool.result.value",
    "input",
    "output",
]
OPERATIONS = [
    "chat",
    "execute_tool",
    "invoke_agent",
    "text_completion",
    "embeddings",
    "create_agent",
]


@st.composite
def messages_json(draw: st.DrawFn) -> str:
    """GenAI-style messages as JSON text (sometimes a little wrong)."""
    parts = st.fixed_dictionaries(
        {"type": st.sampled_from(["text", "tool_call", "tool_call_response", "reasoning", "x"])},
        optional={
            "content": json_values,
            "id": odd_text,
            "name": odd_text,
            "arguments": json_values,
            "response": json_values,
        },
    )
    message = st.fixed_dictionaries(
        {"role": st.one_of(st.sampled_from(["system", "user", "assistant", "tool"]), odd_text)},
        optional={
            "parts": st.lists(parts, max_size=3),
            "content": json_values,
            "tool_calls": json_values,
            "finish_reason": odd_text,
        },
    )
    value = draw(st.one_of(st.lists(message, max_size=3), json_values))
    return dumps(value)


genai_value = st.one_of(
    st.sampled_from(OPERATIONS), messages_json(), json_values, odd_text, odd_number
)


def dumps(value: Any, *, ascii_only: bool = True) -> str:
    return json.dumps(value, allow_nan=True, ensure_ascii=ascii_only)


# ------------------------------------------------------------------------------------------
# OTLP protobuf requests from drawn fields
# ------------------------------------------------------------------------------------------


def _utf8(text: str) -> str:
    """``text`` as protobuf accepts it (proto3 strings are valid UTF-8)."""
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def any_value_pb(value: Any) -> AnyValue:
    """A plain value as an ``AnyValue`` (bytes as bytes, dicts as kvlists)."""
    out = AnyValue()
    if value is None:
        return out
    if isinstance(value, bool):
        out.bool_value = value
    elif isinstance(value, int):
        out.int_value = max(-(2**63), min(2**63 - 1, value))
    elif isinstance(value, float):
        out.double_value = value
    elif isinstance(value, bytes):
        out.bytes_value = value
    elif isinstance(value, str):
        out.string_value = _utf8(value)
    elif isinstance(value, list):
        out.array_value.values.extend(any_value_pb(v) for v in value)
    elif isinstance(value, dict):
        out.kvlist_value.values.extend(
            KeyValue(key=_utf8(str(k)), value=any_value_pb(v)) for k, v in value.items()
        )
    return out


def key_values_pb(items: list[tuple[str, Any]]) -> list[KeyValue]:
    return [KeyValue(key=_utf8(key), value=any_value_pb(value)) for key, value in items]


attribute_items = st.lists(
    st.tuples(
        st.one_of(st.sampled_from(GENAI_KEYS), odd_text), st.one_of(genai_value, st.binary())
    ),
    max_size=6,
)


@st.composite
def spans_pb(draw: st.DrawFn) -> trace_pb2.Span:
    span = trace_pb2.Span(
        trace_id=draw(id_bytes16),
        span_id=draw(id_bytes8),
        parent_span_id=draw(st.one_of(st.just(b""), id_bytes8)),
        name=_utf8(draw(odd_text)),
        kind=draw(int32),
        start_time_unix_nano=draw(uint64),
        end_time_unix_nano=draw(uint64),
        dropped_attributes_count=draw(st.integers(0, 2**32 - 1)),
    )
    span.attributes.extend(key_values_pb(draw(attribute_items)))
    span.status.code = draw(int32)
    span.status.message = _utf8(draw(odd_text))
    for _ in range(draw(st.integers(0, 2))):
        event = span.events.add(name=_utf8(draw(odd_text)), time_unix_nano=draw(uint64))
        event.attributes.extend(key_values_pb(draw(attribute_items)))
    for _ in range(draw(st.integers(0, 2))):
        span.links.add(trace_id=draw(id_bytes16), span_id=draw(id_bytes8))
    return span


@st.composite
def trace_requests(draw: st.DrawFn) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    for _ in range(draw(st.integers(0, 2))):
        resource_spans = request.resource_spans.add()
        resource_spans.resource.attributes.extend(
            key_values_pb([("service.name", draw(odd_text)), *draw(attribute_items)])
        )
        for _ in range(draw(st.integers(0, 2))):
            scope_spans = resource_spans.scope_spans.add()
            scope_spans.scope.name = _utf8(draw(odd_text))
            scope_spans.scope.version = _utf8(draw(odd_text))
            scope_spans.spans.extend(draw(st.lists(spans_pb(), max_size=4)))
    return request


@st.composite
def log_records_pb(draw: st.DrawFn) -> logs_pb2.LogRecord:
    record = logs_pb2.LogRecord(
        time_unix_nano=draw(uint64),
        observed_time_unix_nano=draw(uint64),
        severity_number=draw(int32),
        severity_text=_utf8(draw(odd_text)),
        trace_id=draw(id_bytes16),
        span_id=draw(id_bytes8),
        event_name=_utf8(
            draw(
                st.one_of(
                    st.sampled_from(
                        ["gen_ai.user.message", "gen_ai.choice", "gen_ai.tool.message", ""]
                    ),
                    odd_text,
                )
            )
        ),
    )
    record.body.CopyFrom(any_value_pb(draw(json_values)))
    record.attributes.extend(key_values_pb(draw(attribute_items)))
    return record


@st.composite
def logs_requests(draw: st.DrawFn) -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    for _ in range(draw(st.integers(0, 2))):
        resource_logs = request.resource_logs.add()
        resource_logs.resource.attributes.extend(key_values_pb(draw(attribute_items)))
        for _ in range(draw(st.integers(0, 2))):
            scope_logs = resource_logs.scope_logs.add()
            scope_logs.scope.name = _utf8(draw(odd_text))
            scope_logs.log_records.extend(draw(st.lists(log_records_pb(), max_size=4)))
    return request


def count_items(request: Any) -> int:
    """Spans (or log records) in a parsed request."""
    if isinstance(request, ExportTraceServiceRequest):
        return sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
    return sum(len(s.log_records) for r in request.resource_logs for s in r.scope_logs)


# ------------------------------------------------------------------------------------------
# OTLP/JSON of a request, and mutations of JSON trees and of bytes
# ------------------------------------------------------------------------------------------

_ID_KEYS = {"traceId", "spanId", "parentSpanId"}


def otlp_json(request: Any) -> dict[str, Any]:
    """A request in OTLP/JSON: protobuf's JSON mapping with ids as hex, enums as numbers."""
    value = json_format.MessageToDict(request, use_integers_for_enums=True)

    def fix(node: Any) -> None:
        if isinstance(node, dict):
            for key, item in node.items():
                if key in _ID_KEYS and isinstance(item, str):
                    node[key] = base64.b64decode(item).hex()
                else:
                    fix(item)
        elif isinstance(node, list):
            for item in node:
                fix(item)

    fix(value)
    return value


#: A string that :func:`serialize` replaces with ``N`` levels of nesting (json.dumps itself
#: would overflow the stack on such a value).
DEEP = "\x00deep:"


def serialize(value: Any, *, ascii_only: bool = True) -> bytes:
    text = dumps(value, ascii_only=ascii_only)

    def deep(match: re.Match[str]) -> str:
        depth, kind = int(match.group(1)), match.group(2)
        if kind == "a":
            return "[" * depth + "1" + "]" * depth
        if kind == "o":
            return '{"a":' * depth + "1" + "}" * depth
        return '{"arrayValue":{"values":[' * depth + '{"stringValue":"x"}' + "]}}" * depth

    text = re.sub(r'"\\u0000deep:(\d+):([aov])"', deep, text)
    return text.encode("utf-8", "surrogatepass")


def _slots(value: Any, limit: int = 4000) -> list[tuple[Any, Any]]:
    """``(container, key)`` of every node under ``value`` (breadth-first, at most ``limit``)."""
    out: list[tuple[Any, Any]] = []
    queue = [value]
    while queue and len(out) < limit:
        node = queue.pop(0)
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, item in items:
            out.append((node, key))
            if isinstance(item, dict | list):
                queue.append(item)
    return out


@st.composite
def mutated_tree(draw: st.DrawFn, value: Any, *, rounds: int = 4) -> bytes:
    """``value`` (a decoded JSON document) with 1..``rounds`` mutations, serialized."""
    value = copy.deepcopy(value)
    for _ in range(draw(st.integers(1, rounds))):
        slots = _slots(value) if isinstance(value, dict | list) else []
        if not slots:
            value = draw(json_values)
            continue
        container, key = slots[draw(st.integers(0, len(slots) - 1))]
        old = container[key]
        op = draw(
            st.sampled_from(
                ["value", "number", "string", "drop", "type", "wrap", "deep", "dup", "rename"]
            )
        )
        if op == "value":
            container[key] = draw(json_values)
        elif op == "number":
            container[key] = draw(odd_number)
        elif op == "string":
            container[key] = draw(odd_text)
        elif op == "drop":
            del container[key]
        elif op == "type":  # the same value in another JSON type
            container[key] = (
                str(old)
                if not isinstance(old, str)
                else (int(old) if old.isdigit() and len(old) < 100 else [old])
            )
        elif op == "wrap":
            container[key] = draw(st.sampled_from([[old], {"value": old}, {"stringValue": old}]))
        elif op == "deep":
            depth = draw(st.sampled_from([30, 99, 101, 200, 330, 480, 700, 2000, 20000]))
            container[key] = f"{DEEP}{depth}:{draw(st.sampled_from('aov'))}"
        elif op == "dup" and isinstance(container, list):
            container.insert(key, copy.deepcopy(old))
        elif op == "rename" and isinstance(container, dict):
            new = draw(st.one_of(odd_text, st.just(_camel_snake(key))))
            container[new] = container.pop(key)
    return serialize(value, ascii_only=draw(st.booleans()))


def _camel_snake(key: str) -> str:
    if "_" in key:
        head, *rest = key.split("_")
        return head + "".join(p.title() for p in rest)
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", key).lower()


@st.composite
def mutated_bytes(draw: st.DrawFn, data: bytes, other: bytes = b"") -> bytes:
    """``data`` with 1..4 byte-level mutations (flip, truncate, insert, delete, splice, …)."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(
            st.sampled_from(["flip", "truncate", "insert", "delete", "splice", "byte", "dup"])
        )
        at = draw(st.integers(0, len(out))) if out else 0
        if op == "flip" and out:
            at = min(at, len(out) - 1)
            out[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "truncate":
            del out[at:]
        elif op == "insert":
            out[at:at] = draw(
                st.one_of(st.binary(max_size=16), st.sampled_from([b"\xff" * 10, b"\x0a\x7f"]))
            )
        elif op == "delete":
            del out[at : at + draw(st.integers(1, 64))]
        elif op == "splice" and other:
            cut = draw(st.integers(0, len(other)))
            out = out[:at] + bytearray(other[cut:])
        elif op == "byte" and out:
            at = min(at, len(out) - 1)
            out[at] = draw(st.sampled_from([0x00, 0x0A, 0x12, 0x7F, 0x80, 0xFF]))
        elif op == "dup" and out:
            out[at:at] = out[at : at + draw(st.integers(1, 64))]
    return bytes(out)


# ------------------------------------------------------------------------------------------
# What every decoded record must satisfy
# ------------------------------------------------------------------------------------------


def assert_storable(decoded: Decoded) -> None:
    """The frames fit the store's tables (written as Parquet here), and the dialect mappers
    and the trajectory builder turn them into step rows and trace summaries that fit too."""
    assert isinstance(decoded, Decoded)
    for item in decoded.problems:
        assert isinstance(item, str) and item, decoded.problems
        item.encode("utf-8")
    for seq, frame in enumerate([*decoded.spans, *decoded.logs]):
        frame.seq = seq
        frame.record_id = "r"
    for span in decoded.spans:
        assert 0 <= span.start_ns <= MAX_TIME_NS and 0 <= span.end_ns <= MAX_TIME_NS, span
    _write(pl.DataFrame([span_row(s) for s in decoded.spans], schema=SPANS_SCHEMA))
    _write(pl.DataFrame([log_row(r) for r in decoded.logs], schema=LOGS_SCHEMA))
    built = build_traces(decoded.spans, decoded.logs)
    steps = [{**step, "build_id": 1} for trace in built for step in trace.steps]
    _write(pl.DataFrame(steps, schema=STEPS_PART_SCHEMA))
    _write(pl.DataFrame([{**t.summary, "build_id": 1} for t in built], schema=TRACES_SCHEMA))
    for step in steps:
        failed = [i for i in step["issues"] if i.startswith("mapper ")]
        assert not failed, failed


def _write(frame: pl.DataFrame) -> None:
    frame.write_parquet(io.BytesIO())


def check_record(target: str, record: RawRecord) -> Decoded | None:
    """Decode ``record``: returns what it decoded to, ``None`` when refused with a reason."""
    CASES[target] += 1
    try:
        decoded, _ = decode_record(record)
    except FormatError as exc:
        assert str(exc), "a FormatError without a reason"
        str(exc).encode("utf-8")
        return None
    assert_storable(decoded)
    return decoded


def check_intake(target: str, payload: bytes, *, signal: str, encoding: str) -> Any:
    """The receiver's intake check on one body: an ``Intake`` (whose OTLP responses can be
    built) or a ``FormatError`` with a reason."""
    CASES[target] += 1
    try:
        intake = accept(payload, signal=signal, encoding=encoding, source="fuzz")
    except FormatError as exc:
        assert str(exc)
        str(exc).encode("utf-8")
        return None
    assert intake.items >= 0 and intake.rejected == len(intake.problems)
    intake.response_proto()
    intake.response_json()
    return intake


def item_problems(decoded: Decoded) -> int:
    """Problems that stand for one span or log record each (not notes about the record)."""
    return sum(1 for p in decoded.problems if p.startswith(("resourceSpans[", "resourceLogs[")))


# ------------------------------------------------------------------------------------------
# Seeds: committed fixtures (always there) and the real files beside the clone
# ------------------------------------------------------------------------------------------


@functools.cache
def proto_seeds() -> list[bytes]:
    seeds = [
        (OTLP / "new_content.traces.pb").read_bytes(),
        (OTLP / "new_content.logs.pb").read_bytes(),
    ]
    stream = (OTLP / "new_content.traces.binpb").read_bytes()
    while len(stream) >= 4:
        length = struct.unpack(">I", stream[:4])[0]
        seeds.append(stream[4 : 4 + length])
        stream = stream[4 + length :]
    return seeds


@functools.cache
def otlp_json_seeds() -> list[Any]:
    docs = [json.loads((OTLP / "new_content.traces.json").read_text())]
    for name in ("new_content.traces.jsonl", "legacy_content.logs.jsonl", "new_content.logs.jsonl"):
        docs.extend(json.loads(line) for line in (OTLP / name).read_text().splitlines() if line)
    for path in sorted(EXTERNAL.glob("*/*.json")):
        try:
            doc = json.loads(path.read_text())
        except ValueError:
            continue
        if isinstance(doc, dict) and ("resourceSpans" in doc or "resourceLogs" in doc):
            docs.append(doc)
    return docs


def _json_docs(paths: list[Path]) -> list[Any]:
    docs = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        try:
            docs.append(json.loads(text))
        except ValueError:
            docs.extend(json.loads(line) for line in text.splitlines() if line.strip())
    return docs


@functools.cache
def langsmith_seeds() -> list[Any]:
    paths = sorted((FIXTURES / "langsmith").glob("sdk.*.json*"))
    paths += sorted(EXTERNAL.glob("langsmith-*/*.json"))  # merged runs and batch bodies
    return _json_docs(paths)


@functools.cache
def phoenix_seeds() -> list[Any]:
    return _json_docs(sorted(EXTERNAL.glob("phoenix-*/*.json")))


@functools.cache
def langfuse_seeds() -> list[Any]:
    return _json_docs(sorted((FIXTURES / "langfuse" / "export").glob("*.json*")))


@functools.cache
def whowhen_seeds() -> list[Any]:
    paths = sorted(WHOWHEN.glob("*/*.json"), key=lambda p: (p.parent.name, int(p.stem)))
    # A spread of real logs, the smallest first (mutating a big one costs time, not cover).
    paths = sorted(paths, key=lambda p: p.stat().st_size)[:24]
    return [json.loads(p.read_text(encoding="utf-8")) for p in paths]


def need(path: Path, what: str) -> None:
    del what  # the path says it
    need_data(path)


# ------------------------------------------------------------------------------------------
# (a) protobuf: random and mutated bytes
# ------------------------------------------------------------------------------------------


def proto_targets(payload: bytes) -> None:
    """Every protobuf entry point on one payload, and the counts they must agree on."""
    for signal in (None, "traces", "logs"):
        record = RawRecord(payload, FORMAT_PROTO, "fuzz", "body", signal=signal)
        decoded = check_record("protobuf decode_record", record)
        if signal is None:
            continue
        intake = check_intake("protobuf accept", payload, signal=signal, encoding="proto")
        cls = ExportTraceServiceRequest if signal == "traces" else ExportLogsServiceRequest
        try:
            request = cls.FromString(payload)
        except Exception:
            assert decoded is None and intake is None
            continue
        # Parsed: every span is decoded or rejected with a reason, the same by both paths.
        assert decoded is not None and intake is not None
        total = count_items(request)
        items = decoded.spans if signal == "traces" else decoded.logs
        assert len(items) + item_problems(decoded) == total
        assert (intake.items, intake.rejected) == (len(items), item_problems(decoded))


@fuzz(150)
@given(st.binary(max_size=512))
def test_random_bytes_as_protobuf(payload: bytes):
    proto_targets(payload)


@fuzz(60)
@given(st.one_of(trace_requests(), logs_requests()))
def test_generated_protobuf_requests(request: Any):
    proto_targets(request.SerializeToString())


@fuzz(100)
@given(st.data())
def test_mutated_protobuf(data: st.DataObject):
    seeds = proto_seeds()
    base = data.draw(
        st.one_of(
            st.sampled_from(seeds),
            trace_requests().map(lambda r: r.SerializeToString()),
            logs_requests().map(lambda r: r.SerializeToString()),
        )
    )
    payload = data.draw(mutated_bytes(base, data.draw(st.sampled_from(seeds))))
    proto_targets(payload)


# ------------------------------------------------------------------------------------------
# (b) OTLP/JSON: random JSON, generated requests, mutated requests
# ------------------------------------------------------------------------------------------


def json_targets(payload: bytes) -> None:
    decoded = check_record("otlp-json decode_record", RawRecord(payload, FORMAT_JSON, "f", "1"))
    for signal in ("traces", "logs"):
        check_intake("otlp-json accept", payload, signal=signal, encoding="json")
    if decoded is not None:
        # A record that decodes is also accepted by the receiver on its own endpoint.
        signal = "logs" if decoded.logs and not decoded.spans else None
        if signal:
            assert accept(payload, signal=signal, encoding="json", source="f").items


otlp_skeleton = st.fixed_dictionaries(
    {},
    optional={
        "resourceSpans": st.one_of(
            json_values,
            st.lists(
                st.fixed_dictionaries(
                    {"scopeSpans": st.lists(st.fixed_dictionaries({"spans": json_values}))},
                    optional={"resource": json_values},
                ),
                max_size=2,
            ),
        ),
        "resourceLogs": json_values,
        "resource_spans": json_values,
        "resourceMetrics": json_values,
    },
)


@fuzz(100)
@given(st.one_of(json_values, otlp_skeleton), st.booleans())
def test_random_json_as_otlp(value: Any, ascii_only: bool):
    json_targets(serialize(value, ascii_only=ascii_only))


@fuzz(50)
@given(st.one_of(trace_requests(), logs_requests()))
def test_generated_otlp_json(request: Any):
    payload = serialize(otlp_json(request))
    decoded = check_record("otlp-json decode_record", RawRecord(payload, FORMAT_JSON, "f", "1"))
    if payload == b"{}":  # an empty request: no resourceSpans to tell traces from logs
        return
    assert decoded is not None
    items = decoded.spans if isinstance(request, ExportTraceServiceRequest) else decoded.logs
    # The JSON decoder agrees with the protobuf one: same items, same rejections.
    assert len(items) + item_problems(decoded) == count_items(request)
    proto = check_record(
        "protobuf decode_record", RawRecord(request.SerializeToString(), FORMAT_PROTO, "f", "1")
    )
    assert proto is not None
    proto_items = proto.spans if isinstance(request, ExportTraceServiceRequest) else proto.logs
    assert len(proto_items) == len(items)


@fuzz(120)
@given(st.data())
def test_mutated_otlp_json(data: st.DataObject):
    base = data.draw(
        st.one_of(
            st.sampled_from(otlp_json_seeds()),
            trace_requests().map(otlp_json),
            logs_requests().map(otlp_json),
        )
    )
    json_targets(data.draw(mutated_tree(base)))


# ------------------------------------------------------------------------------------------
# (c) LangSmith, Langfuse and Who&When shapes
# ------------------------------------------------------------------------------------------

uuid_text = st.uuids().map(str)
timestamps = st.one_of(
    st.builds(
        lambda moment, zone: moment.isoformat() + zone,
        st.datetimes(),
        st.sampled_from(["Z", "", "+00:00", "+05:30", "-23:59"]),
    ),
    st.integers(min_value=1_600_000_000, max_value=1_900_000_000).map(
        lambda s: f"2025-01-0{s % 9 + 1}T10:{s % 60:02d}:00.{s % 1000000:06d}Z"
    ),
    odd_number,
    odd_text,
)


@st.composite
def langsmith_runs(draw: st.DrawFn, depth: int = 0) -> dict[str, Any]:
    run_id = draw(st.one_of(uuid_text, odd_text, st.none()))
    trace_id = draw(st.one_of(uuid_text, st.just(run_id), odd_text))
    run: dict[str, Any] = {
        "id": run_id,
        "trace_id": trace_id,
        "run_type": draw(
            st.one_of(
                st.sampled_from(["llm", "chain", "tool", "retriever", "prompt", "LLM", "custom"]),
                odd_text,
            )
        ),
        "name": draw(odd_text),
        "start_time": draw(timestamps),
    }
    optional = {
        "end_time": timestamps,
        "parent_run_id": st.one_of(uuid_text, odd_text, st.none()),
        "dotted_order": st.one_of(
            st.builds(
                lambda a, b: f"20250101T000000000000Z{a}.20250101T000001000000Z{b}",
                uuid_text,
                uuid_text,
            ),
            odd_text,
        ),
        "parent_run_ids": st.one_of(st.lists(uuid_text, max_size=3), odd_text),
        "inputs": st.one_of(
            st.fixed_dictionaries({"messages": st.lists(json_values, max_size=3)}), json_values
        ),
        "outputs": st.one_of(
            st.fixed_dictionaries({"generations": st.lists(json_values, max_size=2)}),
            json_values,
        ),
        "extra": json_values,
        "error": st.one_of(st.none(), odd_text, json_values),
        "status": st.sampled_from(["success", "error", "pending", ""]),
        "tags": st.one_of(st.lists(odd_text, max_size=2), odd_text),
        "events": json_values,
        "duration_ms": odd_number,
        "prompt_tokens": odd_number,
        "total_tokens": odd_number,
    }
    for key in draw(st.sets(st.sampled_from(sorted(optional)))):
        run[key] = draw(optional[key])
    if depth < 2 and draw(st.booleans()):
        run["child_runs"] = draw(st.lists(langsmith_runs(depth + 1), max_size=2))
    return run


@st.composite
def langsmith_documents(draw: st.DrawFn) -> Any:
    runs = draw(st.lists(langsmith_runs(), min_size=1, max_size=3))
    shape = draw(st.sampled_from(["run", "list", "rest", "v2", "cli", "trace get", "batch"]))
    if shape == "run":
        return runs[0]
    if shape == "batch":  # a batch-ingest body: posts, then patches for some of them
        patches = [{"id": run.get("id"), "outputs": run.get("outputs")} for run in runs[1:]]
        return {"post": runs, "patch": patches}
    if shape == "list":
        return runs
    if shape == "rest":
        return {"runs": runs, "cursors": {"next": None}}
    if shape == "v2":
        return {"items": runs, "next_cursor": draw(st.one_of(st.none(), odd_text))}
    cli = [{("run_id" if k == "id" else k): v for k, v in run.items()} for run in runs]
    return cli[0] if shape == "cli" else {"trace_id": runs[0]["trace_id"], "runs": cli}


@st.composite
def langfuse_observations(draw: st.DrawFn) -> dict[str, Any]:
    camel = draw(st.booleans())
    name = (lambda k: k) if camel else _camel_snake
    row: dict[str, Any] = {
        "id": draw(st.one_of(st.uuids().map(lambda u: u.hex[:16]), odd_text)),
        name("traceId"): draw(st.one_of(st.uuids().map(lambda u: u.hex), odd_text)),
        "type": draw(
            st.one_of(st.sampled_from(["GENERATION", "SPAN", "EVENT", "TOOL", "AGENT"]), odd_text)
        ),
        name("startTime"): draw(timestamps),
    }
    optional = {
        "endTime": timestamps,
        "name": odd_text,
        "parentObservationId": st.one_of(st.none(), st.just(""), odd_text),
        "input": st.one_of(messages_json(), json_values),
        "output": st.one_of(messages_json(), json_values),
        "model": odd_text,
        "modelParameters": json_values,
        "usageDetails": st.one_of(
            st.fixed_dictionaries({"input": odd_number, "output": odd_number}), json_values
        ),
        "costDetails": json_values,
        "metadata": st.one_of(
            st.fixed_dictionaries(
                {"resourceAttributes": json_values, "scope": json_values},
                optional={"attributes": json_values},
            ),
            json_values,
            json_values.map(dumps),
        ),
        "level": st.sampled_from(["DEFAULT", "ERROR", "WARNING", "", "x"]),
        "statusMessage": st.one_of(odd_text, json_values),
        "completionStartTime": timestamps,
        "sessionId": odd_text,
        "tags": json_values,
        "latency": odd_number,
    }
    for key in draw(st.sets(st.sampled_from(sorted(optional)))):
        row[name(key)] = draw(optional[key])
    return row


@st.composite
def langfuse_documents(draw: st.DrawFn) -> Any:
    rows = draw(st.lists(langfuse_observations(), min_size=1, max_size=3))
    trace = {
        "id": draw(odd_text),
        "timestamp": draw(timestamps),
        "sessionId": draw(odd_text),
        "userId": draw(odd_text),
        "bookmarked": False,
        "name": draw(odd_text),
        "tags": draw(json_values),
    }
    shape = draw(
        st.sampled_from(["row", "list", "download", "object", "api-trace", "page", "trace"])
    )
    if shape == "row":
        return rows[0]
    if shape == "list":
        return rows
    if shape == "download":
        return {"observations": rows, "scores": draw(json_values)}
    if shape == "object":
        return {"trace": trace, "observations": rows}
    if shape == "api-trace":
        return {**trace, "observations": rows}
    if shape == "page":
        return {"data": rows, "meta": {"page": 1}}
    return [trace, *rows]


@st.composite
def whowhen_documents(draw: st.DrawFn) -> dict[str, Any]:
    entry = st.fixed_dictionaries(
        {"content": st.one_of(odd_text, json_values), "role": st.one_of(odd_text, json_values)},
        optional={"name": st.one_of(odd_text, json_values), "extra": json_values},
    )
    doc: dict[str, Any] = {
        "history": draw(st.lists(st.one_of(entry, json_values), min_size=1, max_size=5)),
        "mistake_agent": draw(st.one_of(odd_text, json_values)),
        "mistake_step": draw(st.one_of(st.integers(0, 5).map(str), odd_text, odd_number)),
    }
    optional = {
        "mistake_reason": odd_text,
        "question": odd_text,
        "question_ID": st.one_of(uuid_text, odd_text),
        "ground_truth": json_values,
        "is_corrected": st.booleans(),
        "level": odd_text,
        "system_prompt": st.one_of(st.dictionaries(odd_text, odd_text, max_size=3), json_values),
    }
    for key in draw(st.sets(st.sampled_from(sorted(optional)))):
        doc[key] = draw(optional[key])
    return doc


def export_targets(fmt: str, payload: bytes) -> Decoded | None:
    """An export record through its own decoder, and through ``decode_record`` as the
    store calls it."""
    CASES[f"{fmt} decode"] += 1
    try:
        direct = get_format(fmt).decode(payload)
    except FormatError as exc:
        assert str(exc)
        direct = None
    decoded = check_record(f"{fmt} decode_record", RawRecord(payload, fmt, "f", "1"))
    assert (direct is None) == (decoded is None)
    return decoded


def file_targets(payload: bytes, suffix: str) -> None:
    """The bytes as a file, sniffed and split as ``otelcar import`` does, every record
    decoded."""
    CASES["files read_records"] += 1
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"dump{suffix}"
        path.write_bytes(payload)
        for record in read_records(path):
            check_record(f"files {record.format}", record)


@fuzz(80)
@given(langsmith_documents(), st.booleans())
def test_langsmith_shapes(document: Any, ascii_only: bool):
    payload = serialize(document, ascii_only=ascii_only)
    for fmt in ("langsmith-runs", "langsmith-cli"):
        decoded = export_targets(fmt, payload)
        runs = _count_runs(document)
        if decoded is not None:
            # Every run is a span or a reported problem; none vanishes.
            assert len(decoded.spans) + len(decoded.problems) >= runs, (runs, decoded.problems)
    file_targets(payload, ".json")


def _count_runs(document: Any) -> int:
    stack, total = [document], 0
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict) and "run_type" in item:
            total += 1  # a span, or a problem that says why not (its children unread)
            if _is_run(item) and isinstance(item.get("child_runs"), list):
                stack.extend(item["child_runs"])
        elif isinstance(item, dict):
            stack.extend(v for k, v in item.items() if k in ("runs", "items"))
    return total


@fuzz(80)
@given(langfuse_documents(), st.booleans())
def test_langfuse_shapes(document: Any, ascii_only: bool):
    payload = serialize(document, ascii_only=ascii_only)
    export_targets("langfuse", payload)
    file_targets(payload, ".json")


@fuzz(40)
@given(st.lists(langfuse_observations(), min_size=1, max_size=4), st.data())
def test_langfuse_csv(rows: list[dict[str, Any]], data: st.DataObject):
    columns = sorted({key for row in rows for key in row})
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if row.get(c) is None else _cell(row.get(c)) for c in columns])
    payload = out.getvalue().encode("utf-8", "surrogatepass")
    if data.draw(st.booleans()):
        payload = data.draw(mutated_bytes(payload))
    export_targets("langfuse-csv", payload)
    file_targets(payload, ".csv")


def _cell(value: Any) -> str:
    return value if isinstance(value, str) else dumps(value)


@fuzz(50)
@given(whowhen_documents(), st.booleans())
def test_whowhen_shapes(document: dict[str, Any], ascii_only: bool):
    payload = serialize(document, ascii_only=ascii_only)
    decoded = export_targets("whowhen", payload)
    assert decoded is not None and len(decoded.spans) == len(document["history"])
    file_targets(payload, ".json")


@fuzz(40)
@given(st.data())
def test_mutated_langsmith_parquet(data: st.DataObject):
    base = (FIXTURES / "langsmith" / "sdk.bulk_export.parquet").read_bytes()
    payload = data.draw(mutated_bytes(base))
    export_targets("langsmith-parquet", payload)


def _mutated_seed_test(seeds: Callable[[], list[Any]], formats: list[str], data: Any) -> None:
    docs = seeds()
    if not docs:
        pytest.skip("no seed documents")
    payload = data.draw(mutated_tree(data.draw(st.sampled_from(docs))))
    for fmt in formats:
        export_targets(fmt, payload)
    file_targets(payload, ".json")


@fuzz(60)
@given(st.data())
def test_mutated_langsmith_files(data: st.DataObject):
    _mutated_seed_test(langsmith_seeds, ["langsmith-runs", "langsmith-cli"], data)


@fuzz(40)
@given(st.data())
def test_mutated_phoenix_span_exports(data: st.DataObject):
    need(EXTERNAL, "Phoenix span exports")
    _mutated_seed_test(phoenix_seeds, ["phoenix-spans"], data)


@fuzz(60)
@given(st.data())
def test_mutated_langfuse_files(data: st.DataObject):
    _mutated_seed_test(langfuse_seeds, ["langfuse"], data)


@fuzz(40)
@given(st.data())
def test_mutated_real_whowhen_logs(data: st.DataObject):
    need(WHOWHEN, "Who&When logs")
    _mutated_seed_test(whowhen_seeds, ["whowhen"], data)


@fuzz(40)
@given(st.data())
def test_mutated_real_external_otlp(data: st.DataObject):
    need(EXTERNAL, "external OTLP dumps")
    docs = otlp_json_seeds()
    json_targets(data.draw(mutated_tree(data.draw(st.sampled_from(docs)))))


# ------------------------------------------------------------------------------------------
# (d) the store: a mix of good and bad records, then a good import, reindex
# ------------------------------------------------------------------------------------------

GOOD_LINES = (OTLP / "new_content.traces.jsonl").read_bytes().splitlines()


@st.composite
def hostile_records(draw: st.DrawFn) -> RawRecord:
    """One record of any kind: good, mutated, random, or framed with a note."""
    kind = draw(
        st.sampled_from(
            ["good", "json", "json-mutated", "proto", "proto-mutated", "bytes", "export", "note"]
        )
    )
    position = f"{kind} {draw(st.integers(0, 10**6))}"
    if kind == "good":
        return RawRecord(draw(st.sampled_from(GOOD_LINES)), FORMAT_JSON, "fuzz", position)
    if kind == "json":
        payload = serialize(otlp_json(draw(st.one_of(trace_requests(), logs_requests()))))
        return RawRecord(payload, FORMAT_JSON, "fuzz", position)
    if kind == "json-mutated":
        payload = draw(mutated_tree(draw(st.sampled_from(otlp_json_seeds()[:6]))))
        return RawRecord(payload, FORMAT_JSON, "fuzz", position)
    if kind == "proto":
        request = draw(st.one_of(trace_requests(), logs_requests()))
        return RawRecord(request.SerializeToString(), FORMAT_PROTO, "fuzz", position)
    if kind == "proto-mutated":
        payload = draw(mutated_bytes(draw(st.sampled_from(proto_seeds()))))
        return RawRecord(payload, FORMAT_PROTO, "fuzz", position)
    if kind == "bytes":
        fmt = draw(st.sampled_from([FORMAT_JSON, FORMAT_PROTO, FORMAT_UNKNOWN, "langfuse-csv"]))
        return RawRecord(draw(st.binary(max_size=64)), fmt, "fuzz", position)
    if kind == "export":
        fmt, doc = draw(
            st.one_of(
                st.tuples(st.just("langsmith-runs"), langsmith_documents()),
                st.tuples(st.just("langfuse"), langfuse_documents()),
                st.tuples(st.just("whowhen"), whowhen_documents()),
            )
        )
        return RawRecord(serialize(doc), fmt, "fuzz", position)
    return RawRecord(draw(st.binary(max_size=8)), FORMAT_PROTO, "fuzz", position, note="cut")


def check_store(root: Path, records: list[RawRecord]) -> None:
    """Import ``records`` into a fresh store at ``root`` and check it accounts for each."""
    CASES["store import_records"] += 1
    store = Store(root)
    report = store.import_records(records)
    unique = {r.record_id for r in records}
    assert report.records == len(records)
    assert report.imported + report.duplicates + len(report.unparsed) == len(records)
    assert all(p.reason for p in report.unparsed + report.partial)
    table = store.records()
    assert table.height == len(unique)
    assert set(table["record_id"]) == unique
    for row in table.iter_rows(named=True):
        assert row["status"] in ("imported", "partial", "unparsed"), row
        if row["status"] != "imported":
            assert row["reason"], row
    spans = store.derived.scan("spans").collect()
    assert spans.height == sum(table["n_spans"]) == report.spans
    # The store still takes a good import, lists its trace, and rebuilds from raw.
    good = import_files([OTLP / "new_content.traces.jsonl"], store=store)
    assert good.ok
    assert NEW_CONTENT in set(store.traces()["trace_id"])
    rebuilt = store.reindex()
    assert not rebuilt.quarantined
    again = store.records()
    assert sorted(again["record_id"]) == sorted(store.records()["record_id"])
    assert store.derived.scan("spans").collect().height == spans.height + good.spans
    store.steps()


@fuzz(20)
@given(st.lists(hostile_records(), min_size=1, max_size=6), st.randoms(use_true_random=False))
def test_store_accounts_for_every_record(records: list[RawRecord], rng: random.Random):
    if rng.random() < 0.3:
        records = [*records, rng.choice(records)]  # a duplicate within one import
    with tempfile.TemporaryDirectory() as folder:
        check_store(Path(folder) / "store", records)


@fuzz(12)
@given(st.lists(hostile_records(), min_size=1, max_size=4))
def test_store_imports_hostile_files(records: list[RawRecord]):
    """The same, through files the way ``otelcar import`` reads them (sniffed, split)."""
    CASES["store import_files"] += 1
    with tempfile.TemporaryDirectory() as folder:
        paths = []
        for index, record in enumerate(records):
            suffix = ".binpb" if record.format == FORMAT_PROTO else ".jsonl"
            path = Path(folder) / f"dump{index}{suffix}"
            path.write_bytes(record.payload)
            paths.append(path)
        read = list(iter_file_records(paths))
        store = Store(Path(folder) / "store")
        report = import_files(paths, store=store)
        assert report.records == len(read)
        assert report.imported + report.duplicates + len(report.unparsed) == len(read)
        assert all(p.reason for p in report.unparsed)
        assert store.records().height == len({r.record_id for r in read})
        assert import_files([OTLP / "new_content.traces.jsonl"], store=store).ok
        assert NEW_CONTENT in set(store.traces()["trace_id"])
        store.reindex()
