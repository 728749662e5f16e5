"""``otelcar init TRACE``: a starting otelcar.toml that parses back, declares only what the
trace recorded, and turns into a full declaration once its inferred lines are uncommented."""

from __future__ import annotations

import tomllib
from pathlib import Path

from click.testing import CliRunner

from otelcar.cli import cli
from otelcar.project_config import parse_config
from otelcar.replay import load_run
from otelcar.starter_config import starting_config
from tests.helpers.workspace import workspace_run

ROOT = Path(__file__).resolve().parents[1]


def _uncomment_inferred(text: str) -> str:
    """The file as a user who accepts every inferred line leaves it."""
    lines = text.splitlines()
    out: list[str] = []
    accept = False
    for line in lines:
        if line.startswith("# inferred"):
            accept = True
            continue
        if accept and line.startswith("# "):
            out.append(line[2:])
            if line.startswith("# [agent.tools."):
                continue
            if line.startswith(("# description", "# structure", "# tools", "# tool_choice")):
                accept = not line.startswith(("# structure", "# tools", "# tool_choice"))
                if line.startswith("# description"):
                    accept = True
            elif line.startswith("# parameters"):
                accept = False
            continue
        accept = False
        out.append(line)
    return "\n".join(out) + "\n"


def test_the_starting_config_declares_nothing_it_inferred() -> None:
    run = workspace_run()
    text = starting_config(run)
    config = parse_config(tomllib.loads(text))
    assert config.agent.structure is None and not config.agent.tools
    assert all(d.tools is None for d in config.agent.decisions)
    assert [d.step for d in config.agent.decisions] == [d.step for d in run.decisions]
    assert set(config.registry.keys()) == {
        "llm",
        "tool:list_files",
        "tool:file_info",
        "tool:delete_file",
    }
    again = load_run(run.trace_id, run.steps, config.agent)
    assert again.requests.note() == run.requests.note()  # still inferred, and said


def test_accepting_every_inferred_line_declares_the_whole_request() -> None:
    run = workspace_run()
    accepted = parse_config(tomllib.loads(_uncomment_inferred(starting_config(run))))
    assert accepted.agent.structure == "workflow"
    assert set(accepted.agent.tools) == {"list_files", "file_info", "delete_file"}
    declared = load_run(run.trace_id, run.steps, accepted.agent)
    assert declared.requests.note() is None
    assert [[t["name"] for t in s.tools.value] for s in declared.requests.decisions] == [
        ["list_files"],
        ["file_info"],
        ["delete_file"],
        [],
    ]


def test_cli_init_on_an_openai_v2_trace(tmp_path: Path) -> None:
    runner = CliRunner()
    store = ["--store", str(tmp_path / "store")]
    imported = runner.invoke(cli, [*store, "import", str(ROOT / "fixtures" / "otlp")])
    assert imported.exit_code == 0, imported.output
    target = tmp_path / "otelcar.toml"
    result = runner.invoke(cli, [*store, "init", "c2b9546e", "-o", str(target)])
    assert result.exit_code == 0, result.output
    text = target.read_text()
    assert "# inferred (the trace records no tool definitions" in text
    assert '[policies."tool:issue_refund"]' in text
    parse_config(tomllib.loads(text))
    again = runner.invoke(cli, [*store, "init", "c2b9546e", "-o", str(target)])
    assert again.exit_code != 0 and "--force" in again.output
    printed = runner.invoke(cli, [*store, "init", "c2b9546e", "-o", "-"])
    assert printed.exit_code == 0 and printed.output == text
    replayed = runner.invoke(cli, [*store, "replay", "c2b9546e", "-c", str(target)])
    assert replayed.exit_code == 0, replayed.output
    assert "partly inferred" in replayed.output
