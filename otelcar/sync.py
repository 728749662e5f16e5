"""Synchronous doors to the asynchronous entry points.

Every long-running entry point (``attribute``, ``why``, ``fix``, ``attribute_traces``) is a
coroutine function, so a server or a notebook can await it; :func:`synchronous` makes the
blocking function scripts call, with the very same keyword-only signature (a ``ParamSpec``,
so type checkers and ``inspect.signature`` see every parameter) and no second list of them.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def run_sync(coroutine: Coroutine[Any, Any, R]) -> R:
    """``asyncio.run`` that does not hand the result back through the event loop: CPython
    3.11's ``asyncio.run`` can build the ``repr()`` of the returned value (python/cpython#112559),
    which for a set of rollouts formats every context of every rollout as text."""
    box: list[R] = []

    async def main() -> None:
        box.append(await coroutine)

    asyncio.run(main())
    return box[0]


def synchronous(function: Callable[P, Coroutine[Any, Any, R]], *, name: str) -> Callable[P, R]:
    """The blocking twin of the coroutine function ``function``, called ``name``: it takes
    the same arguments, runs ``function`` in a new event loop (:func:`run_sync`) and returns
    its result. Its docstring is ``function``'s, introduced as the synchronous form; it
    cannot be called from a running event loop (await ``function`` there)."""

    @functools.wraps(function)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        return run_sync(function(*args, **kwargs))

    call.__name__ = name
    call.__qualname__ = name
    call.__doc__ = (
        f"Synchronous :func:`{function.__name__}` (same arguments; not from inside a running "
        f"event loop).\n\n{function.__doc__ or ''}"
    )
    return call
