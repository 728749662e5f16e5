"""What the console keeps between requests (issue 39: the list while long pages render): the
list page drawn again only when the store or ``otelcar.toml`` changed, a source that is not
the local store read every time, and the stamps and the cache (:mod:`otelcar.store.stamp`)
they rest on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from otelcar import Store, import_files
from otelcar.sources import TraceFilter
from otelcar.store.stamp import StampedCache, file_stamp, store_stamp
from otelcar.testing.long_traces import long_conversation

pytest.importorskip("starlette", reason="otelcar ui needs the 'ui' extra")
from starlette.testclient import TestClient

from otelcar.ui import create_app

FIRST, SECOND = "1" * 32, "2" * 32


class CountingStore(Store):
    """The local store, counting how often its trace index is read."""

    reads = 0

    def traces(self, filter: TraceFilter | None = None) -> pl.DataFrame:
        CountingStore.reads += 1
        return super().traces(filter)


def _import(store: Path, trace_id: str, start_s: int) -> None:
    dump = store.parent / f"{trace_id}.json"
    document = long_conversation(2, trace_id=trace_id, start_ns=start_s * 10**9)
    dump.write_text(json.dumps(document), "utf-8")
    import_files([dump], store=Store(store))


@pytest.fixture
def console(tmp_path: Path) -> tuple[TestClient, Path, Path]:
    """(client, store, otelcar.toml) of a console over a store holding trace FIRST."""
    store, config = tmp_path / "store", tmp_path / "otelcar.toml"
    _import(store, FIRST, 1_700_000_000)
    config.write_text("")
    app = create_app(
        open_source=lambda: CountingStore(store),
        runs_dir=tmp_path / "runs",
        config_path=config,
        store_root=store,
    )
    return TestClient(app, base_url="http://127.0.0.1"), store, config


def test_the_list_is_drawn_again_only_when_a_trace_arrives(console) -> None:
    client, store, _config = console
    first = client.get("/traces")
    assert first.status_code == 200 and "1 trace match" in first.text and FIRST in first.text
    reads = CountingStore.reads
    again = client.get("/traces")
    assert again.text == first.text and CountingStore.reads == reads  # kept: no index read
    _import(store, SECOND, 1_700_000_100)
    arrived = client.get("/traces")
    assert "2 traces match" in arrived.text and SECOND in arrived.text
    assert 'data-count="2"' in arrived.text
    # another query is another page; the kept one is still served as it was
    assert SECOND not in client.get("/traces?until=1990-01-01").text
    assert "2 traces match" in client.get("/traces").text


def test_the_list_says_what_is_received_but_not_derived_at_every_request(console) -> None:
    """A receiver's backlog (batches stored, not yet derived) is said on the list as the CLI's
    ``traces`` says it, read at every request though the list itself is kept (issue 40)."""
    from otelcar.importer import iter_file_records

    client, store, _config = console
    assert 'id="pending"' not in client.get("/traces").text
    dump = store.parent / "backlog.json"
    document = long_conversation(2, trace_id=SECOND, start_ns=1_700_000_100 * 10**9)
    dump.write_text(json.dumps(document), "utf-8")
    Store(store).append(list(iter_file_records([dump])))  # durable, not derived
    reads = CountingStore.reads
    waiting = client.get("/traces").text
    assert "MB of received batches are not derived yet" in waiting and 'id="pending"' in waiting
    assert "1 trace match" in waiting and CountingStore.reads == reads  # the list was kept
    Store(store).catch_up()  # what a running `otelcar collect` does
    derived = client.get("/traces").text
    assert 'id="pending"' not in derived and "2 traces match" in derived


def test_a_changed_config_draws_the_list_again(console) -> None:
    client, _store, config = console
    assert client.get("/traces").status_code == 200
    config.write_text("[prices]\nnot-a-model = 'free'\n")  # now a bad [prices] entry
    assert client.get("/traces").status_code == 500


def test_a_relative_time_is_resolved_at_every_request(console) -> None:
    client, _store, _config = console
    assert "0 traces match" in client.get("/traces?since=1h").text  # a 2023 trace
    reads = CountingStore.reads
    client.get("/traces?since=1h")
    assert CountingStore.reads > reads  # the same text, another instant: drawn again


class Remote:
    """A source that is not the local store (as a ``--source`` is): a fixed trace index."""

    where = "remote test source"

    def __init__(self, index: pl.DataFrame, counter: list[int]) -> None:
        self.index, self.counter = index, counter

    def traces(self, filter: TraceFilter | None = None) -> pl.DataFrame:
        self.counter[0] += 1
        return self.index

    def __enter__(self) -> Remote:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def test_a_source_other_than_the_store_is_read_every_time(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _import(store, FIRST, 1_700_000_000)
    index, counter = Store(store).traces(), [0]
    app = create_app(
        open_source=lambda: Remote(index, counter),
        runs_dir=tmp_path / "runs",
        config_path=tmp_path / "absent.toml",
    )
    (tmp_path / "absent.toml").write_text("")
    client = TestClient(app, base_url="http://127.0.0.1")
    assert FIRST in client.get("/traces").text
    read = counter[0]
    assert FIRST in client.get("/traces").text and counter[0] == 2 * read


def test_stamps_follow_the_store_and_files(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _import(store, FIRST, 1_700_000_000)
    before = store_stamp(Store(store))
    assert before is not None and store_stamp(Store(store)) == before
    assert store_stamp(object()) is None
    _import(store, SECOND, 1_700_000_100)
    assert store_stamp(Store(store)) != before
    path = tmp_path / "otelcar.toml"
    assert file_stamp(path) == ("absent",)
    path.write_text("")
    empty = file_stamp(path)
    path.write_text("[prices]\n")
    assert empty != ("absent",) and file_stamp(path) != empty


def test_the_cache_keeps_the_last_used_and_computes_without_a_key() -> None:
    cache: StampedCache = StampedCache(size=2)
    calls: list[Any] = []

    def compute(value: Any) -> Any:
        calls.append(value)
        return value

    assert cache.get("a", lambda: compute(1)) == 1
    assert cache.get("a", lambda: compute(2)) == 1  # kept
    cache.get("b", lambda: compute(3))
    cache.get("a", lambda: compute(4))  # a used last: b goes next
    cache.get("c", lambda: compute(5))
    assert len(cache) == 2 and cache.get("b", lambda: compute(6)) == 6
    assert cache.get(None, lambda: compute(7)) == 7 and cache.get(None, lambda: compute(8)) == 8
    assert calls == [1, 3, 5, 6, 7, 8]


def test_long_pages_are_built_one_at_a_time_while_the_list_answers(
    console, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two trace pages asked at once are built one after the other (``PAGE_BUILDS``), and the
    list is answered while the first is still being built."""
    import threading

    from otelcar.ui import app as console_app

    client, _store, _config = console
    client.get("/traces")  # kept from here on
    release, started = threading.Event(), threading.Semaphore(0)
    building, most = [0], [0]
    real = console_app.trace_page

    def slow_page(*args: Any, **kwargs: Any) -> Any:
        building[0] += 1
        most[0] = max(most[0], building[0])
        started.release()
        release.wait(30)
        building[0] -= 1
        return real(*args, **kwargs)

    monkeypatch.setattr(console_app, "trace_page", slow_page)
    answers: list[int] = []
    pages = [
        threading.Thread(target=lambda: answers.append(client.get(f"/traces/{FIRST}").status_code))
        for _ in range(2)
    ]
    for thread in pages:
        thread.start()
    assert started.acquire(timeout=30)  # one page is being built
    listed = client.get("/traces")  # answered meanwhile
    assert listed.status_code == 200 and FIRST in listed.text and not answers
    release.set()
    for thread in pages:
        thread.join(30)
    assert answers == [200, 200] and most[0] == 1


