"""The contexts of one rollout's decisions, each built from the previous one.

A decision's context is its recorded template (:mod:`otelcar.replay.recorded`) expanded with
this rollout's actions and observations: an unchanged reference stays the recorded message,
a changed action or observation is carried in. Most templates extend the previous decision's
(the conversation so far plus one action and its results), so a context is the previous
context plus the expansion of the new items, and its digest chain
(:class:`~otelcar.policies.digest.MessageChain`) extends the previous one, hashed only when
a re-decision asks for its cache key. A rollout of ``n`` decisions then does work linear in
``n`` and in the bytes it adds, where expanding every template from scratch did work
quadratic in ``n``. Where a template does not extend the previous one
(multi-agent views, rewritten histories) it is expanded from scratch; the result is the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from otelcar.messages import Message, ToolCall
from otelcar.policies.digest import MessageChain
from otelcar.replay.recorded import (
    ActionRef,
    ContextLink,
    Literal,
    RecordedDecision,
    RecordedRun,
    TemplateItem,
)


@dataclass(frozen=True, slots=True)
class ReplayedObservation:
    """What one tool call of a rollout returned, and who answered it."""

    call: ToolCall
    result: str | None
    error: str | None
    origin: str  # cassette | observe | not recorded | tool:<policy name>

    def message(self, tool_call_id: str | None) -> Message:
        """The tool message that carries it into later contexts (``result``, else ``error``)."""
        text = self.result if self.result is not None else self.error
        return Message("tool", text, tool_call_id=tool_call_id)


@dataclass(slots=True)
class _Built:
    """Decision ``index``'s expanded (pre-edit) context, the actions whose new observations
    it already carries, and the digest chain over its messages."""

    index: int
    messages: list[Message]
    emitted: set[int]
    chain: MessageChain


class RolloutContexts:
    """Actions and observations of one rollout so far, which of them changed, and the
    contexts they make. Record each decision's action (:meth:`set_action`) and observations
    (:meth:`set_observations`) before asking for a later decision's context."""

    def __init__(self, run: RecordedRun) -> None:
        self._links = run.context_links()
        self.actions: dict[int, Message | None] = {}
        self.observations: dict[int, list[ReplayedObservation]] = {}
        self.action_changed: set[int] = set()
        self.obs_changed: set[tuple[int, int]] = set()
        self._latest: _Built | None = None  # only the latest context is ever a parent

    def set_action(self, decision: int, action: Message | None, *, changed: bool) -> None:
        self.actions[decision] = action
        if changed:
            self.action_changed.add(decision)

    def set_observations(
        self, decision: int, observations: list[ReplayedObservation], changed: Iterable[int]
    ) -> None:
        self.observations[decision] = observations
        self.obs_changed.update((decision, call) for call in changed)

    @property
    def latest(self) -> object:
        """The latest built context (opaque): what :meth:`adopt_held` takes back."""
        return self._latest

    def adopt_held(
        self,
        decision: int,
        action: Message,
        observations: list[ReplayedObservation],
        latest: object,
    ) -> None:
        """Record decision ``decision`` as held, unchanged (the recorded ``action`` and
        ``observations``), with ``latest`` (from :attr:`latest` of a state that built the
        same contexts) as the latest built context: what replaying it held would leave."""
        self.actions[decision] = action
        self.observations[decision] = observations
        assert latest is None or isinstance(latest, _Built)
        self._latest = latest

    def context(self, decision: RecordedDecision) -> tuple[list[Message], MessageChain]:
        """The decision's context with this rollout's changes carried in (a new list, never
        changed afterwards: edits make their own), and the chain of its messages (hashed only
        if its digest is asked)."""
        assert decision.context is not None
        link = self._links[decision.index]
        parent = self._latest
        if parent is None or link.parent is None or parent.index != link.parent:
            built = _Built(decision.index, [], set(), MessageChain())
            start = 0
        else:
            built = _Built(decision.index, list(parent.messages), set(parent.emitted), parent.chain)
            start = link.shared
        added = self._expand(decision.template[start:], link, built.emitted)
        built.messages.extend(added)
        built.chain = built.chain.extended(added)
        self._latest = built
        return built.messages, built.chain

    def _expand(
        self, items: list[TemplateItem], link: ContextLink, emitted: set[int]
    ) -> list[Message]:
        out: list[Message] = []
        for item in items:
            if isinstance(item, Literal):
                out.append(item.message)
            elif isinstance(item, ActionRef):
                j = item.decision
                if j not in self.action_changed:
                    out.append(item.message)
                    continue
                action = self.actions.get(j)
                if action is None:
                    continue  # removed
                out.append(_in_role(action, item.message.role))
                if j not in link.observed:  # the new action has calls the recording lacked
                    out.extend(self.observation_messages(j))
                    emitted.add(j)
            else:
                j = item.decision
                if j not in self.action_changed and (j, item.call) not in self.obs_changed:
                    out.append(item.message)
                    continue
                if j in self.action_changed:
                    if j not in emitted:
                        out.extend(self.observation_messages(j))
                        emitted.add(j)
                    continue
                out.append(self.observations[j][item.call].message(item.message.tool_call_id))
        return out

    def observation_messages(self, decision: int) -> list[Message]:
        """The tool messages of ``decision``'s observations in this rollout."""
        return [o.message(o.call.id) for o in self.observations.get(decision, ())]


def _in_role(message: Message, role: str) -> Message:
    if message.role == role:
        return message
    return Message(
        role,
        message.content,
        message.tool_calls,
        message.tool_call_id,
        message.name,
        message.reasoning,
    )
