"""The store's derived parts on disk grow with the input, not its square, and read back the same.

Steps parts hold messages as references into a messages part per build
(:mod:`otelcar.store.refs`); spans parts leave big attributes in the raw records
(:mod:`otelcar.store.raw_spans`). What a reader gets is unchanged: the steps table equals the
one built from the rows (what the store kept before, and what the in-memory sink gives), and
the spans table equals the rows of the decoded spans.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from otelcar import Store, import_files
from otelcar.errors import StoreError
from otelcar.ingest.raw import FORMAT_JSON, RawRecord, decode_record
from otelcar.schema import SPANS_SCHEMA
from otelcar.store.derived import LAYOUT_VERSION
from otelcar.store.raw_spans import RECENT
from otelcar.store.refs import (
    MESSAGES_SCHEMA,
    STEPS_FILE_SCHEMA,
    STEPS_PART_SCHEMA,
    encode_steps,
    resolve_messages,
)
from otelcar.store.sink import InMemorySink
from otelcar.store.tables import frame_of, span_rows
from tests.helpers.generated_agent import agent_trace_otlp, write_dump

TRACE = "7" * 32


# -- message references: encode, store, resolve ----------------------------------------------
# No lone surrogates: the decoders replace them before anything is stored.
_text = st.one_of(st.none(), st.text(st.characters(blacklist_categories=("Cs",)), max_size=8))
_call = st.fixed_dictionaries({"id": _text, "name": _text, "arguments": _text})
_message = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["system", "user", "assistant", "tool"]),
        "content": _text,
        "tool_calls": st.one_of(st.none(), st.lists(_call, max_size=2)),
        "tool_call_id": _text,
        "name": _text,
        "reasoning": _text,
    }
)


@st.composite
def _builds(draw: st.DrawFn) -> list[list[dict[str, Any]]]:
    """Step rows of one to three builds, whose message columns take items from a small pool:
    the same objects again (as the mappers share them), equal copies, and missing items."""
    pool = draw(st.lists(_message, min_size=1, max_size=6))

    def item() -> Any:
        choice = draw(st.integers(0, len(pool) + 1))
        if choice == len(pool):
            return None
        if choice == len(pool) + 1:
            return dict(draw(st.sampled_from(pool)))  # an equal message, another object
        return pool[choice]

    def items() -> list[Any] | None:
        size = draw(st.integers(-1, 5))
        return None if size < 0 else [item() for _ in range(size)]

    builds = []
    for build_id in range(1, draw(st.integers(1, 3)) + 1):
        rows = [
            {
                "trace_id": f"{step % 2:032x}",
                "step": step,
                "input_messages": items(),
                "output": item(),
                "alternates": items(),
                "build_id": build_id,
            }
            for step in range(draw(st.integers(0, 6)))
        ]
        builds.append(rows)
    return builds


def _parquet(frame: pl.DataFrame) -> pl.DataFrame:
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    buffer.seek(0)
    return pl.read_parquet(buffer)


@settings(max_examples=80, deadline=None)
@given(_builds())
def test_message_references_read_back_as_the_messages(builds: list[list[dict[str, Any]]]):
    parts = [encode_steps(rows) for rows in builds]
    messages = {
        i + 1: _parquet(p.messages).cast(dict(MESSAGES_SCHEMA)) for i, p in enumerate(parts)
    }
    for part in parts:
        assert part.steps.schema == STEPS_FILE_SCHEMA
        distinct = part.messages["message"].to_list()
        assert len(distinct) == len({json.dumps(m, sort_keys=True) for m in distinct})

    def messages_of(wanted: list[int]) -> tuple[pl.Series, dict[int, int]]:
        starts = {b: sum(messages[a].height for a in wanted if a < b) for b in wanted}
        return pl.concat([messages[b]["message"] for b in wanted]), starts

    stored = pl.concat([_parquet(p.steps) for p in parts]).cast(dict(STEPS_FILE_SCHEMA))
    read = resolve_messages(stored.lazy(), messages_of).collect()
    rows = [row for build in builds for row in build]
    assert_frame_equal(read, frame_of(rows, STEPS_PART_SCHEMA))
    assert_frame_equal(read, pl.DataFrame(rows, schema=STEPS_PART_SCHEMA))
    picked = resolve_messages(stored.lazy(), messages_of).filter(pl.col("step") == 1).collect()
    assert_frame_equal(picked, read.filter(pl.col("step") == 1))


# -- a long trace in a store -------------------------------------------------------------------
def _result(tool: str, choice: str) -> str:
    step = choice.split("-")[1]
    return f"{tool} result {step}: " + " ".join(f"line {step}.{i} of the lookup" for i in range(30))


def _run(turns: int) -> dict[str, Any]:
    """One agent run of ``turns`` tool calls (and a final answer) with ~700-character tool
    results: every chat span carries the whole conversation so far."""
    return agent_trace_otlp(
        TRACE,
        [f"ok-{i}" for i in range(turns)],
        tools=[f"tool_{i % 4}" for i in range(turns)],
        result=_result,
    )


def _derived_bytes(store: Store) -> int:
    """Bytes of the parts that hold a trace's content (spans, steps and their messages)."""
    parts = [store.root / "derived" / table for table in ("spans", "steps", "messages")]
    return sum(path.stat().st_size for part in parts for path in part.glob("*.parquet"))


