"""The console's failures page (issues 39 and 41): what triage found as traces arrived, read
from the triage state files in the store (docs/triage.md, format 1) — each triaged trace with
its state, culprit step, cause sentence and report; ``passed`` traces only when asked."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="otelcar ui needs the 'ui' extra")

from starlette.testclient import TestClient

from otelcar.store import Store
from otelcar.triage.queue import TriageQueue
from otelcar.triage.summaries import FailureIndex
from otelcar.ui import create_app
from tests import triage_states


@pytest.fixture(scope="module")
def attribution() -> tuple[dict[str, Any], dict[str, Any]]:
    return triage_states.attribution()


def app(root: Path) -> Any:
    return create_app(
        open_source=lambda: Store(root, create=False),
        runs_dir=root / "runs",
        allowed_hosts=["testserver"],
        store_root=root,
    )


def test_the_failures_page_shows_what_triage_found(tmp_path: Path, attribution) -> None:
    ids = triage_states.write_states(tmp_path, attribution)
    with TestClient(app(tmp_path)) as client:
        page = client.get("/failures")
        assert page.status_code == 200
        listed = re.findall(r'<tr class="failure state-(\w+)">', page.text)
        assert sorted(listed) == ["done", "queued", "skipped"]  # passed only when asked
        step = attribution[0]["culprit"]
        assert f'href="/traces/{ids["done"]}/steps/{step}">step {step}</a>' in page.text
        assert f'<q class="cause">{triage_states.CAUSE}</q>' in page.text
        assert "side effects undeclared" in page.text and "no limits set" in page.text
        assert f'href="/failures/{ids["done"]}">report</a>' in page.text
        assert 'data-count="2"' in page.text  # done and skipped: results to show
        passed = client.get("/failures?state=passed").text
        assert re.findall(r'<tr class="failure state-(\w+)">', passed) == ["passed"]
        assert client.get("/failures?state=bogus").status_code == 400
        report = client.get(f"/failures/{ids['done']}")
        assert report.status_code == 200 and 'id="otelcar-data"' in report.text
        assert 'href="/failures" class="back">' in report.text
        assert client.get(f"/failures/{ids['queued']}").status_code == 404
        assert client.get("/failures/not-a-trace").status_code == 404
        assert client.get("/api/failures/events?count=x").status_code == 400


def test_the_index_reads_a_state_again_only_when_it_changed(
    tmp_path: Path, attribution, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = triage_states.write_states(tmp_path, attribution)
    index = FailureIndex(tmp_path)
    assert index.finished() == 2
    import otelcar.triage.summaries as failures

    reads: list[Path] = []
    real = failures.read_json
    monkeypatch.setattr(failures, "read_json", lambda path: reads.append(path) or real(path))
    assert index.finished() == 2 and reads == []  # nothing changed: nothing read
    queue = TriageQueue(tmp_path)
    state = queue.get(ids["queued"])
    assert state is not None
    queue.put({**state, "state": "done", "reason": None})
    assert index.finished() == 3 and [p.stem for p in reads] == [ids["queued"]]


@pytest.mark.slow
def test_the_failures_page_in_chromium(tmp_path: Path, attribution) -> None:
    """Headless Chromium on ``otelcar ui``: the failures page shows the culprit and the cause,
    its link opens the step, and the page's live stream logs no error."""
    from selenium.webdriver.support.ui import WebDriverWait

    from tests.parts import browser_errors, console_server, headless_chromium

    ids = triage_states.write_states(tmp_path / "store", attribution)
    with console_server(tmp_path / "store") as url, headless_chromium(tmp_path / "chrome") as web:
        web.get(url + "/failures")
        WebDriverWait(web, 10).until(
            lambda d: d.execute_script("return document.documentElement.dataset.ready")
        )
        rows = web.find_elements("css selector", "tr.failure")
        assert len(rows) == 3
        done = web.find_element("css selector", "tr.state-done")
        assert triage_states.CAUSE in done.text and ids["done"][:16] in done.text
        assert web.find_element("css selector", "#new-items").get_attribute("hidden") is not None
        assert browser_errors(web) == []
