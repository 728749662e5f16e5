"""The console at the size of real traces (issue 39): a 500-step trace (250 chat turns, each
chat span carrying the whole conversation so far, as instrumentations record it) read through
the real importer, and the console's smaller defects.

- The trace page shows a page of steps, each context as what it adds to the same agent's
  previous decision (the shared prefix folded, linked to the step's own page), long texts
  clipped with "show all"; tool calls and their results link both ways; error steps are
  marked whatever case the producer wrote; the trace's token totals are shown.
- A run on an unknown trace, or with 0 rollouts, is refused and never kept; the "same
  decision" menu offers only what the run accepts; reports and diffs link back; ``otelcar
  ui --port 0`` says which port it listens on.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

pytest.importorskip("starlette", reason="otelcar ui needs the 'ui' extra")

from starlette.testclient import TestClient

from otelcar.cli import cli
from otelcar.testing.long_traces import long_conversation
from otelcar.ui.runs import SAMES
from otelcar.ui.trace_page import CLIP_CHARS, PAGE_STEPS, clip
from tests.helpers.console import TRACE, app_for, project_fixture  # noqa: F401 (fixture)
from tests.parts import console_server

LONG = "5" * 32


@pytest.fixture(scope="module")
def long_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with the 500-step trace (every 40th tool call failing) and a short one whose
    tool result is 10,000 characters long."""
    root = tmp_path_factory.mktemp("long")
    dump = root / "long.json"
    dump.write_text(json.dumps(long_conversation(250, fail_every=40)), encoding="utf-8")
    wide = root / "wide.json"
    wide.write_text(
        json.dumps(long_conversation(3, trace_id="6" * 32, payload=10_000)), encoding="utf-8"
    )
    store = root / "store"
    done = CliRunner().invoke(cli, ["--store", str(store), "import", str(dump), str(wide)])
    assert done.exit_code == 0, done.output
    return store


@pytest.fixture
def client(long_store: Path) -> Any:
    with TestClient(app_for(long_store)) as test_client:
        yield test_client


def steps_on(html: str) -> list[int]:
    return [int(s) for s in re.findall(r'<details class="step[^"]*" id="step-(\d+)"', html)]


def test_a_long_trace_page_costs_what_the_reader_sees(client: TestClient) -> None:
    first = client.get(f"/traces/{LONG}")
    assert first.status_code == 200
    assert len(first.content) < 1_000_000  # the whole trace drawn was 24 MB
    assert steps_on(first.text) == list(range(PAGE_STEPS))
    assert f"steps 0–{PAGE_STEPS - 1} of 500 · page 1 of 5" in first.text
    assert 'rel="next"' in first.text and 'rel="prev"' not in first.text
    last = client.get(f"/traces/{LONG}?page=5")
    assert steps_on(last.text) == list(range(400, 500))
    assert client.get(f"/traces/{LONG}?page=9").status_code == 200  # clamped to the last
    assert client.get(f"/traces/{LONG}?page=0").status_code == 400
    # each context shows what it adds to the previous decision's: the last one's 500
    # messages are 498 folded and 2 new (the previous action and its result)
    assert "context: 500 messages, 2 new since" in last.text
    assert "… 498 earlier messages, the same as the start of" in last.text
    assert f'href="/traces/{LONG}/steps/499">show the whole context</a>' in last.text


def test_the_step_page_shows_the_whole_context(client: TestClient) -> None:
    page = client.get(f"/traces/{LONG}/steps/499")
    assert page.status_code == 200
    assert page.text.count('<div class="msg">') == 500 + 1  # the context and the answer
    assert "earlier messages" not in page.text
    assert f'href="/traces/{LONG}?page=5#step-499"' in page.text  # back to its page
    assert client.get(f"/traces/{LONG}/steps/500").status_code == 404


