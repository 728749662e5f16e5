"""Digests that identify a decision request for the request cache.

A context's digest is a hash chain over its messages: ``c₀ = H("otelcar.messages.v2")``,
``cᵢ₊₁ = H(cᵢ ‖ H(mᵢ))``, where ``H(m)`` hashes the message's canonical JSON: its fields as
a JSON array in the order of :class:`~otelcar.messages.Message`, each tool call as
``[id, name, arguments]``, an arguments object as :func:`~otelcar.messages.arguments_text`
(keys sorted, compact). A context that extends another
continues its chain (:class:`MessageChain`), so the replay harness, whose contexts grow by
a few messages per decision, hashes each message once per rollout instead of the whole
context at every re-decision; anyone else computes the same digest from the messages
(:func:`messages_digest`). Equal message sequences have equal digests; the chain is
order-sensitive and length-delimited (each link hashes a fixed-size message digest).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from json.encoder import encode_basestring
from typing import Any

from otelcar.identity import IdentityMemo
from otelcar.messages import Message, arguments_text

_SEED = hashlib.sha256(b"otelcar.messages.v2").digest()
#: Message digests remembered: every rollout's contexts reuse the recorded messages.
_MESSAGE_DIGESTS: IdentityMemo[Message, bytes] = IdentityMemo(1 << 16)
#: Tool-definition digests remembered: the harness passes the same tuple for every
#: re-decision of a run.
_TOOLS_DIGESTS: IdentityMemo[tuple[dict[str, Any], ...], str] = IdentityMemo(256)
#: Parameters' canonical JSON remembered: the harness asks it of each recorded decision's
#: parameters again at every re-decision.
_PARAMS_JSON: IdentityMemo[Mapping[str, Any], str] = IdentityMemo(1 << 12)


#: One encoder for every digest: ``json.dumps`` with options builds a new encoder per call.
_CANONICAL = json.JSONEncoder(sort_keys=True, ensure_ascii=False, default=str).encode


def canonical_json(value: Any) -> str:
    """The text every digest hashes: sorted keys, UTF-8 kept, unknown types as ``str``."""
    return _CANONICAL(value)


def message_digest(message: Message) -> bytes:
    """The 32-byte digest of one message (remembered for the message object: messages are
    not changed after they are made)."""
    return _MESSAGE_DIGESTS.get(message, _message_digest)


def _message_digest(message: Message) -> bytes:
    # The array of the module docstring, written from its parts: each string as a JSON
    # literal, an arguments object as its canonical text (shared with the cassette's keys).
    calls = ",".join(
        f"[{_literal(call.id)},{_literal(call.name)},{_arguments(call.arguments)}]"
        for call in message.tool_calls
    )
    text = (
        f"[{_literal(message.role)},{_literal(message.content)},[{calls}],"
        f"{_literal(message.tool_call_id)},{_literal(message.name)},{_literal(message.reasoning)}]"
    )
    return hashlib.sha256(text.encode("utf-8")).digest()


def _literal(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return encode_basestring(value)
    return canonical_json(value)


def _arguments(value: Any) -> str:
    if isinstance(value, dict):
        return arguments_text(value)
    return _literal(value)


class MessageChain:
    """The digest of a message sequence, as an immutable chain: :meth:`extended` is O(1) and
    shares this chain, and nothing is hashed until :meth:`hexdigest` is asked (a rollout
    whose decisions are all held never asks). Each link's state is computed once."""

    __slots__ = ("_messages", "_parent", "_state")

    def __init__(
        self, parent: MessageChain | None = None, messages: tuple[Message, ...] = ()
    ) -> None:
        self._parent = parent
        self._messages = messages
        self._state: bytes | None = _SEED if parent is None and not messages else None

    def extended(self, messages: Iterable[Message]) -> MessageChain:
        """The chain of this sequence followed by ``messages``."""
        added = tuple(messages)
        return MessageChain(self, added) if added else self

    def hexdigest(self) -> str:
        state = self._state
        if state is None:
            parent = self._parent
            if parent is not None and parent._state is not None:  # the common case: one link
                state = parent._state
                for message in self._messages:
                    state = hashlib.sha256(state + message_digest(message)).digest()
                self._state = state
            else:
                return self._walk()
        return state.hex()

    def _walk(self) -> str:
        pending: list[MessageChain] = []
        node: MessageChain | None = self
        while node is not None and node._state is None:
            pending.append(node)
            node = node._parent
        state = node._state if node is not None else _SEED
        assert state is not None
        for link in reversed(pending):
            for message in link._messages:
                state = hashlib.sha256(state + message_digest(message)).digest()
            link._state = state
        assert self._state is not None
        return self._state.hex()


def messages_digest(messages: Iterable[Message]) -> str:
    """The chain digest of ``messages`` computed from scratch."""
    return MessageChain().extended(messages).hexdigest()


def tools_digest(tools: tuple[dict[str, Any], ...] | None) -> str | None:
    """The digest of a request's tool definitions (remembered for the tuple: definitions
    are not changed after a request is made)."""
    if tools is None:
        return None
    return _TOOLS_DIGESTS.get(tools, _tools_digest)


def _tools_digest(tools: tuple[dict[str, Any], ...]) -> str:
    return hashlib.sha256(canonical_json(list(tools)).encode("utf-8")).hexdigest()


def params_json(params: Mapping[str, Any]) -> str:
    """The canonical JSON of sampling parameters (remembered for the object: a recorded
    decision's parameters are not changed after the run is loaded)."""
    return _PARAMS_JSON.get(params, canonical_json)


def request_digest(
    policy: str,
    messages: str,
    tools: str | None,
    params: str,
    model: str | None,
    seed: int,
) -> str:
    """The digest of one decision request from its parts (``messages`` and ``tools``: their
    digests; ``params``: the parameters' canonical JSON). The parts are joined unambiguously:
    the strings as JSON literals, the digests as hex, the seed as an integer."""
    text = "\x1f".join(
        (
            encode_basestring(policy),
            messages,
            tools or "-",
            params,
            "null" if model is None else encode_basestring(model),
            str(seed),
        )
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
