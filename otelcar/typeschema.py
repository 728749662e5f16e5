"""JSON Schemas generated from Python types: the documents otelcar writes are declared once,
as ``TypedDict`` classes, and their schemas (``schemas/*.schema.json``) are derived from them.

:func:`json_schema` maps a type to the schema of the JSON values it describes:

- ``str``, ``int``, ``float``, ``bool``, ``None`` → their JSON types (``float`` is
  ``"number"``, which JSON integers satisfy);
- ``Literal[v]`` → ``{"const": v}``; ``Literal[a, b, …]`` → ``{"enum": [a, b, …]}``;
- ``list[T]`` and ``Sequence[T]`` → an array of T (``list[Any]``: any array); ``tuple[T, T]``
  (a fixed length, one item type) → an array of exactly that many T; ``tuple[T, ...]`` → an
  array of T;
- ``dict[str, T]`` → an object whose values are T (``dict[str, Any]``: any object);
- ``T | None`` → T's schema with ``"null"`` added to its ``type`` (or ``anyOf`` with null
  where T has no plain ``type``); other unions → ``anyOf``;
- a ``TypedDict`` → an object with its keys as ``properties`` in declaration order and its
  required keys (``total``, ``Required``, ``NotRequired``) as ``required``, and its docstring
  as its ``description``; one marked :func:`closed` allows no other keys
  (``"additionalProperties": false``);
- ``Annotated[T, Doc("…")]`` gives T's schema that description, ``Annotated[T, Extra(...)]``
  merges further keywords into it (``propertyNames``, ``not``, bounds, defaults),
  ``Annotated[T, Ref("file.schema.json")]`` refers to another contract file's schema instead,
  and ``Annotated[T, Def("name")]`` keeps T's schema once under the document's ``$defs`` and
  refers to it there (``{"$ref": "#/$defs/name"}``), so that a type can hold itself (an
  ``any`` of rules inside a rule) — :func:`json_schema` adds the ``$defs`` to the schema it
  returns, whose root they are relative to;
- ``Any`` → ``{}`` (any value).

Anything else raises :class:`TypeError`, so an undeclared shape cannot slip into a schema.
Pure: the standard library only, importable from every layer.
"""

from __future__ import annotations

import collections.abc
import json
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, Required, TypeVar, Union

_SCALARS: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
}
_T = TypeVar("_T")


@dataclass(frozen=True)
class Doc:
    """``Annotated[T, Doc("…")]``: the description of a key or a value in its schema."""

    text: str


@dataclass(frozen=True)
class Ref:
    """``Annotated[T, Ref("message.schema.json")]``: T's schema is that other schema
    (``{"$ref": …}``), for a value another contract file describes."""

    target: str


@dataclass(frozen=True)
class Extra:
    """``Annotated[T, Extra(minimum=0)]``: further JSON Schema keywords for T's schema (kept
    as JSON text, so that the annotation stays hashable as ``typing`` needs). A keyword that
    is no Python name comes in a mapping: ``Extra({"not": {"enum": […]}})``."""

    text: str = "{}"

    def __init__(self, keywords: Mapping[str, Any] | None = None, /, **more: Any) -> None:
        object.__setattr__(self, "text", json.dumps({**(keywords or {}), **more}))

    @property
    def keywords(self) -> dict[str, Any]:
        return json.loads(self.text)


@dataclass(frozen=True)
class Def:
    """``Annotated[T, Def("rule")]``: T's schema is kept once under the document's ``$defs`` as
    ``rule``, and each use of it refers there (``{"$ref": "#/$defs/rule"}``); T may use the
    same annotated type inside itself (a recursive type). A name stands for one type."""

    name: str


def closed(tp: _T) -> _T:
    """Mark the TypedDict ``tp`` closed: its schema allows no keys but its own
    (``"additionalProperties": false``). It sets ``__closed__``, the attribute that PEP 728's
    ``class T(TypedDict, closed=True)`` sets; a subclass is open unless marked too."""
    if not typing.is_typeddict(tp):
        raise TypeError(f"closed() marks a TypedDict, not {tp!r}")
    tp.__closed__ = True  # type: ignore[attr-defined]
    return tp


#: The ``$defs`` of the schema being built: name → (its type, its schema).
_Defs = dict[str, tuple[Any, dict[str, Any]]]


def json_schema(tp: Any) -> dict[str, Any]:
    """The JSON Schema of the JSON values ``tp`` describes (the rules are in the module's
    docstring), with the ``$defs`` its :class:`Def` annotations name; a new dict on every call.
    :class:`TypeError` for a type it cannot map."""
    defs: _Defs = {}
    schema = _schema(tp, defs)
    if defs:
        schema["$defs"] = {name: definition for name, (_, definition) in defs.items()}
    return schema


