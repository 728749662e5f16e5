"""The pytest plugin: gate an agent's reliability on its recorded traces.

Installed with otelcar (entry point ``pytest11``), it gives every test the fixture
``otelcar_agent``::

    def test_refunds_stay_rare(otelcar_agent):
        agent = otelcar_agent("tests/traces/4bf92f.parquet", config="otelcar.toml")
        agent.assert_fails_at_most(0.1, rollouts=40, confidence=0.95)
        agent.assert_decision(4, max_rate=0.2, samples=20)

``otelcar_agent(trace, config=None, *, store=None)`` rebuilds the agent of one trace: a
steps table saved as Parquet (``otelcar fix --write-test`` keeps one beside its test), a dump
file of one trace (any format :func:`otelcar.read_traces` reads), or a trace id (or unique
prefix) in the store (``store``, else ``--otelcar-store`` / the ``otelcar_store`` ini
option, else ``$OTELCAR_HOME`` or ``./.otelcar``). Its policies and outcome are those of the
``otelcar.toml`` at ``config`` (else ``--otelcar-config`` / ``otelcar_config``, else the
one the CLI would find). Relative paths are taken from the rootdir.

* :meth:`RecordedAgent.assert_fails_at_most` re-runs the agent from the trace's start
  ``rollouts`` times (every decision re-decided with the live policy, seeded) and fails
  when the Wilson upper bound of its failure rate at ``confidence`` exceeds the bound; a
  rollout that could not be judged counts as a failure in that bound.
* :meth:`RecordedAgent.assert_decision` re-decides one recorded decision on its exact
  context (a fix's edits applied, if given) and fails when the bad decision comes back more
  often than ``max_rate`` (the observed rate; with ``confidence``, its Wilson upper bound).
* :meth:`RecordedAgent.assert_fix_live` runs the user's real agent (``[agent] command``, or
  ``command``) against otelcar's model endpoint with a fix's plan, after the live check, and
  fails when the run still fails in more than ``max_rate`` of the rollouts (the same bound),
  or when the agent no longer makes the recorded requests (``docs/live.md``).

Every check is seeded (the same code, model and seed give the same verdict) and counts its
policy calls: the terminal summary lists each check with its estimate and cost. No request
cache is kept between runs, so a model or prompt change that brings a bug back fails.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from otelcar.project_config import ProjectConfig
    from otelcar.replay.recorded import RecordedRun

#: Where the checks of a session are kept for the terminal summary.
_CHECKS = pytest.StashKey[list[str]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("otelcar", "otelcar: agent reliability on recorded traces")
    group.addoption(
        "--otelcar-store",
        dest="otelcar_store",
        default=None,
        help="otelcar store that trace ids are resolved in (default: $OTELCAR_HOME, ./.otelcar)",
    )
    group.addoption(
        "--otelcar-config",
        dest="otelcar_config",
        default=None,
        help="otelcar.toml with the policies and outcome (default: ./otelcar.toml)",
    )
    parser.addini("otelcar_store", "otelcar store for trace ids", default=None)
    parser.addini("otelcar_config", "otelcar.toml with the policies and outcome", default=None)


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_CHECKS] = []


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    checks = config.stash.get(_CHECKS, [])
    if checks:
        terminalreporter.section("otelcar")
        for line in checks:
            terminalreporter.write_line(line)


@dataclass
class RecordedAgent:
    """The agent of one recorded trace with a project's policies and outcome."""

    run: RecordedRun
    project: ProjectConfig
    checks: list[str] = field(default_factory=list)

    def failure_rate(self, *, rollouts: int = 40, confidence: float = 0.95, seed: int = 0) -> Any:
        """The :class:`~otelcar.attribution.reliability.Reliability` estimate (no assertion)."""
        from otelcar.attribution.reliability import failure_rate
        from otelcar.errors import OtelcarError
        from otelcar.sync import run_sync

        if self.project.outcome is None:
            raise OtelcarError("a failure rate needs an outcome: add [outcome] to the otelcar.toml")
        estimate = run_sync(
            failure_rate(
                self.run,
                registry=self.project.registry,
                outcome=self.project.outcome,
                rollouts=rollouts,
                confidence=confidence,
                seed=seed,
            )
        )
        self.checks.append(f"fails_at_most: {estimate.describe()}")
        return estimate

    def assert_fails_at_most(
        self, max_rate: float, *, rollouts: int = 40, confidence: float = 0.95, seed: int = 0
    ) -> Any:
        """Fail unless the Wilson upper bound (at ``confidence``) of the agent's failure
        rate from this trace's start, over ``rollouts`` seeded rollouts, is ≤ ``max_rate``
        (unjudged rollouts counted as failures); returns the estimate."""
        if not 0 <= max_rate <= 1:
            raise ValueError(f"max_rate must be in [0, 1], not {max_rate}")
        estimate = self.failure_rate(rollouts=rollouts, confidence=confidence, seed=seed)
        if estimate.worst_high > max_rate:
            raise AssertionError(
                f"{estimate.describe()}: the {confidence:.0%} upper bound "
                f"{estimate.worst_high:.1%} is above the allowed {max_rate:.1%}"
                + (
                    f" (no failure seen, but {estimate.rollouts} rollouts cannot bound the "
                    f"rate below {max_rate:.1%}: run more)"
                    if estimate.failed == 0 and estimate.lost == 0
                    else ""
                )
            )
        return estimate

    def assert_decision(
        self,
        step: int,
        *,
        max_rate: float,
        same: str = "outcome",
        samples: int = 10,
        fix: dict[str, Any] | None = None,
        fix_name: str | None = None,
        seed: int = 0,
        confidence: float | None = None,
    ) -> Any:
        """Fail when the recorded bad decision of ``step`` comes back in more than
        ``max_rate`` of ``samples`` re-decisions of its exact context (``fix``: a plan of
        context edits applied first; ``same``: what counts as the same decision, as in
        ``otelcar why``). With ``confidence``, the Wilson upper bound is compared instead
        of the observed rate. Returns the :class:`RegressionCheck`."""
        from otelcar.attribution.fixes.regression import check_decision_async
        from otelcar.sync import run_sync

        check = run_sync(
            check_decision_async(
                self.run,
                step,
                registry=self.project.registry,
                outcome=self.project.outcome,
                same=same,
                fix=fix,
                fix_name=fix_name,
                samples=samples,
                seed=seed,
            )
        )
        return self._bounded("decision", step, check, max_rate, confidence, seed)

    def assert_fix_live(
        self,
        step: int,
        *,
        max_rate: float,
        plan: dict[str, Any],
        fix_name: str | None = None,
        rollouts: int = 10,
        seed: int = 0,
        command: str | None = None,
        cwd: str | Path | None = None,
        confidence: float | None = None,
    ) -> Any:
        """Fail when the run still fails in more than ``max_rate`` of ``rollouts`` runs of
        the user's agent with ``plan`` (a fix's plan, as ``otelcar fix --agent --write-test``
        writes it) played on its model requests, judged by the outcome; a run that could not
        be judged counts as failed. The agent is ``[agent] command`` of the otelcar.toml, or
        ``command`` (which replaces it and keeps ``[agent]``'s other settings; it runs in
        ``cwd`` unless ``[agent] cwd`` is set). Fails first, with the first difference, when
        the agent no longer reproduces the recorded run (the live check). With
        ``confidence``, the Wilson upper bound is compared instead of the observed rate.
        Returns the :class:`~otelcar.attribution.fixes.regression.RolloutCheck`."""
        __tracebackhide__ = True
        from otelcar.live.check import LiveReplayError
        from otelcar.live_regression import check_fix_live
        from otelcar.sync import run_sync

        project = self._with_agent(command, cwd)
        try:
            check = run_sync(
                check_fix_live(
                    self.run,
                    project,
                    step=step,
                    plan=plan,
                    fix_name=fix_name,
                    rollouts=rollouts,
                    seed=seed,
                )
            )
        except LiveReplayError as exc:
            self.checks.append(
                f"fix on the agent: trace {self.run.trace_id} step {step}: refused, the agent "
                "does not reproduce the recorded run"
            )
            raise AssertionError(
                f"step {step}: the fix cannot be checked on the agent: {exc}. When the agent "
                "changed on purpose, record a new trace of it and write this test again"
            ) from None
        return self._bounded("fix on the agent", step, check, max_rate, confidence, seed)

    def _with_agent(self, command: str | None, cwd: str | Path | None) -> ProjectConfig:
        """A copy of the project with ``command`` as its agent, as ``--agent`` means it
        (:func:`~otelcar.project_config.with_agent_command`: ``[agent]``'s ``cwd``, ``env``,
        ``timeout_s`` and ``concurrency`` kept), or as it is; an agent command is required."""
        from dataclasses import replace

        from otelcar.errors import OtelcarError
        from otelcar.project_config import with_agent_command

        project = replace(self.project)
        if command is not None:
            with_agent_command(project, command, cwd=cwd)
        if project.agent_command is None:
            where = project.path or "the otelcar.toml"
            raise OtelcarError(
                f"this test runs the agent of [agent] command, and {where} names none: add "
                "one, or give the command (AGENT in a written test)"
            )
        return project

    def _bounded(
        self,
        what: str,
        step: int,
        check: Any,
        max_rate: float,
        confidence: float | None,
        seed: int,
    ) -> Any:
        """Keep the summary line of ``check`` (a re-decision or a rollout check: ``bad`` of
        ``n``), and fail when its observed rate (with ``confidence``: its Wilson upper
        bound) is above ``max_rate`` or nothing was counted."""
        __tracebackhide__ = True
        from otelcar.attribution.stats import wilson

        bound = check.rate
        rule = f"rate {check.rate:.0%}"
        if confidence is not None:
            bound = wilson(check.bad, check.n, confidence).high if check.n else 1.0
            rule = f"{confidence:.0%} upper bound {bound:.0%}"
        self.checks.append(
            f"{what}: trace {self.run.trace_id} step {step}: bad {check.bad}/{check.n} "
            f"({rule}; allowed ≤ {max_rate:.0%}); seed {seed}; cost: {check.calls} policy calls"
        )
        if check.n == 0 or bound > max_rate:
            raise AssertionError(check.message(max_rate) + (f" ({rule})" if confidence else ""))
        return check


