"""Is the resample policy the agent that ran? Each recorded decision re-decided on its exact
recorded context.

Attribution answers questions about the policy that re-decides, which is often not the model
that produced the trace (a cheaper or local model, another provider, another temperature). So
before trusting a counterfactual, ask the policy to re-decide what the agent decided: every
recorded decision (or the ``steps`` given) is re-decided ``samples`` times on its recorded
context, unedited, with seeds of the stage ``policy.check`` (never the draws another
estimator uses). A re-decision **reproduces** the decision when it is the same action:

- ``same="action"`` (the default): the same tool calls with equal arguments (ids ignored, as
  many of each), or — for a reply without calls — the same text, ignoring case and spacing;
- any rule of ``otelcar why --same`` (``tool``, ``tool+args``, ``regex:…``, ``judge``,
  ``outcome``), per decision; a decision the rule cannot apply to is reported with why.

Per decision: reproduced ``k`` of ``n``, the Wilson interval of the rate, what the policy did
instead (the most common other actions, with counts), and at recorded temperature 0 the
share that differed, reported as **residual nondeterminism** (a faithful greedy decoder
reproduces every time). Per decision also **what differs** between the request the policy
is sent and the recorded one: each part of the request otelcar inferred
(:mod:`otelcar.replay.requests`), another model, another temperature.

A rate whose upper bound is below ``min_rate`` (default 0.5) is only an alarm with a reason.
The recorded action may be the rarer choice of the agent that ran (an intermittent failure is
the usual case), and a faithful policy then reproduces it rarely too. So a decision is
**unfaithful** when its rate is shown below ``min_rate`` *and* either it was recorded at
temperature 0 (a faithful greedy decoder reproduces every time) or the request differs from
the recorded one (the differences are the advice: declare them); it is **rare** when its rate
is shown below ``min_rate`` with nothing to blame, which is what an intermittent decision of
the real agent looks like, and is reported as such, never as evidence of another agent.
Every call is counted in ``cost``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from otelcar.attribution.context.decisions import same_decision
from otelcar.attribution.experiment.redecisions import DecisionError, SameDecision, Sample
from otelcar.attribution.steps.policy_check import (
    INSTEAD_SHOWN,
    STAGE,
    DecisionFaithfulness,
    PolicyCheck,
    SameAction,
    check_decisions,
    check_notes,
    request_differences,
    same_action,
)
from otelcar.policies.registry import PolicyRegistry
from otelcar.replay.harness import Budget, Environment
from otelcar.replay.recorded import RecordedDecision, RecordedRun

__all__ = [
    "INSTEAD_SHOWN",
    "STAGE",
    "DecisionFaithfulness",
    "PolicyCheck",
    "SameAction",
    "check_notes",
    "check_policy",
    "request_differences",
    "same_action",
]


def _rule(
    spec: str, decision: RecordedDecision, registry: PolicyRegistry, outcome: Any
) -> SameDecision:
    assert decision.action is not None
    if spec == "action":
        return SameAction(decision.action)  # type: ignore[return-value]
    return same_decision(spec, decision.action, registry, outcome=outcome)


async def check_policy(
    run: RecordedRun,
    *,
    registry: PolicyRegistry,
    samples: int = 10,
    same: str = "action",
    seed: int = 0,
    confidence: float = 0.95,
    min_rate: float = 0.5,
    steps: Sequence[int] | None = None,
    outcome: Any = None,
    budget: Budget | None = None,
    env: Environment | None = None,
    on_sample: Callable[[Sample], None] | None = None,
    stage: str = STAGE,
) -> PolicyCheck:
    """Re-decide every recorded decision of ``run`` (or those of ``steps``) ``samples`` times
    on its exact recorded context and measure how often the registered policy reproduces the
    recorded action, judged by the rule ``same`` (see the module docstring; the seeds:
    :func:`~otelcar.attribution.steps.policy_check.check_decisions`)."""
    known = ("action", "outcome", "tool", "tool+args", "judge")
    if same not in known and not same.startswith(("regex:", "judge:")):
        raise DecisionError(
            f"unknown --same {same!r}; use action, outcome, tool, tool+args, regex:PATTERN or judge"
        )
    return await check_decisions(
        run,
        registry=registry,
        samples=samples,
        same=same,
        rule_for=lambda decision: _rule(same, decision, registry, outcome),
        seed=seed,
        confidence=confidence,
        min_rate=min_rate,
        steps=steps,
        budget=budget,
        env=env,
        on_sample=on_sample,
        stage=stage,
    )
