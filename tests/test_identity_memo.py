"""IdentityMemo: values remembered by object identity, never another object's."""

from __future__ import annotations

import gc

import pytest

from otelcar.identity import IdentityMemo
from otelcar.messages import Message, ToolCall
from otelcar.policies.digest import _message_digest, message_digest


def test_remembers_by_identity_not_equality() -> None:
    calls: list[object] = []
    memo: IdentityMemo[dict, int] = IdentityMemo(8)

    def compute(obj: dict) -> int:
        calls.append(obj)
        return len(calls)

    a, b = {"x": 1}, {"x": 1}
    assert memo.get(a, compute) == 1
    assert memo.get(a, compute) == 1
    assert memo.get(b, compute) == 2  # equal but another object
    assert len(calls) == 2


def test_a_freed_object_id_is_never_served_to_a_new_one() -> None:
    memo: IdentityMemo[list, str] = IdentityMemo(4)
    seen = []
    for i in range(200):  # ids of freed lists are reused by CPython quickly
        obj = [i]
        seen.append(memo.get(obj, lambda o: f"value-{o[0]}"))
        del obj
        gc.collect()
    assert seen == [f"value-{i}" for i in range(200)]
    assert len(memo) <= 4


def test_full_memo_forgets_and_recomputes() -> None:
    memo: IdentityMemo[tuple, int] = IdentityMemo(2)
    objs = [(i,) for i in range(5)]
    for obj in objs:
        memo.get(obj, lambda o: o[0])
    assert len(memo) <= 2
    assert memo.get(objs[-1], lambda o: -1) == 4  # the latest is remembered
    assert memo.get(objs[0], lambda o: -1) == -1  # the first was forgotten: computed again


def test_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="size"):
        IdentityMemo(0)


def test_message_digest_is_the_digest_of_the_content() -> None:
    one = Message("assistant", None, (ToolCall("act", {"v": "BAD"}, "c1"),))
    same = Message("assistant", None, (ToolCall("act", {"v": "BAD"}, "c1"),))
    other = Message("assistant", None, (ToolCall("act", {"v": "OK"}, "c1"),))
    assert message_digest(one) == message_digest(one) == _message_digest(one)
    assert message_digest(same) == message_digest(one)
    assert message_digest(other) != message_digest(one)
