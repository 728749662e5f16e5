"""Who&When logs: format detection, one step per history entry, labels kept on the trace.

The 184 real logs are read from ``../shared/data/whowhen`` (beside the clone); tests that need
them skip with a message when it is absent. The synthetic-log tests always run.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from otelcar import Store, import_files
from otelcar.conventions.whowhen import speaker_of, whowhen_labels
from otelcar.errors import FormatError
from otelcar.ingest.exports.whowhen import decode, detect, trace_key
from otelcar.ingest.files import read_records
from otelcar.ingest.formats import derived_id
from tests.conftest import OTLP
from tests.parts import WHOWHEN, need_data

DATA = WHOWHEN
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SUBSETS = ("hand-crafted", "algorithm-generated")

SMALL_LOG: dict[str, Any] = {
    "is_correct": False,
    "question": "What is 6 * 7?",
    "question_ID": "q-1",
    "level": "1",
    "ground_truth": "42",
    "mistake_agent": "Math_Expert",
    "mistake_step": "2",
    "mistake_reason": "It misread the terminal output.",
    "system_prompt": {"Math_Expert": "You do arithmetic.", "Check_Expert": "You verify."},
    "history": [
        {"content": "Task: compute 6 * 7.", "role": "assistant", "name": "Math_Expert"},
        {"content": "exitcode: 0\nCode output: 42", "role": "user", "name": "Computer_terminal"},
        {"content": "The answer is 24.", "role": "assistant", "name": "Math_Expert"},
        {"content": "TERMINATE", "role": "user", "name": "Check_Expert"},
    ],
}


# -- synthetic logs (no dataset needed) -----------------------------------------------------
def test_small_log_maps_each_entry_to_its_step(tmp_path: Path):
    path = tmp_path / "log.json"
    path.write_text(json.dumps(SMALL_LOG, indent=4))
    assert [r.format for r in read_records(path)] == ["whowhen"]
    store = Store(tmp_path / "store")
    report = import_files([path], store=store)
    assert report.imported == 1 and not report.unparsed and not report.partial
    steps = store.steps()
    assert steps["step"].to_list() == [0, 1, 2, 3]
    assert steps["kind"].to_list() == ["llm", "tool", "llm", "llm"]
    assert steps["agent_name"].to_list() == [
        "Math_Expert",
        "Computer_terminal",
        "Math_Expert",
        "Check_Expert",
    ]
    assert steps["trace_id"][0] == derived_id(trace_key(SMALL_LOG), size=16)
    assert steps["tool_result"][1] == "exitcode: 0\nCode output: 42"
    assert steps["output"][2]["content"] == "The answer is 24."
    # One conversation: step 0 is the parent and the episode of every other step.
    root = steps["span_id"][0]
    assert steps["parent_span_id"].to_list() == [None, root, root, root]
    assert set(steps["episode_id"]) == {root}
    # Each agent sees the shared conversation: its own messages as assistant.
    context = [(m["role"], m["name"], m["content"]) for m in steps["input_messages"][3]]
    assert context == [
        ("system", None, "You verify."),
        ("Math_Expert", "Math_Expert", "Task: compute 6 * 7."),
        ("Computer_terminal", "Computer_terminal", "exitcode: 0\nCode output: 42"),
        ("Math_Expert", "Math_Expert", "The answer is 24."),
    ]
    assert [m["role"] for m in steps["input_messages"][2]] == [
        "system",
        "assistant",
        "Computer_terminal",
    ]
    labels = whowhen_labels(steps)
    assert labels["mistake_step"] == 2 and labels["mistake_agent"] == "Math_Expert"
    assert labels["subset"] == "algorithm-generated" and labels["is_correct"] is False
    assert labels["history_length"] == 4 and labels["question_id"] == "q-1"
    assert labels["extra"] == {"system_prompt": SMALL_LOG["system_prompt"]}
    assert steps["attributes"][1:].to_list() == ["{}", "{}", "{}"]


def test_json_lines_of_logs_and_reindex(tmp_path: Path):
    other = {**SMALL_LOG, "mistake_step": "0"}
    path = tmp_path / "logs.jsonl"
    path.write_text(json.dumps(SMALL_LOG) + "\n" + json.dumps(other) + "\n")
    store = Store(tmp_path / "store")
    assert import_files([path], store=store).imported == 2
    before = store.steps().sort("trace_id", "step")
    assert store.traces().height == 2 and before.height == 8
    store.reindex()
    after = store.steps().sort("trace_id", "step")
    assert after.equals(before)


def test_trace_id_is_the_content_not_the_formatting():
    compact = decode(json.dumps(SMALL_LOG).encode())
    pretty = decode(json.dumps(SMALL_LOG, indent=2, sort_keys=True).encode())
    assert [s.span_id for s in compact.spans] == [s.span_id for s in pretty.spans]
    assert compact.spans[0].trace_id == pretty.spans[0].trace_id
    other = decode(json.dumps({**SMALL_LOG, "mistake_step": "3"}).encode())
    assert other.spans[0].trace_id != compact.spans[0].trace_id
    assert [s.start_ns for s in compact.spans] == sorted({s.start_ns for s in compact.spans})


def test_hand_crafted_roles_name_the_speaker():
    assert speaker_of("Orchestrator (-> WebSurfer)", None).name == "Orchestrator"
    assert speaker_of("Orchestrator (-> WebSurfer)", None).channel == "-> WebSurfer"
    assert speaker_of("human", None).kind == "human"
    assert speaker_of("ComputerTerminal", None).kind == "environment"
    assert speaker_of("user", "Computer_terminal").kind == "environment"
    assert speaker_of("user", "Verification_Expert").kind == "agent"


def test_bad_entries_keep_their_step_and_bad_logs_are_refused():
    log = {**SMALL_LOG, "history": [*SMALL_LOG["history"][:2], "stray text", {"content": "x"}]}
    decoded = decode(json.dumps(log).encode())
    assert len(decoded.spans) == 4
    with pytest.raises(FormatError, match="history"):
        decode(json.dumps({**SMALL_LOG, "history": []}).encode())
    with pytest.raises(FormatError, match="JSON object"):
        decode(b"[1, 2]")


def test_steps_of_unknown_entries_say_why(tmp_path: Path):
    log = {**SMALL_LOG, "history": [*SMALL_LOG["history"][:2], {"content": "x"}]}
    path = tmp_path / "log.json"
    path.write_text(json.dumps(log))
    store = Store(tmp_path / "store")
    import_files([path], store=store)
    steps = store.steps()
    assert steps.height == 3 and steps["kind"][2] == "other"
    assert "no role or name" in steps["issues"][2][0]


def test_detection_is_specific():
    assert detect(SMALL_LOG)
    assert not detect({"history": SMALL_LOG["history"]})  # no Who&When key
    assert not detect({**SMALL_LOG, "history": []})
    assert not detect({"mistake_agent": "x", "history": [{"text": "no role"}]})
    assert not detect({"resourceSpans": []})
    langsmith = {"id": "1", "trace_id": "1", "run_type": "llm", "inputs": {}, "outputs": {}}
    langfuse = {"trace": {"id": "t"}, "observations": [{"id": "o", "type": "GENERATION"}]}
    assert not detect(langsmith) and not detect(langfuse)


def test_otlp_fixtures_are_not_claimed():
    files = [p for p in OTLP.rglob("*") if p.suffix in (".json", ".jsonl", ".gz")]
    assert files
    for path in files:
        assert "whowhen" not in {r.format for r in read_records(path)}, path
    for path in OTLP.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            assert not detect(json.loads(line)), path


def test_no_committed_fixture_is_claimed():
    """Every JSON fixture of any format (OTLP, LangSmith, Langfuse, ...): first value."""
    for path in sorted(FIXTURES.rglob("*.json*")):
        if path.suffix not in (".json", ".jsonl"):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for candidate in (text, text.split("\n", 1)[0]):
            try:
                value = json.loads(candidate)
            except ValueError:
                continue
            assert not detect(value), path
            break


def test_labels_need_one_whowhen_trace(tmp_path: Path):
    store = Store(tmp_path / "store")
    import_files([OTLP / "new_content.traces.jsonl"], store=store)
    with pytest.raises(ValueError, match="no Who&When labels"):
        whowhen_labels(store.steps())
    with pytest.raises(ValueError, match="one trace"):
        whowhen_labels(store.steps().clear())


# -- the 184 real logs ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dataset() -> Path:
    need_data(DATA / SUBSETS[0])
    return DATA


@pytest.fixture(scope="module")
def imported(dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Store:
    """All 184 logs imported into one store (a few seconds)."""
    store = Store(tmp_path_factory.mktemp("whowhen") / "store")
    started = time.perf_counter()
    report = import_files([dataset / subset for subset in SUBSETS], store=store)
    elapsed = time.perf_counter() - started
    assert report.imported == 184, report
    assert not report.unparsed and not report.partial and not report.rejected_items
    print(f"imported 184 Who&When logs in {elapsed:.2f} s")
    return store


def _log(dataset: Path, name: str) -> tuple[dict[str, Any], str]:
    doc = json.loads((dataset / name).read_text(encoding="utf-8"))
    return doc, derived_id(trace_key(doc), size=16)


#: The history entry's text as the steps table holds it (tool result, else the message).
ENTRY_TEXT = (
    pl.when(pl.col("kind") == "tool")
    .then(pl.col("tool_result"))
    .otherwise(pl.col("output").struct.field("content"))
)


def test_every_log_imports_with_one_step_per_history_entry(dataset: Path, imported: Store):
    assert set(imported.records()["format"]) == {"whowhen"}
    by_trace = imported.steps().partition_by("trace_id", as_dict=True)
    traces = imported.traces()
    assert traces.height == 184
    for subset in SUBSETS:
        for path in sorted((dataset / subset).glob("*.json")):
            doc, trace_id = _log(dataset, f"{subset}/{path.name}")
            steps = by_trace[(trace_id,)].sort("step")
            history = doc["history"]
            assert steps["step"].to_list() == list(range(len(history))), path
            texts = steps.select(ENTRY_TEXT)[:, 0].to_list()
            assert texts == [e["content"] for e in history], path
            labels = whowhen_labels(steps)
            assert labels["mistake_agent"] == doc["mistake_agent"], path
            assert labels["mistake_step"] == int(doc["mistake_step"]), path
            assert labels["mistake_reason"] == doc["mistake_reason"], path
            assert labels["ground_truth"] == doc["ground_truth"], path
            assert labels["subset"] == subset, path
            assert labels["history_length"] == len(history), path
            llm = steps.filter(pl.col("kind") == "llm").select(
                "step",
                shared=pl.col("input_messages")
                .list.eval(pl.element().struct.field("role") != "system")
                .list.sum(),
            )
            assert llm["shared"].to_list() == llm["step"].to_list(), path  # all entries before
            assert steps["issues"].list.len().sum() == 0, path
    assert traces["n_steps"].sum() == 4092


def test_hand_crafted_rows(dataset: Path, imported: Store):
    doc, trace_id = _log(dataset, "hand-crafted/1.json")
    steps = imported.steps(trace_id)
    first = steps.row(0, named=True)
    assert (first["kind"], first["name"], first["agent_name"]) == ("other", "human", None)
    assert first["output"]["role"] == "user"
    assert first["output"]["content"].startswith("Where can I take martial arts classes")
    order = steps.row(3, named=True)
    assert (order["kind"], order["name"], order["agent_name"]) == (
        "llm",
        "Orchestrator (-> WebSurfer)",
        "Orchestrator",
    )
    assert order["output"]["content"] == (
        "Please search for martial arts schools or studios near the New York Stock Exchange "
        "and provide a list of their names and addresses."
    )
    surfer = steps.row(4, named=True)
    assert [(m["role"], m["name"]) for m in surfer["input_messages"]] == [
        ("user", "human"),
        ("Orchestrator", "Orchestrator (thought)"),
        ("Orchestrator", "Orchestrator (thought)"),
        ("Orchestrator", "Orchestrator (-> WebSurfer)"),
    ]
    assert [m["role"] for m in order["input_messages"]] == ["user", "assistant", "assistant"]
    labelled = steps.row(int(doc["mistake_step"]), named=True)
    assert labelled["agent_name"] == doc["mistake_agent"] == "WebSurfer"
    assert set(steps["kind"]) == {"other", "llm"}


def test_algorithm_generated_rows(dataset: Path, imported: Store):
    doc, trace_id = _log(dataset, "algorithm-generated/1.json")
    steps = imported.steps(trace_id)
    assert steps["kind"].to_list() == ["llm", "tool", "llm", "tool", "llm", "llm"]
    assert steps["agent_name"].to_list() == [
        "Excel_Expert",
        "Computer_terminal",
        "BusinessLogic_Expert",
        "Computer_terminal",
        "DataVerification_Expert",
        "DataVerification_Expert",
    ]
    opening = steps.row(0, named=True)
    assert [m["role"] for m in opening["input_messages"]] == ["system"]
    assert opening["input_messages"][0]["content"] == doc["system_prompt"]["Excel_Expert"]
    terminal = steps.row(3, named=True)
    assert (terminal["kind"], terminal["tool_name"]) == ("tool", "Computer_terminal")
    assert terminal["tool_result"] == "exitcode: 0 (execution succeeded)\nCode output: 4\n"
    assert steps["output"][5]["content"] == "TERMINATE"
    last = steps.row(5, named=True)
    assert [m["role"] for m in last["input_messages"]] == [
        "system",
        "Excel_Expert",
        "Computer_terminal",
        "BusinessLogic_Expert",
        "Computer_terminal",
        "assistant",
    ]
    labels = whowhen_labels(steps)
    assert (labels["mistake_agent"], labels["mistake_step"]) == ("Excel_Expert", 0)
    assert labels["level"] == "2" and labels["is_correct"] is False
    assert set(labels["extra"]) == {"system_prompt"}
