"""What a test written by ``otelcar fix --write-test`` calls: one recorded decision,
re-decided with the live policies of an ``otelcar.toml``.

It sits with the command line, above every layer: it reads the project configuration (which
builds policies, outcomes and executors), which the attribution layer never does;
:func:`otelcar.attribution.fixes.regression.check_decision_async` is the check itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

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
    with the policies and outcome of the ``otelcar.toml`` at ``config`` (``None``: found as
    the CLI finds it), ``fix`` applied; how often the recorded decision came back."""
    steps = pl.read_parquet(trace)
    if steps.is_empty():
        raise RegressionError(f"{trace}: no steps")
    run = load_run(steps["trace_id"][0], steps)
    project = load_config(config)
    return run_sync(
        check_decision_async(
            run,
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