def _stored(
    tmp_path: Path, turns: int, *, split: bool = False, forget: bool = True
) -> tuple[Store, int]:
    """A store holding a run of ``turns`` turns (with ``split``, imported in two halves: two
    builds, the second rebuilding the trace with the first's spans); its raw bytes. With
    ``forget``, the attributes this process decoded are forgotten after each import, so
    what is left in raw is decoded from the raw records again."""
    entry = _run(turns)
    store = Store(tmp_path / f"store-{turns}-{split}")
    spans = entry["scopeSpans"][0]["spans"]
    halves = [spans[: len(spans) // 2], spans[len(spans) // 2 :]] if split else [spans]
    for number, half in enumerate(halves):
        part = {**entry, "scopeSpans": [{**entry["scopeSpans"][0], "spans": half}]}
        dump = write_dump(tmp_path / f"run-{turns}-{split}-{number}.json", [part])
        assert import_files([dump], store=store).ok
        if forget:
            RECENT.clear()
    raw = sum(store.raw.size(segment) for segment in store.raw.segments())
    return store, raw


def test_a_long_traces_derived_bytes_grow_linearly_with_its_length(tmp_path: Path):
    # Kept whole, the histories made these parts 2.8× as big at twice the length (Parquet's
    # compression folds part of the repetition at these sizes, less and less beyond).
    small, small_raw = _stored(tmp_path, 100)
    large, large_raw = _stored(tmp_path, 200)
    assert large_raw > 3.5 * small_raw  # the records repeat every history: quadratic
    assert _derived_bytes(large) <= 2.3 * _derived_bytes(small)
    assert _derived_bytes(large) < large_raw / 4


def test_a_long_trace_reads_back_as_built_from_its_records(tmp_path: Path):
    store, _ = _stored(tmp_path, 40)
    parts = store.derived.scan("spans").collect()
    assert parts["attributes_in_raw"].sum() > 30  # the chat spans with long histories
    assert (
        parts.filter(pl.col("attributes_in_raw"))["attributes"].null_count()
        == parts.filter(pl.col("attributes_in_raw")).height
    )
    payload = json.dumps({"resourceSpans": [_run(40)]}).encode()
    record = RawRecord(payload=payload, format=FORMAT_JSON, source="run", position="1")
    decoded = decode_record(record)[0].spans
    want = pl.DataFrame(span_rows(decoded), schema=SPANS_SCHEMA).drop("seq", "record_id")
    assert_frame_equal(store.spans(TRACE).drop("seq", "record_id"), want)

    sink = InMemorySink()
    sink.append([record])
    sink.catch_up()
    assert_frame_equal(store.steps(TRACE), sink.steps())
    picked = store.scan_steps().filter(pl.col("step") == 3).select("output").collect()
    assert_frame_equal(picked, sink.steps().filter(pl.col("step") == 3).select("output"))

    for forget in (True, False):  # read back from raw, and from what the import kept
        split, _ = _stored(tmp_path / f"{forget}", 40, split=True, forget=forget)
        assert split.records().height == 2
        assert_frame_equal(split.steps(TRACE), sink.steps())
        assert_frame_equal(split.spans(TRACE).drop("seq", "record_id"), want)


def test_tables_of_an_older_layout_are_refused_until_reindexed(tmp_path: Path):
    store, _ = _stored(tmp_path, 8)
    steps = store.steps()
    state = store.root / "derived" / "state.json"
    data = json.loads(state.read_text())
    state.write_text(json.dumps({**data, "layout": LAYOUT_VERSION - 1}))
    old = Store(store.root, create=False)
    for use in (old.steps, old.traces, old.recover):  # a receiver or an import recovers first
        try:
            use()
        except StoreError as exc:
            assert "otelcar reindex" in str(exc)
        else:
            raise AssertionError(f"{use.__name__} used tables of an older layout")
    report = old.reindex()
    assert report.imported == 1 and not report.quarantined
    assert_frame_equal(Store(store.root, create=False).steps(), steps)
