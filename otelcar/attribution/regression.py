"""The import path of the regression tests ``otelcar fix --write-test`` wrote before otelcar
had a pytest plugin: those files say ``from otelcar.attribution.regression import
check_decision`` and call it with a saved trace and an ``otelcar.toml``, and keep working.

It reads the project configuration (:mod:`otelcar.project_config`, which sits below
attribution with the replay pieces it builds); nothing in otelcar imports it.
Tests written now use the ``otelcar_agent`` fixture (:mod:`otelcar.pytest_plugin`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from otelcar.attribution.fixes.regression import (
    RegressionCheck,
    RegressionError,
    check_decision_async,
)
from otelcar.project_config import load_config
from otelcar.replay.recorded import load_run
from otelcar.sync import run_sync


def check_decision(
    trace: str | Path,
    step: int,
    *,
    config: str | Path | None,
    same: str = "outcome",
    fix: dict[str, Any] | None = None,
    fix_name: str | None = None,
    samples: int = 10,
    seed: int = 0,
) -> RegressionCheck:
    """Re-decide ``step`` of the steps table saved at ``trace`` (Parquet) ``samples`` times
    with the policies and outcome of the ``otelcar.toml`` at ``config``, ``fix`` applied;
    how often the recorded bad decision came back."""
    import polars as pl

    steps = pl.read_parquet(trace)
    if steps.is_empty():
        raise RegressionError(f"{trace}: no steps")
    project = load_config(config)
    return run_sync(
        check_decision_async(
            load_run(steps["trace_id"][0], steps, project.agent),
            step,
            registry=project.registry,
            outcome=project.outcome,
            same=same,
            fix=fix,
            fix_name=fix_name,
            samples=samples,
            seed=seed,
        )
    )


__all__ = ["check_decision"]
