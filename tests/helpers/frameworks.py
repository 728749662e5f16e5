"""The framework fixtures (real instrumentations' traces) loaded as runs, and a seeded random
policy and random plans to replay them under (tests of incremental and held replay)."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from otelcar import Store, import_files
from otelcar.messages import Message, ToolCall
from otelcar.policies import CallableLLMPolicy, CallableToolPolicy, DecisionRequest, PolicyRegistry
from otelcar.replay import Do, Environment, Observe, Plan, Remove, Resample, load_run
from otelcar.replay.recorded import RecordedRun

FRAMEWORKS = Path(__file__).resolve().parents[2] / "fixtures" / "frameworks"
CASES = sorted(p.parent.name for p in FRAMEWORKS.glob("*/expected.json"))


def trace_files(folder: Path) -> list[Path]:
    """The trace files under ``folder`` (not its notes, generators or expected results)."""
    files = [p for p in sorted(folder.rglob("*")) if p.is_file() and p.suffix != ".md"]
    return [p for p in files if p.suffix not in (".py", ".txt") and p.name != "expected.json"]


def runs_in(folder: Path, tmp_path: Path) -> list[RecordedRun]:
    """Every trace with two or more decisions among the trace files under ``folder``."""
    store = Store(tmp_path / "store")
    import_files(trace_files(folder), store=store)
    runs = []
    for trace_id in store.traces()["trace_id"].to_list():
        run = load_run(trace_id, store.steps(trace_id))
        if run.horizon >= 2:
            runs.append(run)
    return runs


def _policy(seen: list[DecisionRequest]) -> Callable[[DecisionRequest], Message]:
    """A seeded random LLM policy (an answer or a tool call) that keeps what it is sent."""

    def decide(request: DecisionRequest) -> Message:
        seen.append(request)
        rng = random.Random(request.seed)
        if rng.random() < 0.5:
            return Message("assistant", f"answer {rng.randrange(3)}")
        name = rng.choice(["search", "lookup"])
        return Message("assistant", None, (ToolCall(name, {"q": rng.randrange(3)}, "c1"),))

    return decide


def random_env(seen: list[DecisionRequest]) -> Environment:
    """An environment of the random policy (requests kept in ``seen``) and a fixed tool."""
    registry = PolicyRegistry().register("llm", CallableLLMPolicy(_policy(seen), name="p"))
    registry.register("tool:*", CallableToolPolicy(lambda request: "tool says hi", name="t"))
    return Environment(registry)


def random_plans(run: RecordedRun, rng: random.Random, count: int) -> list[Plan]:
    """The factual plan and ``count`` random one-intervention plans of ``run``."""
    steps = [d.step for d in run.decisions]
    plans = [Plan()]
    for _ in range(count):
        step = rng.choice(steps)
        decision = run.decision_at_step(step)
        kind = rng.choice(["resample", "resample_from", "do", "remove", "observe"])
        if kind == "resample":
            plans.append(Plan((Resample(step),)))
        elif kind == "resample_from":
            plans.append(Plan.resample_from(step, steps))
        elif kind == "do":
            plans.append(Plan((Do(step, Message("assistant", "forced answer")),)))
        elif kind == "remove":
            plans.append(Plan((Remove(step),)))
        elif decision.action is not None and decision.action.tool_calls:
            plans.append(Plan((Observe(step, "mocked observation", 0),)))
    return plans
