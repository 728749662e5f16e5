"""Policies backed by Python callables (``module:function`` in ``otelcar.toml``).

An LLM callable receives the :class:`~otelcar.policies.base.DecisionRequest` and returns a
:class:`~otelcar.messages.Message` (or a plain string, taken as the assistant's text), or a
:class:`~otelcar.policies.base.Decision`. A tool callable receives the
:class:`~otelcar.policies.base.ToolRequest` (:class:`CallableToolPolicy`) or the call's
arguments as keywords (:class:`KeywordToolPolicy`) and returns the observation text
(non-strings are JSON-encoded). Either may be a coroutine function.

A tool policy runs the user's *real* tool, so two things are explicit:

* **State per rollout** (``factory``): a callable called once per rollout (per
  :class:`~otelcar.policies.base.RolloutScope`) whose result holds the tool, so state the
  tool keeps (files it deleted, rows it wrote) is never shared between rollouts.
* **Side effects** (``side_effects``, :data:`SIDE_EFFECTS`): undeclared, otelcar runs each
  distinct call (tool name and canonical arguments) at most once in the policy's lifetime and
  hands its result to every later identical call; declared, every call runs.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from otelcar.messages import Message
from otelcar.policies.base import (
    Decision,
    DecisionRequest,
    PolicyError,
    RolloutScope,
    ToolRequest,
)
from otelcar.policies.digest import canonical_json
from otelcar.usercode import call_user

#: What ``side_effects`` may declare about a python tool: ``none`` (a pure function),
#: ``sandboxed`` (its effects are isolated per rollout: a ``factory`` state, a scratch
#: directory), ``allowed`` (the user accepts its real side effects, once per call).
SIDE_EFFECTS = ("none", "sandboxed", "allowed")


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
        result = await call_user(self.function, "policy function", args=(request,))
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
    """A tool policy that calls a Python function with the
    :class:`~otelcar.policies.base.ToolRequest`.

    Exactly one of ``function`` (the tool) and ``factory`` is given. ``factory()`` is called
    once per rollout (the request's ``scope``; a request without one gets a state of its own)
    and its result, the rollout's *tool state*, gives the tool for a call of tool ``name``:

    1. a mapping: ``state[name]``;
    2. an object with a callable attribute ``name``: that attribute (a method of the state);
    3. otherwise a callable: the state itself.

    The state is kept in a :class:`weakref.WeakKeyDictionary` keyed by the scope, so it goes
    when its rollout does and no rollout ever sees another's.

    ``side_effects`` (one of :data:`SIDE_EFFECTS`, or ``None``: undeclared) decides how often
    the tool runs. Declared, every call the recording cannot serve runs the tool. Undeclared,
    each distinct call (tool name + :func:`~otelcar.policies.digest.canonical_json` of the
    arguments) runs at most once in this policy's lifetime: every later identical call, in any
    rollout, gets the first call's result (or its error), and identical calls in flight at once
    wait for the first instead of running again. :attr:`ran` counts the tool runs,
    :attr:`reused` the calls answered with an earlier run's outcome, and :meth:`notes` says so
    in one line for the user. A factory does not declare anything by itself: its state is per
    rollout, but the tool may still reach the real world. The record lives in this process: on
    a Ray executor each worker keeps its own (declare ``side_effects`` before running a live
    tool there).
    """

    def __init__(
        self,
        function: Callable[..., Any] | None = None,
        *,
        factory: Callable[[], Any] | None = None,
        side_effects: str | None = None,
        name: str | None = None,
        max_concurrency: int = 64,
    ) -> None:
        if (function is None) == (factory is None):
            raise PolicyError("a python tool policy needs exactly one of function and factory")
        if side_effects is not None and side_effects not in SIDE_EFFECTS:
            raise PolicyError(
                f"side_effects = {side_effects!r} is not one of {', '.join(SIDE_EFFECTS)} "
                "(or leave it out: each distinct call then runs once and its result is reused)"
            )
        self.function = function
        self.factory = factory
        self.side_effects = side_effects
        described = function if function is not None else factory
        self.name = name or getattr(described, "__qualname__", "callable")
        self.max_concurrency = max_concurrency
        #: Tool runs made (with undeclared side effects: at most one per distinct call).
        self.ran = 0
        #: Calls answered with an earlier run's outcome instead of running the tool.
        self.reused = 0
        self._reset()

    def _reset(self) -> None:
        self._states: weakref.WeakKeyDictionary[RolloutScope, asyncio.Future[Any]] = (
            weakref.WeakKeyDictionary()
        )
        self._runs: dict[str, asyncio.Future[str]] = {}
        self._started: set[str] = set()

    def __getstate__(self) -> dict[str, Any]:
        """Picklable (for Ray workers): the states, the runs and the counts stay here; each
        process starts with none."""
        state = self.__dict__.copy()
        for transient in ("_states", "_runs", "_started"):
            state.pop(transient)
        state["ran"] = state["reused"] = 0
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._reset()

    def notes(self) -> list[str]:
        """One line for the user while the side effects are undeclared: what otelcar does
        about it. It depends on the configuration only (not on which calls a run happened to
        repeat), so the same analysis says the same on any executor."""
        if self.side_effects is not None:
            return []
        return [
            f"tool policy {self.name}: side effects undeclared, so each distinct call runs the "
            "tool once and identical calls reuse its result (once per worker on Ray); declare "
            f"side_effects = {' | '.join(repr(s) for s in SIDE_EFFECTS)} to run every call"
        ]

    async def run(self, request: ToolRequest) -> str:
        if self.side_effects is not None:
            return await self._invoke(request)
        key = canonical_json([request.name, request.arguments])
        run = self._runs.get(key)
        if run is not None and run.cancelled() and key not in self._started:
            run = None  # cancelled before the tool was called: it never ran
        if run is None:
            run = asyncio.ensure_future(self._invoke(request, key))
            run.add_done_callback(_retrieve)
            self._runs[key] = run
            return await asyncio.shield(run)
        self.reused += 1
        if run.cancelled() or (not run.done() and run.get_loop() is not asyncio.get_running_loop()):
            raise PolicyError(
                f"tool {request.name!r} with arguments {canonical_json(request.arguments)} was "
                "started once and did not finish (interrupted, or running in another event loop); "
                "its side effects are undeclared, so it is not "
                f"run again (declare side_effects for tool policy {self.name})"
            )
        return await asyncio.shield(run)

    async def _invoke(self, request: ToolRequest, key: str | None = None) -> str:
        tool = await self._tool(request)
        if key is not None:
            self._started.add(key)
        self.ran += 1
        result = await self._call(tool, request)
        return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)

    async def _call(self, tool: Callable[..., Any], request: ToolRequest) -> Any:
        """Call ``tool`` for ``request`` (here: with the request)."""
        return await call_user(tool, "tool function", args=(request,))

    async def _tool(self, request: ToolRequest) -> Callable[..., Any]:
        """The callable that answers ``request``: the function, or taken from the rollout's
        state (see the class docstring)."""
        if self.function is not None:
            return self.function
        assert self.factory is not None
        scope = request.scope
        if scope is None:
            state = await call_user(self.factory, "tool state factory")
        else:
            made = self._states.get(scope)
            if made is None:
                made = asyncio.ensure_future(call_user(self.factory, "tool state factory"))
                made.add_done_callback(_retrieve)
                self._states[scope] = made
            state = await asyncio.shield(made)
        return _tool_of(state, request.name, self.name)


class KeywordToolPolicy(CallableToolPolicy):
    """A tool policy calling the real tool function with the call's arguments as keywords
    (``lookup_order(order_id="A-1")``), the natural form of agent tool functions. Every
    argument name reaches the tool, whatever it is called (``role``, ``self``, ``kwargs``…);
    arguments that are not a JSON object (the model wrote unparsable text) are a
    :class:`PolicyError`, and a call without arguments calls the tool with none."""

    async def _call(self, tool: Callable[..., Any], request: ToolRequest) -> Any:
        arguments = request.arguments
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, Mapping):
            raise PolicyError(
                f"tool {request.name!r} was called with arguments that are not a JSON object "
                f"({str(arguments)[:80]!r}): they cannot be passed as keywords"
            )
        return await call_user(tool, "tool function", kwargs=arguments)


def _tool_of(state: Any, name: str, policy: str) -> Callable[..., Any]:
    if isinstance(state, Mapping):
        if name in state and callable(state[name]):
            return state[name]
        raise PolicyError(
            f"tool policy {policy}: the factory's state has no callable {name!r}; "
            f"it has: {', '.join(map(str, state)) or 'nothing'}"
        )
    attribute = getattr(state, name, None) if name else None
    if callable(attribute):
        return attribute
    if callable(state):
        return state
    raise PolicyError(
        f"tool policy {policy}: the factory returned {type(state).__name__}, which is neither "
        f"callable, nor a mapping, nor an object with a method {name!r}"
    )


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark a future's exception as seen: the callers that awaited it got it already, and a
    run left to finish for later callers must not be reported as never retrieved."""
    if not future.cancelled():
        future.exception()
