"""The contexts of one rollout's decisions, each built from the previous one.

A decision's context is its recorded template (:mod:`otelcar.replay.recorded`) expanded with
this rollout's actions and observations: an unchanged reference stays the recorded message,
a changed action or observation is carried in. Most templates extend the previous decision's
(the conversation so far plus one action and its results), so a context is the previous
context plus the expansion of the new items: a :class:`SharedContext` that shares the previous
context's messages (one append-only log per rollout, each context a view of its first
messages), and a digest chain (:class:`~otelcar.policies.digest.MessageChain`) that extends
the previous one, hashed only when a re-decision asks for its cache key. A rollout of ``n``
decisions then does work linear in ``n`` and in the bytes it adds: neither expanding every
template from scratch nor copying the previous context into a new list (each also quadratic
in ``n``, the copies as well in the garbage collector's traversals of them). Where a template
does not extend the previous one (multi-agent views, rewritten histories) it is expanded from
scratch; the result is the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any, overload

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


class SharedContext(Sequence[Message]):
    """An immutable context that shares its messages with the context it extends.

    A view of the first ``len(self)`` messages of an append-only log. :meth:`extended` by the
    log's owner, on the context at the log's end (a rollout's latest context: the common
    case), appends to the log, so the new context costs its new messages, not the whole
    context; anything else starts a log of the extender's own (one copy). It reads as a
    read-only list: ``len``, indexing, slicing (a slice is a new ``list``), iteration, ``==``
    with any list, tuple or shared context of the same messages, and ``+`` (the result has the
    other operand's type). Pickled as its messages."""

    __slots__ = ("_length", "_log", "_owner")

    def __init__(self, messages: Iterable[Message] = (), *, owner: object = None) -> None:
        """A context of ``messages`` in a new log that ``owner`` may extend in place."""
        self._log: list[Message] = list(messages)
        self._length = len(self._log)
        self._owner = owner

    def extended(self, messages: list[Message], owner: object) -> SharedContext:
        """This context followed by ``messages``, for ``owner`` (the one object that extends
        the contexts it makes, never from two threads at once)."""
        if owner is not self._owner or len(self._log) != self._length:
            return SharedContext([*self, *messages], owner=owner)
        self._log.extend(messages)
        view = SharedContext.__new__(SharedContext)
        view._log, view._length, view._owner = self._log, len(self._log), owner
        return view

    def __len__(self) -> int:
        return self._length

    def starts_with(self, other: object) -> bool:
        """Whether ``other`` is known, in O(1), to be this context's first ``len(other)``
        messages, the same objects: a shared context on the same log, no longer than this
        one. ``False`` says nothing (anything else is not compared)."""
        return (
            isinstance(other, SharedContext)
            and other._log is self._log
            and other._length <= self._length
        )

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._length)
            if step == 1:
                return self._log[start:stop]
            return [self._log[i] for i in range(start, stop, step)]
        if not -self._length <= index < self._length:
            raise IndexError("context index out of range")
        return self._log[index % self._length]

    def __iter__(self) -> Iterator[Message]:
        return islice(self._log, self._length)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SharedContext):
            if other._log is self._log:
                return other._length == self._length
        elif not isinstance(other, list | tuple):
            return NotImplemented
        return len(other) == self._length and self[:] == list(other)

    __hash__ = None  # type: ignore[assignment]  # equal to lists, which are unhashable

    def __add__(self, other: Any) -> Any:
        if isinstance(other, list | tuple):
            return type(other)([*self, *other])
        return NotImplemented

    def __radd__(self, other: Any) -> Any:
        if isinstance(other, list | tuple):
            return type(other)([*other, *self])
        return NotImplemented

    def __repr__(self) -> str:
        return repr(list(self))

    def __reduce__(self) -> tuple[type[SharedContext], tuple[list[Message]]]:
        return SharedContext, (list(self),)


def frozen_messages(messages: Sequence[Message]) -> Sequence[Message]:
    """``messages`` as an immutable sequence for a request: a :class:`SharedContext` or a
    tuple as it is (no copy of a rollout's context per request), anything else as a tuple."""
    return messages if isinstance(messages, SharedContext | tuple) else tuple(messages)


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
    messages: SharedContext
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

    def context(self, decision: RecordedDecision) -> tuple[SharedContext, MessageChain]:
        """The decision's context with this rollout's changes carried in (immutable, sharing
        the previous context's messages: edits make their own list), and the chain of its
        messages (hashed only if its digest is asked)."""
        assert decision.context is not None
        link = self._links[decision.index]
        parent = self._latest
        if parent is None or link.parent is None or parent.index != link.parent:
            emitted: set[int] = set()
            added = self._expand(decision.template, link, emitted)
            built = _Built(
                decision.index,
                SharedContext(added, owner=self),
                emitted,
                MessageChain().extended(added),
            )
        else:
            emitted = set(parent.emitted)
            added = self._expand(decision.template[link.shared :], link, emitted)
            built = _Built(
                decision.index,
                parent.messages.extended(added, self),
                emitted,
                parent.chain.extended(added),
            )
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
