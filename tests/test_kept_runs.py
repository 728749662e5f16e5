"""Kept runs: one folder and one record shape for the console's and the MCP server's runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from otelcar.kept_runs import (
    RUN_ID,
    RunNotFound,
    kept_runs,
    new_run_id,
    read_run,
    runs_dir,
    save_run,
)
from otelcar.mcp import results
from otelcar.store import Store
from otelcar.ui.runs import Run, RunManager


def test_ids_are_made_and_checked_here(tmp_path: Path) -> None:
    run_id = new_run_id("why")
    assert RUN_ID.match(run_id) and run_id.startswith("why-")
    with pytest.raises(ValueError, match="unknown run kind"):
        new_run_id("rm")
    for bad in ("../../etc/passwd", "why-x", "", "attribute-20990101T000000Z-abc"):
        with pytest.raises(RunNotFound):
            read_run(tmp_path, bad)
    with pytest.raises(ValueError, match="not a run id"):
        save_run(tmp_path, {"id": "../x"})


def test_a_console_run_is_listed_and_read_by_the_mcp_server(tmp_path: Path) -> None:
    store = tmp_path / "store"
    manager = RunManager(runs_dir(store), open_source=lambda: Store(store))
    ui_run = Run(new_run_id("attribute"), "attribute", "ab" * 16, {"rollouts": 8})
    ui_run.status, ui_run.finished = "done", ui_run.started + 1
    ui_run.result = {"verdict": "culprit", "culprit": 4, "question": "failure", "cost": {}}
    manager._save(ui_run)
    mcp_record = results.save_result(
        store,
        kind="why",
        trace_id="cd" * 16,
        arguments={"samples": 10},
        result={"verdict": "cause", "step": 4, "headline": "the sentence", "cost": {}},
        started=ui_run.started + 5,
    )
    listed = results.list_results(store)
    assert [r["id"] for r in listed] == [mcp_record["id"], ui_run.id]  # newest first
    assert listed[1]["headline"] == "culprit: step 4 caused the failure"
    assert results.read_result(store, ui_run.id)["options"] == {"rollouts": 8}
    assert [r.id for r in manager.runs()] == [mcp_record["id"], ui_run.id]
    assert manager.get(mcp_record["id"]).headline == "the sentence"


def test_damaged_or_foreign_files_are_not_runs(tmp_path: Path) -> None:
    good = {"id": new_run_id("fix"), "kind": "fix", "trace_id": "ef" * 16, "started": 1.0}
    save_run(tmp_path, good)
    (tmp_path / f"{new_run_id('fix')}.json").write_text("{half", encoding="utf-8")
    (tmp_path / "notes.json").write_text("{}", encoding="utf-8")
    assert [r["id"] for r in kept_runs(tmp_path)] == [good["id"]]
    assert kept_runs(tmp_path / "absent") == []
