"""``otelcar ui``: the routes through Starlette's TestClient (list filters, sorting and pages
over a 100k-trace index, a trace, 404s, escaping, runs started, cancelled and kept), and the
console in real headless Chromium against ``otelcar ui`` started as a process.

The browser test skips, saying why, only when Chromium or ChromeDriver cannot be found, and
fails instead under ``CI=true`` (tests/parts.py), as the report's browser tests do.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

from otelcar.cli import cli
from otelcar.schema import TRACES_SCHEMA
from otelcar.sources import LoadedTrace, TraceFilter
from otelcar.store import Store
from tests.helpers.console import TRACE, app_for, project_fixture  # noqa: F401 (fixture)
from tests.helpers.generated_agent import agent_trace_otlp, write_dump
from tests.helpers.markup import payload
from tests.helpers.scripted_refund import OUTCOME
from tests.parts import headless_chromium

pytest.importorskip("starlette", reason="otelcar ui needs the 'ui' extra")
from starlette.testclient import TestClient

from otelcar.ui import create_app
from otelcar.ui.listing import TraceQuery, apply_query

ROOT = Path(__file__).resolve().parents[1]
SLOW_POLICY = """
import asyncio
from otelcar.messages import Message

async def decide(request):  # waits as a model server would, without blocking the loop
    await asyncio.sleep(0.02)
    return Message("assistant", "This needs a manager's approval.")
"""
# The same, blocking the run's event loop (a plain function computing for 20 ms).
SLOW_SYNC_POLICY = """
import time
from otelcar.messages import Message

def decide(request):
    time.sleep(0.02)
    return Message("assistant", "This needs a manager's approval.")
