"""The live agent's requests kept in the store (issue 43): a passing live check keeps the
tools, tool choice and parameters the agent sent, and a later run of the same trace without
``--agent`` re-decides with them, marked ``live`` and said so.

The store's file (:mod:`otelcar.store.live_requests`) is checked alone: written whole, read
back equal, and never trusted: a damaged, foreign or hostile file is a warning note, and no
trace id names a file outside its folder. Then end to end, on the workflow agent of
``tests/agents`` traced by openai-v2 (which records neither tools nor tool choice):
``otelcar replay TRACE --agent CMD`` keeps them, ``otelcar replay TRACE`` and ``why`` without
the agent use them, and a trace whose recorded decisions changed has its stale steps left
out with a note.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from otelcar.analyses import kept_ready, why_run
from otelcar.cli import cli
from otelcar.live.kept import fingerprint
from otelcar.mcp.runs import RunContext
from otelcar.outcome import outcome_from_config
from otelcar.policies.registry import PolicyRegistry
from otelcar.project_config import ProjectConfig
from otelcar.replay import Environment, Plan, Resample, run_plan
from otelcar.report.notes import step_list, worded
from otelcar.store.live_requests import FOLDER, LiveRequestStore
from otelcar.sync import run_sync
from tests.conftest import ROOT
from tests.helpers.agents import OUTCOMES, Recorded, Seeing
from tests.helpers.sources import StepsSource

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
STEPS = {
    1: {
        "tools": [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}],
        "tool_choice": "required",
        "params": {"temperature": 0.2, "max_tokens": 300},
        "key": "agent#1",
        "fingerprint": "sha256:abc",
    },
    3: {"tools": [], "tool_choice": None, "params": {}},
}


# -- the store's file ------------------------------------------------------------------------
def test_kept_requests_are_read_back_as_they_were_written(tmp_path: Path) -> None:
    store = LiveRequestStore(tmp_path)
    kept = store.save(TRACE, STEPS, command="python agent.py", captured_at="2026-12-04T21:30:00Z")
    assert kept.path == tmp_path / FOLDER / f"{TRACE}.json"
    assert [p.name for p in kept.path.parent.iterdir()] == [kept.path.name]  # no partial left
    read, notes = store.load(TRACE)
    notes = worded(notes)
    assert notes == [] and read is not None
    assert read.steps == STEPS  # step numbers are ints again
    assert (read.command, read.captured_at, read.trace_id) == (
        "python agent.py",
        "2026-12-04T21:30:00Z",
        TRACE,
    )
    assert read.otelcar_version
    assert json.loads(kept.path.read_text())["format"] == 1
    again = store.save(TRACE, {3: STEPS[3]}, command="python agent2.py")  # replaces it whole
    read, _ = store.load(TRACE)
    assert read is not None and read.steps == {3: STEPS[3]} and read.command == "python agent2.py"
    assert again.captured_at.endswith("Z") and "T" in again.captured_at
    assert store.load("ab" * 16) == (None, [])  # none kept: no note
    assert store.forget(TRACE) and not kept.path.exists() and not store.forget(TRACE)


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda d: "{half", "not readable JSON"),
        (lambda d: "[" * 100_000 + "]" * 100_000, "not readable JSON"),
        (lambda d: json.dumps([d]), "not a JSON object"),
        (lambda d: json.dumps({**d, "format": 2}), "its format is 2"),
        (lambda d: json.dumps({**d, "trace_id": "cd" * 16}), "it holds trace"),
        (lambda d: json.dumps({**d, "command": ["rm", "-rf"]}), "its command is not a string"),
        (lambda d: json.dumps({**d, "steps": []}), "its steps are not an object"),
        (lambda d: json.dumps({**d, "steps": {"../1": {}}}), "not a step number"),
        (
            lambda d: json.dumps({**d, "steps": {"1": {**d["steps"]["1"], "tools": "all"}}}),
            "tools is not a list",
        ),
        (
            lambda d: json.dumps({**d, "steps": {"1": {**d["steps"]["1"], "tools": [{}]}}}),
            "each with a name",
        ),
        (
            lambda d: json.dumps({**d, "steps": {"1": {**d["steps"]["1"], "tool_choice": 3}}}),
            "tool_choice is neither",
        ),
        (
            lambda d: json.dumps({**d, "steps": {"1": {**d["steps"]["1"], "params": None}}}),
            "params is not an object",
        ),
        (
            lambda d: json.dumps({**d, "steps": {"1": {**d["steps"]["1"], "key": {"x": 1}}}}),
            "is not a string",
        ),
    ],
)
def test_a_damaged_or_hostile_file_is_a_warning_never_an_error(
    tmp_path: Path, damage: Any, why: str
) -> None:
    store = LiveRequestStore(tmp_path)
    path = store.save(TRACE, STEPS, command="python agent.py").path
    path.write_text(damage(json.loads(path.read_text())), encoding="utf-8")
    kept, notes = store.load(TRACE)
    notes = worded(notes)
    assert kept is None
    assert len(notes) == 1 and notes[0].startswith("warning:"), notes
    assert why in notes[0] and str(path) in notes[0]


def test_an_oversized_or_unreadable_file_is_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LiveRequestStore(tmp_path)
    path = store.save(TRACE, STEPS, command="python agent.py").path
    monkeypatch.setattr("otelcar.store.live_requests.MAX_BYTES", 10)
    kept, notes = store.load(TRACE)
    notes = worded(notes)
    assert kept is None and "over 10" in notes[0]
    monkeypatch.undo()
    path.write_bytes(b"\xff\xfe{")
    kept, notes = store.load(TRACE)
    notes = worded(notes)
    assert kept is None and "not readable JSON" in notes[0]


@pytest.mark.parametrize("trace_id", ["../../etc/passwd", "..", ".", "a/b", "x" * 300, "é"])
def test_no_trace_id_names_a_file_outside_the_folder(tmp_path: Path, trace_id: str) -> None:
    store = LiveRequestStore(tmp_path / "store")
    path = store.path(trace_id)
    assert path.parent == store.folder and path.name.startswith("sha256-")
    store.save(trace_id, STEPS, command="python agent.py")
    kept, notes = store.load(trace_id)
    notes = worded(notes)
    assert notes == [] and kept is not None and kept.trace_id == trace_id
    assert [p.parent for p in (tmp_path / "store").rglob("*.json")] == [store.folder]
    # another id whose digest would differ never reads it
    assert store.load(trace_id + "x") == (None, [])


def test_a_bad_trace_id_or_step_is_refused_on_save(tmp_path: Path) -> None:
    store = LiveRequestStore(tmp_path)
    with pytest.raises(ValueError, match="not a trace id"):
        store.path("")
    with pytest.raises(ValueError, match="step 2: tools"):
        store.save(TRACE, {2: {"tools": [{"name": None}], "params": {}}}, command="a")
    assert not (tmp_path / FOLDER / f"{TRACE}.json").exists()


def test_steps_are_listed_as_ranges() -> None:
    assert step_list([3]) == "step 3"
    assert step_list([1, 2]) == "steps 1, 2"
    assert step_list([4, 1, 2, 3, 7]) == "steps 1–4, 7"


# -- end to end ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cleanup(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    return Recorded("cleanup", "openai-v2", tmp_path_factory.mktemp("kept"))


def _agent_line() -> str:
    return shlex.join([sys.executable, "-m", "tests.agents.run", "cleanup", "--seed", "7"])


def _cli(store: Path, *args: str) -> Any:
    done = CliRunner().invoke(cli, ["--store", str(store), *args], catch_exceptions=False)
    return done


def _sources(document: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [
        (d["tools"]["source"], d["tool_choice"]["source"], d["params"]["source"])
        for d in document["requests"]["decisions"]
    ]


def test_replay_with_the_agent_keeps_its_requests_for_runs_without_it(
    cleanup: Recorded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)  # the agent runs as python -m tests.agents.run; no otelcar.toml
    store = tmp_path / "store"
    assert _cli(store, "import", str(cleanup.path)).exit_code == 0
    trace = cleanup.trace_id

    before = json.loads(_cli(store, "replay", trace, "--json").stdout)
    assert all(tools == "inferred" for tools, _, _ in _sources(before))

    line = _agent_line()
    done = _cli(store, "replay", trace, "--agent", line, "--json")
    assert done.exit_code == 0, done.output
    checked = json.loads(done.stdout)
    assert checked["live"]["reproduced"]
    assert _sources(checked) == [("live", "live", "live")] * 4  # this run, from the agent
    kept_file = store / FOLDER / f"{trace}.json"
    assert kept_file.is_file()
    assert any(f"kept in {kept_file}" in n for n in checked["notes"]), checked["notes"]

    after = json.loads(_cli(store, "replay", trace, "--json").stdout)  # no --agent
    assert _sources(after) == [("live", "live", "live")] * 4
    # the rebuilt agent replays them: its structure is still the detected one, and said so
    assert checked["requests"]["structure"]["source"] == "live"
    assert after["requests"]["structure"]["source"] == "inferred"
    assert any(n.startswith("the re-decided requests are partly inferred") for n in after["notes"])
    offered = [d["tools"]["names"] for d in after["requests"]["decisions"]]
    assert offered == [["list_files"], ["file_info"], ["delete_file", "keep_file"], []]
    choices = [d["tool_choice"]["value"] for d in after["requests"]["decisions"]]
    assert choices == ["required", "required", "auto", None]
    read = [n for n in after["notes"] if "read from the live agent" in n]
    assert len(read) == 1, after["notes"]
    steps = step_list([d["step"] for d in after["requests"]["decisions"]])
    assert read[0].startswith(f"tools, tool choice and parameters of {steps} read from")
    assert f"(`{line}`, captured 20" in read[0] and str(kept_file) in read[0]

    kept_file.unlink()  # forgotten: the rebuilt agent's inferred requests again
    forgotten = json.loads(_cli(store, "replay", trace, "--json").stdout)
    assert _sources(forgotten) == _sources(before)


def _config(store: Path) -> tuple[ProjectConfig, Seeing]:
    policy = Seeing("cleanup")
    registry = PolicyRegistry().register("llm", policy)
    config = ProjectConfig(registry, outcome_from_config(OUTCOMES["cleanup"], registry))
    config.live_requests = LiveRequestStore(store)
    return config, policy


def _keep(cleanup: Recorded, store: Path) -> None:
    """What a passing live check keeps: the agent's requests, as `replay --agent` does."""
    from otelcar.analyses import live_check
    from otelcar.live import AgentCommand

    config, _ = _config(store)
    config.agent_command = AgentCommand.parse(_agent_line(), cwd=ROOT)
    check, _, notes = run_sync(live_check(cleanup.run(), config, seed=0))
    notes = worded(notes)
    assert check.reproduced and any("kept in" in n for n in notes), notes


