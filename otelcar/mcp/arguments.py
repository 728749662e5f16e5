"""The arguments of the MCP tools that run analyses (``attribute``, ``why``, ``fix``), made
from the analyses' request types (:mod:`otelcar.analyses.requests`).

The SDK reads a tool's input schema from its function's signature; :func:`takes` gives a tool
function the signature of its request type's options (each with its type, bounds, default
and help as the description, under its MCP name: ``budget`` is ``max_calls``), so a tool
declares no option of its own and offers every option the CLI does.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Annotated, Any

from pydantic import Field

from otelcar.analyses.options import Spec, specs

#: ``(name, annotation)`` or ``(name, annotation, default)`` of a parameter beside the options.
Extra = tuple[Any, ...]


def annotation(spec: Spec) -> Any:
    """The type of one option as a tool argument: its annotation with its bounds and help."""
    return Annotated[spec.annotation, Field(description=spec.help, **spec.bounds())]


def parameters(request_type: type) -> list[inspect.Parameter]:
    """The keyword parameters of ``request_type``'s options, named as the MCP tools name them."""
    return [
        inspect.Parameter(
            spec.name_in("mcp"),
            inspect.Parameter.KEYWORD_ONLY,
            default=spec.default,
            annotation=annotation(spec),
        )
        for spec in specs(request_type)
    ]


def takes(
    request_type: type, *, leading: Sequence[Extra] = (), trailing: Sequence[Extra] = ()
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A tool function, given the signature ``leading`` parameters (positional), then the
    options of ``request_type`` (:func:`parameters`), then ``trailing`` ones (keyword, with
    defaults). The function takes the options as ``**options``."""

    def extra(item: Extra, kind: Any) -> inspect.Parameter:
        name, hint, *default = item
        return inspect.Parameter(
            name, kind, annotation=hint, default=default[0] if default else inspect.Parameter.empty
        )

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.Signature(
            [
                *(extra(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in leading),
                *parameters(request_type),
                *(extra(p, inspect.Parameter.KEYWORD_ONLY) for p in trailing),
            ],
            return_annotation=dict[str, Any],
        )
        function.__signature__ = signature  # type: ignore[attr-defined]
        function.__annotations__ = {
            **{p.name: p.annotation for p in signature.parameters.values()},
            "return": dict[str, Any],
        }
        return function

    return decorate
