"""Shapley values of decision steps, for failures that need several steps (AND) or that any of
several steps can cause (OR), where a single step effect cannot split the credit.

Players are decision steps. ``v(S)`` = P(fail | the steps in S take their recorded actions,
every other step is re-decided). Monte-Carlo permutation sampling (Castro et al. 2009) with
antithetic pairs (each permutation and its reverse), walking each permutation and estimating
every coalition value with ``rollouts`` fresh rollouts (their seeds are unique to the
coalition evaluation, so the request cache never serves them). The marginal contributions of
a permutation telescope to ``v(all) − v(none)`` (the efficiency check). Intervals: mean of the
per-permutation marginals ± t·s/√P (antithetic pairs averaged first, as their marginals are
dependent).
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass, field

from scipy import stats

from otelcar.attribution.steps.result import ShapleyResult, ShapleyValue
from otelcar.outcome import Outcome
from otelcar.replay.engine import run_plan_async
from otelcar.replay.harness import Environment
from otelcar.replay.plan import Do, Plan, Resample
from otelcar.replay.recorded import RecordedRun


@dataclass
class _Evaluator:
    run: RecordedRun
    env: Environment
    outcome: Outcome
    players: tuple[int, ...]  # decision indexes
    rollouts: int
    seed: int
    concurrency: int
    ran: list[int] = field(default_factory=list)  # rollouts per coalition value evaluated

    def plan(self, held: frozenset[int]) -> Plan:
        items = []
        for decision in self.run.decisions:
            if decision.index in self.players and decision.index not in held:
                items.append(Resample(decision.step))
            elif decision.action is not None:
                items.append(Do(decision.step, decision.action))
        return Plan(tuple(items))

    async def value(self, held: frozenset[int], tag: str) -> float:
        digest = hashlib.sha256(f"{self.seed}:{tag}:{sorted(held)}".encode()).digest()
        seed = int.from_bytes(digest[:4], "big") & 0x7FFFFFFF
        result = await run_plan_async(
            self.run,
            self.plan(held),
            self.env,
            rollouts=self.rollouts,
            seed=seed,
            outcome=self.outcome,
            concurrency=self.concurrency,
        )
        self.ran.append(len(result.rollouts))
        judged = result.judged
        return sum(judged) / len(judged) if judged else float("nan")


async def shapley_values(
    run: RecordedRun,
    env: Environment,
    outcome: Outcome,
    *,
    players: list[int] | None = None,
    pairs: int = 4,
    rollouts: int = 16,
    seed: int = 0,
    confidence: float = 0.95,
    concurrency: int = 8,
) -> ShapleyResult:
    """Shapley values of ``players`` (decision indexes; default all decisions)."""
    chosen = tuple(players if players is not None else [d.index for d in run.decisions])
    evaluator = _Evaluator(run, env, outcome, chosen, rollouts, seed, concurrency)
    rng = random.Random(seed)
    marginals: dict[int, list[float]] = {p: [] for p in chosen}
    for pair in range(pairs):
        order = list(chosen)
        rng.shuffle(order)
        pair_marginals: dict[int, list[float]] = {p: [] for p in chosen}
        for direction, permutation in enumerate((order, list(reversed(order)))):
            held: frozenset[int] = frozenset()
            previous = await evaluator.value(held, f"{pair}:{direction}:0")
            for position, player in enumerate(permutation, start=1):
                held = held | {player}
                current = await evaluator.value(held, f"{pair}:{direction}:{position}")
                pair_marginals[player].append(current - previous)
                previous = current
        for player, values in pair_marginals.items():
            marginals[player].append(sum(values) / len(values))
    v_all = await evaluator.value(frozenset(chosen), "all")
    v_none = await evaluator.value(frozenset(), "none")
    t = float(stats.t.ppf(1 - (1 - confidence) / 2, max(1, pairs - 1)))
    values = []
    for player in chosen:
        samples = marginals[player]
        mean = sum(samples) / len(samples)
        sd = (
            math.sqrt(sum((x - mean) ** 2 for x in samples) / (len(samples) - 1))
            if len(samples) > 1
            else float("inf")
        )
        half = t * sd / math.sqrt(len(samples))
        values.append(
            ShapleyValue(
                run.decisions[player].step,
                mean,
                (max(-1.0, mean - half), min(1.0, mean + half)),
                2 * pairs,
            )
        )
    return ShapleyResult(
        values,
        v_all,
        v_none,
        sum(v.phi for v in values),
        rollouts,
        2 * pairs,
        rollouts=sum(evaluator.ran),
    )
