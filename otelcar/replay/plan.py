"""Intervention plans: the do-algebra over a recorded run (DESIGN.md §5).

A :class:`Plan` is an ordered, composable set of interventions, each addressed to a decision
by its **step** number in the steps table (what ``otelcar show`` prints):

| intervention | effect at that decision |
|---|---|
| :class:`Resample` | re-decide with the registered policy (even if nothing upstream changed) |
| :class:`Do` | take the given action instead of the recorded one |
| :class:`Remove` | skip the decision: no action, no observations; the run continues |
| :class:`Observe` | keep the action, mock the result of one of its tool calls |
| :class:`EditContext` | edit the context before deciding (then re-decide) |
| :class:`SwapModel` | re-decide these steps with another registered LLM policy |

Context edits: :class:`RemoveMessage`, :class:`ReplaceMessage`, :class:`InsertMessage`,
:class:`RemoveJsonItem`, :class:`ReplaceJsonItem`, :class:`RemoveText`, :class:`ReplaceText`.
Every plan round-trips through JSON (:meth:`Plan.to_json` / :meth:`Plan.from_json`) for reports.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from typing import Any, ClassVar

from otelcar.errors import OtelcarError
from otelcar.messages import Message


class PlanError(OtelcarError):
    """An intervention that cannot apply (bad step, message index, JSON path, text)."""


# -- context edits -----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class RemoveMessage:
    index: int
    kind: ClassVar[str] = "remove_message"

    def apply(self, messages: list[Message]) -> list[Message]:
        _check_index(messages, self.index)
        return messages[: self.index] + messages[self.index + 1 :]


@dataclass(frozen=True, slots=True)
class ReplaceMessage:
    index: int
    message: Message
    kind: ClassVar[str] = "replace_message"

    def apply(self, messages: list[Message]) -> list[Message]:
        _check_index(messages, self.index)
        return [*messages[: self.index], self.message, *messages[self.index + 1 :]]


@dataclass(frozen=True, slots=True)
class InsertMessage:
    """Insert ``message`` before position ``index`` (``index == len(context)``: append)."""

    index: int
    message: Message
    kind: ClassVar[str] = "insert_message"

    def apply(self, messages: list[Message]) -> list[Message]:
        if not 0 <= self.index <= len(messages):
            raise PlanError(
                f"insert position {self.index} is outside the context (0..{len(messages)})"
            )
        return [*messages[: self.index], self.message, *messages[self.index :]]


@dataclass(frozen=True, slots=True)
class RemoveJsonItem:
    """Remove the item at ``path`` (keys and list indexes) of a message whose content is JSON."""

    index: int
    path: tuple[str | int, ...]
    kind: ClassVar[str] = "remove_json_item"

    def apply(self, messages: list[Message]) -> list[Message]:
        return _edit_json(messages, self.index, self.path, None, remove=True)


@dataclass(frozen=True, slots=True)
class ReplaceJsonItem:
    index: int
    path: tuple[str | int, ...]
    value: Any
    kind: ClassVar[str] = "replace_json_item"

    def apply(self, messages: list[Message]) -> list[Message]:
        return _edit_json(messages, self.index, self.path, self.value, remove=False)


@dataclass(frozen=True, slots=True)
class RemoveText:
    """Remove the first occurrence of ``text`` from a message's content."""

    index: int
    text: str
    kind: ClassVar[str] = "remove_text"

    def apply(self, messages: list[Message]) -> list[Message]:
        return ReplaceText(self.index, self.text, "").apply(messages)


@dataclass(frozen=True, slots=True)
class ReplaceText:
    index: int
    text: str
    replacement: str
    kind: ClassVar[str] = "replace_text"

    def apply(self, messages: list[Message]) -> list[Message]:
        _check_index(messages, self.index)
        message = messages[self.index]
        content = message.content or ""
        if self.text not in content:
            raise PlanError(f"message {self.index} does not contain {self.text[:60]!r}")
        edited = replace(message, content=content.replace(self.text, self.replacement, 1))
        return [*messages[: self.index], edited, *messages[self.index + 1 :]]


Edit = (
    RemoveMessage
    | ReplaceMessage
    | InsertMessage
    | RemoveJsonItem
    | ReplaceJsonItem
    | RemoveText
    | ReplaceText
)
EDITS: dict[str, type] = {
    cls.kind: cls
    for cls in (
        RemoveMessage,
        ReplaceMessage,
        InsertMessage,
        RemoveJsonItem,
        ReplaceJsonItem,
        RemoveText,
        ReplaceText,
    )
}


def _check_index(messages: list[Message], index: int) -> None:
    if not 0 <= index < len(messages):
        raise PlanError(f"message index {index} is outside the context (0..{len(messages) - 1})")


def _edit_json(
    messages: list[Message], index: int, path: tuple[str | int, ...], value: Any, *, remove: bool
) -> list[Message]:
    _check_index(messages, index)
    message = messages[index]
    try:
        document = json.loads(message.content or "")
    except ValueError:
        raise PlanError(f"message {index} content is not JSON") from None
    if not path:
        raise PlanError("empty JSON path")
    parent = document
    try:
        for key in path[:-1]:
            parent = parent[key]
        if remove:
            del parent[path[-1]]
        else:
            parent[path[-1]] = value
    except (KeyError, IndexError, TypeError):
        raise PlanError(f"JSON path {list(path)} not found in message {index}") from None
    edited = replace(message, content=json.dumps(document, ensure_ascii=False))
    return [*messages[:index], edited, *messages[index + 1 :]]


