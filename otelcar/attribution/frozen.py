"""Finished results are values: a result's sequences are tuples, so nothing changes one after
it is made (a frozen dataclass alone still lets a caller append to its lists)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any


def freeze_sequences(result: Any) -> None:
    """In ``result`` (a frozen dataclass, from its ``__post_init__``): every field holding a
    list holds it as a tuple. Its ``to_dict()`` writes lists again, as JSON has them."""
    for f in fields(result):
        value = getattr(result, f.name)
        if isinstance(value, list):
            object.__setattr__(result, f.name, tuple(value))
