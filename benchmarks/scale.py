"""Scale benchmark: ``aggregate`` over many failing traces, in-process versus on Ray.

The batch: ``--traces`` generated failing runs of one scripted agent
(:mod:`otelcar.testing.scenarios`;
six tool decisions and a final answer; re-decided, decision 3 goes wrong 35 % of the time,
every other one 5 %). Most recorded runs went wrong at decision 3, the rest at another
decision. The policy answers after a fixed latency (``--latency-ms``, ``asyncio.sleep``: a
model server that the process waits on; ``--blocking`` uses ``time.sleep`` instead, like an
in-process model holding the CPU). Every trace is attributed with ``--rollouts`` rollouts per
plan (fixed R, so every executor does exactly the same work).

Measured in the same run, on this machine:

1. **local**: :class:`~otelcar.executors.LocalExecutor` (one process, traces one at a time);
2. **ray rollouts**: :class:`~otelcar.executors.ray_executor.RayExecutor`, every rollout a
   task, ``trace_concurrency`` traces at once;
3. **ray traces**: the same executor, every trace's whole attribution one task
   (``trace_tasks=True``).

For each: wall time, rollouts per second, the CPU time of the driver and of the workers (read
from ``/proc`` by worker process id) per rollout. The verdicts must be identical across the
three (the run fails otherwise). From the measured per-rollout costs it then **projects**
throughput on a cluster of N one-CPU workers: min(N / worker CPU per rollout, 1 / driver CPU
per rollout, N × concurrency / waiting per rollout). The projection ignores the network and
assumes the policy servers keep up; it is labelled as such.

Run ``python benchmarks/scale.py`` (1,000 traces) or ``--quick`` (50). See
``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from otelcar.attribution.aggregate import aggregate, attribute_traces
from otelcar.executors import Executor, LocalExecutor
from otelcar.policies.python import CallableLLMPolicy
from otelcar.policies.registry import PolicyRegistry
from otelcar.testing import scenarios as synthetic

DECISIONS = 6
WEAK = 3
CLOCK = os.sysconf("SC_CLK_TCK")


def agent(recorded_bad: int) -> synthetic.Scenario:
    """The agent, with a recorded run that went wrong at ``recorded_bad``."""
    choices: list[synthetic.Choices] = [[("BAD", 0.05), ("ok", 0.95)] for _ in range(DECISIONS)]
    choices[WEAK] = [("BAD", 0.35), ("ok", 0.65)]
    recorded = ["ok"] * DECISIONS
    recorded[recorded_bad] = "BAD"
    return synthetic.Scenario("agent", recorded, choices, lambda c: "BAD" in c, recorded_bad)


def batch(count: int, seed: int) -> list[tuple[str, pl.DataFrame]]:
    """``count`` failing traces: 70 % went wrong at the weak decision, the rest elsewhere."""
    rng = random.Random(seed)
    traces = []
    for n in range(count):
        bad = WEAK if rng.random() < 0.7 else rng.choice([i for i in range(DECISIONS) if i != WEAK])
        trace_id = f"{n + 1:032x}"
        steps = synthetic.steps_table(agent(bad)).with_columns(pl.lit(trace_id).alias("trace_id"))
        traces.append((trace_id, steps))
    return traces


def registry_and_outcome(latency_s: float, blocking: bool) -> tuple[PolicyRegistry, Any]:
    """The agent's policies, the LLM one answering after ``latency_s``."""
    _, registry, outcome = synthetic.build(agent(WEAK))
    decide: Callable[[Any], Any] = registry.llm("llm").function  # type: ignore[attr-defined]

    if blocking:

        def slow(request: Any) -> Any:
            time.sleep(latency_s)
            return decide(request)

    else:

        async def slow(request: Any) -> Any:  # type: ignore[misc]
            await asyncio.sleep(latency_s)
            return decide(request)

    registry.register("llm", CallableLLMPolicy(slow, name="scripted", max_concurrency=64))
    return registry, outcome


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of a process (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK


@dataclass
class Measured:
    name: str
    wall_s: float
    driver_cpu_s: float
    worker_cpu_s: float
    rollouts: int
    calls: int
    verdicts: list[dict[str, Any]]
    headline: str

    @property
    def per_rollout_ms(self) -> tuple[float, float]:
        return (1000 * self.driver_cpu_s / self.rollouts, 1000 * self.worker_cpu_s / self.rollouts)


def measure(
    name: str,
    traces: list[tuple[str, pl.DataFrame]],
    executor: Executor,
    *,
    trace_tasks: bool,
    options: dict[str, Any],
    worker_pids: list[int],
) -> Measured:
    cpu0, workers0 = time.process_time(), sum(process_cpu(p) for p in worker_pids)
    start = time.perf_counter()
    verdicts = attribute_traces(traces, executor=executor, trace_tasks=trace_tasks, **options)
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu0
    workers = sum(process_cpu(p) for p in worker_pids) - workers0
    result = aggregate(verdicts)
    cost = result.cost()
    comparable = [
        {k: v for k, v in verdict.to_dict().items() if k != "cost"} for verdict in verdicts
    ]
    return Measured(
        name,
        wall,
        cpu,
        workers,
        int(cost.get("rollouts", 0)),
        int(cost.get("llm_calls", 0)),
        comparable,
        result.headline(),
    )


def project(
    driver_ms: float, worker_ms: float, waiting_ms: float, concurrency: int, n: int
) -> float:
    """Rollouts per second on ``n`` one-CPU workers (see the module docstring)."""
    limits = [n * 1000 / worker_ms if worker_ms else float("inf")]
    limits.append(1000 / driver_ms if driver_ms else float("inf"))
    limits.append(n * concurrency * 1000 / waiting_ms if waiting_ms else float("inf"))
    return min(limits)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="50 traces")
    parser.add_argument("--rollouts", type=int, default=8, help="rollouts per plan (fixed R)")
    parser.add_argument("--latency-ms", type=float, default=5.0)
    parser.add_argument("--blocking", action="store_true", help="time.sleep, not asyncio")
    parser.add_argument("--concurrency", type=int, default=8, help="rollouts per worker")
    parser.add_argument("--cpus", type=int, default=None, help="local Ray cluster CPUs")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    count = 50 if args.quick else args.traces

    import ray

    from otelcar.executors.ray_executor import RayExecutor

    print(
        f"python {platform.python_version()}, ray {ray.__version__}, {os.cpu_count()} CPUs; "
        f"{count} traces, R = {args.rollouts}, latency {args.latency_ms} ms "
        f"({'blocking' if args.blocking else 'asyncio'})",
        flush=True,
    )
    traces = batch(count, args.seed)
    registry, outcome = registry_and_outcome(args.latency_ms / 1000, args.blocking)
    options = {
        "registry": registry,
        "outcome": outcome,
        "rollouts": args.rollouts,
        "seed": args.seed,
        "concurrency": args.concurrency,
    }
    runs = [
        measure(
            "local", traces, LocalExecutor(), trace_tasks=False, options=options, worker_pids=[]
        )
    ]
    print(f"local done in {runs[0].wall_s:.1f} s", flush=True)
    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
    try:
        executor = RayExecutor(concurrency=args.concurrency)
        pids = executor.worker_pids()
        for name, trace_tasks in (("ray rollouts", False), ("ray traces", True)):
            runs.append(
                measure(
                    name,
                    traces,
                    executor,
                    trace_tasks=trace_tasks,
                    options=options,
                    worker_pids=pids,
                )
            )
            print(f"{name} done in {runs[-1].wall_s:.1f} s", flush=True)
        workers = executor.workers
        executor.close()
    finally:
        ray.shutdown()

    local = runs[0]
    mismatches = [r.name for r in runs[1:] if r.verdicts != local.verdicts]
    print(f"\n{local.headline}\n")
    print(
        f"{'executor':14} {'wall s':>8} {'vs local':>8} {'rollouts/s':>11} "
        f"{'driver ms/rollout':>18} {'workers ms/rollout':>19}"
    )
    for r in runs:
        driver, worker = r.per_rollout_ms
        print(
            f"{r.name:14} {r.wall_s:8.1f} {r.wall_s / local.wall_s:7.2f}x "
            f"{r.rollouts / r.wall_s:11.0f} {driver:18.3f} {worker:19.3f}"
        )
    calls_per_rollout = local.calls / max(1, local.rollouts)
    waiting_ms = calls_per_rollout * args.latency_ms
    local_ms = 1000 * local.driver_cpu_s / local.rollouts
    print(
        f"\n{local.rollouts} rollouts per executor ({local.rollouts / count:.0f} per trace), "
        f"{calls_per_rollout:.2f} policy calls per rollout (the rest served by the request "
        f"cache), {workers} Ray workers on this machine."
    )
    for r in runs[1:]:
        driver, worker = r.per_rollout_ms
        print(
            f"{r.name}: overhead per rollout {driver + worker - local_ms:+.3f} ms CPU "
            f"(driver {driver:.3f} + workers {worker:.3f} vs {local_ms:.3f} in-process)"
        )
    print(
        "\nPROJECTION (not measured): rollouts/s on a cluster of N one-CPU workers = min(N / "
        "worker CPU per rollout, 1 / driver CPU per rollout, N × concurrency / policy waiting "
        f"per rollout [{waiting_ms:.1f} ms]); no network cost, policy servers keep up."
    )
    print(f"{'N':>6} " + " ".join(f"{r.name:>14}" for r in runs[1:]))
    for n in (1, 4, 16, 64, 256, 1024):
        cells = []
        for r in runs[1:]:
            driver, worker = r.per_rollout_ms
            cells.append(f"{project(driver, worker, waiting_ms, args.concurrency, n):14.0f}")
        print(f"{n:6d} " + " ".join(cells))
    if mismatches:
        print(f"\nFAIL: verdicts differ from the local executor: {', '.join(mismatches)}")
        return 1
    print("\nverdicts identical under all three executors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
