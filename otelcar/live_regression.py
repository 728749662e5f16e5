"""A fix checked on the user's real agent: what ``otelcar fix --agent CMD --write-test`` writes
calls (through the pytest plugin's ``otelcar_agent`` fixture), and what Python can call.

:func:`check_fix_live` runs the live fidelity check first (:func:`otelcar.analyses.live_ready`:
a held run of the agent must make every recorded request again, else
:class:`~otelcar.live.check.LiveReplayError`), then the rollout check of
:func:`otelcar.attribution.fixes.regression.check_fix_rollouts_async` with every rollout a run
of the agent (:func:`otelcar.analyses.live_rollouts`). It sits above the attribution layer,
which must not know the live agent, next to :mod:`otelcar.analyses` (``docs/live.md``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from otelcar.attribution.fixes.regression import RolloutCheck
    from otelcar.project_config import ProjectConfig
    from otelcar.replay import RecordedRun


async def check_fix_live(
    run: RecordedRun,
    config: ProjectConfig,
    *,
    step: int,
    plan: dict[str, Any],
    fix_name: str | None = None,
    rollouts: int = 10,
    seed: int = 0,
) -> RolloutCheck:
    """``rollouts`` runs of ``config``'s agent command with ``plan`` played on its model
    requests (:func:`otelcar.attribution.fixes.regression.rollout_plan`: the fix's edits at
    ``step`` and later, every decision from ``step`` on decided again by ``config``'s
    policies, the ones before answered from the trace), each judged with ``config``'s
    outcome. Raises :class:`~otelcar.live.check.LiveReplayError` when the agent no longer
    reproduces the recorded run, :class:`~otelcar.errors.OtelcarError` without an agent
    command or an outcome. The live check's headline is the result's first note."""
    from otelcar.analyses import live_ready, live_rollouts
    from otelcar.attribution.fixes.regression import RegressionError, check_fix_rollouts_async

    command = config.agent_command
    if command is None:
        raise RegressionError(
            "a fix checked on the agent needs an agent command: [agent] command in "
            "otelcar.toml, or the test's AGENT"
        )
    if config.outcome is None:
        raise RegressionError("a fix checked on the agent needs [outcome] in otelcar.toml")
    ready, notes = await live_ready(run, config, seed=seed)
    with live_rollouts(config):
        check = await check_fix_rollouts_async(
            ready,
            step,
            registry=config.registry,
            outcome=config.outcome,
            plan=plan,
            fix_name=fix_name,
            rollouts=rollouts,
            seed=seed,
            concurrency=config.replay.concurrency,
            agent=command.describe(),
        )
    check.notes[:0] = notes
    return check
