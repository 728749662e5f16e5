"""The requests a live agent made, kept in the store for later runs without ``--agent``.

When the user's agent reproduces a recorded run (the live check, :mod:`otelcar.live.check`),
its requests carry what the trace may not have recorded: the tools it offered, its tool
choice and its sampling parameters. They are kept here, one JSON file per trace:
``<store>/live_requests/<trace id>.json`` (an id that is not a safe file name is kept under
``sha256-`` and its digest), written whole (a temporary file renamed), so a later ``why`` or
``fix`` without ``--agent`` re-decides with the agent's real request (docs/live.md).

A file is ``{"format": 1, "trace_id", "command", "captured_at" (UTC, ISO 8601),
"otelcar_version", "steps": {"<step>": {"tools": [definitions], "tool_choice": text | null,
"params": {…}, …}}}``; a step may carry more string fields (the caller's own, such as a
fingerprint of the recorded decision it was read at), kept as they are.

This module keeps plain dicts and knows nothing of runs or agents: what a step's request
means, and whether it still fits the trace, is for the layers above. Every read is checked:
a damaged, foreign or hostile file is never an error, only a note saying why it was left
out (:meth:`LiveRequestStore.load`). Forget a trace's kept requests by deleting its file
(:meth:`LiveRequestStore.forget`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from otelcar.notes import Note, note
from otelcar.version import __version__

FORMAT = 1
FOLDER = "live_requests"
#: the largest file read back (a request's tools are kilobytes; a bigger file is not ours)
MAX_BYTES = 16 * 1024 * 1024
_SAFE_TRACE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_STEP = re.compile(r"^(0|[1-9][0-9]{0,8})$")


@dataclass(frozen=True)
class KeptRequests:
    """One trace's kept requests: the agent ``command`` that made them, when
    (``captured_at``, UTC ISO 8601), with which otelcar, and by recorded step each request's
    ``tools``, ``tool_choice`` and ``params`` (and any string fields the saver added)."""

    trace_id: str
    command: str
    captured_at: str
    otelcar_version: str | None
    steps: dict[int, dict[str, Any]]
    path: Path

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "trace_id": self.trace_id,
            "command": self.command,
            "captured_at": self.captured_at,
            "otelcar_version": self.otelcar_version,
            "steps": {str(step): request for step, request in sorted(self.steps.items())},
        }


class LiveRequestStore:
    """The kept live requests of the store at ``store_root`` (module docstring)."""

    def __init__(self, store_root: str | Path) -> None:
        self.folder = Path(store_root) / FOLDER

    def path(self, trace_id: str) -> Path:
        """The file of ``trace_id``: always directly in :attr:`folder`."""
        if not isinstance(trace_id, str) or not trace_id:
            raise ValueError(f"{trace_id!r} is not a trace id")
        if _SAFE_TRACE.match(trace_id) and trace_id not in (".", ".."):
            name = trace_id
        else:
            name = "sha256-" + hashlib.sha256(trace_id.encode("utf-8")).hexdigest()[:40]
        return self.folder / f"{name}.json"

    def save(
        self,
        trace_id: str,
        steps: Mapping[int, Mapping[str, Any]],
        *,
        command: str,
        captured_at: str | None = None,
    ) -> KeptRequests:
        """Keep ``steps`` (by recorded step: ``tools``, ``tool_choice``, ``params``) as
        ``trace_id``'s requests, replacing what was kept; ``captured_at`` defaults to now.
        Raises :class:`ValueError` for a step that :meth:`load` would not read back."""
        kept = KeptRequests(
            trace_id,
            command,
            captured_at or now(),
            __version__,
            {int(step): dict(request) for step, request in steps.items()},
            self.path(trace_id),
        )
        for step, request in kept.steps.items():
            problem = _step_problem(str(step), request)
            if problem is not None:
                raise ValueError(f"step {step}: {problem}")
        text = json.dumps(kept.to_dict(), indent=2, ensure_ascii=False, default=str)
        self.folder.mkdir(parents=True, exist_ok=True)
        handle, partial = tempfile.mkstemp(
            dir=self.folder, prefix=f".{kept.path.stem}.", suffix=".partial"
        )
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(text + "\n")
            os.replace(partial, kept.path)
        except BaseException:
            Path(partial).unlink(missing_ok=True)
            raise
        return kept

    def load(self, trace_id: str) -> tuple[KeptRequests | None, list[Note]]:
        """``(kept requests, notes)`` of ``trace_id``: ``(None, [])`` when none are kept;
        ``(None, [why])`` when the file cannot be read as kept requests of this trace (never
        an exception: the caller goes on without them)."""
        path = self.path(trace_id)
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return None, []
        except OSError as exc:
            return None, [_ignored(path, f"it cannot be read ({exc.strerror or exc})")]
        if size > MAX_BYTES:
            return None, [_ignored(path, f"it is {size} bytes, over {MAX_BYTES}")]
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
            return None, [_ignored(path, f"it is not readable JSON ({type(exc).__name__})")]
        problem = _document_problem(document, trace_id)
        if problem is not None:
            return None, [_ignored(path, problem)]
        return KeptRequests(
            trace_id,
            document["command"],
            document["captured_at"],
            document.get("otelcar_version"),
            {int(step): request for step, request in document["steps"].items()},
            path,
        ), []

    def forget(self, trace_id: str) -> bool:
        """Delete ``trace_id``'s kept requests; True when there were some."""
        try:
            self.path(trace_id).unlink()
        except FileNotFoundError:
            return False
        return True


def now() -> str:
    """The current UTC time as ``captured_at`` has it (``2026-12-04T21:30:05Z``)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ignored(path: Path, why: str) -> Note:
    return note("live_kept_ignored", path=str(path), why=why)


def _document_problem(document: Any, trace_id: str) -> str | None:
    """Why ``document`` is not the kept requests of ``trace_id`` (``None``: it is)."""
    if not isinstance(document, dict):
        return "it is not a JSON object"
    if document.get("format") != FORMAT:
        return f"its format is {document.get('format')!r}, not {FORMAT}"
    if document.get("trace_id") != trace_id:
        return f"it holds trace {str(document.get('trace_id'))[:80]!r}, not {trace_id!r}"
    for key in ("command", "captured_at"):
        if not isinstance(document.get(key), str):
            return f"its {key} is not a string"
    version = document.get("otelcar_version")
    if version is not None and not isinstance(version, str):
        return "its otelcar_version is not a string"
    steps = document.get("steps")
    if not isinstance(steps, dict):
        return "its steps are not an object"
    for step, request in steps.items():
        problem = _step_problem(step, request)
        if problem is not None:
            return f"step {str(step)[:20]!r}: {problem}"
    return None


def _step_problem(step: str, request: Any) -> str | None:
    """Why ``request`` (kept at ``step``) is not one step's request (``None``: it is)."""
    if not _STEP.match(step):
        return "not a step number"
    if not isinstance(request, dict):
        return "not an object"
    tools = request.get("tools")
    if not isinstance(tools, list) or not all(
        isinstance(t, dict) and isinstance(t.get("name"), str) and t["name"] for t in tools
    ):
        return "tools is not a list of definitions, each with a name"
    choice = request.get("tool_choice")
    if choice is not None and not isinstance(choice, str):
        return "tool_choice is neither a string nor null"
    if not isinstance(request.get("params"), dict):
        return "params is not an object"
    extra = set(request) - {"tools", "tool_choice", "params"}
    if any(not isinstance(request[key], str) for key in extra):
        return "a field other than tools, tool_choice and params is not a string"
    return None