def _schema(tp: Any, defs: _Defs) -> dict[str, Any]:
    if tp is Any:
        return {}
    if isinstance(tp, type) and tp in _SCALARS:
        return {"type": _SCALARS[tp]}
    if typing.is_typeddict(tp):
        return _typed_dict(tp, defs)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return _annotated(args[0], args[1:], defs)
    if origin is Literal:
        values = list(args)
        return {"const": values[0]} if len(values) == 1 else {"enum": values}
    if origin in (Union, types.UnionType):
        return _union(args, defs)
    if origin in (list, collections.abc.Sequence):
        if args[0] is Any:
            return {"type": "array"}
        return {"type": "array", "items": _schema(args[0], defs)}
    if origin is tuple:
        return _tuple(args, defs)
    if origin in (dict, collections.abc.Mapping):
        if args and args[0] is not str:
            raise TypeError(f"JSON object keys are strings, not {args[0]!r}")
        value = args[1] if args else Any
        return {"type": "object"} if value is Any else _object_of(value, defs)
    raise TypeError(f"no JSON Schema for the type {tp!r}")


def document_schema(tp: Any, *, name: str, title: str) -> dict[str, Any]:
    """The schema of a whole document (``schemas/<name>``): ``tp``'s schema headed by the
    draft, ``$id`` (``otelcar/<name>``) and ``title``."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"otelcar/{name}",
        "title": title,
        **json_schema(tp),
    }


def _annotated(tp: Any, metadata: tuple[Any, ...], defs: _Defs) -> dict[str, Any]:
    """``Annotated[tp, *metadata]``: a :class:`Ref` or :class:`Def` refers elsewhere for
    ``tp``'s schema; :class:`Doc` and :class:`Extra` apply where it is used."""
    refs = [m.target for m in metadata if isinstance(m, Ref)]
    named = [m.name for m in metadata if isinstance(m, Def)]
    if refs:
        schema = {"$ref": refs[0]}
    elif named:
        schema = {"$ref": _define(named[0], tp, defs)}
    else:
        schema = _schema(tp, defs)
    for extra in metadata:
        if isinstance(extra, Doc):
            schema["description"] = extra.text
        elif isinstance(extra, Extra):
            schema.update(extra.keywords)
    return schema


def _define(name: str, tp: Any, defs: _Defs) -> str:
    """Keep ``tp``'s schema as ``$defs/name`` (once: a use inside ``tp`` itself finds it
    there) and return the reference to it."""
    if name in defs:
        if defs[name][0] != tp:
            raise TypeError(f"$defs/{name} names two types: {defs[name][0]!r} and {tp!r}")
    else:
        definition: dict[str, Any] = {}
        defs[name] = (tp, definition)  # before building it, for a use inside it
        definition.update(_schema(tp, defs))
    return f"#/$defs/{name}"


def _object_of(value: Any, defs: _Defs) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": _schema(value, defs)}


def _tuple(args: tuple[Any, ...], defs: _Defs) -> dict[str, Any]:
    if len(args) == 2 and args[1] is Ellipsis:
        return {"type": "array", "items": _schema(args[0], defs)}
    if not args or any(a != args[0] for a in args):
        raise TypeError(f"a tuple schema needs one item type, got {args!r}")
    n = len(args)
    return {"type": "array", "items": _schema(args[0], defs), "minItems": n, "maxItems": n}


def _union(args: tuple[Any, ...], defs: _Defs) -> dict[str, Any]:
    nullable = type(None) in args
    rest = [a for a in args if a is not type(None)]
    if nullable and len(rest) == 1:
        schema = _schema(rest[0], defs)
        kind = schema.get("type")
        if "enum" in schema:
            schema["enum"] = [*schema["enum"], None]
            return schema
        if isinstance(kind, str):  # its other keywords apply to that type, not to null
            schema["type"] = [kind, "null"]
            return schema
        return {"anyOf": [schema, {"type": "null"}]}
    kinds = [_schema(a, defs) for a in rest]
    if all(set(k) == {"type"} and isinstance(k["type"], str) for k in kinds):
        return {"type": [k["type"] for k in kinds] + (["null"] if nullable else [])}
    return {"anyOf": kinds + ([{"type": "null"}] if nullable else [])}


def _typed_dict(tp: Any, defs: _Defs) -> dict[str, Any]:
    # Read Required/NotRequired from the resolved hints: with postponed annotations
    # (``from __future__ import annotations``) ``__required_keys__`` cannot see them.
    hints = typing.get_type_hints(tp, include_extras=True)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for key, hint in hints.items():
        needed = key in tp.__required_keys__  # each class's totality, bases included
        while typing.get_origin(hint) in (Required, NotRequired):
            needed = typing.get_origin(hint) is Required
            hint = typing.get_args(hint)[0]
        if needed:
            required.append(key)
        properties[key] = _schema(hint, defs)
    schema: dict[str, Any] = {"type": "object"}
    doc = _own_doc(tp)
    if doc:
        schema["description"] = doc
    if required:
        schema["required"] = required
    schema["properties"] = properties
    if tp.__dict__.get("__closed__") is True:
        schema["additionalProperties"] = False
    return schema


def _own_doc(tp: Any) -> str | None:
    """A TypedDict's docstring as its description (None for the default one)."""
    doc = tp.__dict__.get("__doc__")
    return " ".join(doc.split()) if doc else None


#: An interval as JSON: ``[low, high]``.
Pair = typing.Annotated[list[float], Extra(minItems=2, maxItems=2)]