def test_calls_and_results_link_both_ways_and_errors_are_marked(client: TestClient) -> None:
    text = client.get(f"/traces/{LONG}").text
    # step 1 calls search; step 2 runs it: each links the other
    assert re.search(r'call_00000</span> · result: <a href="[^"]*#step-2">step 2</a>', text)
    assert re.search(r'called by <a href="[^"]*#step-1">step 1</a> \(call call_00000\)', text)
    failed = re.findall(r'<details class="step failed" id="step-(\d+)"[^>]* open>', text)
    assert failed == ["80"]  # the 40th tool call: status ERROR in the store
    assert 'badge bad">error' in text
    totals = re.search(r'<span id="tokens">(\d+) in / (\d+) out tokens</span>', text)
    assert totals is not None and int(totals.group(1)) > 0 and int(totals.group(2)) > 0


def test_long_texts_are_clipped_with_a_way_to_all_of_it(client: TestClient) -> None:
    text = client.get(f"/traces/{'6' * 32}").text
    hidden = 10_000 - CLIP_CHARS
    assert f"… {hidden} more characters: show all" in text
    full = client.get(f"/traces/{'6' * 32}/steps/2").text
    assert "more characters" not in full
    assert clip("x" * 5, 3).hidden == 2 and clip(None).text is None


def test_runs_on_unknown_traces_or_with_zero_rollouts_are_refused_and_not_kept(
    project: tuple[Path, Path],
) -> None:
    store, config = project
    with TestClient(app_for(store, config)) as client:
        missing = client.post("/traces/ffffffff/runs", data={"kind": "attribute"})
        assert missing.status_code == 404
        for bad in ({"rollouts": "0"}, {"budget": "0"}, {"samples": "1"}):
            refused = client.post(f"/traces/{TRACE}/runs", data={"kind": "attribute", **bad})
            assert refused.status_code == 400 and "at least" in refused.text, bad
        assert client.app.state.runs.runs() == []
    assert "answer" not in SAMES and "judge" in SAMES


def test_port_0_says_the_port_it_listens_on(long_store: Path) -> None:
    with console_server(long_store) as url:  # it reads the port from the line ui prints
        assert not url.endswith(":0")
        assert b"2 traces match" in urllib.request.urlopen(url + "/traces", timeout=5).read()


def test_a_context_the_agent_rewrote_folds_only_what_it_shares(tmp_path: Path) -> None:
    """An agent that drops old turns from its history (a summarising memory): the step's
    context shares only its first two messages with the previous one, so two are folded and
    the rest shown; the next step, back to the whole history, shares two with it."""
    document = long_conversation(5, trace_id="7" * 32)
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    chats = [s for s in spans if s["name"].startswith("chat")]
    attribute = next(a for a in chats[3]["attributes"] if a["key"] == "gen_ai.input.messages")
    history = json.loads(attribute["value"]["stringValue"])
    attribute["value"]["stringValue"] = json.dumps(history[:2] + history[4:])  # turn 0 dropped
    dump = tmp_path / "rewritten.json"
    dump.write_text(json.dumps(document), encoding="utf-8")
    store = tmp_path / "store"
    assert CliRunner().invoke(cli, ["--store", str(store), "import", str(dump)]).exit_code == 0
    with TestClient(app_for(store)) as client:
        text = client.get(f"/traces/{'7' * 32}").text
    contexts = re.findall(r"context: (\d+) messages(?:, (\d+) new since <a[^>]*>step (\d+))?", text)
    assert contexts == [("2", "", ""), ("4", "2", "1"), ("6", "2", "3"), ("6", "4", "5"),
                        ("10", "8", "7")]  # fmt: skip


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """``(store, otelcar.toml)``: two traces of conversation ``conv-1`` (gpt-4o-mini, and a
    model the config prices), one of ``conv-2`` with a model nobody prices."""
    root = tmp_path_factory.mktemp("sessions")
    dumps = []
    for name, trace, model, conversation, start in (
        ("a", "a" * 32, "gpt-4o-mini-2024-07-18", "conv-1", 1),
        ("b", "b" * 32, "acme/house-model-7b", "conv-1", 2),
        ("c", "c" * 32, "mystery-llm", "conv-2", 3),
    ):
        path = root / f"{name}.json"
        document = long_conversation(
            3, trace_id=trace, model=model, conversation=conversation,
            start_ns=start * 10**18,
        )  # fmt: skip
        path.write_text(json.dumps(document), encoding="utf-8")
        dumps.append(str(path))
    store = root / "store"
    assert CliRunner().invoke(cli, ["--store", str(store), "import", *dumps]).exit_code == 0
    config = root / "otelcar.toml"
    config.write_text('[prices]\n"house-model" = { input = 1.0, output = 2.0 }\n', "utf-8")
    return store, config


