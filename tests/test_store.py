"""The embedded store: verbatim raw records, dedup, reindex, recovery, incremental traces."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from polars.testing import assert_frame_equal

from otelcar import Store, TraceNotFound, import_files
from otelcar.errors import StoreError
from otelcar.report.imports import import_headline
from tests.conftest import BAD, LEGACY_CONTENT, NEW_CONTENT, OTLP

NEW = [OTLP / "new_content.traces.jsonl", OTLP / "new_content.logs.jsonl"]


def test_raw_records_are_kept_verbatim(store: Store):
    import_files(NEW, store=store)
    frames = [f for seg in store.raw.segments() for f in store.raw.read(seg)]
    payloads = {f.record.payload.strip() for f in frames}
    lines = {line.strip().encode() for path in NEW for line in path.read_text().splitlines()}
    assert payloads == lines
    assert {f.record.source for f in frames} == {str(p) for p in NEW}


def test_importing_the_same_file_twice_duplicates_nothing(store: Store):
    first = import_files(NEW, store=store)
    steps = store.steps(NEW_CONTENT)
    size = sum(store.raw.size(s) for s in store.raw.segments())
    second = import_files(NEW, store=store)
    assert (first.imported, first.duplicates) == (3, 0)
    assert (second.imported, second.duplicates, second.records) == (0, 3, 3)
    assert sum(store.raw.size(s) for s in store.raw.segments()) == size
    assert_frame_equal(store.steps(NEW_CONTENT), steps)
    assert store.traces().height == 1


def test_a_trace_split_over_two_imports_is_rebuilt_whole(store: Store):
    import_files([OTLP / "legacy_content.traces.jsonl"], store=store)
    before = store.steps(LEGACY_CONTENT)
    assert before.filter(before["kind"] == "llm")["content_captured"].to_list() == [False] * 3
    import_files([OTLP / "legacy_content.logs.jsonl"], store=store)
    after = store.steps(LEGACY_CONTENT)
    assert after.filter(after["kind"] == "llm")["content_captured"].to_list() == [True] * 3
    assert store.traces().filter(store.traces()["trace_id"] == LEGACY_CONTENT)["n_logs"][0] == 17


def test_reindex_rebuilds_the_same_tables(store: Store):
    import_files([OTLP], store=store)
    steps, traces = store.steps(), store.traces()
    report = store.reindex()
    assert report.imported > 0
    assert_frame_equal(store.steps(), steps)
    assert_frame_equal(store.traces().drop("build_id"), traces.drop("build_id"))


def test_bad_records_are_kept_with_reasons_and_good_ones_imported(store: Store):
    report = import_files(
        [BAD / "truncated_line.traces.jsonl", BAD / "garbage.pb", BAD / "truncated.binpb"],
        store=store,
    )
    assert report.ok
    assert report.imported == 3  # two good lines and the stream's first frame
    assert len(report.unparsed) == 3
    reasons = {p.reason.split(":")[0] for p in report.unparsed}
    assert reasons == {
        "invalid JSON",
        "truncated frame",
        "unrecognised format (512 bytes starting cd 07 2c d8 be 6f 9f 62 ac 4c 09 c2 82 06 e7 e3)",
    }
    records = store.records()
    assert records.filter(records["status"] == "unparsed").height == 3
    headline = import_headline(report)
    assert headline.startswith("6 records, 3 imported, 3 kept unparsed: ")


def test_nothing_importable_is_not_ok(store: Store):
    report = import_files([BAD / "garbage.pb"], store=store)
    assert not report.ok and report.imported == 0


def test_prefixes_resolve_uniquely(store: Store, tmp_path: Path):
    spans = [
        {"traceId": trace_id, "spanId": "00000000000000a1", "name": "x"}
        for trace_id in ("ab" + "0" * 29 + "1", "ab" + "0" * 29 + "2")
    ]
    dump = tmp_path / "two.json"
    dump.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}))
    import_files([dump, OTLP / "new_content.traces.jsonl"], store=store)
    assert store.resolve(NEW_CONTENT[:6].upper()) == NEW_CONTENT
    with pytest.raises(TraceNotFound, match="no trace id starts with"):
        store.resolve("ffff")
    with pytest.raises(TraceNotFound, match="matches 2 traces"):
        store.resolve("ab")
    assert store.resolve("ab" + "0" * 29 + "2").endswith("2")


def test_interrupted_write_is_quarantined_and_nothing_acknowledged_is_lost(tmp_path: Path):
    store = Store(tmp_path / "s")
    import_files(NEW, store=store)
    segment = store.raw.directory / store.raw.segments()[-1]
    good_size = segment.stat().st_size
    with segment.open("ab") as handle:  # a frame cut short by a crash
        handle.write(b"OCR1\x00\x00\x00\x10partial")
    store = Store(tmp_path / "s")
    report = store.catch_up(recover=True)
    assert len(report.quarantined) == 1
    assert segment.stat().st_size == good_size
    assert list((store.raw.directory / "quarantine").iterdir())
    assert store.steps(NEW_CONTENT).height == 7


def test_derived_tables_are_caught_up_from_raw_after_a_crash(tmp_path: Path):
    store = Store(tmp_path / "s")
    import_files(NEW, store=store)
    expected = store.steps(NEW_CONTENT)
    shutil.rmtree(tmp_path / "s" / "derived")  # as if the process died before deriving
    store = Store(tmp_path / "s")
    store.catch_up()
    assert_frame_equal(store.steps(NEW_CONTENT), expected)


def test_unknown_layout_is_refused(tmp_path: Path):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "STORE").write_text('{"layout": 99}')
    with pytest.raises(StoreError, match="unknown store layout"):
        Store(tmp_path / "s")
    with pytest.raises(StoreError, match="no otelcar store"):
        Store(tmp_path / "none", create=False)


def test_imports_larger_than_one_build_are_split_and_traces_rebuilt_whole(
    store: Store, monkeypatch: pytest.MonkeyPatch
):
    import otelcar.store.store as store_module

    monkeypatch.setattr(store_module, "BUILD_LIMIT_BYTES", 1)  # one build per record
    report = import_files(NEW, store=store)
    assert (report.imported, report.duplicates) == (3, 0)
    assert len(store.derived.parts("spans")) == 2 and len(store.derived.parts("logs")) == 1
    reference = Store(store.root.parent / "reference")
    import_files(NEW, store=reference)
    assert_frame_equal(store.steps(NEW_CONTENT), reference.steps(NEW_CONTENT))


def test_a_build_interrupted_before_its_state_was_saved_is_redone_cleanly(tmp_path: Path):
    from otelcar.importer import iter_file_records

    store = Store(tmp_path / "s")
    import_files([OTLP / "legacy_content.traces.jsonl"], store=store)
    records = list(iter_file_records([OTLP / "new_content.traces.jsonl"]))
    store.append(records)  # durable, not derived yet
    # An interrupted build 2: its parts were written, state.json was not.
    stale = {
        "record_id": [r.record_id for r in records],
        "status": ["imported"] * len(records),
    }
    import polars as pl

    from otelcar.schema import RECORDS_SCHEMA

    frame = pl.DataFrame(
        {name: stale.get(name, [None] * len(records)) for name in RECORDS_SCHEMA.names()},
        schema=RECORDS_SCHEMA,
    )
    path = store.derived.part_path("records", 2)
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.write_parquet(path)
    (store.derived.part_path("logs", 2).parent).mkdir(parents=True, exist_ok=True)
    frame.write_parquet(store.derived.part_path("logs", 2).with_suffix(".bogus"))
    assert store.derived.record_ids() == set(store.records()["record_id"].to_list())
    report = Store(tmp_path / "s").catch_up()
    assert report.duplicates == 0 and report.imported == len(records)
    assert store.steps(NEW_CONTENT).height == 7
    statuses = Store(tmp_path / "s").records()["status"].to_list()
    assert statuses.count("duplicate") == 0


def test_headline_reasons_end_at_a_phrase_never_mid_word(store: Store, tmp_path: Path):
    # A reason's kind stops at the first ':' or ';' outside brackets and quotes, and a long
    # one is cut at a word: "(keys: a, b)" stays whole.
    dump = tmp_path / "jaeger.json"
    dump.write_text(json.dumps({"data": 1, "errors": None}))
    listed = tmp_path / "list.json"
    listed.write_text(json.dumps([1, 2]))
    report = import_files([dump, listed], store=store)
    headline = import_headline(report)
    assert "1× JSON object has no resourceSpans or resourceLogs (keys: data, errors)" in headline
    assert "1× JSON is a list, not an OTLP export object" in headline
    from otelcar.report.imports import REASON_KIND_CHARS, reason_kind

    long = reason_kind("word " * 60)
    assert len(long) <= REASON_KIND_CHARS + 2 and long.endswith("word …")


def test_a_store_reads_what_another_writer_derived_since(tmp_path: Path) -> None:
    """A long-lived reader (the receiver's, a console) sees builds another process committed:
    records, steps, spans and traces alike."""
    reader = Store(tmp_path / "store")
    assert reader.records().height == 0
    writer = Store(tmp_path / "store")  # as another process would open it
    import_files([OTLP / "new_content.traces.jsonl"], store=writer)
    assert reader.records().height == writer.records().height > 0
    assert reader.steps(NEW_CONTENT).height == 7
    assert reader.spans(NEW_CONTENT).height == writer.spans(NEW_CONTENT).height > 0
    assert reader.traces()["trace_id"].to_list() == [NEW_CONTENT]


def test_the_trace_index_grows_by_parts_and_merges_to_the_same_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A build writes only the index rows of the traces it touched (not the whole index
    again); merged every few builds, the index is the one a single import builds, and parts
    a crash left behind after a merge change nothing."""
    import otelcar.store.derived as derived_module
    import otelcar.store.store as store_module

    reference = Store(tmp_path / "reference")
    import_files([OTLP], store=reference)
    monkeypatch.setattr(store_module, "BUILD_LIMIT_BYTES", 1)  # one build per record
    monkeypatch.setattr(derived_module, "TRACES_COMPACT_PARTS", 4)
    store = Store(tmp_path / "s")
    import_files([OTLP], store=store)
    derived = store.derived
    assert derived.state.next_build > 8  # several merges happened
    assert len(derived.parts("traces")) < 4 and (derived.directory / "traces.parquet").exists()
    assert_frame_equal(store.traces().drop("build_id"), reference.traces().drop("build_id"))
    assert_frame_equal(store.steps(), reference.steps())

    monkeypatch.setattr(derived_module, "TRACES_COMPACT_PARTS", 10**6)
    import_files(
        [OTLP / "new_content.traces.jsonl", OTLP / "legacy_content.logs.jsonl"], store=store
    )
    kept = {p.name: p.read_bytes() for p in derived.parts("traces")}
    before = store.traces()
    assert derived.compact_traces(at_least=1) and derived.parts("traces") == []
    for name, data in kept.items():  # a crash between the merge and removing its parts
        (derived.directory / "traces" / name).write_bytes(data)
    assert_frame_equal(Store(tmp_path / "s").traces(), before)
    assert derived.known_traces([NEW_CONTENT, "f" * 32]) == {NEW_CONTENT}
