"""The replay harness: the rebuilt agent, one rollout of one plan (DESIGN.md §5).

The loop: take the context of the next decision (its template expanded with the actions and
observations of *this* rollout), apply the plan's context edits, get an action (the recorded
one while the timeline has not diverged and the plan leaves the step alone; otherwise the
registered policy's, or the plan's), execute each tool call (the cassette when the same call
was recorded, the tool policy otherwise, or the plan's mocked observation), and continue
until a final answer, or the recorded horizon plus ``slack`` decisions. A held decision of an
undiverged rollout is the same in every rollout of the run, so it is adopted from the run's
shared held walk (:mod:`otelcar.replay.held`) rather than replayed again.

A rollout is a pure function of (recorded run, plan, seed): every policy call gets the seed
derived from (base seed, rollout index, decision index), so the same seeds recur across plans
(common random numbers).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from otelcar.errors import OtelcarError
from otelcar.identity import IdentityMemo
from otelcar.messages import Message
from otelcar.policies.base import (
    Decision,
    DecisionRequest,
    LLMPolicy,
    PolicyError,
    PolicyUnavailable,
    RolloutScope,
    ToolRequest,
)
from otelcar.policies.digest import MessageChain, params_json
from otelcar.policies.registry import PolicyRegistry
from otelcar.replay.cassette import Cassette
from otelcar.replay.contexts import ReplayedObservation, RolloutContexts, frozen_messages
from otelcar.replay.held import held_walk
from otelcar.replay.plan import (
    Do,
    EditContext,
    Intervention,
    Observe,
    Plan,
    PlanError,
    Remove,
    Resample,
    SwapModel,
)
from otelcar.replay.recorded import RecordedDecision, RecordedRun, ends_run, same_message

DEFAULT_SLACK = 4


class BudgetExhausted(OtelcarError):
    """The policy-call or token budget ran out."""


class ReplayError(OtelcarError):
    """A rollout could not continue (missing content, failing policy)."""


@functools.lru_cache(maxsize=1 << 16)
def derive_seed(base_seed: int, rollout: int, decision: int) -> int:
    """The seed of decision ``decision`` in rollout ``rollout`` (stable across plans;
    remembered: every plan asks for the same seeds)."""
    digest = hashlib.sha256(f"{base_seed}:{rollout}:{decision}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


@dataclass(slots=True)
class Budget:
    """Caps on policy calls and tokens, shared by all rollouts of a run (``None``: no cap),
    and ``slack``: how many decisions a diverged rollout may take past the recorded horizon
    (``[replay] slack``). :meth:`cancel` stops the run cooperatively: every policy call
    asked for afterwards raises :class:`asyncio.CancelledError` instead of being made, so
    rollouts queued behind a synchronous policy end at once rather than each running."""

    max_calls: int | None = None
    max_tokens: int | None = None
    calls: int = 0
    tokens: int = 0
    slack: int = DEFAULT_SLACK
    cancelled: bool = False

    def cancel(self) -> None:
        """Refuse every later policy call (a run being cancelled; calls in flight finish)."""
        self.cancelled = True

    def reserve(self) -> None:
        """Count one policy call about to be made; raises :class:`BudgetExhausted` when a cap
        is reached and :class:`asyncio.CancelledError` once :meth:`cancel` was called."""
        if self.cancelled:
            raise asyncio.CancelledError("the run was cancelled")
        if self.max_calls is not None and self.calls >= self.max_calls:
            raise BudgetExhausted(f"policy-call budget of {self.max_calls} spent")
        if self.max_tokens is not None and self.tokens >= self.max_tokens:
            raise BudgetExhausted(f"token budget of {self.max_tokens} spent")
        self.calls += 1


@dataclass(slots=True)
class Accounting:
    """What a run cost: policy calls (cache hits are free; ``failed_calls`` are those that
    raised, counted apart), tokens, tool-policy calls, and how many rollouts ran and failed."""

    llm_calls: int = 0
    failed_calls: int = 0
    cache_hits: int = 0
    tool_calls: int = 0
    cassette_hits: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    rollouts_run: int = 0
    rollouts_failed: int = 0

    def to_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in self.__slots__}  # type: ignore[attr-defined]


@dataclass
class Environment:
    """Shared by the rollouts of one run: policies, request cache, budget, accounting."""

    registry: PolicyRegistry
    budget: Budget = field(default_factory=Budget)
    cache: dict[str, Decision] = field(default_factory=dict)
    accounting: Accounting = field(default_factory=Accounting)
    _semaphores: dict[str, asyncio.Semaphore] = field(default_factory=dict)
    _pending: dict[str, list[asyncio.Future[None]]] = field(default_factory=dict)
    _bound_outcomes: IdentityMemo[Any, Any] = field(
        default_factory=lambda: IdentityMemo(64), repr=False, compare=False
    )

    def semaphore(self, name: str, limit: int) -> asyncio.Semaphore:
        if name not in self._semaphores:
            self._semaphores[name] = asyncio.Semaphore(max(1, limit))
        return self._semaphores[name]

    async def decide(self, policy: LLMPolicy, request: DecisionRequest) -> tuple[Decision, bool]:
        """One policy call through the request cache, the budget and the accounting.

        Returns the decision and whether it came from the cache (free). Every re-decision of
        the harness goes through here, and so do single-decision experiments (``otelcar why``),
        so the same request with the same seed is answered once per environment — also when
        rollouts ask it at the same time: they wait for the call in flight (and make their own
        if it fails), so what a run spends does not depend on how its rollouts interleave.
        """
        key = request.cache_key(policy.name)
        while True:
            cached = self.cache.get(key)
            if cached is not None:
                self.accounting.cache_hits += 1
                return cached, True
            waiting = self._pending.get(key)
            if waiting is None:
                break
            # a call for the same request is in flight: wait for it (each waiter its own
            # future, made only when there is one), then from the cache or our own call
            mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            waiting.append(mine)
            await mine
        waiters: list[asyncio.Future[None]] = []
        self._pending[key] = waiters
        try:
            self.budget.reserve()
            async with self.semaphore(f"llm:{policy.name}", policy.max_concurrency):
                decision = await policy.decide(request)
        except BaseException as exc:
            if isinstance(exc, Exception) and not isinstance(exc, BudgetExhausted):
                self.accounting.failed_calls += 1
            raise
        else:
            self.cache[key] = decision
        finally:
            del self._pending[key]
            for waiter in waiters:  # they find the decision in the cache, or try themselves
                if not waiter.done():
                    waiter.set_result(None)
        self.accounting.llm_calls += 1
        self.accounting.input_tokens += decision.input_tokens
        self.accounting.output_tokens += decision.output_tokens
        self.budget.tokens += decision.input_tokens + decision.output_tokens
        return decision, False

    def bind(self, outcome: Any) -> Any:
        """``outcome`` with every LLM policy inside it (a judge's, in any composite) calling
        through this environment: counted, budgeted and cached like the agent's own calls.
        Outcomes are walked as dataclasses (fields holding a policy, an outcome, or a tuple
        of outcomes), so third-party outcomes built the same way are bound too; binding
        twice is binding once. The bound outcome is remembered per outcome object (every
        rollout of a run binds the same one)."""
        return self._bound_outcomes.get(outcome, lambda value: _bound(value, self))


@dataclass(frozen=True)
class EnvironmentPolicy:
    """An LLM policy whose calls go through an :class:`Environment` (see ``bind``)."""

    inner: LLMPolicy
    env: Environment

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def max_concurrency(self) -> int:
        return getattr(self.inner, "max_concurrency", 8)

    async def decide(self, request: DecisionRequest) -> Decision:
        decision, _ = await self.env.decide(self.inner, request)
        return decision


def _bound(value: Any, env: Environment) -> Any:
    """``value`` bound to ``env`` (see :meth:`Environment.bind`): an LLM policy wrapped, a
    dataclass with every field bound (tuples item by item), anything else as it is."""
    if isinstance(value, EnvironmentPolicy):
        return value if value.env is env else EnvironmentPolicy(value.inner, env)
    if hasattr(value, "decide") and not hasattr(value, "failed"):
        return EnvironmentPolicy(value, env)
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        return value
    changes: dict[str, Any] = {}
    for item in dataclasses.fields(value):
        current = getattr(value, item.name)
        if isinstance(current, tuple):
            new = tuple(_bound(v, env) for v in current)
            changed = any(n is not c for n, c in zip(new, current, strict=True))
        else:
            new = _bound(current, env)
            changed = new is not current
        if changed:
            changes[item.name] = new
    return dataclasses.replace(value, **changes) if changes else value


def decision_request(
    run: RecordedRun,
    recorded: RecordedDecision | None,
    context: Sequence[Message],
    *,
    seed: int,
    step: int | None,
    agent: str | None,
    chain: MessageChain | None = None,
) -> DecisionRequest:
    """The request that re-decides ``recorded`` (``None``: beyond the horizon) on ``context``:
    the tools, tool choice and sampling parameters :attr:`RecordedRun.requests` settled for
    it (recorded, declared or inferred), and the recorded model. ``chain``: the digest chain
    of ``context`` when the caller has it; ``context`` becomes the request's ``messages``
    through :func:`~otelcar.replay.contexts.frozen_messages` (a rollout's context is not
    copied per request)."""
    spec = run.requests.spec(recorded, agent)
    tools = spec.tools.value
    params = spec.params.value
    return DecisionRequest(
        messages=frozen_messages(context),
        tools=tools or None,
        params=dict(params),
        model=recorded.model if recorded else None,
        seed=seed,
        step=step,
        agent=agent,
        tool_choice=spec.tool_choice.value if tools else None,
    ).knowing(chain, params_json(params))


@dataclass(slots=True)
class ReplayedDecision:
    """One decision as it happened in a rollout."""

    index: int
    recorded_step: int | None
    agent: str | None
    name: str
    context: Sequence[Message] | None  # a SharedContext; a list where edited or past the horizon
    action: Message | None
    observations: list[ReplayedObservation]
    origin: str  # recorded | do | removed | policy:<name> | cache:<name>
    seed: int
    input_tokens: int = 0
    output_tokens: int = 0
    diverged_before: bool = False
    notes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Rollout:
    """One rollout of one plan: its decisions, how it ended, and why. ``trace``: the
    rollout's own trace as a steps table (:data:`otelcar.schema.STEPS_SCHEMA`), where the
    rollout made one (a live rollout's agent sends its spans, :mod:`otelcar.live.spans`);
    ``None`` for the rebuilt agent, whose rollout is its decisions. ``process``: how the
    agent's process ended (:class:`otelcar.outcome.ProcessEnd`), for a live rollout."""

    index: int
    seed: int
    plan: Plan
    decisions: list[ReplayedDecision] = field(default_factory=list)
    status: str = "running"  # final | horizon | truncated | failed | budget
    error: str | None = None
    trace: Any = None  # a polars DataFrame (STEPS_SCHEMA) or None
    process: Any = None  # a ProcessEnd or None

    @property
    def ok(self) -> bool:
        return self.status in ("final", "horizon")


async def replay(
    run: RecordedRun,
    plan: Plan,
    env: Environment,
    *,
    rollout: int = 0,
    base_seed: int = 0,
    slack: int | None = None,
) -> Rollout:
    """Run one rollout of ``plan``; never raises for a policy failure (the rollout records it).
    A plan that does not fit the run raises :class:`PlanError` first (:func:`check_plan`)."""
    _check_plan_once(run, plan)
    slack = env.budget.slack if slack is None else slack
    result = Rollout(index=rollout, seed=base_seed, plan=plan)
    state = RolloutContexts(run)
    cassette = Cassette(run)
    walk = held_walk(run)
    scope = RolloutScope(rollout)  # the rollout's own tool state (policies/base.py)
    diverged = False
    previous: ReplayedDecision | None = None
    k = 0
    try:
        while True:
            recorded = run.decisions[k] if k < run.horizon else None
            if recorded is None and (not diverged or previous is None):
                result.status = "horizon"  # the recorded run's own end
                return result
            if recorded is None and k >= run.horizon + slack:
                result.status = "truncated"
                result.error = (
                    f"cut after {k} decisions ({slack} past the recorded horizon, "
                    "[replay] slack) before a final answer: not judged"
                )
                return result
            step = recorded.step if recorded else None
            interventions = plan.at(step) if step is not None else ()
            seed = derive_seed(base_seed, rollout, k)
            held = walk.step(k) if not diverged and not interventions else None
            if held is not None:  # the shared held replay of this decision (replay/held.py)
                assert recorded is not None and recorded.action is not None
                previous = ReplayedDecision(
                    index=k,
                    recorded_step=step,
                    agent=recorded.agent,
                    name=recorded.name,
                    context=held.context,
                    action=recorded.action,
                    observations=held.adopt(state, cassette),
                    origin="recorded",
                    seed=seed,
                )
                env.accounting.cassette_hits += len(held.plays)
                result.decisions.append(previous)
                if held.ends:
                    result.status = "final"
                    return result
                k += 1
                continue
            context, chain = _context(recorded, previous, state)
            edited = False
            for item in interventions:
                if isinstance(item, EditContext):
                    if context is None:
                        raise ReplayError(
                            f"step {step}: cannot edit a context that was not captured"
                        )
                    context = item.edit.apply(list(context))
                    chain = None
                    edited = True
            replayed = ReplayedDecision(
                index=k,
                recorded_step=step,
                agent=recorded.agent if recorded else (previous.agent if previous else None),
                name=recorded.name if recorded else (previous.name if previous else "llm"),
                context=context,
                action=None,
                observations=[],
                origin="",
                seed=seed,
                diverged_before=diverged,
            )
            await _decide(
                replayed, recorded, interventions, context, chain, run, env, diverged or edited
            )
            action_changed = (
                recorded is None
                or replayed.action is None
                or recorded.action is None
                or not same_message(replayed.action, recorded.action)
            )
            state.set_action(k, replayed.action, changed=action_changed)
            result.decisions.append(replayed)  # before the tools: a failure shows where
            await _execute(replayed, recorded, interventions, cassette, env, state, scope)
            diverged = (
                diverged
                or edited
                or action_changed
                or any((k, i) in state.obs_changed for i in range(len(replayed.observations)))
            )
            previous = replayed
            if ends_run(replayed.action, recorded, run):
                result.status = "final"
                return result
            k += 1
    except BudgetExhausted as exc:
        result.status, result.error = "budget", str(exc)
    except PolicyUnavailable:
        raise  # the policy never answered: the whole command stops (policies/base.py)
    except (ReplayError, PolicyError) as exc:
        result.status, result.error = "failed", str(exc)
    except Exception as exc:
        result.status, result.error = "failed", f"{type(exc).__name__}: {exc}"
    return result


#: The plans already checked against each of the latest few runs (a plan's rollouts all
#: replay the same run): id → plan, the plan kept so its id is not reused.
_CHECKED_PLANS: IdentityMemo[RecordedRun, dict[int, Plan]] = IdentityMemo(8)


def _check_plan_once(run: RecordedRun, plan: Plan) -> None:
    """:func:`check_plan`, once per (run, plan) object pair."""
    checked = _CHECKED_PLANS.get(run, lambda _: {})
    if checked.get(id(plan)) is not plan:
        check_plan(run, plan)
        checked[id(plan)] = plan


def check_plan(run: RecordedRun, plan: Plan) -> None:
    """Raise :class:`PlanError` when an intervention addresses what the run does not have: a
    step that is not a decision (LLM) step — a tool step names the decision that called it —
    or a tool call the recorded action did not make. Without this check such a plan ran as
    the unchanged replay and its result read as the intervention's."""
    decisions = {d.step: d for d in run.decisions}
    where = f"trace {run.trace_id}"

    def decision(step: int) -> RecordedDecision:
        found = decisions.get(step)
        if found is not None:
            return found
        row = run.steps.filter(run.steps["step"] == step) if "step" in run.steps.columns else None
        if row is None or row.is_empty():
            raise PlanError(
                f"step {step} is not a step of {where} (decision steps: {sorted(decisions)})"
            )
        kind = row["kind"][0]
        caller = row["call_step"][0] if "call_step" in row.columns else None
        hint = (
            f"; it is a tool step called by decision step {caller}: intervene there (e.g. "
            f"observe a result of step {caller}'s call)"
            if kind == "tool" and caller is not None
            else ""
        )
        raise PlanError(
            f"step {step} of {where} is a {kind} step, not a decision (LLM) step{hint}; "
            f"decision steps: {sorted(decisions)}"
        )

    for item in plan.interventions:
        if isinstance(item, SwapModel):
            for step in item.steps or ():
                decision(step)
            continue
        found = decision(item.step)
        if isinstance(item, Observe):
            calls = found.action.tool_calls if found.action else ()
            if not 0 <= item.call < len(calls):
                raise PlanError(
                    f"step {item.step} made {len(calls)} tool call(s); there is no call "
                    f"{item.call} to observe"
                )


def _context(
    recorded: RecordedDecision | None, previous: ReplayedDecision | None, state: RolloutContexts
) -> tuple[Sequence[Message] | None, MessageChain | None]:
    """The next decision's context and its digest chain (``None``: computed if asked)."""
    if recorded is not None:
        return state.context(recorded) if recorded.context is not None else (None, None)
    assert previous is not None  # beyond the horizon: the generic transition
    context = list(previous.context or [])
    if previous.action is not None:
        context.append(previous.action)
    context.extend(o.message(o.call.id) for o in previous.observations)
    return context, None


async def _decide(
    replayed: ReplayedDecision,
    recorded: RecordedDecision | None,
    interventions: Sequence[Intervention],
    context: Sequence[Message] | None,
    chain: MessageChain | None,
    run: RecordedRun,
    env: Environment,
    context_changed: bool,
) -> None:
    held = not interventions and not context_changed
    if held and recorded is not None and recorded.action is not None:
        # the common case, decided without scanning the interventions
        replayed.action, replayed.origin = recorded.action, "recorded"
        return
    remove: Remove | None = None
    do: Do | None = None
    swap: SwapModel | None = None
    resample = False
    for item in interventions:  # the first of each kind counts
        if isinstance(item, Remove):
            remove = remove or item
        elif isinstance(item, Do):
            do = do or item
        elif isinstance(item, SwapModel):
            swap = swap or item
        elif isinstance(item, Resample):
            resample = True
    if remove is not None:
        replayed.origin = "removed"
        return
    if do is not None:
        replayed.action, replayed.origin = do.action, "do"
        return
    must_decide = (
        resample
        or swap is not None
        or context_changed
        or recorded is None
        or recorded.action is None
    )
    if not must_decide:
        replayed.action, replayed.origin = recorded.action, "recorded"
        return
    if context is None:
        reason = "; ".join(recorded.problems) if recorded else "no context"
        raise ReplayError(
            f"step {replayed.recorded_step} must be re-decided but its context "
            f"is unavailable ({reason})"
        )
    policy = (
        env.registry.llm(swap.policy)
        if swap is not None
        else env.registry.llm_for(agent=replayed.agent, name=replayed.name)
    )
    request = decision_request(
        run,
        recorded,
        context,
        seed=replayed.seed,
        step=replayed.recorded_step,
        agent=replayed.agent,
        chain=chain,
    )
    decision, cached = await env.decide(policy, request)
    if cached:
        replayed.action, replayed.origin = decision.message, f"cache:{policy.name}"
        return
    replayed.action, replayed.origin = decision.message, f"policy:{policy.name}"
    replayed.input_tokens, replayed.output_tokens = decision.input_tokens, decision.output_tokens


async def _execute(
    replayed: ReplayedDecision,
    recorded: RecordedDecision | None,
    interventions: Sequence[Intervention],
    cassette: Cassette,
    env: Environment,
    state: RolloutContexts,
    scope: RolloutScope,
) -> None:
    action = replayed.action
    if action is None:
        state.set_observations(replayed.index, [], ())
        return
    changed: list[int] = []
    mocks = {i.call: i.observation for i in interventions if isinstance(i, Observe)}
    for index, call in enumerate(action.tool_calls):
        recorded_obs = (
            recorded.observations[index]
            if recorded is not None and index < len(recorded.observations)
            else None
        )
        if index in mocks:
            obs = ReplayedObservation(call, mocks[index], None, "observe")
        elif (
            replayed.origin == "recorded"
            and recorded_obs is not None
            and recorded_obs.result is None
            and recorded_obs.error is None
        ):
            # A held step never runs a tool: its unrecorded result stays unrecorded.
            obs = ReplayedObservation(call, None, None, "not recorded")
        else:
            hit = cassette.play(call.name, call.arguments)
            if hit is not None:
                env.accounting.cassette_hits += 1
                obs = ReplayedObservation(call, hit[0], hit[1], "cassette")
            else:
                policy = env.registry.tool_for(call.name or "")
                if hasattr(policy, "with_examples"):
                    policy = policy.with_examples(cassette.examples())
                async with env.semaphore(f"tool:{policy.name}", policy.max_concurrency):
                    text = await policy.run(
                        ToolRequest(
                            name=call.name or "",
                            arguments=call.arguments,
                            call_id=call.id,
                            step=replayed.recorded_step,
                            seed=replayed.seed,
                            context=frozen_messages(replayed.context or ()),
                            scope=scope,
                        )
                    )
                env.accounting.tool_calls += 1
                obs = ReplayedObservation(call, text, None, f"tool:{policy.name}")
        replayed.observations.append(obs)
        if recorded_obs is None or recorded_obs.result != obs.result:
            changed.append(index)
    state.set_observations(replayed.index, replayed.observations, changed)