def test_the_list_shows_tokens_cost_and_session_of_each_trace(sessions) -> None:
    store, config = sessions
    with TestClient(app_for(store, config)) as client:
        text = client.get("/traces").text
    rows = re.findall(
        r'trace-link"><code>(\w)\w*</code>.*?class="num tokens">(\d+)</td>'
        r'<td class="num cost">(.*?)</td><td class="session">(?:<a href="/sessions/([\w-]+)")?',
        text,
        re.S,
    )
    by_trace = {r[0]: r[1:] for r in rows}
    assert set(by_trace) == {"a", "b", "c"}
    assert by_trace["a"][1].startswith("$0.0") and by_trace["a"][2] == "conv-1"
    assert by_trace["b"][1].startswith("$0.0") and "unpriced" not in by_trace["b"][1]  # [prices]
    assert "unpriced" in by_trace["c"][1] and "mystery-llm" in by_trace["c"][1]  # named, not $0
    assert by_trace["c"][2] == "conv-2" and int(by_trace["c"][0]) > 0


def test_a_session_page_lists_its_traces_with_their_totals(sessions) -> None:
    store, config = sessions
    with TestClient(app_for(store, config)) as client:
        page = client.get("/sessions/conv-1")
        assert page.status_code == 200
        listed = re.findall(r'trace-link"><code>(\w)', page.text)
        assert listed == ["a", "b"]  # oldest first
        assert "2 traces of this conversation" in page.text
        trace = client.get(f"/traces/{'a' * 32}").text
        assert 'id="session" href="/sessions/conv-1"' in trace and 'id="cost">$' in trace
        assert client.get("/sessions/nobody").status_code == 404


def test_prices_are_the_longest_key_that_begins_the_model() -> None:
    from otelcar.pricing import PriceError, price_of, prices_from_config

    assert price_of("gpt-4o-mini-2024-07-18") == (0.15, 0.60)  # never gpt-4o's
    assert price_of("openai/gpt-4o") == (2.50, 10.00)
    assert price_of("o1-mini") == (1.10, 4.40) and price_of("mystery") is None
    mine = prices_from_config({"gpt-4o": {"input": 1, "output": 2}})
    assert price_of("gpt-4o-2024-08-06", mine) == (1.0, 2.0)
    for bad in ({"m": {"input": 1}}, {"m": {"input": -1, "output": 1}}, {"m": 3}):
        with pytest.raises(PriceError):
            prices_from_config(bad)


def test_the_span_tree_nests_steps_by_their_spans(client: TestClient) -> None:
    text = client.get(f"/traces/{LONG}").text
    start = text.index('id="span-tree"')
    tree = text[start : text.index("</details>", start)]
    assert tree.count("<li>") == 500  # every step once, on every page
    root = re.search(r'<li><a href="[^"]*#step-0">0</a> <span class="badge">agent</span>', tree)
    assert root is not None and tree.count("<ul>") == 1  # the agent's 499 steps under it
    assert f'href="/traces/{LONG}?page=5#step-499"' in tree


