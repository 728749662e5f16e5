"""JSON Schemas generated from Python types: the documents otelcar writes are declared once,
as ``TypedDict`` classes, and their schemas (``schemas/*.schema.json``) are derived from them.

:func:`json_schema` maps a type to the schema of the JSON values it describes:

- ``str``, ``int``, ``float``, ``bool``, ``None`` → their JSON types (``float`` is
  ``"number"``, which JSON integers satisfy);
- ``Literal[v]`` → ``{"const": v}``; ``Literal[a, b, …]`` → ``{"enum": [a, b, …]}``;
- ``list[T]`` and ``Sequence[T]`` → an array of T; ``tuple[T, T]`` (a fixed length, one item
  type) → an array of exactly that many T; ``tuple[T, ...]`` → an array of T;
- ``dict[str, T]`` → an object whose values are T (``dict[str, Any]``: any object);
- ``T | None`` → T's schema with ``"null"`` added to its ``type`` (or ``anyOf`` with null
  where T has no plain ``type``); other unions → ``anyOf``;
- a ``TypedDict`` → an object with its keys as ``properties`` in declaration order and its
  required keys (``total``, ``Required``, ``NotRequired``) as ``required``; a key annotated
  ``Annotated[T, Doc("…")]`` gets that description, ``Annotated[T, Extra(...)]`` merges
  further keywords into T's schema, and ``Annotated[T, Ref("file.schema.json")]`` refers to
  another contract file's schema instead;
- ``Any`` → ``{}`` (any value).

Anything else raises :class:`TypeError`, so an undeclared shape cannot slip into a schema.
Pure: the standard library only, importable from every layer.
"""

from __future__ import annotations

import collections.abc
import json
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, Required, Union

_SCALARS: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


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
    as JSON text, so that the annotation stays hashable as ``typing`` needs)."""

    text: str = "{}"

    def __init__(self, **keywords: Any) -> None:
        object.__setattr__(self, "text", json.dumps(keywords))

    @property
    def keywords(self) -> dict[str, Any]:
        return json.loads(self.text)


def json_schema(tp: Any) -> dict[str, Any]:
    """The JSON Schema of the JSON values ``tp`` describes (the rules are in the module's
    docstring); a new dict on every call. :class:`TypeError` for a type it cannot map."""
    if tp is Any:
        return {}
    if isinstance(tp, type) and tp in _SCALARS:
        return {"type": _SCALARS[tp]}
    if typing.is_typeddict(tp):
        return _typed_dict(tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        refs = [a.target for a in args[1:] if isinstance(a, Ref)]
        schema = {"$ref": refs[0]} if refs else json_schema(args[0])
        for extra in args[1:]:
            if isinstance(extra, Doc):
                schema["description"] = extra.text
            elif isinstance(extra, Extra):
                schema.update(extra.keywords)
        return schema
    if origin is Literal:
        values = list(args)
        return {"const": values[0]} if len(values) == 1 else {"enum": values}
    if origin in (Union, types.UnionType):
        return _union(args)
    if origin in (list, collections.abc.Sequence):
        return {"type": "array", "items": json_schema(args[0])}
    if origin is tuple:
        return _tuple(args)
    if origin in (dict, collections.abc.Mapping):
        if args and args[0] is not str:
            raise TypeError(f"JSON object keys are strings, not {args[0]!r}")
        value = args[1] if args else Any
        return {"type": "object"} if value is Any else _object_of(value)
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


def _object_of(value: Any) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": json_schema(value)}


def _tuple(args: tuple[Any, ...]) -> dict[str, Any]:
    if len(args) == 2 and args[1] is Ellipsis:
        return {"type": "array", "items": json_schema(args[0])}
    if not args or any(a != args[0] for a in args):
        raise TypeError(f"a tuple schema needs one item type, got {args!r}")
    n = len(args)
    return {"type": "array", "items": json_schema(args[0]), "minItems": n, "maxItems": n}


def _union(args: tuple[Any, ...]) -> dict[str, Any]:
    nullable = type(None) in args
    rest = [a for a in args if a is not type(None)]
    if nullable and len(rest) == 1:
        schema = json_schema(rest[0])
        kind = schema.get("type")
        if "enum" in schema:
            schema["enum"] = [*schema["enum"], None]
            return schema
        if isinstance(kind, str):  # its other keywords apply to that type, not to null
            schema["type"] = [kind, "null"]
            return schema
        return {"anyOf": [schema, {"type": "null"}]}
    kinds = [json_schema(a) for a in rest]
    if all(set(k) == {"type"} and isinstance(k["type"], str) for k in kinds):
        return {"type": [k["type"] for k in kinds] + (["null"] if nullable else [])}
    return {"anyOf": kinds + ([{"type": "null"}] if nullable else [])}


def _typed_dict(tp: Any) -> dict[str, Any]:
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
        properties[key] = json_schema(hint)
    schema: dict[str, Any] = {"type": "object"}
    doc = _own_doc(tp)
    if doc:
        schema["description"] = doc
    if required:
        schema["required"] = required
    schema["properties"] = properties
    return schema


def _own_doc(tp: Any) -> str | None:
    """A TypedDict's docstring as its description (None for the default one)."""
    doc = tp.__dict__.get("__doc__")
    return " ".join(doc.split()) if doc else None


#: An interval as JSON: ``[low, high]``.
Pair = typing.Annotated[list[float], Extra(minItems=2, maxItems=2)]
