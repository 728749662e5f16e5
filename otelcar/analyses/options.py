"""What one option of an analysis is — its type, default, bounds and help text — declared
once, on a field of a frozen request type (:mod:`otelcar.analyses.requests`).

A request type is a frozen dataclass whose option fields are made with :func:`option`.
:func:`specs` reads them back as :class:`Spec` values, which is all a front end needs to
offer them: the CLI makes click options of them (:mod:`otelcar.cli.options`), the MCP server
a tool signature (:mod:`otelcar.mcp.arguments`) and the console its run form
(:mod:`otelcar.ui.forms`). :class:`Request` checks every value against its bounds when a
request is made, so a request the library receives is one every front end accepts.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from otelcar.errors import OtelcarError


class RequestError(OtelcarError):
    """A request option's value out of its bounds or not one of its choices."""


@dataclass(frozen=True)
class Option:
    """How an option is offered, besides its type and default (the field's).

    ``help``: one text for the CLI's ``--help``, the MCP tool's input schema and the console
    form's hint. ``flags``: the CLI's declarations (default ``--field-name``; a
    ``--x/--no-x`` pair for a flag that is on by default). ``ge``, ``gt``, ``le``, ``lt``:
    bounds of a number. ``names``: the names front ends use instead of the field's
    (``(("mcp", "max_calls"),)``). ``offered``: for a text option that also takes other forms,
    the values a choice list offers (each one the analysis accepts). ``metavar``: the CLI's
    placeholder."""

    help: str
    flags: tuple[str, ...] = ()
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    names: tuple[tuple[str, str], ...] = ()
    offered: tuple[str, ...] = ()
    metavar: str | None = None


def option(default: Any, help: str, **how: Any) -> Any:
    """A request field with default ``default`` offered as :class:`Option` ``(help, **how)``
    says."""
    return dataclasses.field(default=default, metadata={"option": Option(help, **how)})


@dataclass(frozen=True)
class Spec:
    """One option of a request type, resolved: ``name`` (the field's), ``kind`` (``bool``,
    ``int``, ``float`` or ``str``), ``optional`` (``None`` allowed: the default comes from
    elsewhere, ``otelcar.toml`` or the analysis), ``choices`` (the closed set of a
    ``Literal``; with ``kind`` ``int`` also, the names a number may be given as instead),
    ``default``, the :class:`Option`, the field's annotation (``annotation``) and whether it
    holds any number of values (``multiple``: a ``tuple[int, ...]``, given once per value)."""

    name: str
    kind: type
    optional: bool
    choices: tuple[str, ...]
    default: Any
    option: Option
    annotation: Any
    multiple: bool = False

    @property
    def help(self) -> str:
        return self.option.help

    def name_in(self, front_end: str) -> str:
        """The name ``front_end`` (``cli``, ``mcp``, ``form``) gives the option."""
        return dict(self.option.names).get(front_end, self.name)

    def bounds(self) -> dict[str, float]:
        """The bounds that are set, as ``{"ge": 1}``."""
        found = {k: getattr(self.option, k) for k in ("ge", "gt", "le", "lt")}
        return {k: v for k, v in found.items() if v is not None}

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is not a value of this option (``None`` when it is)."""
        if self.multiple:
            if not isinstance(value, tuple):
                return f"a tuple of values, not {value!r}"
            one = dataclasses.replace(self, multiple=False)
            return next((p for p in map(one.problem, value) if p is not None), None)
        if value is None:
            return None if self.optional else "a value is needed"
        if isinstance(value, str) and value in self.choices:
            return None
        if self.choices and self.kind is str:
            return f"one of {', '.join(self.choices)}, not {value!r}"
        wanted = (int,) if self.kind is int else (int, float) if self.kind is float else ()
        if self.kind is bool and not isinstance(value, bool):
            return f"true or false, not {value!r}"
        if wanted and (isinstance(value, bool) or not isinstance(value, wanted)):
            names = f" or one of {', '.join(self.choices)}" if self.choices else ""
            return f"a {'whole ' if self.kind is int else ''}number{names}, not {value!r}"
        if self.kind is str and not isinstance(value, str):
            return f"a text, not {value!r}"
        for bound, ok, says in _CHECKS:
            limit = getattr(self.option, bound)
            if limit is not None and not ok(value, limit):
                return f"{says} {limit:g}, not {value!r}"
        return None


_CHECKS = (
    ("ge", lambda v, b: v >= b, "at least"),
    ("gt", lambda v, b: v > b, "above"),
    ("le", lambda v, b: v <= b, "at most"),
    ("lt", lambda v, b: v < b, "below"),
)


@functools.cache
def specs(request_type: type) -> tuple[Spec, ...]:
    """The options of ``request_type`` (its fields made with :func:`option`), in order."""
    hints = typing.get_type_hints(request_type)
    found = []
    for field in dataclasses.fields(request_type):
        how = field.metadata.get("option")
        if how is None:
            continue
        annotation = hints[field.name]
        multiple = typing.get_origin(annotation) is tuple
        one = typing.get_args(annotation)[0] if multiple else annotation
        kind, optional, choices = _resolve(one)
        found.append(
            Spec(field.name, kind, optional, choices, field.default, how, annotation, multiple)
        )
    return tuple(found)


def _resolve(annotation: Any) -> tuple[type, bool, tuple[str, ...]]:
    """``(kind, optional, choices)`` of a field annotation (of one value of a
    ``tuple[int, ...]``): ``int | None``, ``bool``, ``Literal["a", "b"]``,
    ``int | Literal["culprit", "last"]``, ``str``."""
    parts = (
        typing.get_args(annotation)
        if typing.get_origin(annotation) in (typing.Union, types.UnionType)
        else (annotation,)
    )
    optional = type(None) in parts
    kinds = [p for p in parts if p is not type(None)]
    choices: tuple[str, ...] = ()
    plain = []
    for part in kinds:
        if typing.get_origin(part) is Literal:
            choices += tuple(typing.get_args(part))
        else:
            plain.append(part)
    if len(plain) > 1 or (plain and plain[0] not in (bool, int, float, str)):
        raise TypeError(f"a request option cannot be of type {annotation!r}")
    return (plain[0] if plain else str), optional, choices


class Request:
    """The base of the frozen request types: every option's value is checked when a request
    is made (:class:`RequestError`, one line naming the option)."""

    #: The analysis' name (``attribute``, ``why``, ``fix``).
    kind: ClassVar[str]

    def __post_init__(self) -> None:
        for spec in specs(type(self)):
            problem = spec.problem(getattr(self, spec.name))
            if problem is not None:
                raise RequestError(f"{spec.name}: {problem}")

    @classmethod
    def of(cls, front_end: str, values: Mapping[str, Any]) -> Any:
        """The request of ``values`` named as ``front_end`` names the options (the MCP
        tool's ``max_calls`` is ``budget``); an option not given keeps its default."""
        given = {
            s.name: values[s.name_in(front_end)]
            for s in specs(cls)
            if s.name_in(front_end) in values
        }
        return cls(**given)

    def options(self) -> dict[str, Any]:
        """Every option's value by its field name."""
        return {spec.name: getattr(self, spec.name) for spec in specs(type(self))}
