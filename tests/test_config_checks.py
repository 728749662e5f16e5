"""``otelcar.toml`` against the trace it is used on (:mod:`otelcar.config_checks`): a tool
policy's key, an outcome's tool or argument that the trace cannot have is one ``error:`` line
with the trace's names and a did-you-mean, in every front end, before any policy call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from otelcar.cli import cli
from otelcar.config_checks import (
    ConfigMismatch,
    check_config_fits,
    outcome_findings,
    policy_key_problems,
    trace_tools,
)
from otelcar.messages import Message, ToolCall
from otelcar.outcome import outcome_from_config
from otelcar.project_config import ProjectConfig
from otelcar.replay import load_run
from otelcar.testing import StaticToolPolicy, Turn, conversation_steps
from tests.conftest import NEW_CONTENT
from tests.helpers.scripted_refund import imported_trace_with_policy, never_called

TRACE = "ab" * 16
PARAMETERS = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "force": {"type": "boolean"}},
}


def _run(*, defined: bool) -> Any:
    """A run that calls file_info, then delete_file; with ``defined``, its requests also
    record the definitions of those two and of ``search``, which it never calls."""
    turns = [
        Turn(Message("assistant", None, (ToolCall("file_info", {"path": "/a"}, "c1"),)), ["3"]),
        Turn(Message("assistant", None, (ToolCall("delete_file", {"path": "/a"}, "c2"),)), ["ok"]),
        Turn(Message("assistant", "done")),
    ]
    tools = (
        [
            {"type": "function", "name": name, "description": "", "parameters": PARAMETERS}
            for name in ("file_info", "delete_file", "search")
        ]
        if defined
        else None
    )
    return load_run(TRACE, conversation_steps(TRACE, [Message("user", "tidy")], turns, tools=tools))


def test_the_tools_a_trace_knows_come_from_calls_steps_and_definitions():
    called = trace_tools(_run(defined=False))
    assert called.names == ("delete_file", "file_info") and not called.complete
    assert called.arguments["delete_file"] == ("path",) and not called.parameters
    defined = trace_tools(_run(defined=True))
    assert defined.names == ("delete_file", "file_info", "search") and defined.complete
    assert defined.arguments["search"] == ("force", "path")
    assert defined.parameters == {"delete_file", "file_info", "search"}


def test_a_tool_policy_key_that_matches_no_tool_is_a_problem_with_did_you_mean():
    run = _run(defined=False)
    (problem,) = policy_key_problems(run, ["llm", "tool:*", "tool:file_info", "tool:fileinfo"])
    assert problem.startswith('[policies."tool:fileinfo"] matches no tool of trace ')
    assert "(its tools: delete_file, file_info); did you mean 'tool:file_info'?" in problem
    # Nothing close, and no definition recorded: a tool this run never called may still be
    # the agent's, so it is left alone ...
    assert policy_key_problems(run, ["tool:escalate"]) == []
    # ... but where the requests record the agent's tools, the list is complete.
    (far,) = policy_key_problems(_run(defined=True), ["tool:escalate", "tool:search"])
    assert '"tool:escalate"' in far and "delete_file, file_info, search)" in far
    assert "did you mean" not in far


def test_outcome_tools_and_arguments_are_checked_against_the_trace():
    rules = {
        "any": [
            {"type": "tool_called", "tool": "delete_file", "args": {"pth": "/a"}},
            {"type": "tool_called", "tool": "delet_file"},
            {"type": "tool_not_called", "tool": "escalate"},
            {"type": "tool_called", "tool": "delete_file", "args": {"force": True}},
            {"type": "final_answer", "contains": "done"},
        ]
    }
    outcome = outcome_from_config(rules)
    found = outcome_findings(_run(defined=False), outcome)
    unknown_arg, unknown_tool = found.errors
    assert "'pth' is not an argument of delete_file" in unknown_arg
    assert "(its arguments: path); did you mean 'path'?" in unknown_arg
    assert "'delet_file': trace" in unknown_tool and "did you mean 'delete_file'?" in unknown_tool
    # Never used by this run, but possibly the agent's: hints, not errors.
    assert [h.split(":")[0] for h in found.hints] == [
        "outcome tool_not_called 'escalate'",
        "outcome tool_called 'delete_file'",
    ]
    complete = outcome_findings(_run(defined=True), outcome)
    assert len(complete.errors) == 3 and complete.hints == []  # force is a parameter there
    assert "'escalate': trace" in complete.errors[2]


def test_check_config_fits_names_the_config_and_every_problem():
    config = ProjectConfig(path=Path("otelcar.toml"))
    config.registry.register("tool:fileinfo", StaticToolPolicy({"*": "ok"}))
    config.outcome = outcome_from_config({"type": "tool_called", "tool": "delete_fil"})
    with pytest.raises(ConfigMismatch) as error:
        check_config_fits(_run(defined=False), config)
    message = str(error.value)
    assert message.startswith('otelcar.toml: [policies."tool:fileinfo"] matches no tool')
    assert "did you mean 'tool:file_info'?" in message
    assert "did you mean 'delete_file'?" in message
    config.registry = ProjectConfig().registry
    config.outcome = outcome_from_config({"type": "tool_called", "tool": "delete_file"})
    check_config_fits(_run(defined=False), config)  # fits: no error


TYPO = '[policies."tool:lookup_ordr"]\ntype = "recorded"\n'
BAD_ARG = '[outcome]\ntype = "tool_called"\ntool = "issue_refund"\nargs = { ordr_id = "A-1" }\n'


@pytest.mark.parametrize(
    "command",
    [["replay"], ["rollout"], ["attribute"], ["why", "--step", "4"], ["fix", "--step", "4"]],
)
def test_every_command_refuses_a_config_that_does_not_fit_before_any_call(
    tmp_path: Path, command: list[str]
):
    runner, store, config = imported_trace_with_policy(tmp_path)
    config.write_text(config.read_text() + TYPO + BAD_ARG)
    never_called(tmp_path, config)
    done = runner.invoke(
        cli, [*store, command[0], NEW_CONTENT[:8], *command[1:], "-c", str(config)]
    )
    assert done.exit_code == 2, done.output
    (line,) = done.output.strip().splitlines()
    assert line.startswith(f'error: {config}: [policies."tool:lookup_ordr"] matches no tool')
    assert "(its tools: get_refund_policy, issue_refund, lookup_order)" in line
    assert "did you mean 'tool:lookup_order'?" in line
    assert "'ordr_id' is not an argument of issue_refund" in line
    assert "(its arguments: amount, order_id); did you mean 'order_id'?" in line


def test_a_fail_if_rule_is_checked_like_the_configs_outcome(tmp_path: Path):
    runner, store, config = imported_trace_with_policy(tmp_path)
    base = [*store, "attribute", NEW_CONTENT[:8], "-c", str(config), "--fail-if"]
    done = runner.invoke(cli, [*base, "tool_called:issue_refnd"])
    assert done.exit_code == 2
    assert "outcome tool_called 'issue_refnd': trace" in done.output
    assert "did you mean 'issue_refund'?" in done.output


def test_a_passing_run_says_which_outcome_names_it_never_used(tmp_path: Path):
    """Not an error before the run (the agent may have the tool), but the refusal says why
    the outcome did not fire instead of only suggesting --credit."""
    runner, store, config = imported_trace_with_policy(tmp_path)
    base = [*store, "attribute", NEW_CONTENT[:8], "-c", str(config), "--fail-if"]
    done = runner.invoke(cli, [*base, "tool_called:escalate_to_manager"])
    assert done.exit_code == 2
    assert "the recorded run did not fail" in done.output
    assert "'escalate_to_manager': trace" in done.output and "--credit" in done.output


def test_the_mcp_server_and_the_console_refuse_it_too(tmp_path: Path):
    from otelcar.analyses import prepare
    from otelcar.mcp.runs import RunContext
    from otelcar.store import Store
    from otelcar.ui.runs import RunManager

    _, _, config = imported_trace_with_policy(tmp_path)
    config.write_text(config.read_text() + TYPO)
    context = RunContext(tmp_path / "store", config)
    with pytest.raises(ConfigMismatch, match="did you mean 'tool:lookup_order'"):
        prepare(context.project, NEW_CONTENT[:8])
    manager = RunManager(
        tmp_path / "runs", open_source=lambda: Store(tmp_path / "store"), config_path=config
    )
    run = manager.start("why", NEW_CONTENT[:8], {"step": "4"})
    manager._threads[run.id].join(timeout=60)
    assert run.status == "failed" and "did you mean 'tool:lookup_order'" in (run.error or "")