def test_listed_totals_are_read_only_for_traces_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The list's tokens and cost per trace (``TotalsCache``): kept by trace, build id and
    prices, so after a trace arrives only that trace's steps are read."""
    from otelcar.ui import trace_cache

    read: list[list[str]] = []
    real = trace_cache.page_totals

    def spy(source: Any, ids: list[str], prices: Any) -> Any:
        read.append(sorted(ids))
        return real(source, ids, prices)

    monkeypatch.setattr(trace_cache, "page_totals", spy)
    store = tmp_path / "store"
    _import(store, FIRST, 1_700_000_000)
    kept = trace_cache.TotalsCache()
    first = kept.totals(Store(store), Store(store).traces().to_dicts(), {})
    assert first is not None and set(first) == {FIRST} and read == [[FIRST]]
    assert kept.totals(Store(store), Store(store).traces().to_dicts(), {}) == first
    assert read == [[FIRST]]  # kept: nothing read
    _import(store, SECOND, 1_700_000_100)
    both = kept.totals(Store(store), Store(store).traces().to_dicts(), {})
    assert both is not None and set(both) == {FIRST, SECOND} and both[FIRST] == first[FIRST]
    assert read[-1] == [SECOND]  # only the trace that arrived
    priced = {"gpt-4o": (1.0, 2.0)}
    kept.totals(Store(store), Store(store).traces().to_dicts(), priced)
    assert read[-1] == [FIRST, SECOND]  # other prices: every trace priced again
    remote = [{**row, "build_id": None} for row in Store(store).traces().to_dicts()]
    kept.totals(Store(store), remote, priced)
    kept.totals(Store(store), remote, priced)
    assert read[-2:] == [[FIRST, SECOND], [FIRST, SECOND]]  # no build id: always read
