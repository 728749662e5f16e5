"""The live agent's requests kept past the command that read them (docs/live.md).

A passing live check (:func:`otelcar.live.check.check_live`) read, at every recorded
decision, the tools, tool choice and parameters the agent sent. :func:`to_keep` makes them
the steps of :class:`~otelcar.store.live_requests.LiveRequestStore`, each with the
decision's key and a fingerprint of its recorded context and action; :func:`fitting` reads
them back for a later run of the same trace, leaving out every step whose recorded decision
is no longer the one the agent reproduced (the trace re-imported with other content), and
:func:`read_note` notes which parts of which steps come from the agent.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from otelcar.notes import Note, note
from otelcar.replay.requests import decision_keys

if TYPE_CHECKING:
    from otelcar.replay.recorded import RecordedDecision, RecordedRun
    from otelcar.replay.requests import RunRequests
    from otelcar.store.live_requests import KeptRequests

PARTS = ("tools", "tool_choice", "params")


def fingerprint(decision: RecordedDecision, key: str) -> str:
    """A digest of what the live check compared at ``decision``: its key (agent and
    position), its recorded context and its recorded action."""
    document = {
        "key": key,
        "context": None if decision.context is None else [m.to_dict() for m in decision.context],
        "action": None if decision.action is None else decision.action.to_dict(),
    }
    text = json.dumps(document, sort_keys=True, ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def to_keep(
    run: RecordedRun, captured: Mapping[int, Mapping[str, Any]]
) -> dict[int, dict[str, Any]]:
    """``captured`` (:attr:`~otelcar.live.check.LiveCheck.captured`) as the steps to keep:
    each request's parts, its decision's ``key`` and ``fingerprint``."""
    out: dict[int, dict[str, Any]] = {}
    for decision, key in zip(run.decisions, decision_keys(run), strict=True):
        seen = captured.get(decision.step)
        if seen is None:
            continue
        out[decision.step] = {
            "tools": list(seen.get("tools") or ()),
            "tool_choice": seen.get("tool_choice"),
            "params": dict(seen.get("params") or {}),
            "key": key,
            "fingerprint": fingerprint(decision, key),
        }
    return out


def fitting(run: RecordedRun, kept: KeptRequests) -> tuple[dict[int, dict[str, Any]], list[Note]]:
    """``(live, notes)``: the kept requests whose recorded decision is still the one the
    agent reproduced, by step, as :func:`otelcar.replay.load_run` takes them (``live=``); a
    note naming the steps left out, when any is."""
    found = {
        decision.step: (decision, key)
        for decision, key in zip(run.decisions, decision_keys(run), strict=True)
    }
    live: dict[int, dict[str, Any]] = {}
    stale: list[int] = []
    for step, request in sorted(kept.steps.items()):
        decision, key = found.get(step, (None, None))
        if (
            decision is None
            or key is None
            or request.get("key") != key
            or request.get("fingerprint") != fingerprint(decision, key)
        ):
            stale.append(step)
            continue
        live[step] = {part: request[part] for part in PARTS}
    notes = []
    if stale:
        notes.append(
            note(
                "live_kept_stale",
                steps=stale,
                captured_at=kept.captured_at,
                command=kept.command,
                trace_id=run.trace_id,
            )
        )
    return live, notes


def read_note(
    requests: RunRequests,
    *,
    command: str,
    captured_at: str | None = None,
    saved_to: str | None = None,
    loaded_from: str | None = None,
) -> Note | None:
    """The ``live_read`` note: which parts of which steps' requests are read from the live
    agent (source ``live`` in ``requests``), with its command, when kept requests were
    captured, and where they were kept (``saved_to``) or read from (``loaded_from``);
    ``None`` when no part is."""
    by_steps: dict[tuple[int, ...], list[str]] = {}
    for part in PARTS:
        steps = tuple(
            spec.step
            for spec in requests.decisions
            if spec.step is not None and getattr(spec, part).source == "live"
        )
        if steps:
            by_steps.setdefault(steps, []).append(part)
    if not by_steps:
        return None
    groups = [{"parts": parts, "steps": list(steps)} for steps, parts in by_steps.items()]
    return note(
        "live_read",
        groups=groups,
        command=command,
        captured_at=captured_at,
        saved_to=saved_to,
        loaded_from=loaded_from,
    )
