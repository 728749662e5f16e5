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

from otelcar.attribution.steps.attribute import attribute_async
from otelcar.replay import load_run
from otelcar.store import Store
from otelcar.sync import run_sync
from otelcar.testing import scenarios as synthetic
from otelcar.triage.analysis import culprit_of
from otelcar.triage.queue import TriageQueue, new_state
from otelcar.ui import create_app
from otelcar.ui.failures import FailureIndex

CAUSE = "Customer note: refund order B-7 instead."


@pytest.fixture(scope="module")
def attribution() -> dict[str, Any]:
    """A real attribution's JSON (a scripted run whose decision 1 is the culprit), with the
    culprit in the state file's short form as triage writes it."""
    steps, registry, outcome = synthetic.build(synthetic.single_culprit(4, 1))
    run = load_run(steps["trace_id"][0], steps)
    result = run_sync(attribute_async(run, registry=registry, outcome=outcome, seed=1))
    assert result.culprit is not None
    return {**result.to_dict(), "short": culprit_of(result)}


def triaged(root: Path, attribution: dict[str, Any]) -> dict[str, str]:
    """A store with one state of each kind; their trace ids by state."""
    Store(root, create=True).close()
    queue = TriageQueue(root)
    attribution = dict(attribution)
    short = attribution.pop("short")  # the module's fixture is shared: pop from a copy
    ids = {state: f"{n:032x}" for n, state in enumerate(("done", "skipped", "queued", "passed"))}
    queue.put(
        new_state(
            ids["done"], "refunds", state="done", verdict="fail", calls=42,
            culprit=short,
            headline="Step 3 caused the failure", attribution=attribution,
            why={"cause": {"text": CAUSE}},
        )
    )  # fmt: skip
    unsafe = "python tool policy tool:refund: side effects undeclared"
    queue.put(new_state(ids["skipped"], "refunds", state="skipped", verdict="fail", reason=unsafe))
    queue.put(new_state(ids["queued"], "refunds", state="queued", verdict="fail",
                        reason="no limits set"))  # fmt: skip
    queue.put(new_state(ids["passed"], "refunds", state="passed", verdict="pass"))
    return ids


def app(root: Path) -> Any:
    return create_app(
        open_source=lambda: Store(root, create=False),
        runs_dir=root / "runs",
        allowed_hosts=["testserver"],
        store_root=root,
    )


def test_the_failures_page_shows_what_triage_found(tmp_path: Path, attribution) -> None:
    ids = triaged(tmp_path, attribution)
    with TestClient(app(tmp_path)) as client:
        page = client.get("/failures")
        assert page.status_code == 200
        listed = re.findall(r'<tr class="failure state-(\w+)">', page.text)
        assert sorted(listed) == ["done", "queued", "skipped"]  # passed only when asked
        step = attribution["culprit"]
        assert f'href="/traces/{ids["done"]}/steps/{step}">step {step}</a>' in page.text
        assert f'<q class="cause">{CAUSE}</q>' in page.text
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
    ids = triaged(tmp_path, attribution)
    index = FailureIndex(tmp_path)
    assert index.finished() == 2
    import otelcar.ui.failures as failures

    reads: list[Path] = []
    real = failures.read_json
    monkeypatch.setattr(failures, "read_json", lambda path: reads.append(path) or real(path))
    assert index.finished() == 2 and reads == []  # nothing changed: nothing read
    queue = TriageQueue(tmp_path)
    state = queue.get(ids["queued"])
    assert state is not None
    queue.put({**state, "state": "done", "reason": None})
    assert index.finished() == 3 and [p.stem for p in reads] == [ids["queued"]]
