"""The receiver's sink interface: the Store and the in-memory sink behave alike, through the
real SDK exporters; the receiver's transport-neutral result is an enum."""

from __future__ import annotations

from pathlib import Path

import pytest
from polars.testing import assert_frame_equal

from otelcar import Store, import_files
from otelcar.ingest.raw import FORMAT_JSON, FORMAT_PROTO, RawRecord
from otelcar.receiver import Receiver, ReceiverConfig
from otelcar.receiver.handling import IntakeResult, handle
from otelcar.receiver.stats import ReceiverStats
from otelcar.receiver.writer import DurableWriter
from otelcar.store.sink import InMemorySink, TraceSink
from tests.conftest import NEW_CONTENT, OTLP
from tests.helpers.otlp_agent import run_sdk_agent

ROOT = Path(__file__).resolve().parents[1]
TRACE_PB = (OTLP / "new_content.traces.pb").read_bytes()


def test_both_sinks_implement_the_interface(tmp_path: Path) -> None:
    assert isinstance(Store(tmp_path / "s"), TraceSink)
    assert isinstance(InMemorySink(), TraceSink)


def test_in_memory_sink_derives_like_the_store(tmp_path: Path) -> None:
    records = [
        RawRecord(TRACE_PB, FORMAT_PROTO, "test", "1", signal="traces"),
        RawRecord(TRACE_PB, FORMAT_PROTO, "test", "2 (a retry)", signal="traces"),
        RawRecord(b"{not json", FORMAT_JSON, "test", "3", signal="traces"),
    ]
    memory, store = InMemorySink(), Store(tmp_path / "store")
    for sink in (memory, store):
        sink.append(records)
        assert sink.pending_bytes() > 0
    got, want = memory.catch_up(), store.catch_up()
    assert memory.pending_bytes() == 0 == store.pending_bytes()
    assert (got.imported, got.duplicates, len(got.unparsed), got.spans) == (
        want.imported,
        want.duplicates,
        len(want.unparsed),
        want.spans,
    )
    assert got.traces == want.traces == {NEW_CONTENT} and got.new_traces == 1
    assert got.unparsed[0].position == "3"
    assert_frame_equal(memory.steps(), store.steps())
    assert len(memory.records()) == 3  # kept verbatim, the unparsed one included
    assert memory.catch_up().imported == 0  # nothing new


def test_receiver_into_memory_via_the_sdk_exporter(tmp_path: Path) -> None:
    sink = InMemorySink()
    receiver = Receiver(sink, ReceiverConfig(grpc_port=0, http_port=0, materialize_every_s=0.1))
    assert receiver.derivation.mode == "thread"  # "auto": no child process for memory
    receiver.start()
    try:
        out = tmp_path / "agent"
        trace_id = run_sdk_agent(receiver.grpc_port, "grpc", out)
    finally:
        receiver.stop()
    from_file = Store(tmp_path / "file")
    import_files([out / "agent.traces.jsonl", out / "agent.logs.jsonl"], store=from_file)
    steps = sink.steps()
    assert_frame_equal(steps.filter(steps["trace_id"] == trace_id), from_file.steps(trace_id))


def test_a_process_derivation_needs_a_store() -> None:
    with pytest.raises(ValueError, match="derived on a thread"):
        Receiver(InMemorySink(), ReceiverConfig(grpc_port=None, http_port=None, derive="process"))


def test_handle_answers_with_an_intake_result() -> None:
    sink = InMemorySink()
    writer = DurableWriter(sink)
    stats = ReceiverStats()
    try:
        ok = handle(
            TRACE_PB, signal="traces", encoding="proto", peer="t", writer=writer, stats=stats
        )
        bad = handle(
            b"\xff\x00junk", signal="traces", encoding="proto", peer="t", writer=writer, stats=stats
        )
    finally:
        writer.close()
    assert ok.result is IntakeResult.OK and ok.intake is not None
    assert bad.result is IntakeResult.INVALID and bad.message
    refusing = DurableWriter(sink, refuse=lambda: "behind")
    try:
        busy = handle(
            TRACE_PB, signal="traces", encoding="proto", peer="t", writer=refusing, stats=stats
        )
    finally:
        refusing.close()
    assert busy.result is IntakeResult.BUSY and "behind" in busy.message
    closed = DurableWriter(sink)
    closed.close()
    gone = handle(TRACE_PB, signal="traces", encoding="proto", peer="t", writer=closed, stats=stats)
    assert gone.result is IntakeResult.UNAVAILABLE
    assert [r.value for r in IntakeResult] == ["ok", "invalid", "busy", "unavailable"]