"""


@pytest.fixture
def client(project: tuple[Path, Path]) -> Iterator[TestClient]:
    with TestClient(app_for(*project)) as test_client:
        yield test_client


# -- the list ---------------------------------------------------------------------------------
class IndexSource:
    """A trace source over a prepared trace index (no steps): what the list reads."""

    where = "test index"

    def __init__(self, index: pl.DataFrame) -> None:
        self.index = index
        self.filters: list[TraceFilter | None] = []

    def traces(self, filter: TraceFilter | None = None) -> pl.DataFrame:
        self.filters.append(filter)
        return self.index

    def resolve(self, prefix: str) -> str:
        from otelcar.errors import TraceNotFound

        raise TraceNotFound(f"no trace id starts with {prefix!r}")

    def load(self, trace_id: str) -> LoadedTrace:
        raise AssertionError("not used")

    def close(self) -> None:
        pass

    def __enter__(self) -> IndexSource:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def big_index(n: int = 100_000) -> pl.DataFrame:
    """``n`` traces: services a/b/c in turn, trace i starting at second i with i % 7 steps,
    an error in every 10th, dialect genai or openinference in turn."""
    i = pl.int_range(0, n, eager=True)
    frame = pl.DataFrame(
        {
            "trace_id": i.map_elements(lambda v: f"{v:032x}", return_dtype=pl.String),
            "service": i.map_elements(lambda v: "abc"[v % 3], return_dtype=pl.String),
            "root_name": pl.repeat("invoke_agent", n, eager=True),
            "start_ns": i * 10**9,
            "end_ns": i * 10**9 + (i % 5) * 10**6,
            "n_steps": i % 7,
            "n_errors": (i % 10 == 0).cast(pl.Int64),
            "dialects": i.map_elements(
                lambda v: ["genai"] if v % 2 else ["openinference"],
                return_dtype=pl.List(pl.String),
            ),
        }
    )
    return frame.with_columns(
        *(
            pl.lit(0, pl.Int64).alias(c)
            for c in TRACES_SCHEMA
            if c.startswith("n_") and c not in frame.columns
        ),
        pl.lit("full").alias("content_captured"),
        pl.lit(None, pl.Int64).alias("build_id"),
    ).select(list(TRACES_SCHEMA))


def test_list_filters_sorts_and_pages_a_large_index_in_polars():
    index = big_index()
    assert index.schema == TRACES_SCHEMA
    source = IndexSource(index)
    app = create_app(
        open_source=lambda: source, runs_dir=Path("/nonexistent/runs"), allowed_hosts=["testserver"]
    )
    with TestClient(app) as client:
        started = time.perf_counter()
        page = client.get("/traces?service=b&errors=yes&dialect=genai&sort=steps&order=asc&page=3")
        elapsed = time.perf_counter() - started
    assert page.status_code == 200, page.text
    assert elapsed < 3.0, f"{elapsed:.2f} s for one page of 100k traces"
    # Service b is i % 3 == 1, an error is i % 10 == 0, genai is odd i: i % 30 == 10 or 20
    # with i odd — none; so the page says so, and the source got the service pushed down.
    assert "0 traces match" in page.text and "no trace matches" in page.text
    assert source.filters[-1] == TraceFilter(service="b")
    listing = apply_query(index, TraceQuery(service="b", errors="yes", per_page=25, page=2))
    expected = index.filter((pl.col("service") == "b") & (pl.col("n_errors") > 0))
    assert listing.total == expected.height == 3333 and listing.pages == 134
    newest = expected.sort("start_ns", descending=True)["trace_id"].to_list()
    assert [r["trace_id"] for r in listing.rows] == newest[25:50]
    ascending = apply_query(index, TraceQuery(sort="steps", desc=False, per_page=25))
    assert {r["n_steps"] for r in ascending.rows} == {0}
    by_steps = apply_query(index, TraceQuery(sort="steps", per_page=25))
    assert {r["n_steps"] for r in by_steps.rows} == {6}
    clamped = apply_query(index, TraceQuery(dialect="openinference", page=10**6))
    assert clamped.page == clamped.pages == 1000 and len(clamped.rows) == 50
    assert all(r["dialects"] == ["openinference"] for r in clamped.rows)
    since = apply_query(
        index, TraceQuery(since="1970-01-01T00:00:10Z", until="1970-01-01T00:00:20Z")
    )
    assert since.total == 10 and since.rows[0]["start_ns"] == 19 * 10**9
    assert listing.services == ["a", "b", "c"] and listing.dialects == ["genai", "openinference"]


def test_list_page_links_the_trace_and_keeps_the_query_in_sort_and_page_links(client):
    page = client.get("/traces")
    assert page.status_code == 200
    assert f'href="/traces/{TRACE}"' in page.text and "refund-agent" in page.text
    assert "1 trace match" in page.text
    assert "script-src 'sha256-" in page.headers["content-security-policy"]
    assert "http://" not in page.text and "https://" not in page.text  # nothing fetched
    filtered = client.get("/traces?service=refund-agent&sort=steps")
    assert 'href="/traces?service=refund-agent&amp;sort=steps&amp;order=asc"' in filtered.text
    assert "1 trace match" in filtered.text
    assert "0 traces match" in client.get("/traces?service=nobody").text
    assert "0 traces match" in client.get("/traces?errors=yes").text
    assert "0 traces match" in client.get("/traces?until=2000-01-01").text
    bad = client.get("/traces?since=yesterday")
    assert bad.status_code == 400 and "ISO 8601" in bad.text
    assert client.get("/traces?sort=nothing").status_code == 400


# -- one trace --------------------------------------------------------------------------------
def test_trace_page_shows_every_step_message_tool_call_and_result(client):
    page = client.get(f"/traces/{TRACE[:8]}")  # a unique prefix is enough
    assert page.status_code == 200
    text = page.text
    assert [int(s) for s in re.findall(r'id="step-(\d+)"', text)] == list(range(7))
    assert "issue_refund" in text and "Refund R-77 issued for 129.99" in text
    assert "I have issued refund R-77 of $129.99 for order A-1001." in text
    assert "&quot;order_id&quot;: &quot;A-1001&quot;" in text  # arguments, decoded and escaped
    assert text.count('class="bar"') == 7
    assert f'action="/traces/{TRACE}/runs"' in text


def test_unknown_trace_and_run_are_404(client):
    missing_trace = client.get("/traces/ffffffff")
    assert missing_trace.status_code == 404 and "ffffffff" in missing_trace.text
    assert client.get("/runs/20990101-000000-abcdef").status_code == 404
    assert client.get("/runs/..%2F..%2Fetc").status_code == 404
    assert client.get("/results/nothing").status_code == 404


def test_trace_page_lists_kept_timelines_and_links_their_diff(project):
    """A timeline kept with `rollout --save` is listed on its trace's page and its link shows
    where it parts from the recorded run; an unknown name is a 404, a bad one a 400."""
    store, config = project
    plan = ["--resample", "4", "-n", "3", "--save", "again-4"]
    kept = CliRunner().invoke(
        cli, ["--store", str(store), "rollout", TRACE[:8], "-c", str(config), *plan]
    )
    assert kept.exit_code == 0, kept.output
    with TestClient(app_for(store, config)) as client:
        page = client.get(f"/traces/{TRACE}")
        assert page.status_code == 200
        assert 'id="timelines"' in page.text and ">again-4</a>" in page.text
        link = re.search(r'href="(/traces/[^"]+/timelines/[^"]+)"', page.text)
        assert link is not None
        diff = client.get(link.group(1))
        assert diff.status_code == 200, diff.text[:500]
        assert "Where the runs part" in diff.text and "A: again-4" in diff.text
        assert f'href="/traces/{TRACE}" class="back">← the trace in the console' in diff.text
        assert client.get(f"/traces/{TRACE}/timelines/nothing-kept").status_code == 404
        assert client.get(f"/traces/{TRACE}/timelines/..%2Fx").status_code in (400, 404)
        # without a local store the console shows none
        bare = create_app(
            open_source=lambda: Store(store, create=False),
            runs_dir=store / "runs",
            allowed_hosts=["testserver"],
        )
        with TestClient(bare) as other:
            assert 'id="timelines"' not in other.get(f"/traces/{TRACE}").text


def hostile_store(directory: Path) -> tuple[Path, str]:
    """A store holding a trace whose service, agent, model, tools, prompts, results and final
    answer carry markup payloads and invisible characters."""
    trace = "e" * 32
    tools = [payload("tool-a") + "\u202e", payload("tool-b"), payload("tool-c")]
    entry = agent_trace_otlp(
        trace,
        ["ok", "BAD", "ok"],
        tools=tools,
        service=payload("service") + "\x1b]0;title\x07",
        agent=payload("agent"),
        model=payload("model"),
        system=payload("system"),
        user=payload("user"),
        result=lambda tool, choice: payload("result") + choice,
        final=payload("final"),
    )
    dump = write_dump(directory / "hostile.traces.json", [entry])
    store = directory / "hostile-store"
    CliRunner().invoke(cli, ["--store", str(store), "import", str(dump)], catch_exceptions=False)
    return store, trace


def test_hostile_trace_text_is_escaped_as_the_report_escapes_it(tmp_path: Path):
    store, trace = hostile_store(tmp_path)
    with TestClient(app_for(store)) as client:
        for url in ("/traces", f"/traces/{trace}"):
            page = client.get(url)
            assert page.status_code == 200
            html = page.text
            assert html.count("<script") == 1  # the console's own, nothing from the trace
            for tag in ("<img", "<iframe", "<svg onload", "<!--", '<a href="javascript'):
                assert tag not in html, (url, tag)
            assert "&lt;/script&gt;&lt;script&gt;document.title=&#x27;PWNED&#x27;" in html
            assert '<span class="ctl" title="U+001B">\\x1b</span>' in html  # as the report does
            assert "\x1b" not in html and "\u202e" not in html
        # In an attribute value (the service filter's options) the escape is plain text.
        listing = client.get("/traces").text
        option = re.search(r'<option value="([^"]*service[^"]*)"', listing)
        assert option is not None and "\\x1b]0;title\\x07" in option.group(1)


# -- runs -------------------------------------------------------------------------------------
def test_an_attribution_started_from_the_page_runs_is_kept_and_reported(project):
    store, config = project
    with TestClient(app_for(store, config)) as client:
        started = client.post(
            f"/traces/{TRACE}/runs",
            data={"kind": "attribute", "rollouts": "8"},
            follow_redirects=False,
        )
        assert started.status_code == 303
        run_id = started.headers["location"].rsplit("/", 1)[1]
        run = client.app.state.runs.wait(run_id, timeout_s=60)
        assert run.status == "done", run.error
        status = client.get(f"/api/runs/{run_id}").json()
        assert status["status"] == "done" and status["progress"]["done"] > 0
        assert status["cost"]["llm_calls"] > 0 and "result" not in status
        page = client.get(f"/runs/{run_id}").text
        assert 'id="verdict"' in page and run.headline in page
        assert run.result["kind"] == "attribution" and "timeline" in run.result
        report = client.get(f"/results/{run_id}")
        assert report.status_code == 200 and 'id="otelcar-data"' in report.text
        assert f'href="/runs/{run_id}" class="back">← this run in the console' in report.text
        assert run_id in client.get("/results").text
        assert (store / "runs" / f"{run_id}.json").is_file()
    with TestClient(app_for(store, config)) as restarted:  # kept across a restart
        assert run_id in restarted.get("/runs").text
        assert restarted.app.state.runs.get(run_id).headline == run.headline


def test_the_run_form_passes_the_analysis_options_and_refuses_bad_ones(project):
    store, config = project
    with TestClient(app_for(store, config)) as client:
        form = client.get(f"/traces/{TRACE}").text
        for control in ('id="run-mode"', 'id="run-shapley"', 'id="run-same"', 'id="run-forward"'):
            assert control in form, control
        started = client.post(
            f"/traces/{TRACE}/runs",
            data={"kind": "attribute", "mode": "bisect", "no_refute": "1"},
            follow_redirects=False,
        )
        run = client.app.state.runs.wait(started.headers["location"].rsplit("/", 1)[1], 60)
        assert run.status == "done", run.error
        assert run.options == {"mode": "bisect", "no_refute": True}
        assert run.result["mode"] == "bisect" and not run.result.get("refutations")
        why = client.post(
            f"/traces/{TRACE}/runs",
            data={"kind": "why", "step": "4", "samples": "6", "same": "tool+args", "seed": "2"},
            follow_redirects=False,
        )
        done = client.app.state.runs.wait(why.headers["location"].rsplit("/", 1)[1], 60)
        assert done.status == "done", done.error
        assert done.result["same_spec"] == "tool+args" and done.result["step"] == 4
        for bad in ({"mode": "guess"}, {"same": "vibes"}, {"seed": "x"}):
            refused = client.post(f"/traces/{TRACE}/runs", data={"kind": "attribute", **bad})
            assert refused.status_code == 400, bad


@pytest.mark.parametrize("policy", [SLOW_POLICY, SLOW_SYNC_POLICY], ids=["async", "sync"])
def test_a_run_is_cancelled_and_a_bad_one_fails_with_its_message(project, policy: str):
    store, config = project
    module = "slow_sync" if policy is SLOW_SYNC_POLICY else "slow_policy"
    (config.parent / f"{module}.py").write_text(policy)
    config.write_text(config.read_text().replace("agent_policy:decide", f"{module}:decide"))
    with TestClient(app_for(store, config)) as client:
        manager = client.app.state.runs
        run = manager.start("attribute", TRACE, {"rollouts": 500})
        deadline = time.monotonic() + 30
        while manager.get(run.id).done_units < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        asked = time.monotonic()
        cancelled = client.post(f"/runs/{run.id}/cancel", follow_redirects=False)
        assert cancelled.status_code == 303
        ended = manager.wait(run.id, timeout_s=30)
        # Queued rollouts are refused their policy calls (Budget.cancel), so even a policy
        # that blocks the loop stops within a few calls, not after the 500 × 3 queued.
        assert time.monotonic() - asked < 5
        assert ended.status == "cancelled" and 2 <= ended.done_units < 500
        assert manager.get(run.id).status == "cancelled"  # read back from its file
        failed = manager.wait(manager.start("why", "0" * 32).id, timeout_s=30)
        assert failed.status == "failed" and "0000" in failed.error
        assert client.post(f"/traces/{TRACE}/runs", data={"kind": "rm"}).status_code == 400


def test_posts_from_another_site_are_refused(client):
    for headers in ({"origin": "http://evil.example"}, {"sec-fetch-site": "cross-site"}):
        refused = client.post(f"/traces/{TRACE}/runs", data={"kind": "why"}, headers=headers)
        assert refused.status_code == 403
    assert client.app.state.runs.runs() == []
    elsewhere = client.get("/traces", headers={"host": "attacker.example"})
    assert elsewhere.status_code == 400  # not an allowed host name


# -- the browser ------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    with headless_chromium(tmp_path / "chromium-profile") as driver:
        yield driver


def serve(store: Path, config: Path, cwd: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``otelcar ui`` as a process on a free port, once it answers."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "otelcar.cli",
            "--store",
            str(store),
            "ui",
            "--port",
            str(port),
            "-c",
            str(config),
        ],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(url + "/traces", timeout=2).read()
            return process, url
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                output = process.communicate()[0].decode(errors="replace")
                raise AssertionError(f"otelcar ui did not start:\n{output}") from None
            time.sleep(0.2)


def errors_logged(driver: Any) -> list[dict[str, Any]]:
    return [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]


@pytest.mark.slow
def test_console_in_chromium_list_trace_attribution_and_hostile_text(
    browser: Any, project: tuple[Path, Path], tmp_path: Path
):
    from selenium.webdriver.support.ui import Select, WebDriverWait

    store, config = project
    _, hostile_trace = hostile_store(tmp_path)
    CliRunner().invoke(  # the hostile trace in the same store
        cli,
        ["--store", str(store), "import", str(tmp_path / "hostile.traces.json")],
        catch_exceptions=False,
    )
    process, url = serve(store, config, tmp_path)
    try:
        browser.get(url + "/traces")
        assert len(browser.find_elements("css selector", "tr.trace-row")) == 2
        Select(browser.find_element("name", "service")).select_by_visible_text("refund-agent")
        browser.find_element("id", "apply").click()
        WebDriverWait(browser, 10).until(lambda d: "service=refund-agent" in d.current_url)
        rows = browser.find_elements("css selector", "tr.trace-row")
        assert len(rows) == 1
        rows[0].find_element("css selector", "a.trace-link").click()
        WebDriverWait(browser, 10).until(lambda d: TRACE in d.find_element("tag name", "h1").text)
        steps = browser.find_elements("css selector", "details.step")
        assert len(steps) == 7
        Select(browser.find_element("id", "run-kind")).select_by_visible_text("attribute")
        browser.find_element("id", "run-start").click()
        WebDriverWait(browser, 10).until(lambda d: "/runs/" in d.current_url)
        try:  # the page polls the run's progress and reloads when it ended
            WebDriverWait(browser, 60, poll_frequency=0.1).until(
                lambda d: d.find_elements("id", "verdict")
            )
        except Exception:
            page = browser.page_source[-3000:] + str(browser.get_log("browser"))
            raise AssertionError(f"no verdict shown:\n{page}") from None
        verdict = browser.find_element("id", "verdict").text
        assert "culprit" in verdict or "undecided" in verdict or "step" in verdict, verdict
        assert int(browser.find_element("id", "run-done").text) > 0
        assert int(browser.find_element("id", "run-calls").text) > 0
        assert errors_logged(browser) == []  # the polling script ran under the CSP
        browser.find_element("id", "report-link").click()
        WebDriverWait(browser, 10).until(
            lambda d: d.execute_script("return document.documentElement.dataset.ready") == "1"
        )
        assert browser.find_element("id", "verdict").text
        # The hostile trace: every payload shows as text and nothing of it runs.
        browser.get(f"{url}/traces/{hostile_trace}")
        for details in browser.find_elements("css selector", "details"):
            browser.execute_script("arguments[0].open = true", details)
        assert browser.execute_script("return window.__pwned === undefined")
        assert "PWNED" not in browser.title
        created = browser.execute_script(
            "return document.querySelectorAll('img, iframe, object, embed, svg, #pwned, "
            "#pwned-link').length"
        )
        assert created == 0
        text = browser.find_element("id", "steps").text
        assert "</script><script>document.title='PWNED'" in text
        assert '<img src=x onerror="window.__pwned=1">' in text
        assert browser.execute_script("return document.scripts.length") == 1
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def test_the_list_judges_each_recorded_run_when_an_outcome_is_configured(
    project: tuple[Path, Path],
) -> None:
    """With [outcome] in the console's otelcar.toml, an outcome column says which listed runs
    failed (judged as recorded, no policy call); without one there is no column."""
    store, config = project
    with TestClient(app_for(store, config)) as client:
        page = client.get("/traces").text
    assert "<th>outcome</th>" in page
    assert '<td class="outcome-fail"><span class="badge bad">fail</span></td>' in page
    bare = config.parent / "no-outcome.toml"
    bare.write_text(config.read_text().replace(OUTCOME, ""))
    with TestClient(app_for(store, bare)) as client:
        assert "<th>outcome</th>" not in client.get("/traces").text
