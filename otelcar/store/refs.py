"""Steps parts on disk: each distinct message stored once per build, contexts as references.

The GenAI conventions repeat the whole conversation in every chat span, so a trace of ``n``
turns holds its first messages ``n`` times, and a steps table that kept every step's
``input_messages`` whole would grow with ``n²``. On disk a build's steps part
(:data:`STEPS_FILE_SCHEMA`) holds the message columns (:data:`MESSAGE_COLUMNS`) as
positions (``UInt32``) into the same build's messages part (:data:`MESSAGES_SCHEMA`: one row
per distinct message, in order of first use). Messages are told apart by content (their JSON
text), so a message repeated in many contexts, or by many traces of the build (a shared
system prompt), is stored once; what grows with ``n²`` is only the list of positions, which
Parquet's compression folds (each context repeats the previous one's positions).

:func:`encode_steps` turns step rows into the two frames; :func:`resolve_messages` turns a
lazy scan of steps parts back into the in-memory steps table (:data:`otelcar.schema.
STEPS_SCHEMA`), equal to the one built from the rows (:func:`otelcar.store.tables.frame_of`),
reading the messages parts only when a message column is collected.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from otelcar.messages import MESSAGE_DTYPE
from otelcar.schema import STEPS_SCHEMA

#: The steps columns that hold messages: as references on disk.
MESSAGE_COLUMNS = ("input_messages", "output", "alternates")
#: A build's messages part: its distinct messages, a row's position is its reference.
MESSAGES_SCHEMA = pl.Schema({"message": MESSAGE_DTYPE})
#: The in-memory steps table with the build that holds each row.
STEPS_PART_SCHEMA = pl.Schema({**STEPS_SCHEMA, "build_id": pl.Int64})
#: A build's steps part on disk: :data:`STEPS_PART_SCHEMA` with messages as references.
STEPS_FILE_SCHEMA = pl.Schema(
    {
        name: (
            dtype
            if name not in MESSAGE_COLUMNS
            else pl.List(pl.UInt32)
            if isinstance(dtype, pl.List)
            else pl.UInt32
        )
        for name, dtype in STEPS_PART_SCHEMA.items()
    }
)

#: A message's content as text, the same whatever the order of its keys.
_content = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode
_TEXT = (str, type(None))


def _key(item: Any) -> Any:
    """A hashable key, equal for messages of equal content: a message whose values are text
    (or ``None``, tool calls of text included) as its sorted ``(field, value)`` pairs (no
    text is encoded: hashing a string is cheaper); anything else as its JSON text."""
    if type(item) is not dict:
        return _content(item)
    fields = []
    for name, value in item.items():
        if name == "tool_calls" and type(value) is list:
            calls = []
            for call in value:
                if type(call) is not dict or any(type(v) not in _TEXT for v in call.values()):
                    return _content(item)
                calls.append(tuple(sorted(call.items())))
            value = ("calls", tuple(calls))
        elif type(value) not in _TEXT:
            return _content(item)
        fields.append((name, value))
    fields.sort()  # by name: the names are distinct
    return tuple(fields)


#: ``(build ids)`` → the messages of those builds' parts, concatenated in that order, and
#: the position in it where each build's messages start.
MessagesOf = Callable[[list[int]], tuple[pl.Series, dict[int, int]]]


@dataclass(slots=True)
class EncodedSteps:
    """One build's steps as stored: the steps part and the messages part it refers to."""

    steps: pl.DataFrame  # STEPS_FILE_SCHEMA
    messages: pl.DataFrame  # MESSAGES_SCHEMA


