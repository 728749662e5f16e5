"""IdentityMemo: values remembered by object identity, never another object's."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from otelcar.identity import IdentityMemo
from otelcar.messages import (
    Message,
    ToolCall,
    decode_arguments,
    encode_arguments,
    survives_encoding,
)
from otelcar.policies.base import DecisionRequest
from otelcar.policies.digest import (
    MessageChain,
    _message_digest,
    message_digest,
    messages_digest,
    params_json,
)


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
    seen, ids = [], set()
    for i in range(200):  # ids of freed lists are reused by CPython quickly
        obj = [i]
        ids.add(id(obj))
        seen.append(memo.get(obj, lambda o: f"value-{o[0]}"))
        del obj  # freed by its count once the memo forgets it (no cycle: no gc.collect() needed)
    assert seen == [f"value-{i}" for i in range(200)]
    assert len(memo) <= 4
    assert len(ids) < 200  # ids were in fact reused: the case the memo must not confuse


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


def test_the_message_digest_tells_apart_what_the_message_fields_tell_apart() -> None:
    base = Message("assistant", "a", (ToolCall("f", {"x": 1}, "c"),), None, None, None)
    variants = [
        Message("user", "a", base.tool_calls),
        Message("assistant", "b", base.tool_calls),
        Message("assistant", "a", (ToolCall("g", {"x": 1}, "c"),)),
        Message("assistant", "a", (ToolCall("f", {"x": 2}, "c"),)),
        Message("assistant", "a", (ToolCall("f", {"x": 1}, "d"),)),
        Message("assistant", "a", (ToolCall("f", '{"x": 1}', "c"),)),  # raw text, not an object
        Message("assistant", "a", base.tool_calls, tool_call_id="c"),
        Message("assistant", "a", base.tool_calls, name="n"),
        Message("assistant", "a", base.tool_calls, reasoning="r"),
        Message("assistant", "a"),
        Message("assistant", None, base.tool_calls),
    ]
    digests = {_message_digest(m) for m in [base, *variants]}
    assert len(digests) == len(variants) + 1
    reordered = Message("assistant", "a", (ToolCall("f", {"x": 1}, "c"),))
    assert _message_digest(reordered) == _message_digest(base)
    assert _message_digest(
        Message("tool", None, (ToolCall("f", {"b": 1, "a": 2}),))
    ) == _message_digest(Message("tool", None, (ToolCall("f", {"a": 2, "b": 1}),)))


def test_a_chain_extended_link_by_link_has_the_digest_of_the_whole_sequence() -> None:
    messages = [Message("user", f"m{i}") for i in range(7)]
    chain = MessageChain()
    for i, message in enumerate(messages):
        chain = chain.extended([message])
        if i % 2:  # some links hashed as they come, the others in one walk later
            assert chain.hexdigest() == messages_digest(messages[: i + 1])
    assert chain.hexdigest() == messages_digest(messages)
    assert messages_digest(messages[:3]) != messages_digest(messages[1:4])


def _request(**changes) -> DecisionRequest:
    fields = {
        "messages": (Message("user", "hi"),),
        "tools": ({"name": "f"},),
        "params": {"temperature": 1.0, "top_p": None},
        "model": "m",
        "seed": 7,
        "step": 1,
    }
    fields.update(changes)
    return DecisionRequest(**fields)


def test_request_keys_change_with_every_part_and_not_with_the_hints() -> None:
    key = _request().cache_key("p")
    assert _request().cache_key("p") == key
    assert _request(params={"top_p": None, "temperature": 1.0}).cache_key("p") == key
    assert _request(step=2).cache_key("p") == key  # where it is asked does not matter
    others = [
        _request().cache_key("q"),
        _request(messages=(Message("user", "ho"),)).cache_key("p"),
        _request(tools=({"name": "g"},)).cache_key("p"),
        _request(tools=None).cache_key("p"),
        _request(params={"temperature": 0.5, "top_p": None}).cache_key("p"),
        _request(model=None).cache_key("p"),
        _request(model="null").cache_key("p"),
        _request(seed=8).cache_key("p"),
    ]
    assert len({key, *others}) == len(others) + 1
    params = {"temperature": 1.0, "top_p": None}
    told = _request(params=params).knowing(
        MessageChain().extended([Message("user", "hi")]), params_json(params)
    )
    assert told.cache_key("p") == key
    assert params_json(params) is params_json(params)  # remembered for the object


_JSON_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
)
_PLAIN = st.recursive(
    _JSON_LEAF,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(), inner, max_size=4)
    ),
    max_leaves=12,
)
_ANY = st.recursive(
    st.one_of(_JSON_LEAF, st.floats(), st.tuples(_JSON_LEAF)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner),
        st.dictionaries(st.one_of(st.text(), st.integers()), inner, max_size=4),
    ),
    max_leaves=12,
)


def _same(a: object, b: object) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)  # type: ignore[index]
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))  # type: ignore[arg-type]
    return a == b


@given(_ANY)
def test_what_survives_encoding_comes_back_the_same(value) -> None:
    # The rollout events skip the table round trip for such arguments: a wrong "yes" would
    # let an outcome see a value the table would not hold.
    if survives_encoding(value):
        assert _same(decode_arguments(encode_arguments(value)), value)


@given(_PLAIN)
def test_plain_json_values_survive_encoding(value) -> None:
    assert survives_encoding(value)
    assert _same(decode_arguments(encode_arguments(value)), value)
