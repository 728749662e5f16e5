"""Calling the user's own functions: outcome functions, python policies, tool functions.

Every call into code configured by the user goes through :func:`call_user`, so an exception
there becomes one :class:`~otelcar.errors.UserCodeError` that names the function (as
``module:qualname``) and the exception, with the original kept as ``__cause__`` (the CLI shows
the traceback only with ``--debug``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from otelcar.errors import OtelcarError, UserCodeError


def describe_function(function: Callable[..., Any]) -> str:
    """``module:qualname`` of ``function`` (its ``repr`` when it has neither)."""
    module = getattr(function, "__module__", None)
    name = getattr(function, "__qualname__", None) or getattr(function, "__name__", None)
    if module and name:
        return f"{module}:{name}"
    return name or repr(function)


async def call_user(
    function: Callable[..., Any],
    role: str,
    *,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
) -> Any:
    """``function(*args, **kwargs)``, awaited when it returns an awaitable.

    The user's arguments travel as one sequence and one mapping, never beside otelcar's own
    parameters, so a user's keyword named ``role``, ``function``, ``args`` or ``kwargs`` (a
    tool argument, an outcome function's configured ``args``) reaches ``function`` unchanged;
    they are unpacked only in the call itself.

    ``role`` says what the function is for (``"outcome function"``, ``"tool function"``, …).
    Raises :class:`UserCodeError` ("outcome function tools:judge raised TypeError: …") when the
    function (or the awaitable it returned) raises an ``Exception``; an
    :class:`~otelcar.errors.OtelcarError` it raises on purpose passes through unchanged.
    """
    try:
        result = function(*args, **(kwargs or {}))
        if inspect.isawaitable(result):
            result = await result
    except OtelcarError:
        raise  # raised on purpose (a PolicyError, say): its message already says what
    except Exception as exc:
        raise UserCodeError(
            f"{role} {describe_function(function)} raised {type(exc).__name__}: {exc}"
        ) from exc
    return result