class _Distinct:
    """Distinct messages in order of first use. A message object seen before is found by
    identity (the mappers share one object per message of a trace); a new object by its
    content (:func:`_key`), so equal messages of other objects (other traces) get the same
    position."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self._by_id: dict[int, tuple[Any, int]] = {}
        self._by_text: dict[Any, int] = {}

    def refs(self, items: Sequence[Any] | None) -> list[int | None] | None:
        """The positions of ``items`` (``None`` for no list)."""
        if items is None:
            return None
        by_id = self._by_id
        found: list[int | None] = []
        for item in items:
            held = by_id.get(id(item))
            found.append(held[1] if held is not None and held[0] is item else self.ref(item))
        return found

    def ref(self, item: Any) -> int | None:
        """``item``'s position (``None`` for a missing message)."""
        if item is None:
            return None
        held = self._by_id.get(id(item))
        if held is not None and held[0] is item:
            return held[1]
        try:
            key: Any = _key(item)
        except (TypeError, ValueError):  # not JSON: never equal to another object
            key = ("object", id(item))
        position = self._by_text.get(key)
        if position is None:
            position = self._by_text[key] = len(self.items)
            self.items.append(item)
        self._by_id[id(item)] = (item, position)
        return position


def encode_steps(rows: Sequence[dict[str, Any]]) -> EncodedSteps:
    """The steps part and messages part of ``rows`` (step rows with ``build_id``,
    :data:`STEPS_PART_SCHEMA`); the rows are not changed."""
    distinct = _Distinct()
    columns: dict[str, pl.Series] = {}
    for name in MESSAGE_COLUMNS:
        if isinstance(STEPS_PART_SCHEMA[name], pl.List):
            values: list[Any] = [distinct.refs(row.get(name)) for row in rows]
        else:
            values = [distinct.ref(row.get(name)) for row in rows]
        columns[name] = pl.Series(name, values, dtype=STEPS_FILE_SCHEMA[name])
    rest = {k: v for k, v in STEPS_FILE_SCHEMA.items() if k not in MESSAGE_COLUMNS}
    steps = pl.DataFrame(rows, schema=rest).with_columns(**columns).select(list(STEPS_FILE_SCHEMA))
    messages = pl.DataFrame({"message": pl.Series("message", distinct.items, dtype=MESSAGE_DTYPE)})
    return EncodedSteps(steps, messages)


def resolve_messages(steps: pl.LazyFrame, messages_of: MessagesOf) -> pl.LazyFrame:
    """``steps`` (rows of steps parts, :data:`STEPS_FILE_SCHEMA`) with the message columns
    turned back into messages (:data:`STEPS_PART_SCHEMA`). Row by row, so filters on other
    columns are applied before; ``messages_of`` is called only when a message column is
    collected, with the builds of the rows collected (once per set of builds)."""
    messages_of = _once(messages_of)
    return steps.with_columns(
        pl.struct("build_id", name)
        .map_batches(
            _resolver(name, messages_of), return_dtype=STEPS_PART_SCHEMA[name], is_elementwise=True
        )
        .alias(name)
        for name in MESSAGE_COLUMNS
    )


def _once(messages_of: MessagesOf) -> MessagesOf:
    """``messages_of`` computed once per set of builds (the three message columns ask for
    the same builds, possibly at once from several threads)."""
    done: dict[tuple[int, ...], tuple[pl.Series, dict[int, int]]] = {}
    lock = threading.Lock()

    def once(builds: list[int]) -> tuple[pl.Series, dict[int, int]]:
        key = tuple(builds)
        with lock:
            if key not in done:
                done[key] = messages_of(builds)
            return done[key]

    return once


def _resolver(name: str, messages_of: MessagesOf) -> Callable[[pl.Series], pl.Series]:
    dtype = STEPS_PART_SCHEMA[name]

    def resolve(pairs: pl.Series) -> pl.Series:
        frame = pairs.struct.unnest()
        if frame.is_empty():
            return pl.Series(name, [], dtype=dtype)
        builds = frame["build_id"].unique().sort().to_list()
        messages, starts = messages_of(builds)
        start = frame["build_id"].replace_strict(starts, return_dtype=pl.UInt32)
        refs = frame.select(pl.col(name) + start).to_series()
        if isinstance(dtype, pl.List):
            table = pl.DataFrame({name: refs}).select(
                pl.lit(messages.implode()).list.gather(pl.col(name)).alias(name)
            )
            return table.to_series().cast(dtype)
        return messages.gather(refs).alias(name).cast(dtype)

    return resolve
