"""The policy check's core: re-decide recorded decisions on their exact recorded contexts and
measure how often the registered policy reproduces the recorded action (the method:
:mod:`otelcar.attribution.faithfulness`, which adds ``otelcar why``'s ``--same`` rules).

It sits in the steps layer because ``attribute`` runs it as a stage at its culprit
(:func:`~otelcar.attribution.steps.attribute.attribute_async`), drawing on the refutation's
seeds so that the re-decisions the refutation already made there are served from the request
cache. Here a re-decision is judged by a rule object (``matches(action, env)``):
:class:`SameAction` (the same calls with equal arguments, or the same text) by default.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from otelcar.attribution.experiment.redecisions import (
    DecisionError,
    SameDecision,
    Sample,
    Sampler,
    canonical,
    describe_action,
)
from otelcar.attribution.experiment.seeds import SeedSpace
from otelcar.attribution.frozen import freeze_sequences
from otelcar.attribution.stats import wilson
from otelcar.messages import Message
from otelcar.notes import Note, note
from otelcar.policies.base import PolicyError
from otelcar.policies.registry import PolicyRegistry
from otelcar.replay.harness import Budget, BudgetExhausted, Environment, decision_request
from otelcar.replay.recorded import RecordedDecision, RecordedRun

#: The seed stage of the check (its own draws: :mod:`otelcar.attribution.experiment.seeds`).
STAGE = "policy.check"
#: How many other actions are listed per decision.
INSTEAD_SHOWN = 3

#: ``rule_for(decision)``: the rule a re-decision of ``decision`` is judged by (raises
#: :class:`~otelcar.attribution.experiment.redecisions.DecisionError` when it cannot apply).
RuleFor = Callable[[RecordedDecision], SameDecision]


def same_action_rule(decision: RecordedDecision) -> SameDecision:
    """The default rule: :class:`SameAction` of the recorded action."""
    assert decision.action is not None
    return SameAction(decision.action)  # type: ignore[return-value]


def _words(text: str | None) -> str:
    return " ".join((text or "").split()).casefold()


def same_action(action: Message, recorded: Message) -> bool:
    """Whether ``action`` is the recorded action: the same calls with equal arguments (ids
    ignored, counted), or for replies without calls the same text up to case and spacing."""
    if action.tool_calls or recorded.tool_calls:
        calls = Counter((c.name, canonical(c.arguments)) for c in action.tool_calls)
        return calls == Counter((c.name, canonical(c.arguments)) for c in recorded.tool_calls)
    return _words(action.content) == _words(recorded.content)


@dataclass(frozen=True)
class SameAction:
    """The rule ``action``: a re-decision is the recorded action (:func:`same_action`)."""

    recorded: Message
    spec: str = "action"

    def describe(self) -> str:
        return f"repeats {describe_action(self.recorded)}"

    async def matches(self, action: Message, env: Environment) -> bool:
        return same_action(action, self.recorded)


@dataclass(frozen=True)
class DecisionFaithfulness:
    """One decision: reproduced ``reproduced`` of ``n`` re-decisions (``errors`` more
    failed), the Wilson interval of the rate, what the policy did instead, the recorded
    temperature; ``note`` says why a decision was not checked (``n`` is then 0)."""

    step: int
    agent: str | None
    name: str | None
    recorded: str
    rule: str
    reproduced: int
    n: int
    errors: int
    low: float
    high: float
    temperature: float | None
    instead: list[tuple[str, int]] = field(default_factory=list)
    note: str | None = None
    differences: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float | None:
        return self.reproduced / self.n if self.n else None

    @property
    def greedy(self) -> bool:
        """Recorded at temperature 0 (the policy should then reproduce every time)."""
        return self.temperature == 0

    def below(self, min_rate: float) -> bool:
        """The upper bound of the rate is below ``min_rate`` (a decision not checked never
        is)."""
        return self.n > 0 and self.high < min_rate

    def unfaithful(self, min_rate: float) -> bool:
        """Shown below ``min_rate`` with a reason: recorded greedy, or a request that
        differs from the recorded one (module docstring)."""
        return self.below(min_rate) and (self.greedy or bool(self.differences))

    def rare(self, min_rate: float) -> bool:
        """Shown below ``min_rate`` with nothing to blame: an intermittent decision."""
        return self.below(min_rate) and not self.unfaithful(min_rate)

    def to_dict(self, min_rate: float) -> dict[str, Any]:
        return {
            "step": self.step,
            "agent": self.agent,
            "name": self.name,
            "recorded": self.recorded,
            "rule": self.rule,
            "reproduced": self.reproduced,
            "n": self.n,
            "errors": self.errors,
            "rate": self.rate,
            "interval": [self.low, self.high],
            "temperature": self.temperature,
            "residual_nondeterminism": (
                1 - self.rate if self.greedy and self.rate is not None else None
            ),
            "unfaithful": self.unfaithful(min_rate),
            "rare": self.rare(min_rate),
            "differences": list(self.differences),
            "instead": [{"action": a, "count": c} for a, c in self.instead],
            "note": self.note,
        }


@dataclass(frozen=True)
class PolicyCheck:
    """Every checked decision of one trace, the settings, and what it cost."""

    trace_id: str
    same: str
    samples: int
    confidence: float
    min_rate: float
    seed: int
    decisions: tuple[DecisionFaithfulness, ...]
    cost: dict[str, int]

    def __post_init__(self) -> None:
        freeze_sequences(self)

    def unfaithful(self) -> list[DecisionFaithfulness]:
        return [d for d in self.decisions if d.unfaithful(self.min_rate)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "policy_check",
            "trace_id": self.trace_id,
            "same": self.same,
            "samples": self.samples,
            "confidence": self.confidence,
            "min_rate": self.min_rate,
            "seed": self.seed,
            "decisions": [d.to_dict(self.min_rate) for d in self.decisions],
            "unfaithful_steps": [d.step for d in self.unfaithful()],
            "cost": self.cost,
        }


def request_differences(
    run: RecordedRun, decision: RecordedDecision, registry: PolicyRegistry
) -> list[str]:
    """How the request a re-decision of ``decision`` sends differs from the recorded one:
    every part otelcar inferred (a part the policy itself sets, its ``tool_choice``, is the
    user's), another model, another temperature. Empty: the recorded request, as recorded or
    declared."""
    spec = run.requests.spec(decision)
    try:
        policy: Any = registry.llm_for(agent=decision.agent, name=decision.name)
    except PolicyError:
        policy = None
    out = [
        f"{label} inferred ({part.basis})"
        for label, part in (("tools", spec.tools), ("tool choice", spec.tool_choice))
        if part.source == "inferred"
        and not (label == "tool choice" and getattr(policy, "tool_choice", None) is not None)
    ]
    model = getattr(policy, "model", None)
    if model and decision.model and model != decision.model:
        out.append(f"model {model} (recorded {decision.model})")
    recorded = _temperature(decision)
    if recorded is not None and hasattr(policy, "sent_temperature"):
        request = decision_request(
            run, decision, decision.context or [], seed=0, step=decision.step,
            agent=decision.agent,
        )  # fmt: skip
        sent = policy.sent_temperature(request)  # what the policy sends, as it decides it
        if float(sent) != recorded:
            out.append(f"temperature {sent} (recorded {recorded})")
    return out


def _temperature(decision: RecordedDecision) -> float | None:
    value = (decision.params or {}).get("temperature")
    return float(value) if isinstance(value, int | float) else None


async def check_decisions(
    run: RecordedRun,
    *,
    registry: PolicyRegistry,
    samples: int = 10,
    same: str = "action",
    rule_for: RuleFor = same_action_rule,
    seed: int = 0,
    confidence: float = 0.95,
    min_rate: float = 0.5,
    steps: Sequence[int] | None = None,
    budget: Budget | None = None,
    env: Environment | None = None,
    on_sample: Callable[[Sample], None] | None = None,
    stage: str | Mapping[int, str] = STAGE,
) -> PolicyCheck:
    """Re-decide every recorded decision of ``run`` (or those of ``steps``) ``samples`` times
    on its exact recorded context and measure how often the registered policy reproduces the
    recorded action, each re-decision judged by ``rule_for(decision)`` (``same`` names the
    rule in the result).

    Re-decision ``r`` of decision ``i`` uses the seed ``(stage seed, r, i)``, which is the
    seed rollout ``r`` of an estimator's stage ``stage`` uses for decision ``i``: with
    ``stage="refute"`` and ``env`` the environment ``attribute`` ran in, the re-decisions of
    the culprit that the refutation's ``P_{k−1}`` rollouts already made on its recorded
    context are the same requests and are served from the request cache (free). Which
    re-decisions are taken (``0..samples−1``) is fixed before any is seen, so the reuse does
    not depend on when the refutation stopped: it only decides which of them cost a call.
    ``stage`` may map steps to stages (a step not in it draws on :data:`STAGE`)."""
    if samples < 1:
        raise ValueError("a policy check needs at least one re-decision per decision")
    env = env or Environment(registry, budget or Budget())
    before = env.accounting.to_dict()
    wanted = set(steps) if steps is not None else None
    seeds = SeedSpace(seed)
    found: list[DecisionFaithfulness] = []
    for decision in run.decisions:
        if decision.step is None or (wanted is not None and decision.step not in wanted):
            continue
        described = describe_action(decision.action)

        def skipped(note: str, d: RecordedDecision = decision, shown: str = described) -> None:
            found.append(
                DecisionFaithfulness(
                    d.step, d.agent, d.name, shown, same, 0, 0, 0, 0.0, 1.0,
                    _temperature(d), note=note,
                )
            )  # fmt: skip

        if decision.action is None:
            skipped("no recorded action")
            continue
        try:
            rule = rule_for(decision)
            named = stage if isinstance(stage, str) else stage.get(decision.step, STAGE)
            sampler = Sampler(
                run, decision, env, rule, seed=seeds.stage(named), on_sample=on_sample
            )
        except DecisionError as exc:
            skipped(str(exc))
            continue
        differences = request_differences(run, decision, registry)
        arm = await sampler.ensure([], samples)
        valid = arm.valid()
        reproduced = sum(1 for s in valid if s.bad)
        interval = wilson(reproduced, len(valid), confidence)
        instead = Counter(describe_action(s.action) for s in valid if not s.bad)
        found.append(
            DecisionFaithfulness(
                decision.step,
                decision.agent,
                decision.name,
                described,
                rule.describe(),
                reproduced,
                len(valid),
                len(arm.samples) - len(valid),
                interval.low,
                interval.high,
                _temperature(decision),
                instead.most_common(INSTEAD_SHOWN),
                differences=differences,
            )
        )
    after = env.accounting.to_dict()
    return PolicyCheck(
        run.trace_id,
        same,
        samples,
        confidence,
        min_rate,
        seed,
        found,
        {k: after[k] - before[k] for k in after},
    )


def check_notes(check: PolicyCheck) -> list[Note]:
    """The notes an attribution carries for its policy check: one per decision the policy
    rarely reproduces with a reason to suspect another agent, one per rare reproduction on
    the recorded request (an intermittent decision of the agent that ran)."""
    notes = [
        note(
            "policy_unfaithful",
            step=decision.step,
            reproduced=decision.reproduced,
            n=decision.n,
            confidence=check.confidence,
            high=decision.high,
            differences=list(decision.differences),
        )
        for decision in check.unfaithful()
    ]
    notes.extend(
        note("policy_rare", step=decision.step, reproduced=decision.reproduced, n=decision.n)
        for decision in check.decisions
        if decision.rare(check.min_rate)
    )
    return notes


@dataclass(frozen=True)
class CheckStage:
    """What ``attribute``'s policy-check stage adds to its result: the check (``None`` when
    none ran), its notes, and the policy calls it made (re-decisions the refutation had
    already made are cache hits, not calls)."""

    check: PolicyCheck | None
    notes: list[Note]
    calls: int


async def check_stage(
    run: RecordedRun,
    env: Environment,
    *,
    culprit: int | None,
    harmful: int | None,
    samples: int,
    seed: int,
) -> CheckStage:
    """``attribute``'s policy check at its ``culprit`` step and at the ``harmful`` step (the
    one that made the harmful call, when it differs): ``samples`` re-decisions each on the
    recorded context, in ``env``, each drawn where ``attribute`` already re-decided that step
    on that context (:func:`check_decisions`), so those re-decisions are served from the
    request cache: the culprit on the refutation's seeds (stage ``refute``: its ``P_{k−1}``
    rollouts), the harmful step on the curve's (stage ``attribute``: every curve plan
    ``P_{h−1}`` re-decides it on its recorded context in the first look). Which re-decisions
    are taken is fixed before any is seen. Nothing runs without a culprit or samples; a spent
    budget gives a note instead of the check."""
    if culprit is None or samples < 1:
        return CheckStage(None, [], 0)
    stages = {culprit: "refute"}
    if harmful is not None and harmful != culprit:
        stages[harmful] = "attribute"
    before = env.accounting.llm_calls
    try:
        check = await check_decisions(
            run, registry=env.registry, samples=samples, seed=seed, steps=sorted(stages),
            env=env, stage=stages,
        )  # fmt: skip
    except BudgetExhausted as exc:
        not_run = note("policy_check_not_run", error=str(exc))
        return CheckStage(None, [not_run], env.accounting.llm_calls - before)
    return CheckStage(check, check_notes(check), check.cost.get("llm_calls", 0))