def test_spans_that_name_each_other_as_parents_make_no_cycle() -> None:
    import polars as pl

    from otelcar.ui.trace_page import span_tree

    steps = pl.DataFrame(
        {
            "step": [0, 1, 2],
            "name": ["a", "b", "c"],
            "kind": ["agent", "llm", "tool"],
            "status": [None, "ERROR", None],
            "span_id": ["s0", "s1", "s2"],
            "parent_span_id": ["s1", "s0", "missing"],  # 0 and 1 name each other
        }
    )
    tree = span_tree(steps)
    assert [n["step"] for n in tree] == [0, 2]
    assert [c["step"] for c in tree[0]["children"]] == [1] and tree[0]["children"][0]["error"]


def test_new_traces_are_told_live_while_they_arrive(long_store: Path, tmp_path: Path) -> None:
    """The list's event stream: a trace imported while a page is open (as ``otelcar collect``
    writes them) is told as an ``event: traces`` within seconds; a bad count is refused."""
    import shutil

    store = tmp_path / "store"
    shutil.copytree(long_store, store)
    with console_server(store) as base:
        page = urllib.request.urlopen(base + "/traces", timeout=5).read().decode()
        assert 'data-count="2"' in page
        with urllib.request.urlopen(base + "/api/traces/events?count=2", timeout=20) as stream:
            dump = tmp_path / "new.json"
            dump.write_text(json.dumps(long_conversation(2, trace_id="8" * 32)), "utf-8")
            done = CliRunner().invoke(cli, ["--store", str(store), "import", str(dump)])
            assert done.exit_code == 0, done.output
            lines = []
            while not lines or not lines[-1].startswith("data:"):
                lines.append(stream.readline().decode().strip())
        assert "event: traces" in lines and json.loads(lines[-1][5:]) == {"count": 3, "new": 1}
        try:
            urllib.request.urlopen(base + "/api/traces/events?count=x", timeout=5)
            raise AssertionError("a bad count was accepted")
        except urllib.error.HTTPError as exc:
            assert exc.code == 400


def test_search_finds_the_steps_that_mention_the_text(client: TestClient) -> None:
    """The console's search (the one the MCP server runs): the long trace's failed tool
    calls say "timed out" in their results; the search lists the trace with those steps,
    each linked to the step's own page."""
    page = client.get("/search?q=TIMED OUT")  # case-insensitive
    assert page.status_code == 200
    assert "1 trace mention" in page.text
    hits = [int(n) for n in re.findall(rf'href="/traces/{LONG}/steps/(\d+)">', page.text)]
    # the failed call's step, then every later decision, whose context holds its result
    assert hits == [80, *range(81, 103, 2)]  # the first 12 linked
    assert re.search(r"and (\d+) more", page.text)
    assert "0 traces mention" in client.get("/search?q=no such words here").text
    assert 'id="search-q"' in client.get("/search").text  # an empty query shows the form


def test_a_trace_read_again_only_when_it_changed(tmp_path: Path) -> None:
    """The console's trace cache: the same trace twice is read once; once new spans of it are
    derived (a new build id in its index row), it is read again."""
    from otelcar.store import Store
    from otelcar.ui.trace_cache import TraceCache

    first = long_conversation(2, trace_id="9" * 32)
    dump = tmp_path / "first.json"
    dump.write_text(json.dumps(first), encoding="utf-8")
    store = tmp_path / "store"
    assert CliRunner().invoke(cli, ["--store", str(store), "import", str(dump)]).exit_code == 0
    cache = TraceCache(size=2)
    with Store(store) as source:
        loaded = cache.load(source, "9999")
        assert cache.load(source, "9" * 32) is loaded and len(cache) == 1
    more = long_conversation(1, trace_id="9" * 32, start_ns=1_800_000_000 * 10**9)
    for span in more["resourceSpans"][0]["scopeSpans"][0]["spans"]:  # new spans, same trace
        span["spanId"] = "f" + span["spanId"][1:]
        span["parentSpanId"] = ""
    dump.write_text(json.dumps(more), encoding="utf-8")
    assert CliRunner().invoke(cli, ["--store", str(store), "import", str(dump)]).exit_code == 0
    with Store(store) as source:
        again = cache.load(source, "9" * 32)
    assert again is not loaded and again.steps.height > loaded.steps.height
