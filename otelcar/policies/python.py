"""Policies backed by Python callables (``module:function`` in ``otelcar.toml``).

An LLM callable receives the :class:`~otelcar.policies.base.DecisionRequest` and returns a
:class:`~otelcar.messages.Message` (or a plain string, taken as the assistant's text), or a
:class:`~otelcar.policies.base.Decision`. A tool callable receives the
:class:`~otelcar.policies.base.ToolRequest` and returns the observation text (non-strings are
JSON-encoded). Either may be a coroutine function.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from typing import Any

from otelcar.messages import Message
from otelcar.policies.base import Decision, DecisionRequest, PolicyError, ToolRequest
from otelcar.usercode import call_user


def load_callable(spec: str) -> Callable[..., Any]:
    """Import ``module:function`` (dotted attribute paths allowed after the colon)."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise PolicyError(f"{spec!r} is not of the form module:function")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise PolicyError(f"cannot import {module_name!r} for {spec!r}: {exc}") from None
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise PolicyError(f"{module_name!r} has no attribute {attribute!r}") from None
    if not callable(target):
        raise PolicyError(f"{spec} is not callable")
    return target


class CallableLLMPolicy:
    """An LLM policy that calls a Python function."""

    def __init__(
        self, function: Callable[..., Any], *, name: str | None = None, max_concurrency: int = 64
    ) -> None:
        self.function = function
        self.name = name or getattr(function, "__qualname__", "callable")
        self.max_concurrency = max_concurrency

    async def decide(self, request: DecisionRequest) -> Decision:
        result = await call_user(self.function, request, role="policy function")
        if isinstance(result, Decision):
            return result
        if isinstance(result, str):
            return Decision(Message(role="assistant", content=result), policy=self.name)
        if isinstance(result, Message):
            return Decision(result, policy=self.name)
        raise PolicyError(
            f"policy {self.name} returned {type(result).__name__}, "
            "expected Message, str or Decision"
        )


class CallableToolPolicy:
    """A tool policy that calls a Python function."""

    def __init__(
        self, function: Callable[..., Any], *, name: str | None = None, max_concurrency: int = 64
    ) -> None:
        self.function = function
        self.name = name or getattr(function, "__qualname__", "callable")
        self.max_concurrency = max_concurrency

    async def run(self, request: ToolRequest) -> str:
        result = await call_user(self.function, request, role="tool function")
        return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)


class KeywordToolPolicy(CallableToolPolicy):
    """A tool policy calling the real tool function with the call's arguments as keywords
    (``lookup_order(order_id="A-1")``), the natural form of agent tool functions."""

    async def run(self, request: ToolRequest) -> str:
        arguments = request.arguments if isinstance(request.arguments, dict) else {}
        result = await call_user(self.function, role="tool function", **arguments)
        return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
