"""Policy contracts: what the replay harness asks a policy, and what it gets back.

An **LLM policy** re-decides a decision step: it receives the rebuilt context (normalized
messages), the tools, the sampling parameters and a seed, and returns an assistant message.
A **tool policy** produces the observation of a tool call the recording cannot serve.
Policies are async; plain functions are wrapped by the classes of
:mod:`otelcar.policies.python`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from otelcar.errors import OtelcarError
from otelcar.messages import Arguments, Message
from otelcar.policies.digest import (
    MessageChain,
    canonical_json,
    messages_digest,
    request_digest,
    tools_digest,
)


class PolicyError(OtelcarError):
    """A policy failed (unreachable server, bad response, missing configuration)."""


class PolicyUnavailable(PolicyError):
    """A policy's endpoint could not be reached (connection refused, connect or first-answer
    timeout) before it ever answered in this process.

    Not a failure of one rollout but of the whole command: the harness, the decision sampler
    and the engine let it through, so ``attribute``, ``why``, ``fix`` and ``rollout`` stop at
    once with this message instead of replaying every rollout into the same error.
    """


@dataclass(frozen=True, slots=True)
class DecisionRequest:
    """One re-decision of decision step ``step`` (``None`` beyond the recorded horizon).

    ``messages``: the context, an immutable sequence of messages: a tuple, or (from the replay
    harness) a :class:`~otelcar.replay.contexts.SharedContext`, which shares the rollout's
    messages instead of copying them per request and reads as a tuple does (``len``,
    indexing, slicing, iteration, ``==`` and ``+`` with tuples)."""

    messages: Sequence[Message]
    tools: tuple[dict[str, Any], ...] | None
    params: dict[str, Any]
    model: str | None
    seed: int
    step: int | None
    agent: str | None = None
    #: what to send as ``tool_choice`` (OpenAI's wire form: ``"auto"``, ``"none"``,
    #: ``"required"`` or ``{"type": "function", "function": {"name": …}}``); ``None``: not
    #: sent (the policy's own ``tool_choice`` option, else the server's default)
    tool_choice: Any = None
    _messages_chain: MessageChain | None = field(
        default=None, init=False, compare=False, repr=False
    )
    _params_json: str | None = field(default=None, init=False, compare=False, repr=False)

    def knowing(
        self, chain: MessageChain | None, params_json: str | None = None
    ) -> DecisionRequest:
        """This request, told the digest chain of its messages (:mod:`otelcar.policies.digest`)
        and the canonical JSON of its parameters (:func:`~otelcar.policies.digest.params_json`)
        by a caller that has them (the replay harness: built incrementally, or remembered per
        recorded decision); ``None`` leaves them to be computed. The fields are not
        ``__init__`` arguments, so ``dataclasses.replace`` starts without them and never
        carries a stale digest."""
        object.__setattr__(self, "_messages_chain", chain)
        object.__setattr__(self, "_params_json", params_json)
        return self

    def cache_key(self, policy: str) -> str:
        """Identity of the request for the request cache: (policy, messages, tools, params,
        tool choice, model, seed). The messages enter as their chain digest and the tools as
        theirs, so a key costs the bytes not hashed before, not the whole context."""
        messages = (
            self._messages_chain.hexdigest()
            if self._messages_chain is not None
            else messages_digest(self.messages)
        )
        params = self._params_json if self._params_json is not None else canonical_json(self.params)
        if self.tool_choice is not None:
            params = f"{params}\x1etool_choice={canonical_json(self.tool_choice)}"
        return request_digest(
            policy, messages, tools_digest(self.tools), params, self.model, self.seed
        )


@dataclass(frozen=True, slots=True)
class Decision:
    """A policy's answer: the assistant message and what it cost."""

    message: Message
    input_tokens: int = 0
    output_tokens: int = 0
    policy: str = ""
    raw: dict[str, Any] | None = field(default=None, compare=False)


class RolloutScope:
    """The identity of one rollout, for tool policies that keep a state per rollout (a fresh
    tool state each, never shared): compared by identity, weakly referenceable, so a state
    kept for it goes when the rollout ends. ``rollout`` is the rollout's index in its plan
    (the same index recurs across plans: use the scope, not the index, as the key)."""

    __slots__ = ("__weakref__", "rollout")

    def __init__(self, rollout: int) -> None:
        self.rollout = rollout

    def __repr__(self) -> str:
        return f"RolloutScope(rollout={self.rollout})"


@dataclass(frozen=True, slots=True)
class ToolRequest:
    """A tool call the recording cannot serve (new arguments, or a mocked environment).
    ``scope``: the rollout it belongs to (``None`` outside a rollout)."""

    name: str
    arguments: Arguments
    call_id: str | None
    step: int | None
    seed: int
    context: Sequence[Message] = ()  # immutable, as DecisionRequest.messages
    scope: RolloutScope | None = None


@runtime_checkable
class LLMPolicy(Protocol):
    name: str
    max_concurrency: int

    async def decide(self, request: DecisionRequest) -> Decision: ...


@runtime_checkable
class ToolPolicy(Protocol):
    name: str
    max_concurrency: int

    async def run(self, request: ToolRequest) -> str: ...
