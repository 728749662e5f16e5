"""Stand-ins for what the adaptive design reads (a run's decisions, each plan's rollout
outcomes), to test the sequential design without running rollouts."""

from __future__ import annotations

from typing import Any


def fake_run(m: int) -> Any:
    """What :func:`estimate` and :func:`sequential` read of a run: its m decisions."""
    from types import SimpleNamespace

    decisions = [SimpleNamespace(index=k, step=2 * k, agent=None, name="llm") for k in range(m)]
    return SimpleNamespace(decisions=decisions, horizon=m)


def outcomes_of(
    rows: dict[int, list[bool]], repeated: dict[int, bool] | None = None
) -> dict[int, Any]:
    """Each plan's outcomes (``-1``: the factual plan): ``rows[k]`` its rollouts' failures,
    ``repeated[k]`` whether each rollout repeated the recorded first action."""
    from otelcar.attribution.experiment.rollouts import PlanOutcomes

    result = {}
    for k, failures in rows.items():
        plan = PlanOutcomes()
        plan.failures = dict(enumerate(failures))
        plan.repeated_first = {r: (repeated or {}).get(k, False) for r in range(len(failures))}
        result[k] = plan
    return result
