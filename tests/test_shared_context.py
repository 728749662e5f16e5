"""SharedContext: a rollout's contexts share one append-only log and read as lists/tuples."""

from __future__ import annotations

import pickle

import pytest

from otelcar.messages import Message
from otelcar.replay.contexts import SharedContext, frozen_messages

A, B, C, D = (Message("user", text) for text in "abcd")


def test_extending_the_end_of_the_log_shares_it_and_leaves_earlier_contexts_unchanged() -> None:
    owner = object()
    first = SharedContext([A], owner=owner)
    second = first.extended([B], owner)
    third = second.extended([C], owner)
    assert second._log is first._log is third._log  # no copy
    assert list(first) == [A] and list(second) == [A, B] and list(third) == [A, B, C]


def test_a_context_not_at_the_end_or_of_another_owner_is_copied() -> None:
    owner, other = object(), object()
    first = SharedContext([A], owner=owner)
    first.extended([B], owner)
    branch = first.extended([C], owner)  # first is no longer the log's end
    assert branch._log is not first._log and list(branch) == [A, C]
    foreign = branch.extended([D], other)
    assert foreign._log is not branch._log and list(foreign) == [A, C, D]
    assert list(branch) == [A, C]


def test_reads_as_a_list_and_a_tuple() -> None:
    owner = object()
    context = SharedContext([A, B], owner=owner).extended([C], owner)
    context.extended([D], owner)  # the log goes on; the view does not
    assert len(context) == 3 and context[-1] == C and context[0] == A
    with pytest.raises(IndexError):
        context[3]
    assert context[1:] == [B, C] and context[::-1] == [C, B, A]
    assert context == [A, B, C] and context == (A, B, C)
    assert [A, B, C] == context  # noqa: SIM300 - the reflected comparison
    assert context != [A, B, C, D] and context == SharedContext([A, B, C])
    joined, prefixed = context + [D], (D,) + context  # noqa: RUF005 - what user code may write
    assert joined == [A, B, C, D] and isinstance(joined, list)
    assert prefixed == (D, A, B, C) and isinstance(prefixed, tuple)
    assert repr(context) == repr([A, B, C])
    restored = pickle.loads(pickle.dumps(context))
    assert restored == context and len(restored._log) == 3


def test_frozen_messages_copies_only_mutable_sequences() -> None:
    shared = SharedContext([A])
    assert frozen_messages(shared) is shared
    held = (A, B)
    assert frozen_messages(held) is held
    assert frozen_messages([A, B]) == (A, B) and isinstance(frozen_messages([A, B]), tuple)
