"""Validators of otelcar's JSON outputs against the committed schemas (``schemas/``)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
from referencing import Registry, Resource

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"


def validator(name: str) -> jsonschema.Draft202012Validator:
    """A validator of ``schemas/NAME``, resolving the message schema it refers to (under
    either name the schemas use for it)."""
    message = Resource.from_contents(json.loads((SCHEMAS / "message.schema.json").read_text()))
    uris = ("message.schema.json", "otelcar/message.schema.json")
    registry = Registry().with_resources([(uri, message) for uri in uris])
    return jsonschema.Draft202012Validator(
        json.loads((SCHEMAS / name).read_text()), registry=registry
    )
