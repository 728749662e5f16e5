"""The words of a result: each analysis' one-sentence headline, rendered from the finished,
typed result, and :func:`document`, the result's JSON with its headline.

The analyses return data (``to_dict()`` holds numbers, steps and names, no prose); every
front end writes :func:`document` of a result, so the same result reads the same in the
terminal, the JSON, MCP and the console. Here: :class:`TimelineDiff`, :class:`LiveCheck` and
:class:`ImportReport`; the estimators' results (attribution with its policy check, why, fix,
aggregate and each trace's verdict) are worded in :mod:`otelcar.report.findings`, which loads
on the first result this module has no words for, so that wording a diff or a live check
loads no estimator (they import SciPy: about 1.5 CPU-s). Any other result's document is its
``to_dict()``.
"""

from __future__ import annotations

import importlib
import sys
from functools import singledispatch
from typing import Any

from otelcar.live.check import LiveCheck
from otelcar.messages import describe_action
from otelcar.replay.divergence import TimelineDiff
from otelcar.replay.timelines import RunPath
from otelcar.report.notes import word, worded
from otelcar.store.report import ImportReport

#: Where the estimators' results are worded (:mod:`otelcar.report.findings`).
FINDINGS = "otelcar.report.findings"


def _load_findings() -> bool:
    """Load the estimators' wordings if they are not loaded yet; True when this did."""
    if FINDINGS in sys.modules:
        return False
    importlib.import_module(FINDINGS)
    return True


@singledispatch
def headline(result: Any) -> str:
    """One sentence: what the analysis found, where, how sure, at what cost."""
    if _load_findings():
        return headline(result)
    raise TypeError(f"no headline for {type(result).__name__}")


@singledispatch
def document(result: Any) -> dict[str, Any]:
    """``result.to_dict()`` with its headline (and its parts' headlines): what every front
    end writes as the result's JSON (``schemas/<kind>.schema.json``). A result without a
    headline (a rollout, pairs, a replay check) is its ``to_dict()``."""
    if _load_findings():
        return document(result)
    return worded_data(result)


def worded_data(result: Any) -> dict[str, Any]:
    """``result.to_dict()`` with its notes worded (:mod:`otelcar.report.notes`), when it has
    any."""
    data = dict(result.to_dict())
    if "notes" in data and hasattr(result, "notes"):
        data["notes"] = worded(result.notes)
    return data


def with_headline(data: Any, text: str, after: str) -> dict[str, Any]:
    """``data`` with ``"headline": text`` placed right after the key ``after``."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        out[key] = value
        if key == after:
            out["headline"] = text
    out.setdefault("headline", text)
    return out


# -- diff -------------------------------------------------------------------------------------
@headline.register
def _(diff: TimelineDiff) -> str:
    d = diff.detail
    parted = d.parted
    if parted is None:
        where = f"{d.a.label} and {d.b.label} never part: the same decisions throughout"
    else:
        side = parted.a or parted.b
        step = (
            f"recorded step {side.recorded_step}"
            if side and side.recorded_step is not None
            else "no recorded step"
        )
        if parted.parts == "length":
            longer = d.a.label if parted.a is not None else d.b.label
            what = f"{longer} goes on after the other ends"
        elif parted.parts == "context":
            what = f"the context differs ({parted.context.describe()})"
        else:
            what = (
                f"{d.a.label} did {describe_action(parted.a.action if parted.a else None)}"
                f", {d.b.label} {describe_action(parted.b.action if parted.b else None)}"
            )
        where = (
            f"{d.a.label} and {d.b.label} part at decision {parted.index} "
            f"({side.name if side else '?'}, {step}): {what}"
        )
    return f"{where}. Outcome: {d.a.label} {_ended(d.a)}, {d.b.label} {_ended(d.b)}."


def _ended(path: RunPath) -> str:
    if path.failed is None:
        return f"not judged ({path.status})"
    return ("failed" if path.failed else "passed") + (
        f" ({path.status})" if path.status not in ("final", "horizon") else ""
    )


# -- the live check ---------------------------------------------------------------------------
@headline.register
def _(check: LiveCheck) -> str:
    if check.reproduced:
        return word(check.reproduced_note())
    return (
        f"live replay of {check.trace_id} with `{check.command}` does NOT reproduce the "
        f"recorded run: {check.first_difference()}"
    )


@headline.register
def _(report: ImportReport) -> str:
    from otelcar.report.imports import import_headline

    return import_headline(report)


def headline_after(kind: type, after: str) -> None:
    """Register ``kind``'s document: its ``to_dict()`` with the headline placed right after
    the key ``after``."""

    def with_its_headline(result: Any) -> dict[str, Any]:
        return with_headline(worded_data(result), headline(result), after=after)

    document.register(kind, with_its_headline)


headline_after(TimelineDiff, "b_plan")
headline_after(LiveCheck, "reproduced")
