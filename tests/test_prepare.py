"""One ``prepare`` for every front end (issue 38): the CLI, the MCP server and the web console
ready a run with :func:`otelcar.analyses.prepare` — the same run, the same project config,
the same request and budget for the same trace — and its errors are the user errors every
front end shows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from otelcar.analyses import BudgetRefused, Prepared, Project, WhyRequest, prepare
from otelcar.analyses import project as project_module
from otelcar.cli import cli
from otelcar.errors import OtelcarError, TraceNotFound
from otelcar.project_config import ConfigError
from otelcar.sources import SourceSettings
from otelcar.store import Store
from tests.conftest import NEW_CONTENT
from tests.helpers.scripted_refund import OUTCOME, imported_trace_with_policy
from tests.helpers.sources import StepsSource


class Prepared_(OtelcarError):
    """Ends a run as soon as it is prepared: what it was prepared with is all this checks."""


@pytest.fixture(name="project")
def project_fixture(tmp_path: Path) -> tuple[Path, Path]:
    """``(store, otelcar.toml)``: the refund trace imported, a scripted policy, an outcome."""
    _, _, config = imported_trace_with_policy(tmp_path)
    config.write_text(config.read_text() + OUTCOME)
    return tmp_path / "store", config


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Project, str, Any, Prepared]]:
    """Every call of ``prepare``: its project, trace id, request and what it gave; the run
    then ends with :class:`Prepared_`."""
    real, seen = project_module.prepare, []

    def recording(project: Project, trace_id: str, request: Any = None, **how: Any) -> Prepared:
        ready = real(project, trace_id, request, **how)
        seen.append((project, trace_id, request, ready))
        raise Prepared_("prepared")

    monkeypatch.setattr(project_module, "prepare", recording)
    return seen


def _cli(store: Path, config: Path) -> None:
    from click.testing import CliRunner

    argv = ["--store", str(store), "why", NEW_CONTENT[:8], "-c", str(config)]
    done = CliRunner().invoke(cli, [*argv, "--step", "4", "--budget", "50"])
    assert done.exit_code == 2 and "error: prepared" in done.output, done.output


def _mcp(store: Path, config: Path) -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from otelcar.mcp.runs import RunContext
    from otelcar.mcp.server import build_server

    async def call() -> Any:
        async with Client(build_server(RunContext(store, config))) as client:
            arguments = {"trace_id": NEW_CONTENT[:8], "step": 4, "max_calls": 50}
            return await client.call_tool("why", arguments)

    result = anyio.run(call)
    assert result.is_error and "prepared" in result.content[0].text


def _console(store: Path, config: Path) -> None:
    from otelcar.ui.runs import RunManager

    manager = RunManager(
        store / "runs", open_source=lambda: Store(store), config_path=config, store_root=store
    )
    started = manager.start("why", NEW_CONTENT[:8], {"step": "4", "budget": "50"})
    ended = manager.wait(started.id, timeout_s=60)
    assert ended.status == "failed" and ended.error == "prepared", ended.error


def test_the_cli_the_mcp_server_and_the_console_ready_a_run_the_same_way(
    project: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, config = project
    seen = _spy(monkeypatch)
    for front_end in (_cli, _mcp, _console):
        front_end(store, config)
    assert len(seen) == 3
    (_, _, request, first), *_others = seen
    assert request == WhyRequest(step=4, budget=50)
    for where, trace_id, asked, ready in seen:
        assert trace_id == NEW_CONTENT[:8] and asked == request
        assert Path(where.store_root) == store and where.config_path == config
        assert ready.run.trace_id == NEW_CONTENT and ready.config.path == config
        assert ready.env.budget.max_calls == 50 and ready.env.registry is ready.config.registry
        assert ready.config.outcome is not None and ready.config.live_requests is not None
        assert ready.config.live_requests.folder == first.config.live_requests.folder
        assert [d.step for d in ready.run.decisions] == [d.step for d in first.run.decisions]
        assert ready.steps.equals(first.steps)
    assert all(where.max_calls is None for where, *_ in seen)  # no ceiling was set


def test_a_source_given_is_read_and_the_projects_is_not(project: tuple[Path, Path]) -> None:
    store, config = project
    steps = Store(store).steps(NEW_CONTENT)
    source = StepsSource(NEW_CONTENT, steps)
    elsewhere = Project(store.parent / "no-store", config)  # its own store is missing
    ready = prepare(elsewhere, NEW_CONTENT[:6], WhyRequest(), source=source)
    assert ready.run.trace_id == NEW_CONTENT and ready.steps is steps
    with pytest.raises(OtelcarError, match="no otelcar store"):
        prepare(elsewhere, NEW_CONTENT[:6], WhyRequest())


def test_its_errors_are_the_user_errors_of_every_front_end(
    project: tuple[Path, Path], tmp_path: Path
) -> None:
    store, config = project
    where = Project(store, config)
    with pytest.raises(TraceNotFound, match="no trace id starts with 'ffff'"):
        prepare(where, "ffff", WhyRequest())
    with pytest.raises(BudgetRefused, match="over this server's ceiling of 100"):
        prepare(Project(store, config, max_calls=100), NEW_CONTENT, WhyRequest(budget=101))
    assert prepare(Project(store, config, max_calls=100), NEW_CONTENT).env.budget.max_calls == 100
    no_outcome = tmp_path / "no-outcome.toml"
    no_outcome.write_text(config.read_text().replace(OUTCOME, ""))
    from otelcar.analyses import AttributeRequest

    with pytest.raises(TraceNotFound):  # the trace first, as before: then the outcome
        prepare(Project(store, no_outcome), "ffff", AttributeRequest())
    with pytest.raises(ConfigError, match=r"no outcome: add \[outcome\] to .*no-outcome.toml"):
        prepare(Project(store, no_outcome), NEW_CONTENT, AttributeRequest())
    rules = {"any": [{"type": "tool_called", "tool": "issue_refund"}]}
    ready = prepare(Project(store, no_outcome), NEW_CONTENT, AttributeRequest(), outcome=rules)
    assert ready.config.outcome is not None


def test_a_source_url_replaces_the_configs_and_keeps_its_tables() -> None:
    configured = SourceSettings("clickhouse://a/db", table="spans", logs_table="logs", database="d")
    assert Project().source(configured) is configured
    assert Project().source(None) is None
    moved = Project(source_url="chdb:///tmp/x").source(configured)
    assert moved == SourceSettings("chdb:///tmp/x", table="spans", logs_table="logs", database="d")
    assert Project(source_url="chdb:///tmp/x").source(None) == SourceSettings("chdb:///tmp/x")
