"""Rollouts on a real local Ray cluster: the same seeds give the same results as in-process.

The cluster is started once for the module (2 CPUs, no dashboard) and shut down after. Every
comparison runs the same work under :class:`LocalExecutor` and :class:`RayExecutor` and asks
for identical verdicts, identical per-plan outcomes and identical accounting (the request
cache of rollout r lives on the worker every rollout r is routed to, so even the cache hits
agree). A worker process that dies is retried by Ray, or its rollouts come back as failed
with the reason; none is dropped.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from otelcar import read_otlp
from otelcar.attribution import attribute
from otelcar.attribution.aggregate import attribute_traces
from otelcar.attribution.steps.curve import curve_plans
from otelcar.cli import cli
from otelcar.executors import LocalExecutor, use_executor
from otelcar.executors.ray_executor import RayExecutor
from otelcar.outcome import FunctionOutcome
from otelcar.policies.python import CallableLLMPolicy, CallableToolPolicy
from otelcar.policies.registry import PolicyRegistry
from otelcar.project_config import ConfigError, parse_config
from otelcar.replay import Budget, Environment, load_run, run_plan
from otelcar.testing import scenarios as synthetic
from tests.helpers.generated_agent import (
    AGENT_MODULE,
    AGENT_SOURCE,
    agent_trace_otlp,
    batch,
    write_dump,
)
from tests.parts import missing, need_module

ray = need_module("ray", "pip install -e '.[dev]' (or 'otelcar[ray]'); `make test` does")


@pytest.fixture(scope="module")
def cluster() -> Any:
    """A local Ray cluster for this module (skips, with Ray's reason, if it cannot start)."""
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    except Exception as exc:  # no shared memory, no free ports, …
        missing(f"a local Ray cluster ({type(exc).__name__}: {exc})", "see docs/ray.md")
    yield ray
    ray.shutdown()


@pytest.fixture
def executor(cluster: Any) -> Any:
    """Workers for one test (they hold the cluster's CPUs; Ray keeps worker processes
    warm, so starting them again is quick)."""
    ex = RayExecutor(concurrency=4)
    yield ex
    ex.close()


def _comparable(document: Any) -> Any:
    """A result without what may differ between two runs with the same seeds: seconds, and
    which of two rollouts making the same request was served from the cache (``origin``)."""
    if isinstance(document, dict):
        return {k: _comparable(v) for k, v in document.items() if k not in ("wall_s", "origin")}
    if isinstance(document, list):
        return [_comparable(v) for v in document]
    return document


def _scenario(n: int = 6, culprit: int = 2) -> tuple[Any, PolicyRegistry, Any]:
    steps, registry, outcome = synthetic.build(synthetic.intermittent(n, culprit))
    return load_run(synthetic.TRACE_ID, steps), registry, outcome


def test_every_curve_plan_gives_the_same_rollouts_and_cost_on_ray(executor: RayExecutor):
    run, registry, outcome = _scenario()
    plans = curve_plans(run)
    outcomes: dict[str, dict[int, list[bool | None]]] = {}
    costs: dict[str, dict[str, int]] = {}
    progress: dict[str, int] = {}
    for where in (LocalExecutor(), executor):
        env = Environment(registry)
        seen: list[int] = []
        count = seen.append
        outcomes[where.name] = {}
        for k, plan in plans.items():
            result = run_plan(run, plan, env, rollouts=6, seed=5, outcome=outcome, executor=where)
            assert [r.index for r in result.rollouts] == list(range(6))
            assert not result.errors
            outcomes[where.name][k] = result.failures
        for k, plan in plans.items():  # a second round continues the rollout indexes
            more = run_plan(
                run,
                plan,
                env,
                rollouts=3,
                first_rollout=6,
                seed=5,
                outcome=outcome,
                executor=where,
                on_rollout=lambda judged, count=count: count(judged.rollout.index),
            )
            outcomes[where.name][k] += more.failures
        costs[where.name] = env.accounting.to_dict()
        progress[where.name] = len(seen)
    assert outcomes["ray"] == outcomes["local"]
    assert any(True in f for f in outcomes["local"].values())  # the plans do differ
    assert any(False in f for f in outcomes["local"].values())
    assert costs["ray"] == costs["local"] and costs["local"]["cache_hits"] > 0
    assert progress["ray"] == progress["local"] == 3 * len(plans)  # callbacks on the driver


def test_attribution_is_identical_on_ray(executor: RayExecutor):
    run, registry, outcome = _scenario(8, 3)
    local = attribute(run, registry=registry, outcome=outcome, seed=11)
    with use_executor(executor):
        remote = attribute(run, registry=registry, outcome=outcome, seed=11)
    assert remote.verdict == local.verdict == "culprit" and remote.culprit.index == 3
    assert _comparable(remote.to_dict()) == _comparable(local.to_dict())


def test_the_budget_is_reserved_by_the_driver_and_never_exceeded(executor: RayExecutor):
    run, registry, outcome = _scenario()
    plan = curve_plans(run)[-1]  # re-decide everything
    cap = 15
    env = Environment(registry, Budget(max_calls=cap))
    result = run_plan(run, plan, env, rollouts=8, seed=2, outcome=outcome, executor=executor)
    statuses = [r.status for r in result.rollouts]
    assert len(statuses) == 8 and "budget" in statuses  # stopped cleanly, nothing dropped
    assert env.budget.calls == env.accounting.llm_calls <= cap
    assert all("budget of 15" in r.error for r in result.rollouts if r.status == "budget")
    unlimited = Environment(registry)
    run_plan(run, plan, unlimited, rollouts=8, seed=2, outcome=outcome, executor=executor)
    assert unlimited.budget.calls == unlimited.accounting.llm_calls > cap


def _aggregate_inputs(tmp_path: Path) -> tuple[list, PolicyRegistry, FunctionOutcome]:
    runs = batch(weak=3, one_off=[1], passing=1)
    dump = write_dump(
        tmp_path / "batch.json",
        [
            agent_trace_otlp(tid, choices, start_ns=1_780_000_000_000_000_000 + n * 10**10)
            for n, (tid, choices) in enumerate(runs)
        ],
    )
    steps = read_otlp(dump)
    traces = [(tid, steps.filter(steps["trace_id"] == tid)) for tid, _ in runs]
    registry = PolicyRegistry()
    registry.register("llm", CallableLLMPolicy(AGENT_MODULE["decide"], name="agent"))
    registry.register("tool:*", CallableToolPolicy(AGENT_MODULE["run_tool"], name="tools"))
    outcome = FunctionOutcome(AGENT_MODULE["fails"], "a tool was called with choice BAD")
    return traces, registry, outcome


@pytest.mark.parametrize("trace_tasks", [False, True], ids=["rollout-tasks", "trace-tasks"])
def test_aggregate_is_identical_on_ray(executor: RayExecutor, tmp_path: Path, trace_tasks: bool):
    traces, registry, outcome = _aggregate_inputs(tmp_path)
    options = {"registry": registry, "outcome": outcome, "seed": 3, "rollouts": 8}
    local = attribute_traces(traces, **options)
    seen: list[str] = []
    remote = attribute_traces(
        traces,
        executor=executor,
        trace_tasks=trace_tasks,
        on_trace=lambda v: seen.append(v.trace_id),
        **options,
    )
    assert [v.trace_id for v in remote] == [t for t, _ in traces]  # in the order given
    assert sorted(seen) == sorted(t for t, _ in traces)
    assert [v.status for v in local].count("attributed") == 4
    assert [_comparable(v.to_dict()) for v in remote] == [_comparable(v.to_dict()) for v in local]


def _dies_once(marker: Path, driver_pid: int) -> Any:
    """The scripted agent, except that the first call in a worker process kills that
    process (once: the marker file says it happened)."""
    decide = AGENT_MODULE["decide"]

    def policy(request: Any) -> Any:
        if os.getpid() != driver_pid and not marker.exists():
            marker.write_text(str(os.getpid()))
            os._exit(1)
        return decide(request)

    return policy


def _dying_setup(tmp_path: Path) -> tuple[Any, PolicyRegistry, Any, Path]:
    traces, _, outcome = _aggregate_inputs(tmp_path)
    trace_id, steps = traces[0]
    marker = tmp_path / "worker-killed"
    registry = PolicyRegistry()
    registry.register("llm", CallableLLMPolicy(_dies_once(marker, os.getpid()), name="agent"))
    registry.register("tool:*", CallableToolPolicy(AGENT_MODULE["run_tool"], name="tools"))
    return load_run(trace_id, steps), registry, outcome, marker


def test_a_killed_worker_loses_no_rollout(executor: RayExecutor, tmp_path: Path):
    run, registry, outcome, marker = _dying_setup(tmp_path)
    plan = curve_plans(run)[-1]
    local = run_plan(run, plan, Environment(registry), rollouts=8, seed=1, outcome=outcome)
    before = set(executor.worker_pids())
    remote = run_plan(
        run, plan, Environment(registry), rollouts=8, seed=1, outcome=outcome, executor=executor
    )
    assert marker.exists() and int(marker.read_text()) in before  # a worker did die
    assert set(executor.worker_pids()) != before  # and Ray restarted it
    assert not remote.errors
    assert remote.failures == local.failures
    assert [r.decisions[-1].action for r in remote.rollouts] == [
        r.decisions[-1].action for r in local.rollouts
    ]


def test_a_worker_lost_for_good_is_reported_not_dropped(cluster: Any, tmp_path: Path):
    run, registry, outcome, marker = _dying_setup(tmp_path)
    plan = curve_plans(run)[-1]
    local = run_plan(run, plan, Environment(registry), rollouts=8, seed=1, outcome=outcome)
    no_retry = RayExecutor(concurrency=4, max_retries=0)
    try:
        remote = run_plan(
            run,
            plan,
            Environment(registry),
            rollouts=8,
            seed=1,
            outcome=outcome,
            executor=no_retry,
            stop_when_most_fail=False,  # to see every lost rollout reported
        )
    finally:
        no_retry.close()
    assert marker.exists()
    assert [r.index for r in remote.rollouts] == list(range(8))
    lost = [r for r in remote.rollouts if r.status == "failed"]
    assert lost and all("Ray worker lost (after 0 retries)" in r.error for r in lost)
    assert len(remote.errors) == len(lost)
    for r, failed, expected in zip(remote.rollouts, remote.failures, local.failures, strict=True):
        assert failed is None if r.status == "failed" else failed == expected


def test_a_killed_worker_loses_no_trace_of_an_aggregate(executor: RayExecutor, tmp_path: Path):
    traces, _, outcome = _aggregate_inputs(tmp_path)
    _, registry, _, marker = _dying_setup(tmp_path)
    options = {"registry": registry, "outcome": outcome, "seed": 3, "rollouts": 8}
    local = attribute_traces(traces[:3], **options)
    remote = attribute_traces(traces[:3], executor=executor, trace_tasks=True, **options)
    assert marker.exists()  # a worker died running a trace; Ray ran that trace again
    assert [_comparable(v.to_dict()) for v in remote] == [_comparable(v.to_dict()) for v in local]


def test_an_environment_that_cannot_be_sent_is_a_clear_error(executor: RayExecutor):
    import threading

    from otelcar.executors import ExecutorError

    run, registry, _ = _scenario()
    lock = threading.Lock()
    registry.register("llm:other", CallableLLMPolicy(lambda r, lock=lock: None, name="locked"))
    with pytest.raises(ExecutorError, match="policy registry cannot be sent to Ray workers"):
        run_plan(run, curve_plans(run)[-1], Environment(registry), rollouts=2, executor=executor)


# -- the command line and otelcar.toml --------------------------------------------------------
CONFIG = (
    '[policies.llm]\ntype = "python"\nfunction = "ray_agent_under_test:decide"\n'
    '[policies."tool:*"]\ntype = "python"\nfunction = "ray_agent_under_test:run_tool"\n'
    "keywords = false\n"
    '[outcome]\ntype = "function"\nfunction = "ray_agent_under_test:fails"\n'
    "[replay]\nseed = 5\n"
)


def _cli_store(tmp_path: Path) -> tuple[list[str], list[str]]:
    (tmp_path / "ray_agent_under_test.py").write_text(AGENT_SOURCE)
    runs = batch(weak=2, one_off=[4], passing=0)
    dump = write_dump(
        tmp_path / "batch.json",
        [
            agent_trace_otlp(tid, choices, start_ns=1_780_000_000_000_000_000 + n * 10**10)
            for n, (tid, choices) in enumerate(runs)
        ],
    )
    store = ["--store", str(tmp_path / "store")]
    imported = CliRunner().invoke(cli, [*store, "import", str(dump)], catch_exceptions=False)
    assert imported.exit_code == 0, imported.output
    return store, [tid for tid, _ in runs]


def test_cli_attribute_and_aggregate_on_ray(cluster: Any, tmp_path: Path):
    store, ids = _cli_store(tmp_path)
    config = tmp_path / "otelcar.toml"
    config.write_text(CONFIG)
    runner = CliRunner()
    documents = {}
    for flags in ([], ["--executor", "ray"]):
        name = flags[-1] if flags else "local"
        out = runner.invoke(
            cli,
            [*store, "attribute", ids[0], "-c", str(config), "-n", "16", *flags, "--json", "-"],
            catch_exceptions=False,
        )
        assert out.exit_code == 0, out.output
        documents[name] = _comparable(json.loads(out.stdout))
    assert documents["ray"] == documents["local"]
    assert documents["ray"]["verdict"] == "culprit"
    assert ray.is_initialized()  # a cluster the CLI did not start is left running
    # [replay] executor = "ray" in otelcar.toml, for aggregate
    ray_config = tmp_path / "ray.toml"
    ray_config.write_text(CONFIG + 'executor = "ray"\n')
    aggregated = {}
    for name, path in (("local", config), ("ray", ray_config)):
        out = runner.invoke(
            cli,
            [*store, "aggregate", "-c", str(path), "-n", "8", "--json", "-"],
            catch_exceptions=False,
        )
        assert out.exit_code == 0, out.output
        aggregated[name] = _comparable(json.loads(out.stdout))
    assert aggregated["ray"] == aggregated["local"]
    assert aggregated["ray"]["counts"]["attributed"] == 3
    wrong = runner.invoke(
        cli, [*store, "attribute", ids[0], "-c", str(config), "--ray-address", "auto"]
    )
    assert wrong.exit_code == 2 and "--ray-address needs --executor ray" in wrong.output


def test_config_executor_keys_are_checked():
    settings = parse_config({"replay": {"executor": "ray", "ray_address": "ray://head:10001"}})
    assert settings.replay.executor == "ray" and settings.replay.ray_address == "ray://head:10001"
    assert parse_config({}).replay.executor == "local"
    with pytest.raises(ConfigError, match="executor = 'dask' is not valid"):
        parse_config({"replay": {"executor": "dask"}})
    with pytest.raises(ConfigError, match="ray_address = 10001 is not valid"):
        parse_config({"replay": {"ray_address": 10001}})
