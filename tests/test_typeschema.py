"""JSON Schemas generated from types (otelcar.typeschema): each rule of the mapping, the
errors for shapes it cannot map, and the documents otelcar writes validating against them."""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, Required, TypedDict

import jsonschema
import pytest

from otelcar.typeschema import Def, Doc, Extra, Pair, closed, document_schema, json_schema


class Inner(TypedDict, total=False):
    """An inner object."""

    a: int
    b: Required[str]


class Outer(TypedDict):
    name: str
    count: Annotated[int, Doc("how many"), Extra(minimum=0)]
    ratio: float | None
    kind: Literal["x", "y"]
    version: Literal[2]
    tags: list[str]
    span: Pair
    inner: Inner | None
    scores: dict[str, float]
    extra: dict[str, Any]
    anything: Any
    either: int | str
    later: NotRequired[bool]


class Child(Outer):
    more: NotRequired[int]


class OptionalNote(TypedDict, total=False):
    note: str


class WithOptionalBase(OptionalNote):
    kind: str


def test_each_type_maps_to_its_schema():
    schema = json_schema(Outer)
    props = schema["properties"]
    assert schema["type"] == "object"
    assert schema["required"] == [k for k in props if k != "later"]
    assert props["name"] == {"type": "string"}
    assert props["count"] == {"type": "integer", "description": "how many", "minimum": 0}
    assert props["ratio"] == {"type": ["number", "null"]}
    assert props["kind"] == {"enum": ["x", "y"]}
    assert props["version"] == {"const": 2}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert props["span"] == {
        "type": "array",
        "items": {"type": "number"},
        "minItems": 2,
        "maxItems": 2,
    }
    assert props["inner"]["type"] == ["object", "null"]
    assert props["inner"]["description"] == "An inner object."
    assert props["inner"]["required"] == ["b"]
    assert props["scores"] == {"type": "object", "additionalProperties": {"type": "number"}}
    assert props["extra"] == {"type": "object"}
    assert props["anything"] == {}
    assert props["either"] == {"type": ["integer", "string"]}


def test_inherited_keys_keep_their_requiredness_under_postponed_annotations():
    schema = json_schema(Child)
    assert "later" not in schema["required"] and "more" not in schema["required"]
    assert schema["required"][0] == "name"
    assert list(schema["properties"])[-1] == "more"


def test_keys_of_a_total_false_base_stay_optional_in_a_total_subclass():
    assert json_schema(WithOptionalBase)["required"] == ["kind"]


def test_a_nullable_literal_adds_null_to_its_enum():
    assert json_schema(Literal["a", "b"] | None) == {"enum": ["a", "b", None]}


@pytest.mark.parametrize("tp", [set[int], dict[int, str], tuple[int, str], complex, object])
def test_a_shape_without_a_json_schema_is_refused(tp):
    with pytest.raises(TypeError):
        json_schema(tp)


def test_a_generated_schema_checks_what_it_describes():
    schema = document_schema(Outer, name="outer.schema.json", title="outer")
    assert schema["$id"] == "otelcar/outer.schema.json" and schema["title"] == "outer"
    jsonschema.Draft202012Validator.check_schema(schema)
    good = {
        "name": "n",
        "count": 0,
        "ratio": None,
        "kind": "x",
        "version": 2,
        "tags": [],
        "span": [0.1, 0.2],
        "inner": {"b": "s"},
        "scores": {"a": 1.5},
        "extra": {"z": [1]},
        "anything": [None],
        "either": "s",
    }
    jsonschema.validate(good, schema)
    for key, bad in [
        ("count", -1),
        ("kind", "z"),
        ("span", [1.0]),
        ("inner", {"a": 1}),
        ("scores", {"a": "x"}),
        ("either", 1.5),
    ]:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**good, key: bad}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({k: v for k, v in good.items() if k != "tags"}, schema)


@closed
class Point(TypedDict, total=False):
    x: int
    y: int


class Labelled(Point):
    label: str


def test_a_closed_typed_dict_allows_no_other_keys():
    schema = json_schema(Point)
    assert schema["additionalProperties"] is False
    jsonschema.validate({"x": 1}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"x": 1, "z": 2}, schema)
    assert "additionalProperties" not in json_schema(Labelled)  # a subclass is open


def test_closed_marks_only_a_typed_dict():
    with pytest.raises(TypeError):
        closed(Def)


def test_extra_takes_keywords_that_are_no_python_names():
    schema = json_schema(Annotated[str, Extra({"not": {"enum": ["a"]}}, minLength=1)])
    assert schema == {"type": "string", "not": {"enum": ["a"]}, "minLength": 1}
    checked = json_schema(Annotated[dict[str, int], Extra(propertyNames={"pattern": "^[a-z]+$"})])
    jsonschema.validate({"ab": 1}, checked)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"A": 1}, checked)


def test_a_list_of_any_is_any_array():
    assert json_schema(list[Any]) == {"type": "array"}
    assert json_schema(str | list[Any]) == {"type": ["string", "array"]}


class Leaf(TypedDict):
    value: int


class Branch(TypedDict):
    """A node that holds nodes."""

    children: list[Node]


Node = Annotated[Annotated[Leaf, Def("leaf")] | Annotated[Branch, Def("branch")], Def("node")]


class Tree(TypedDict):
    root: Annotated[Node, Doc("the top node")]
    spare: NotRequired[Node]


def test_a_def_is_kept_once_under_defs_and_may_hold_itself():
    schema = document_schema(Tree, name="tree.schema.json", title="tree")
    assert schema["properties"]["root"] == {"$ref": "#/$defs/node", "description": "the top node"}
    assert schema["properties"]["spare"] == {"$ref": "#/$defs/node"}
    assert list(schema["$defs"]) == ["node", "leaf", "branch"]
    assert schema["$defs"]["node"] == {
        "anyOf": [{"$ref": "#/$defs/leaf"}, {"$ref": "#/$defs/branch"}]
    }
    children = schema["$defs"]["branch"]["properties"]["children"]
    assert children == {"type": "array", "items": {"$ref": "#/$defs/node"}}
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate({"root": {"children": [{"value": 1}, {"children": []}]}}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"root": {"children": [{"value": "x"}]}}, schema)


def test_a_def_name_stands_for_one_type():
    class Twice(TypedDict):
        a: Annotated[int, Def("n")]
        b: Annotated[str, Def("n")]

    with pytest.raises(TypeError, match="names two types"):
        json_schema(Twice)
