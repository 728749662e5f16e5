"""The console's run form, made from the analyses' request types
(:mod:`otelcar.analyses.requests`): which fields it has, how a posted form becomes a run's
options, and how those options become the request the run starts.

A field is an option of a request type; one that several analyses have (``budget``,
``seed``) is one field, labelled with the analyses it is for. An
option that is on by default (``refute``) is a ``no_…`` checkbox. A choice lists only values
the run accepts: a ``Literal``'s, or the ``offered`` values of a text option (``same``). A
run's options are kept as the form names them (``{"mode": "bisect", "no_refute": True}``),
only those given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from otelcar.analyses.options import RequestError, Spec, specs
from otelcar.analyses.requests import REQUESTS
from otelcar.errors import OtelcarError


class FormError(OtelcarError):
    """A posted value that is not one the field takes (one line naming the field)."""


@dataclass(frozen=True)
class FormField:
    """One field of the run form: ``name`` (the form's), ``label``, ``control`` (``select``,
    ``checkbox``, ``number`` or ``text``), ``choices`` (a select's), ``value`` (prefilled:
    the default when every analysis with the field has the same one), ``hint`` (the help)."""

    name: str
    label: str
    control: str
    choices: tuple[str, ...]
    value: str
    hint: str

    @property
    def id(self) -> str:
        return "run-" + self.name.replace("_", "-")


def form_name(spec: Spec) -> str:
    """The form's name of an option: ``no_<name>`` for one on by default."""
    return f"no_{spec.name}" if spec.kind is bool and spec.default is True else spec.name


def _on_form(kind: str) -> tuple[Spec, ...]:
    return specs(REQUESTS[kind])


def _choices(spec: Spec) -> tuple[str, ...]:
    return spec.option.offered or (spec.choices if spec.kind is str else ())


def form_fields() -> list[FormField]:
    """The run form's fields, in the order of the analyses (attribute, why, fix) and their
    options."""
    seen: dict[str, list[tuple[str, Spec]]] = {}
    for kind in REQUESTS:
        for spec in _on_form(kind):
            seen.setdefault(form_name(spec), []).append((kind, spec))
    fields = []
    for name, found in seen.items():
        spec = found[0][1]
        defaults = {s.default for _, s in found}
        choices = _choices(spec)
        control = (
            "checkbox"
            if spec.kind is bool
            else "select"
            if choices
            else "number"
            if spec.kind in (int, float) and not spec.choices
            else "text"
        )
        one = defaults.pop() if len(defaults) == 1 else None
        shown = "" if one is None or isinstance(one, bool) else str(one)
        label = name.replace("_", " ")
        fields.append(
            FormField(
                name,
                f"{label} ({', '.join(k for k, _ in found)})",
                control,
                choices,
                shown,
                spec.help,
            )
        )
    return fields


def form_options(kind: str, form: Mapping[str, Any]) -> dict[str, Any]:
    """The options of a ``kind`` run in the posted ``form``: each field of that analysis that
    is given (a checked box, a non-empty value), converted. Every field given is checked,
    also one of another analysis: :class:`FormError` for a value a field does not take."""
    options: dict[str, Any] = {}
    for each in REQUESTS:
        for spec in _on_form(each):
            name = form_name(spec)
            value = str(form.get(name) or "").strip()
            if value:
                converted = _converted(spec, name, value)
                if each == kind:
                    options[name] = converted
    return options


def _converted(spec: Spec, name: str, value: str) -> Any:
    """A posted ``value`` of the field of ``spec`` as the option takes it, within its
    bounds."""
    if spec.kind is bool:
        return True
    choices = _choices(spec)
    if choices and value not in choices:
        raise FormError(f"{name}: one of {', '.join(choices)}")
    converted = value if choices or value in spec.choices else _number(spec, name, value)
    problem = spec.problem(converted)
    if problem is not None:
        raise FormError(f"{name}: {problem}")
    return converted


def _number(spec: Spec, name: str, value: str) -> int | float | str:
    if spec.kind is str:
        return value
    try:
        return int(value) if spec.kind is int else float(value)
    except ValueError:
        raise FormError(f"{name}: a number") from None


def request_of(kind: str, options: Mapping[str, Any]) -> Any:
    """The request of a ``kind`` run with ``options`` as :func:`form_options` gives them (a
    number may also be its text, as posted); :class:`FormError` for an unknown option or a
    value out of its bounds."""
    by_form = {form_name(s): s for s in _on_form(kind)}
    values = {}
    for name, value in options.items():
        spec = by_form.get(name)
        if spec is None:
            raise FormError(f"{name}: not an option of {kind}")
        if isinstance(value, str) and spec.kind in (int, float):  # as posted: "4"
            value = _converted(spec, name, value)
        values[spec.name] = (not value) if name != spec.name else value
    try:
        return REQUESTS[kind](**values)
    except RequestError as exc:
        raise FormError(str(exc)) from None