# -- interventions ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Resample:
    step: int
    kind: ClassVar[str] = "resample"


@dataclass(frozen=True, slots=True)
class Do:
    step: int
    action: Message
    kind: ClassVar[str] = "do"


@dataclass(frozen=True, slots=True)
class Remove:
    step: int
    kind: ClassVar[str] = "remove"


@dataclass(frozen=True, slots=True)
class Observe:
    """Mock the result of tool call ``call`` (its index in the action) of decision ``step``."""

    step: int
    observation: str
    call: int = 0
    kind: ClassVar[str] = "observe"


@dataclass(frozen=True, slots=True)
class EditContext:
    step: int
    edit: Edit
    kind: ClassVar[str] = "edit_context"


@dataclass(frozen=True, slots=True)
class SwapModel:
    """Re-decide ``steps`` (``None``: every decision from ``start`` on) with policy ``policy``."""

    policy: str
    start: int = 0
    steps: tuple[int, ...] | None = None
    kind: ClassVar[str] = "swap_model"

    def covers(self, step: int) -> bool:
        return step in self.steps if self.steps is not None else step >= self.start


Intervention = Resample | Do | Remove | Observe | EditContext | SwapModel
INTERVENTIONS: dict[str, type] = {
    cls.kind: cls for cls in (Resample, Do, Remove, Observe, EditContext, SwapModel)
}


@dataclass(frozen=True)
class Plan:
    """An ordered set of interventions; ``Plan()`` is the factual replay (everything held)."""

    interventions: tuple[Intervention, ...] = field(default_factory=tuple)

    def __add__(self, other: Plan | Intervention) -> Plan:
        extra = other.interventions if isinstance(other, Plan) else (other,)
        return Plan(self.interventions + extra)

    def at(self, step: int) -> tuple[Intervention, ...]:
        """Interventions addressed to ``step`` (SwapModel ranges included), in plan order.
        Each step's answer is computed once per plan (every rollout of a plan asks the same
        steps), so a rollout's look-ups are linear in its decisions, not decisions ×
        interventions."""
        found = self._at.get(step)
        if found is None:
            index = self._by_step
            positions = index.get(step, ())
            ranges = [i for i in index.get(None, ()) if self.interventions[i].covers(step)]
            if ranges:
                positions = tuple(sorted((*positions, *ranges)))
            found = self._at[step] = tuple(self.interventions[i] for i in positions)
        return found

    @cached_property
    def _at(self) -> dict[int, tuple[Intervention, ...]]:
        return {}

    @cached_property
    def _by_step(self) -> dict[int | None, tuple[int, ...]]:
        """Positions of the interventions per step; ``None``: the SwapModel ranges."""
        index: dict[int | None, list[int]] = {}
        for position, item in enumerate(self.interventions):
            key = None if isinstance(item, SwapModel) else item.step
            index.setdefault(key, []).append(position)
        return {key: tuple(positions) for key, positions in index.items()}

    def steps(self) -> set[int]:
        return {i.step for i in self.interventions if not isinstance(i, SwapModel)}

    @classmethod
    def resample_from(cls, step: int, decision_steps: list[int]) -> Plan:
        """Hold every decision before ``step``, re-decide it and every later one (q_k)."""
        return cls(tuple(Resample(s) for s in decision_steps if s >= step))

    def describe(self) -> str:
        if not self.interventions:
            return "factual replay (everything held)"
        return "; ".join(_describe(i) for i in self.interventions)

    # -- JSON --------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"interventions": [_to_dict(i) for i in self.interventions]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        return cls(tuple(_intervention_from(item) for item in data.get("interventions", ())))

    @classmethod
    def from_json(cls, text: str) -> Plan:
        return cls.from_dict(json.loads(text))


def _describe(item: Intervention) -> str:
    if isinstance(item, SwapModel):
        where = f"steps {list(item.steps)}" if item.steps is not None else f"steps {item.start}.."
        return f"swap_model({where} → {item.policy})"
    if isinstance(item, EditContext):
        return f"edit_context({item.step}, {item.edit.kind})"
    return f"{item.kind}({item.step})"


def _message_dict(message: Message) -> dict[str, Any]:
    return message.to_dict()


def _to_dict(item: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": item.kind}
    for key, value in asdict(item).items():
        if isinstance(value, dict) and "role" in value and key in ("action", "message"):
            out[key] = value
        elif key == "edit":
            out[key] = _to_dict(item.edit)
        elif isinstance(value, tuple):
            out[key] = list(value)
        else:
            out[key] = value
    for key in ("action", "message"):
        if hasattr(item, key) and isinstance(getattr(item, key), Message):
            out[key] = _message_dict(getattr(item, key))
    return out


def _intervention_from(data: dict[str, Any]) -> Any:
    kinds = {**INTERVENTIONS, **EDITS}
    cls = kinds.get(data.get("kind", ""))
    if cls is None:
        raise PlanError(f"unknown intervention {data.get('kind')!r}; known: {', '.join(kinds)}")
    values = {k: v for k, v in data.items() if k != "kind"}
    for key in ("action", "message"):
        if key in values:
            values[key] = Message.from_dict(values[key])
    if "edit" in values:
        values["edit"] = _intervention_from(values["edit"])
    for key in ("path", "steps"):
        if isinstance(values.get(key), list):
            values[key] = tuple(values[key])
    return cls(**values)