def _option(config: pytest.Config, name: str) -> str | None:
    value = config.getoption(name, default=None) or config.getini(name)
    return str(value) if value else None


def _steps(trace: str | Path, store: str | Path | None, root: Path) -> Any:
    """The steps table of one trace (see the module docstring for what ``trace`` may be)."""
    import polars as pl

    from otelcar.errors import OtelcarError
    from otelcar.readers import read_traces
    from otelcar.store import Store

    path = Path(trace)
    path = path if path.is_absolute() else root / path
    if path.is_file() and path.suffix == ".parquet":
        steps = pl.read_parquet(path)
    elif path.exists():
        steps = read_traces(path)
    else:
        where = Path(store) if store is not None else None
        if where is not None and not where.is_absolute():
            where = root / where
        found = Store(where, create=False)
        return found.steps(found.resolve(str(trace)))
    ids = steps["trace_id"].unique().to_list() if steps.height else []
    if len(ids) != 1:
        raise OtelcarError(f"{path}: holds {len(ids)} traces; otelcar_agent needs one")
    return steps


@pytest.fixture
def otelcar_agent(
    request: pytest.FixtureRequest, pytestconfig: pytest.Config
) -> Iterator[Callable[..., RecordedAgent]]:
    """``otelcar_agent(trace, config=None, *, store=None)`` → :class:`RecordedAgent`
    (module docstring)."""
    from otelcar.project_config import load_config
    from otelcar.replay.recorded import load_run

    root = Path(pytestconfig.rootpath)
    made: list[RecordedAgent] = []

    def make(
        trace: str | Path, config: str | Path | None = None, *, store: str | Path | None = None
    ) -> RecordedAgent:
        steps = _steps(trace, store or _option(pytestconfig, "otelcar_store"), root)
        chosen = config if config is not None else _option(pytestconfig, "otelcar_config")
        if chosen is not None and not Path(chosen).is_absolute():
            chosen = root / chosen
        project = load_config(chosen)
        agent = RecordedAgent(load_run(steps["trace_id"][0], steps, project.agent), project)
        made.append(agent)
        return agent

    yield make
    lines = pytestconfig.stash.setdefault(_CHECKS, [])
    for agent in made:
        lines.extend(f"{request.node.nodeid}: {check}" for check in agent.checks)
