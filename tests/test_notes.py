"""Notes are data made below and worded once in ``otelcar/report/notes.py``: every kind made
in ``otelcar/`` has a wording whose parameters are exactly the facts each maker passes, no
wording is left without a maker, and a result's data holds kinds while its document holds
the words."""

from __future__ import annotations

import ast
import copy
import dataclasses
import inspect
import pickle
from pathlib import Path

import pytest

from otelcar.notes import Note, note
from otelcar.report.notes import WORDINGS, word, worded

PACKAGE = Path(__file__).resolve().parents[1] / "otelcar"


def _made() -> list[tuple[str, str, set[str] | None]]:
    """``(where, kind, facts)`` of every ``note("kind", ...)`` call in ``otelcar/``; facts is
    None when the call spreads a mapping (``**facts``)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            if node.func.id != "note" or not node.args:
                continue
            first = node.args[0]
            assert isinstance(first, ast.Constant) and isinstance(first.value, str), (
                f"{path}:{node.lineno}: a note's kind is a literal string"
            )
            spread = any(k.arg is None for k in node.keywords)
            facts = None if spread else {k.arg for k in node.keywords if k.arg}
            found.append((f"{path.relative_to(PACKAGE.parent)}:{node.lineno}", first.value, facts))
    return found


MADE = _made()


def test_every_kind_made_is_worded_with_exactly_its_facts():
    assert len(MADE) >= 40  # the scan finds the makers (not an empty pass)
    for where, kind, facts in MADE:
        assert kind in WORDINGS, f"{where}: the note kind {kind!r} has no wording"
        if facts is None:
            continue
        wants = set(inspect.signature(WORDINGS[kind]).parameters)
        assert facts == wants, (
            f"{where}: {kind!r} is made with {sorted(facts)}, worded from {sorted(wants)}"
        )


def test_every_wording_has_a_maker():
    made = {kind for _, kind, _ in MADE}
    assert set(WORDINGS) - made == set()


def test_a_note_is_a_read_only_value_that_round_trips():
    made = note("budget_stop", max_calls=40)
    assert made == Note.from_dict(made.to_dict())
    assert made.to_dict() == {"kind": "budget_stop", "max_calls": 40}
    for change in (
        lambda f: f.__setitem__("max_calls", 1),
        lambda f: f.update(max_calls=1),
        lambda f: f.pop("max_calls"),
        lambda f: f.clear(),
    ):
        with pytest.raises(TypeError, match="cannot be changed"):
            change(made.facts)
    assert made.facts == {"max_calls": 40}
    # a result holding notes copies, pickles and converts as any dataclass value does
    assert pickle.loads(pickle.dumps(made)) == made == copy.deepcopy(made)
    assert dataclasses.asdict(made) == {"kind": "budget_stop", "facts": {"max_calls": 40}}
    assert word(made) == "stopped by the budget of 40 policy calls"
    assert worded([made, made]) == [word(made)] * 2


def test_an_unknown_kind_is_an_error_not_a_silent_line():
    with pytest.raises(KeyError, match="no wording for the note kind 'nonesuch'"):
        word(note("nonesuch"))
