"""The CLI end to end (click's CliRunner), JSON outputs validated against schemas/."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from otelcar import STEPS_SCHEMA
from otelcar.cli import cli
from tests.conftest import BAD, LEGACY_CONTENT, NEW_CONTENT, OTLP
from tests.helpers.schemas import validator

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def run(tmp_path: Path):
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(
            cli, ["--store", str(tmp_path / "store"), *args], catch_exceptions=False
        )

    return invoke


def test_import_list_show(run, tmp_path: Path):
    result = run("import", str(OTLP))
    assert result.exit_code == 0, result.output
    assert "kept unparsed" in result.output.splitlines()[0]

    listing = run("traces", "--json")
    traces = json.loads(listing.output)
    validator("traces-list.schema.json").validate(traces)
    assert len(traces) == 6
    new = next(t for t in traces if t["trace_id"] == NEW_CONTENT)
    assert (new["n_steps"], new["n_llm"], new["n_tool"], new["content_captured"]) == (
        7,
        3,
        3,
        "yes",
    )
    assert new["service"] == "refund-agent"

    shown = run("show", NEW_CONTENT[:8], "--json")
    data = json.loads(shown.output)
    validator("show.schema.json").validate(data)
    assert [s["kind"] for s in data["steps"]] == [
        "agent",
        "llm",
        "tool",
        "tool",
        "llm",
        "tool",
        "llm",
    ]
    assert data["steps"][2]["tool_args"] == {"order_id": "A-1001"}

    table = run("show", NEW_CONTENT[:8])
    assert "lookup_order" in table.output and "get_refund_policy" in table.output
    full = run("show", NEW_CONTENT[:8], "--full")
    assert "I want a refund for order A-1001" in full.output

    parquet = tmp_path / "steps.parquet"
    run("show", NEW_CONTENT, "--parquet", str(parquet))
    frame = pl.read_parquet(parquet)
    assert frame.schema == STEPS_SCHEMA and frame.height == 7

    human = run("traces")
    assert NEW_CONTENT in human.output and "refund-agent" in human.output


def test_exit_codes_and_error_messages(run):
    bad = run("import", str(BAD / "garbage.pb"))
    assert bad.exit_code == 1
    assert "0 imported, 1 kept unparsed: 1× unrecognised format" in bad.output
    run("import", str(OTLP / "new_content.traces.jsonl"))
    missing = run("show", "ffff")
    assert missing.exit_code == 2
    assert "error: no trace id starts with 'ffff'" in missing.output
    nofile = run("import", "/nonexistent/dump.jsonl")
    assert nofile.exit_code == 1 and "/nonexistent/dump.jsonl: no such file" in nofile.output


def test_import_reads_every_path_it_can_and_lists_the_others(run, tmp_path):
    """A missing path named beside a good file no longer aborts the run; every path that is
    not read is listed with why, also those found while walking a directory."""
    folder = tmp_path / "dumps"
    folder.mkdir()
    (folder / "good.jsonl").write_bytes((OTLP / "new_content.traces.jsonl").read_bytes())
    (folder / "empty.jsonl").write_bytes(b"")
    (folder / "loop.jsonl").symlink_to(folder / "loop.jsonl")
    (folder / "gone.jsonl").symlink_to(tmp_path / "nowhere.jsonl")
    (folder / "elsewhere").symlink_to(tmp_path, target_is_directory=True)
    result = run(
        "import", "--json", str(tmp_path / "missing.jsonl"), str(folder),
        str(OTLP / "legacy_content.traces.jsonl"),
    )  # fmt: skip
    assert result.exit_code == 1  # a named path could not be read
    report = json.loads(result.output)
    assert {NEW_CONTENT, LEGACY_CONTENT} <= set(report["traces"])
    skipped = report["skipped_paths"]
    reasons = {Path(p["source"]).name: (p["position"], p["reason"]) for p in skipped}
    assert reasons["missing.jsonl"] == ("named", "no such file or directory")
    assert reasons["empty.jsonl"] == ("walked", "empty file")
    assert reasons["loop.jsonl"][0] == "walked" and "cannot be read" in reasons["loop.jsonl"][1]
    assert reasons["gone.jsonl"] == ("walked", "symbolic link to nothing")
    assert reasons["elsewhere"] == ("walked", "symbolic link to a directory (not followed)")


def test_records_and_reindex(run):
    run("import", str(BAD / "truncated_line.traces.jsonl"))
    records = json.loads(run("records", "--json").output)
    assert [r["status"] for r in records] == ["imported", "unparsed", "imported"]
    assert records[1]["reason"].startswith("invalid JSON")
    shown = run("records", "--status", "unparsed")
    assert "line 2" in shown.output
    again = run("reindex", "--json")
    assert json.loads(again.output)["imported"] == 2


def test_import_json_report(run):
    result = run("import", "--json", str(OTLP / "new_content.traces.pb"))
    report = json.loads(result.output)
    assert report["spans"] == 7 and report["traces"] == [NEW_CONTENT]


def test_schema_command_lists_files(run):
    assert run("schema").output.split() == [
        "steps.schema.json",
        "message.schema.json",
        "traces-list.schema.json",
        "show.schema.json",
        "config.schema.json",
        "attribution.schema.json",
        "why.schema.json",
        "fix.schema.json",
        "aggregate.schema.json",
        "timelines-list.schema.json",
        "timeline.schema.json",
        "diff.schema.json",
        "pairs.schema.json",
    ]


def test_version_and_help_load_no_heavy_library():
    """`otelcar --version` starts in the time of click alone: polars, scipy, numpy, grpc,
    rich and the reports load only when a command needs them (the start-up benchmark,
    benchmarks/startup.py, measures the time)."""
    import subprocess
    import sys

    heavy = ("polars", "scipy", "numpy", "grpc", "rich", "otelcar.report", "otelcar.store")
    probe = (
        "import sys\n"
        "from otelcar.cli import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        f"print([m for m in {heavy!r} if m in sys.modules])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, "--version"], capture_output=True, text=True, check=True
    )
    assert done.stdout.splitlines()[-1] == "[]", done.stdout
    assert "otelcar, version" in done.stdout


@pytest.mark.parametrize("command", [["import", "FILE"], ["traces"], ["show", "c2b9546e"]])
def test_store_commands_load_no_replay_or_statistics(command: list[str], tmp_path: Path):
    """`import`, `traces` and `show` need the store, not the attribution stack, the HTML
    reports or scipy: loading those took a second of every `otelcar import` (1.3 s of the
    1.6 s it took on a small file)."""
    import subprocess
    import sys

    heavy = ("scipy", "otelcar.attribution", "otelcar.report.html")
    trace_file = str(OTLP / "new_content.traces.jsonl")
    store = ["--store", str(tmp_path / "store")]
    if command[0] != "import":  # a store to look at, made in another process
        made = subprocess.run(
            [
                sys.executable,
                "-c",
                "from otelcar.cli import main; main()",
                *store,
                "import",
                trace_file,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert made.returncode == 0, made.stderr[-2000:]
    probe = (
        "import sys\n"
        "from otelcar.cli import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit as exit:\n"
        "    assert not exit.code, exit.code\n"
        f"print([m for m in {heavy!r} if m in sys.modules])\n"
    )
    argv = [trace_file if a == "FILE" else a for a in command]
    done = subprocess.run(
        [sys.executable, "-c", probe, *store, *argv], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == "[]", done.stdout[-2000:]


def test_traces_says_what_is_received_but_not_derived(run, tmp_path: Path):
    from otelcar import Store
    from otelcar.importer import iter_file_records

    assert run("import", str(OTLP / "new_content.traces.jsonl")).exit_code == 0
    quiet = run("traces")
    assert "not derived yet" not in quiet.output
    store = Store(tmp_path / "store")
    store.append(list(iter_file_records([OTLP / "legacy_content.traces.jsonl"])))  # no build
    assert store.pending_bytes() > 0
    listing = run("traces", "--json")
    assert len(json.loads(listing.stdout)) == 1  # stdout stays the schema's list
    assert "MB of received batches are not derived yet" in listing.stderr
    assert run("import", str(OTLP / "new_content.traces.jsonl")).exit_code == 0  # derives all
    assert store.pending_bytes() == 0
    assert "not derived yet" not in run("traces").output
    assert len(json.loads(run("traces", "--json").stdout)) == 2


def test_traces_judges_each_recorded_run_with_the_configured_outcome(
    run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """With an [outcome], `otelcar traces` adds the outcome of each recorded run as it was
    recorded (no policy call; a judge outcome is not run); without one, nothing changes."""
    assert run("import", str(OTLP)).exit_code == 0
    config = tmp_path / "judging.toml"
    config.write_text(  # content not captured: no arguments recorded, so no match: pass
        '[outcome]\ntype = "tool_called"\ntool = "issue_refund"\nargs = { order_id = "re:.*" }\n'
    )
    listing = run("traces", "-c", str(config), "--json")
    traces = json.loads(listing.stdout)
    validator("traces-list.schema.json").validate(traces)
    verdicts = {t["trace_id"]: t["outcome"] for t in traces}
    assert verdicts[NEW_CONTENT] == "fail" and verdicts[LEGACY_CONTENT] == "fail"
    assert sorted(set(verdicts.values())) == ["fail", "pass"]
    table = run("traces", "-c", str(config)).output
    assert "outcome" in table and "pass" in table
    assert all("outcome" not in t for t in json.loads(run("traces", "--json").stdout))

    # The default ./otelcar.toml counts too; a judge outcome needs an LLM: shown, not run.
    (tmp_path / "never_judged.py").write_text(
        "def decide(request):\n    raise AssertionError('a policy call was made')\n"
    )
    (tmp_path / "otelcar.toml").write_text(
        '[policies.llm]\ntype = "python"\nfunction = "never_judged:decide"\n'
        '[outcome]\nany = [\n  { type = "tool_called", tool = "issue_refund" },\n'
        '  { type = "judge", question = "Was the refund wrong?" },\n]\n'
    )
    monkeypatch.chdir(tmp_path)
    judged = json.loads(run("traces", "--json").stdout)
    assert {t["outcome"] for t in judged} == {"judge"}

    # An outcome function that raises: error in the column, its reason once on stderr.
    (tmp_path / "broken_outcome.py").write_text("def failed(steps):\n    raise KeyError('x')\n")
    (tmp_path / "otelcar.toml").write_text(
        '[outcome]\ntype = "function"\nfunction = "broken_outcome:failed"\n'
    )
    broken = run("traces", "--json")
    assert broken.exit_code == 0
    assert {t["outcome"] for t in json.loads(broken.stdout)} == {"error"}
    assert "outcome error on 6 trace(s), e.g. " in broken.stderr and "KeyError" in broken.stderr
