"""One live rollout: the plan played on the agent's own model requests (DESIGN.md §5b).

The k-th request of a rollout is matched to the k-th recorded decision. While the timeline has
not diverged and the plan leaves that decision alone, the answer is the recorded action, with
the recorded tool-call ids, so the agent's next request is the recorded next context. At the
decision the plan intervenes on: ``resample`` forwards **the agent's own request** (its tools,
tool choice and parameters) to the registered policy with the rollout's seed in place of the
agent's; ``do`` answers with the forced action; ``edit_context`` edits the request's messages,
then forwards it; ``swap_model`` forwards to the named policy. Once the timeline diverged —
an answer that differs from the recording, or a request whose messages differ from the
recorded context (a real tool answered otherwise) — every request is forwarded. ``remove``
has no meaning for an agent that makes its own calls and is refused.

Every exchange is kept (:class:`Exchange`): what the agent sent, what it got, where the answer
came from, and for an undiverged request how it differs from the recorded context (the live
fidelity check). :meth:`RolloutSession.rollout` turns them into the replay's
:class:`~otelcar.replay.harness.Rollout`, so outcomes, reports and timelines read a live
rollout as they read a rebuilt one.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from otelcar.live.wire import LiveRequest
from otelcar.messages import Message, ToolCall
from otelcar.policies.base import DecisionRequest
from otelcar.replay.contexts import ReplayedObservation
from otelcar.replay.harness import (
    Environment,
    ReplayedDecision,
    Rollout,
    derive_seed,
)
from otelcar.replay.plan import Do, EditContext, Plan, PlanError, Remove, SwapModel
from otelcar.replay.recorded import RecordedDecision, RecordedRun, same_message


@dataclass(slots=True)
class Exchange:
    """One model request of the live agent and its answer. ``origin``: ``recorded`` |
    ``do`` | ``policy:<name>`` | ``cache:<name>``; ``differs``: for a request made before the
    timeline diverged, how it differs from the recorded context (``None``: it does not)."""

    index: int
    request: LiveRequest
    answer: Message
    origin: str
    recorded_step: int | None
    agent: str | None
    seed: int
    differs: str | None = None
    diverged_before: bool = False
    input_tokens: int = 0
    output_tokens: int = 0


def context_difference(live: tuple[Message, ...], recorded: list[Message] | None) -> str | None:
    """How the agent's request messages differ from a recorded context (``None``: the same
    decision input: roles, texts and tool calls by name and arguments, ids aside)."""
    if recorded is None:
        return "the recorded context was not captured"
    for i, (a, b) in enumerate(zip(live, recorded, strict=False)):
        if not same_message(a, b) or (a.tool_call_id or "") != (b.tool_call_id or ""):
            return (
                f"message {i} ({a.role}) differs: recorded {_short(b)}, the agent sent {_short(a)}"
            )
    if len(live) != len(recorded):
        return f"the agent sent {len(live)} messages, the recording has {len(recorded)}"
    return None


def _short(message: Message, limit: int = 80) -> str:
    if message.tool_calls:
        text = ", ".join(f"{c.name}({c.arguments})" for c in message.tool_calls)
    else:
        text = message.content or ""
    text = " ".join(str(text).split())
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


@dataclass
class RolloutSession:
    """The plan ``plan`` played for rollout ``rollout`` of ``run`` (module docstring); its
    policy calls go through ``env`` (cache, budget, accounting) like the rebuilt agent's."""

    run: RecordedRun
    plan: Plan
    env: Environment
    rollout: int
    base_seed: int
    token: str
    exchanges: list[Exchange] = field(default_factory=list)
    diverged: bool = False
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def __post_init__(self) -> None:
        if any(isinstance(item, Remove) for item in self.plan.interventions):
            raise PlanError(
                "remove(k) has no meaning in live replay (the agent makes its own model "
                "calls); use do(k, action) or edit_context"
            )

    async def answer(self, request: LiveRequest) -> Exchange:
        """The answer to the agent's next request (requests of one rollout are answered in
        the order they arrive)."""
        async with self._lock:
            exchange = await self._answer(request)
            self.exchanges.append(exchange)
            return exchange

    async def _answer(self, request: LiveRequest) -> Exchange:
        k = len(self.exchanges)
        recorded = self.run.decisions[k] if k < self.run.horizon else None
        step = recorded.step if recorded else None
        agent = recorded.agent if recorded else (self.exchanges[-1].agent if k else None)
        seed = derive_seed(self.base_seed, self.rollout, k)
        exchange = Exchange(k, request, Message("assistant", ""), "", step, agent, seed)
        exchange.diverged_before = self.diverged
        if recorded is None:
            self.diverged = True  # past the recorded horizon
        elif not self.diverged:
            exchange.differs = context_difference(request.messages, recorded.context)
            if exchange.differs is not None:
                self.diverged = True
        interventions = self.plan.at(step) if step is not None else ()
        messages = request.messages
        swap: SwapModel | None = None
        forced: Do | None = None
        for item in interventions:
            if isinstance(item, EditContext):
                messages = tuple(item.edit.apply(list(messages)))
            elif isinstance(item, SwapModel):
                swap = swap or item
            elif isinstance(item, Do):
                forced = forced or item
        if forced is not None:
            exchange.answer, exchange.origin = self._with_ids(forced.action, k), "do"
        elif not self.diverged and not interventions and recorded and recorded.action:
            exchange.answer, exchange.origin = recorded.action, "recorded"
        else:
            await self._forward(exchange, recorded, request, messages, swap)
            if recorded and recorded.action and same_message(exchange.answer, recorded.action):
                # the recorded decision again: answered with the recorded call ids, so the
                # agent's next request is the recorded next context and the run stays held
                exchange.answer = recorded.action
        changed = (
            recorded is None
            or recorded.action is None
            or (
                exchange.origin != "recorded" and not same_message(exchange.answer, recorded.action)
            )
        )
        self.diverged = self.diverged or changed
        return exchange

    async def _forward(
        self,
        exchange: Exchange,
        recorded: RecordedDecision | None,
        request: LiveRequest,
        messages: tuple[Message, ...],
        swap: SwapModel | None,
    ) -> None:
        registry = self.env.registry
        policy = (
            registry.llm(swap.policy)
            if swap is not None
            else registry.llm_for(agent=exchange.agent, name=recorded.name if recorded else None)
        )
        decision, cached = await self.env.decide(
            policy,
            DecisionRequest(
                messages=messages,
                tools=request.tools,
                params=dict(request.params),
                model=request.model,
                seed=exchange.seed,
                step=exchange.recorded_step,
                agent=exchange.agent,
                tool_choice=request.tool_choice if request.tools else None,
            ),
        )
        exchange.answer = self._with_ids(decision.message, exchange.index)
        exchange.origin = f"{'cache' if cached else 'policy'}:{policy.name}"
        if not cached:
            exchange.input_tokens = decision.input_tokens
            exchange.output_tokens = decision.output_tokens

    def _with_ids(self, message: Message, k: int) -> Message:
        """``message`` with an id on every tool call (the agent echoes them back)."""
        if all(call.id for call in message.tool_calls):
            return message
        calls = tuple(
            call if call.id else ToolCall(call.name, call.arguments, f"call_{self.token}_{k}_{i}")
            for i, call in enumerate(message.tool_calls)
        )
        return Message(
            message.role, message.content, calls, message.tool_call_id, message.name,
            message.reasoning,
        )  # fmt: skip

    def rollout_record(self, status: str, error: str | None = None) -> Rollout:
        """The exchanges as the replay's :class:`Rollout`: each decision's context is the
        agent's request, its action the answer, its observations the tool results the agent
        sent back in its next request (``None`` for calls of the last answer, whose results
        no request carried)."""
        result = Rollout(index=self.rollout, seed=self.base_seed, plan=self.plan)
        for n, exchange in enumerate(self.exchanges):
            later = self.exchanges[n + 1].request.messages if n + 1 < len(self.exchanges) else ()
            results = {m.tool_call_id: m.content for m in later if m.role == "tool"}
            observations = [
                ReplayedObservation(
                    call,
                    results.get(call.id),
                    None,
                    "live" if call.id in results else "not recorded",
                )
                for call in exchange.answer.tool_calls
            ]
            result.decisions.append(
                ReplayedDecision(
                    index=n,
                    recorded_step=exchange.recorded_step,
                    agent=exchange.agent,
                    name=exchange.agent or (exchange.request.model or "llm"),
                    context=list(exchange.request.messages),
                    action=exchange.answer,
                    observations=observations,
                    origin=exchange.origin,
                    seed=exchange.seed,
                    input_tokens=exchange.input_tokens,
                    output_tokens=exchange.output_tokens,
                    diverged_before=exchange.diverged_before,
                    notes=[f"request differs from the recording: {exchange.differs}"]
                    if exchange.differs
                    else [],
                )
            )
        result.status, result.error = status, error
        return result
