"""One trace's content decoded once (:mod:`otelcar.conventions.memo`) changes nothing but time.

* Every fixture of every producer and every third-party trace in ``../shared/data/external``
  is imported twice, with the memo and with it switched off; the steps tables must be equal
  (every column, issues and their order included).
* ``TraceMemo.loads_value`` must give what ``jsontext.loads_value`` gives (the value, or a
  ``ValueError`` with the same message) for any text, notably texts that extend an array
  decoded before in every way JSON allows and in ways it does not (fuzzed with hypothesis).
* A history of ``n`` turns decodes each message once: the characters handed to the JSON
  reader grow with the distinct content, not with its ``n`` repetitions.
* The steps table built from each distinct message once (``tables.frame_of``) equals the
  table built row by row.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import otelcar.conventions.memo as memo_module
import otelcar.store.tables as tables
import otelcar.trajectory as trajectory
from otelcar import Store, import_files
from otelcar.conventions.memo import TraceMemo, current, decode_json, derived_each, trace_memo
from otelcar.ingest.frames import SpanFrame
from otelcar.ingest.jsontext import loads_value
from otelcar.store.derived import TABLES
from otelcar.store.tables import frame_of
from otelcar.trajectory import build_trace
from tests.parts import EXTERNAL, need_data

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"


def _trace_files(folder: Path) -> list[Path]:
    skip = {".md", ".py", ".txt"}
    return [
        p
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.suffix not in skip and p.name != "expected.json"
    ]


def _steps(files: list[Path], root: Path) -> pl.DataFrame:
    store = Store(root)
    import_files(files, store=store)
    return store.steps().sort("trace_id", "step")


def _assert_same_with_and_without_memo(
    files: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_memo = _steps(files, tmp_path / "with")
    with monkeypatch.context() as patch:
        patch.setattr(trajectory, "trace_memo", contextlib.nullcontext)
        without = _steps(files, tmp_path / "without")
    assert with_memo.height == without.height > 0
    for column in with_memo.columns:
        assert with_memo[column].to_list() == without[column].to_list(), column


def test_fixtures_build_the_same_steps_with_and_without_the_memo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _assert_same_with_and_without_memo(_trace_files(FIXTURES), tmp_path, monkeypatch)


def test_third_party_traces_build_the_same_steps_with_and_without_the_memo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need_data(EXTERNAL)
    _assert_same_with_and_without_memo(_trace_files(EXTERNAL), tmp_path, monkeypatch)


def _plain(text: str) -> tuple[str, object]:
    try:
        return "value", loads_value(text)
    except ValueError as exc:
        return "error", str(exc)


def _memo(memo: TraceMemo, text: str) -> tuple[str, object]:
    try:
        return "value", memo.loads_value(text)
    except ValueError as exc:
        return "error", str(exc)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
separators = st.sampled_from([(",", ":"), (", ", ": "), (" ,\n ", ":")])
# What may follow an array's items: more items, nothing, or text JSON does not allow there.
tails = st.one_of(
    st.lists(json_values, min_size=1, max_size=3).map(
        lambda items: "," + ",".join(json.dumps(i) for i in items) + "]"
    ),
    st.sampled_from(["]", " ]\n", ",]", ", ]", "0]", "1, 2]", ",", "]]", "],[1]", ',"\\ud800"]']),
    st.text(max_size=6),
)


@settings(max_examples=300, deadline=None)
@given(
    first=st.lists(json_values, max_size=4),
    separator=separators,
    tail=tails,
    repeat=st.booleans(),
)
def test_memo_decodes_like_loads_value(
    first: list[object], separator: tuple[str, str], tail: str, repeat: bool
) -> None:
    earlier = json.dumps(first, separators=separator, ensure_ascii=False)
    later = earlier.rstrip()[:-1] + tail
    memo = TraceMemo()
    assert _memo(memo, earlier) == _plain(earlier)
    assert _memo(memo, later) == _plain(later), (earlier, later)
    if repeat:  # the same texts again: served from the memo
        assert _memo(memo, later) == _plain(later)
        assert _memo(memo, earlier) == _plain(earlier)


def test_memo_hands_out_containers_its_readers_may_change() -> None:
    memo = TraceMemo()
    first = memo.loads_value('[{"a": 1}, 2]')
    first.append("mine")
    first[0]["b"] = "not copied: items are shared read-only"
    again = memo.loads_value('[{"a": 1}, 2]')
    assert len(again) == 2
    extended = memo.loads_value('[{"a": 1}, 2, 3]')
    assert len(extended) == 3 and extended[0] is again[0]


def test_a_history_is_decoded_once_whatever_its_length(monkeypatch: pytest.MonkeyPatch) -> None:
    decoded: list[int] = []

    def counting(text: str) -> object:
        decoded.append(len(text))
        return loads_value(text)

    monkeypatch.setattr(memo_module, "loads_value", counting)
    history: list[dict] = []
    spans = []
    for turn in range(60):
        history.append({"role": "user", "parts": [{"type": "text", "content": f"q{turn} " * 40}]})
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps(history),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": f"a{turn}"}]}]
            ),
        }
        spans.append(
            SpanFrame(
                trace_id="t" * 32,
                span_id=f"{turn + 1:016x}",
                parent_span_id=None,
                name="chat m",
                kind="CLIENT",
                start_ns=turn,
                end_ns=turn + 1,
                attributes=attributes,
                seq=turn,
            )
        )
        history.append(json.loads(attributes["gen_ai.output.messages"])[0])
    build = build_trace("t" * 32, spans)
    last = spans[-1].attributes["gen_ai.input.messages"]
    assert len(build.steps) == 60
    assert build.steps[-1]["input_messages"][0]["content"] == history[0]["parts"][0]["content"]
    # Without the memo the reader would get every history whole: about 30× the last one.
    assert sum(decoded) < 2 * len(last) + sum(
        len(s.attributes["gen_ai.output.messages"]) for s in spans
    )


def test_derived_each_computes_once_per_object_and_position() -> None:
    calls: list[tuple[int, str]] = []

    def compute(index: int, item: str) -> str:
        calls.append((index, item))
        return f"{index}:{item}"

    a, b, c = "a" * 3, "b" * 3, "c" * 3
    with trace_memo():
        assert derived_each("k", [a, b], compute) == ["0:aaa", "1:bbb"]
        assert derived_each("k", [a, b, c], compute) == ["0:aaa", "1:bbb", "2:ccc"]
        assert derived_each("k", [b], compute) == ["0:bbb"]  # another position: computed
        assert derived_each("k", [a, b, c], compute) == ["0:aaa", "1:bbb", "2:ccc"]
        assert derived_each("other", [a], compute) == ["0:aaa"]
    assert calls == [(0, a), (1, b), (2, c), (0, b), (0, a)]
    assert current() is None
    calls.clear()
    assert derived_each("k", [a, a], compute) == ["0:aaa", "1:aaa"]  # no memo: every time
    assert decode_json("[1]") == [1]
    assert len(calls) == 2


def _rows_of(files: list[Path], root: Path) -> list[dict]:
    from otelcar.store.tables import span_from_row

    store = Store(root)
    import_files(files, store=store)
    rows: list[dict] = []
    for trace_id in store.traces()["trace_id"].to_list():
        spans = [span_from_row(r) for r in store.spans(trace_id).to_dicts()]
        rows.extend(build_trace(trace_id, spans).steps)
    for row in rows:
        row["build_id"] = 0
    return rows


@pytest.mark.parametrize("folder", [FIXTURES, EXTERNAL], ids=["fixtures", "external"])
def test_steps_frame_from_shared_items_equals_the_row_by_row_frame(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need_data(folder)
    rows = _rows_of(_trace_files(folder), tmp_path / "store")
    # Mixed on purpose: no list, an empty one, and lists of unshared copies.
    rows[0]["input_messages"], rows[1]["input_messages"] = None, []
    rows[2]["alternates"] = [dict(m) for m in rows[2]["input_messages"] or []]
    schema = TABLES["steps"]
    repeated = rows * 3  # every list item shared three times: gathered whatever the minimum
    for minimum in (tables.SHARED_ITEMS_MIN, 0):
        monkeypatch.setattr(tables, "SHARED_ITEMS_MIN", minimum)
        for some in (rows, repeated, rows[:1], []):
            assert frame_of(some, schema).equals(pl.DataFrame(some, schema=schema))
