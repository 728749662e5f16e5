"""Replay: rebuild the agent from its trace and run intervention plans (DESIGN.md §5).

Typical use::

    from otelcar.replay import load_run, Plan, Resample, Environment, run_plan
    run = load_run(trace_id, store.steps(trace_id))
    env = Environment(registry)               # otelcar.policies.PolicyRegistry
    result = run_plan(run, Plan((Resample(4),)), env, rollouts=20, seed=7, outcome=outcome)
"""

from otelcar.replay.engine import RolloutSet, RolloutsFailed, run_plan, run_plan_async
from otelcar.replay.fidelity import FidelityReport, check_fidelity, check_fidelity_async
from otelcar.replay.harness import (
    Accounting,
    Budget,
    BudgetExhausted,
    Environment,
    ReplayError,
    Rollout,
    decision_request,
    derive_seed,
    replay,
)
from otelcar.replay.plan import (
    Do,
    EditContext,
    InsertMessage,
    Observe,
    Plan,
    PlanError,
    Remove,
    RemoveJsonItem,
    RemoveMessage,
    RemoveText,
    ReplaceJsonItem,
    ReplaceMessage,
    ReplaceText,
    Resample,
    SwapModel,
)
from otelcar.replay.recorded import RecordedRun, load_run
from otelcar.replay.rollout_table import ROLLOUT_SCHEMA, rollout_steps

__all__ = [
    "ROLLOUT_SCHEMA",
    "Accounting",
    "Budget",
    "BudgetExhausted",
    "Do",
    "EditContext",
    "Environment",
    "FidelityReport",
    "InsertMessage",
    "Observe",
    "Plan",
    "PlanError",
    "RecordedRun",
    "Remove",
    "RemoveJsonItem",
    "RemoveMessage",
    "RemoveText",
    "ReplaceJsonItem",
    "ReplaceMessage",
    "ReplaceText",
    "ReplayError",
    "Resample",
    "Rollout",
    "RolloutSet",
    "RolloutsFailed",
    "SwapModel",
    "check_fidelity",
    "check_fidelity_async",
    "decision_request",
    "derive_seed",
    "load_run",
    "replay",
    "rollout_steps",
    "run_plan",
    "run_plan_async",
]