def test_why_without_the_agent_re_decides_with_its_kept_requests(
    cleanup: Recorded, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    _keep(cleanup, store)
    run = cleanup.run()
    act = run.decisions[2].step
    config, policy = _config(store)
    result = run_sync(why_run(run, config, step=act, seed=1, samples=4))
    assert any("read from the live agent" in n for n in worded(result.notes)), worded(result.notes)
    acting = [r for r in policy.requests if r.step == act]
    assert acting and all(
        [t["name"] for t in r.tools or ()] == ["delete_file", "keep_file"]
        and r.tool_choice == "auto"
        for r in acting
    )

    # without the store's requests, the rebuilt agent offers only the tool it called there
    config.live_requests = LiveRequestStore(tmp_path / "empty")
    ready, notes = kept_ready(run, config)
    notes = worded(notes)
    assert notes == [] and ready is run
    seeing = Seeing("cleanup")
    registry = PolicyRegistry().register("llm", seeing)
    run_plan(ready, Plan((Resample(act),)), Environment(registry), rollouts=1)
    assert [[t["name"] for t in r.tools or ()] for r in seeing.requests if r.step == act] == [
        ["delete_file"]
    ]


def test_kept_requests_that_no_longer_fit_the_trace_are_left_out(
    cleanup: Recorded, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    _keep(cleanup, store)
    run = cleanup.run()
    path = LiveRequestStore(store).path(run.trace_id)
    document = json.loads(path.read_text())
    first, act = run.decisions[0].step, run.decisions[2].step
    assert document["steps"][str(act)]["fingerprint"] == fingerprint(
        run.decisions[2], document["steps"][str(act)]["key"]
    )
    # re-imported with other content: the act step's recorded decision differs, a step is gone
    document["steps"][str(act)]["fingerprint"] = "sha256:" + "0" * 64
    document["steps"]["999"] = document["steps"].pop(str(first))
    path.write_text(json.dumps(document), encoding="utf-8")

    config, _ = _config(store)
    ready, notes = kept_ready(run, config)
    notes = worded(notes)
    stale = [n for n in notes if "no longer fit" in n]
    assert len(stale) == 1 and stale[0].startswith("warning:")
    assert step_list([act, 999]) in stale[0]
    sources = {spec.step: spec.tools.source for spec in ready.requests.decisions}
    assert sources[act] == "inferred" and sources[first] == "inferred"
    assert [s for s, source in sources.items() if source == "live"] == [
        d.step for d in run.decisions if d.step not in (first, act)
    ]
    read = [n for n in notes if "read from the live agent" in n]
    assert len(read) == 1 and step_list([first, act]) not in read[0]


def test_the_console_and_the_mcp_server_use_the_stores_kept_requests(
    cleanup: Recorded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from otelcar.ui.runs import RunManager

    store = tmp_path / "store"
    _keep(cleanup, store)
    run = cleanup.run()
    config, _ = _config(store)
    config.live_requests = None  # as otelcar.toml loads it: the console sets the store's
    monkeypatch.setattr("otelcar.project_config.load_config", lambda path=None: config)
    manager = RunManager(
        tmp_path / "runs",
        open_source=lambda: StepsSource(run.trace_id, cleanup.steps),
        store_root=store,
    )
    started = manager.start("why", run.trace_id, {"step": run.decisions[2].step, "samples": 2})
    ended = manager.wait(started.id, timeout_s=120)
    assert ended.status == "done", ended.error
    assert ended.result is not None
    assert any("read from the live agent" in n for n in ended.result["notes"])

    mcp = RunContext(store).config()
    assert mcp.live_requests is not None and mcp.live_requests.folder == store / FOLDER
