"""Lost rollouts that bias the culprit down: how often a smaller step is named (issue 37).

The case (:func:`otelcar.testing.scenarios.lost_branch`): the culprit's re-decisions take a
branch whose tool fails in 55 % of rollouts, so its effect on the surviving pairs (0.23)
falls below a later step's (0.3). For each seed, ``attribute`` either names a step (exit 0)
or refuses (``RolloutsFailed``, exit 2: the lost pairs could change the verdict). Printed:
the runs that named the true culprit, the smaller step, another step or none, and the
refusals, with the Wilson 95 % interval of the smaller-step rate (the goal: ≤ 5 %).

    python benchmarks/lost_rollouts.py --seeds 100
"""

from __future__ import annotations

import argparse
from collections import Counter

from otelcar.attribution import attribute
from otelcar.attribution.stats import wilson
from otelcar.replay import load_run
from otelcar.replay.engine import RolloutsFailed
from otelcar.testing import scenarios as synthetic


def outcome_of(seed: int, scenario: synthetic.Scenario) -> str:
    """What one run said: culprit, smaller, other, none (no culprit) or refused."""
    steps, registry, outcome = synthetic.build(scenario)
    run = load_run(synthetic.TRACE_ID, steps)
    try:
        result = attribute(run, registry=registry, outcome=outcome, seed=seed)
    except RolloutsFailed:
        return "refused"
    if result.culprit is None:
        return "none"
    if result.culprit.index == scenario.answer:
        return "culprit"
    return "smaller" if result.culprit.index == scenario.extra["smaller"] else "other"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=100)
    args = parser.parse_args()
    scenario = synthetic.lost_branch()
    counts = Counter(outcome_of(seed, scenario) for seed in range(args.seeds))
    rate = wilson(counts["smaller"], args.seeds)
    print(f"{scenario.name}, {args.seeds} seeds: {dict(counts)}")
    print(
        f"smaller step named with exit 0: {counts['smaller']}/{args.seeds} "
        f"(Wilson 95% {100 * rate.low:.1f}–{100 * rate.high:.1f}%; goal ≤ 5%)"
    )


if __name__ == "__main__":
    main()
