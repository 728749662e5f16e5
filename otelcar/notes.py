"""What an analysis says about how it went, as data: a :class:`Note` is a kind and the facts
it rests on (numbers, steps, names, the text of an error), never a sentence.

Every layer that has something to tell the user (the replay about requests it inferred, a
policy about reused results, the estimators about a stop, a fallback or lost rollouts)
makes notes with :func:`note`; :mod:`otelcar.report.notes` words them, one wording per kind,
so the same note reads the same in the terminal, the JSON, MCP and the console. A result's
``to_dict()`` writes its notes as ``{"kind": ..., **facts}``; its document (what the front
ends write) holds them worded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, NoReturn

from otelcar.typeschema import Doc, Extra

#: A note as a result's data writes it (:meth:`Note.to_dict`); its document holds it worded.
NoteData = Annotated[
    dict[str, Any],
    Doc("a note: its kind and the facts its wording rests on (otelcar.report.notes words it)"),
    Extra(required=["kind"], properties={"kind": {"type": "string"}}),
]


class Facts(dict[str, Any]):
    """A note's facts: a dict that refuses every change after it is made, and still copies,
    pickles and converts (``dataclasses.asdict``) as a dict does."""

    def _read_only(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("a note's facts cannot be changed")

    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __reduce__(self) -> tuple[type[Facts], tuple[dict[str, Any]]]:
        return (Facts, (dict(self),))


@dataclass(frozen=True)
class Note:
    """One thing to tell the user: ``kind`` names the wording, ``facts`` (JSON values, read
    only) fill it. Equal notes have equal kinds and facts."""

    kind: str
    facts: Mapping[str, Any] = field(default_factory=Facts)

    def __post_init__(self) -> None:
        object.__setattr__(self, "facts", Facts(self.facts))

    def to_dict(self) -> dict[str, Any]:
        """``{"kind": kind, **facts}``: the note as a result's data writes it."""
        return {"kind": self.kind, **self.facts}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Note:
        """The note :meth:`to_dict` wrote."""
        facts = {k: v for k, v in data.items() if k != "kind"}
        return cls(str(data["kind"]), facts)


def note(kind: str, **facts: Any) -> Note:
    """A :class:`Note` of ``kind`` on ``facts``."""
    return Note(kind, facts)
