"""Arms of seeded re-decisions: one recorded decision re-decided on edited contexts.

Sample ``r`` of every arm uses the seed ``derive_seed(seed, r, decision index)``, the seed
rollout ``r`` of ``Plan((Resample(step),))`` gives this decision: the base arm's requests are
the replay's own, requests are cached in the :class:`~otelcar.replay.Environment` (counted and
budgeted there), and the arms of one sampler share seeds (common random numbers: with a
seed-honouring policy an edit that changes nothing gives identical samples). Two samplers with
different seeds (:class:`~otelcar.attribution.experiment.seeds.SeedSpace` stages) draw
independently: that is how ``fix`` validates on draws ``why`` never saw.

A :class:`SameDecision` rule says whether a re-decision repeats the recorded decision (a
"bad" sample); the sampler's ``label`` says what it did instead (``why``'s labels:
:func:`otelcar.attribution.context.decisions.classify`).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from otelcar.attribution.stats import Interval, wilson
from otelcar.errors import OtelcarError
from otelcar.messages import Message
from otelcar.messages import canonical as canonical  # re-exported: its former home
from otelcar.messages import describe_action as describe_action  # re-exported
from otelcar.policies.base import LLMPolicy, PolicyUnavailable
from otelcar.replay.engine import raise_if_mostly_failed
from otelcar.replay.harness import BudgetExhausted, Environment, decision_request, derive_seed
from otelcar.replay.plan import Edit, EditContext, Plan
from otelcar.replay.recorded import RecordedDecision, RecordedRun

#: ``label(action, context, removed)``: what a re-decision that is not the same decision did.
Label = Callable[[Message, Sequence[Message], tuple[Any, ...]], str]


class DecisionError(OtelcarError):
    """The decision cannot be re-decided or compared (no context, no rule, bad rule)."""


class SameDecision(Protocol):
    """A rule saying whether a re-decision repeats the recorded decision."""

    spec: str

    def describe(self) -> str: ...

    async def matches(self, action: Message, env: Environment) -> bool: ...


# -- arms ----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Sample:
    """One re-decision: ``bad`` (repeats the decision; ``None`` on error) and what it did."""

    r: int
    bad: bool | None
    action: Message | None
    kind: str  # same | different | answer | refetch | ask | stop | error
    error: str | None = None


@dataclass
class Arm:
    """The re-decisions of one edited context, by sample index."""

    key: str
    edits: tuple[Edit, ...]
    removed: tuple[Any, ...] = ()  # what the edits remove (why's pieces)
    samples: dict[int, Sample] = field(default_factory=dict)

    def valid(self, upto: int | None = None) -> list[Sample]:
        return [
            s
            for r, s in sorted(self.samples.items())
            if s.bad is not None and (upto is None or r < upto)
        ]

    @property
    def n(self) -> int:
        return len(self.valid())

    @property
    def bad(self) -> int:
        return sum(bool(s.bad) for s in self.valid())

    @property
    def rate(self) -> float:
        return self.bad / self.n if self.n else float("nan")

    def ci(self, confidence: float = 0.95) -> Interval:
        return wilson(self.bad, self.n, confidence)

    @property
    def errors(self) -> list[str]:
        return [s.error or "" for s in self.samples.values() if s.bad is None]

    def instead(self) -> Counter[str]:
        return Counter(s.kind for s in self.valid() if not s.bad)

    def alternative(self) -> Message | None:
        """The most common action among the samples that did not repeat the decision."""
        counts: Counter[str] = Counter()
        first: dict[str, Message] = {}
        for s in self.valid():
            if not s.bad and s.action is not None:
                key = describe_action(s.action)
                counts[key] += 1
                first.setdefault(key, s.action)
        return first[counts.most_common(1)[0][0]] if counts else None


class Sampler:
    """Re-decides one recorded decision on edited contexts (see the module docstring)."""

    def __init__(
        self,
        run: RecordedRun,
        decision: RecordedDecision,
        env: Environment,
        same: SameDecision,
        *,
        seed: int = 0,
        policy: LLMPolicy | None = None,
        on_sample: Callable[[Sample], None] | None = None,
        label: Label | None = None,
    ) -> None:
        if decision.context is None:
            raise DecisionError(
                f"step {decision.step}: its context was not captured "
                f"({'; '.join(decision.problems) or 'no input messages'}): nothing to re-decide"
            )
        self.run = run
        self.decision = decision
        self.context: list[Message] = list(decision.context)
        self.env = env
        self.same = same
        self.seed = seed
        self.policy = policy or env.registry.llm_for(agent=decision.agent, name=decision.name)
        self.on_sample = on_sample
        self.label = label
        self.arms: dict[str, Arm] = {}

    def key(self, edits: Sequence[Edit]) -> str:
        return Plan(tuple(EditContext(self.decision.step, e) for e in edits)).to_json()

    def arm(self, edits: Sequence[Edit], removed: Sequence[Any] = ()) -> Arm:
        key = self.key(edits)
        if key not in self.arms:
            self.arms[key] = Arm(key, tuple(edits), tuple(removed))
        return self.arms[key]

    async def ensure(self, edits: Sequence[Edit], n: int, removed: Sequence[Any] = ()) -> Arm:
        """The arm of ``edits`` with samples ``0..n-1`` (missing ones drawn concurrently).

        Raises :class:`~otelcar.replay.BudgetExhausted` once every started sample finished.
        """
        arm = self.arm(edits, removed)
        missing = [r for r in range(n) if r not in arm.samples]
        if not missing:
            return arm
        context = list(self.context)
        for edit in arm.edits:
            context = edit.apply(context)
        results = await asyncio.gather(
            *(self._one(context, arm, r) for r in missing), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BudgetExhausted):
                raise result
            if isinstance(result, BaseException):
                raise result
        samples = [s for a in self.arms.values() for s in a.samples.values()]
        failed = [s for s in samples if s.kind == "error"]
        raise_if_mostly_failed(
            len(samples), len(failed), [s.error for s in failed], what="re-decisions"
        )
        return arm

    async def _one(self, context: list[Message], arm: Arm, r: int) -> None:
        seed = derive_seed(self.seed, r, self.decision.index)
        request = decision_request(
            self.run,
            self.decision,
            context,
            seed=seed,
            step=self.decision.step,
            agent=self.decision.agent,
        )
        try:
            decision, _ = await self.env.decide(self.policy, request)
            action = decision.message
            bad = await self.same.matches(action, self.env)
        except (BudgetExhausted, PolicyUnavailable):
            raise
        except Exception as exc:  # a failing policy or judge: this sample only
            sample = Sample(r, None, None, "error", f"{type(exc).__name__}: {exc}")
        else:
            if bad:
                kind = "same"
            elif self.label is not None:
                kind = self.label(action, self.context, arm.removed)
            else:
                kind = "different"
            sample = Sample(r, bad, action, kind)
        arm.samples[r] = sample
        if self.on_sample is not None:
            self.on_sample(sample)
