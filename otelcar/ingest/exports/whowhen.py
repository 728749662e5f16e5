"""Who&When failure-attribution logs (arXiv:2505.00212) as spans.

A log is one JSON document: a multi-agent conversation ``history`` (a list of
``{content, role, name?}``) plus the benchmark's labels (``mistake_agent``, ``mistake_step``,
``mistake_reason``, ``question``, ``ground_truth``, ...). One document is one trace; history
entry ``i`` is one span, and nothing else is: the steps built from it are exactly the history
entries, in order, so a step index is a history index and ``mistake_step`` labels line up.

Contract of :func:`decode` (the dialect mapper :mod:`otelcar.conventions.whowhen` reads these
attributes; nothing is interpreted here beyond finding an entry's system prompt):

- trace id: :func:`~otelcar.ingest.formats.derived_id` of ``whowhen:<sha256 of the document
  as canonical JSON>``. ``question_ID`` is not unique (45 questions were run in both subsets),
  so the content is the key: the same log always gets the same id, however it is formatted,
  and two different logs never share one.
- span ``i``: id derived from the trace key and ``i``; span 0 is the parent of every other
  span (one conversation, one episode); the logs record no times, so entry ``i`` gets the
  synthetic, zero-length time ``(i+1) ms`` after the epoch (order kept; no span lies inside
  another, so no two entries are merged as stacked copies of one call);
  attributes :data:`ENTRY_INDEX`, :data:`ENTRY_ROLE`, :data:`ENTRY_NAME`,
  :data:`ENTRY_CONTENT`, :data:`ENTRY_SYSTEM_PROMPT` (the speaker's prompt from the log's
  ``system_prompt`` map) and :data:`ENTRY_CONTEXT` (the entries before it, verbatim, so the
  mapper can give each decision its whole context).
- span 0 also carries the log's labels: every top-level key but ``history`` as
  ``whowhen.<key>`` with its value verbatim (``whowhen.mistake_step`` stays the string the
  file holds), plus :data:`SUBSET` and :data:`HISTORY_LENGTH`. Read them back with
  :func:`otelcar.conventions.whowhen.whowhen_labels`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from otelcar.errors import FormatError
from otelcar.ingest import jsontext
from otelcar.ingest.formats import ExportFormat, derived_id
from otelcar.ingest.frames import Decoded, SpanFrame

FORMAT = "whowhen"
PREFIX = "whowhen."
ENTRY_INDEX = "whowhen.entry.index"
ENTRY_ROLE = "whowhen.entry.role"
ENTRY_NAME = "whowhen.entry.name"
ENTRY_CONTENT = "whowhen.entry.content"
ENTRY_SYSTEM_PROMPT = "whowhen.entry.system_prompt"
ENTRY_CONTEXT = "whowhen.entry.context"
SUBSET = "whowhen.subset"
HISTORY_LENGTH = "whowhen.history_length"
HAND_CRAFTED = "hand-crafted"
ALGORITHM_GENERATED = "algorithm-generated"
#: Top-level keys that, next to ``history``, mark a document as a Who&When log.
MARKER_KEYS = ("mistake_agent", "mistake_step", "mistake_reason", "question_ID")
STEP_NS = 1_000_000
SCOPE = "otelcar.whowhen"


def detect(value: Any) -> bool:
    """Whether a JSON value is a Who&When log: an object with a non-empty ``history`` list of
    ``{content, role}`` objects and at least one of :data:`MARKER_KEYS`."""
    if not isinstance(value, dict) or not any(key in value for key in MARKER_KEYS):
        return False
    history = value.get("history")
    if not isinstance(history, list) or not history:
        return False
    first = history[0]
    return isinstance(first, dict) and "content" in first and "role" in first


def subset_of(doc: dict[str, Any]) -> str | None:
    """The Who&When subset a log comes from, from its shape (the README's facts).

    Algorithm-generated (CaptainAgent) logs carry ``system_prompt`` and a ``name`` on each
    history entry; hand-crafted (Magentic-One) logs have neither and flag ``is_corrected``.
    """
    history = doc.get("history") or []
    named = any(isinstance(e, dict) and "name" in e for e in history)
    if "system_prompt" in doc or named:
        return ALGORITHM_GENERATED
    if "is_corrected" in doc:
        return HAND_CRAFTED
    return None


def trace_key(doc: dict[str, Any]) -> str:
    """The stable key of a log: a hash of its canonical JSON (see the module docstring)."""
    canonical = json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "whowhen:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def decode(payload: bytes) -> Decoded:
    """One Who&When log → one span per history entry (see the module docstring).

    Raises :class:`FormatError` when the payload is not a JSON object with a non-empty
    ``history`` list.
    """
    return decode_value(*jsontext.loads(payload))


def decode_value(doc: Any, replaced: int) -> Decoded:
    """:func:`decode` of a log already parsed (``replaced``: surrogates replaced)."""
    if not isinstance(doc, dict):
        raise FormatError(f"a Who&When log is a JSON object, not a {type(doc).__name__}")
    history = doc.get("history")
    if not isinstance(history, list) or not history:
        raise FormatError("Who&When log without a non-empty 'history' list")
    # Each entry's context holds the entries before it: one level deeper than the log.
    if jsontext.depth(doc) >= jsontext.MAX_DEPTH:
        raise FormatError(f"Who&When log nested more than {jsontext.MAX_DEPTH - 1} levels deep")
    key = trace_key(doc)
    trace_id = derived_id(key, size=16)
    subset = subset_of(doc)
    prompts = doc.get("system_prompt") if isinstance(doc.get("system_prompt"), dict) else {}
    root_id = derived_id(f"{key}#0", size=8)
    resource = {"service.name": f"whowhen/{subset}" if subset else "whowhen"}
    spans = []
    for index, entry in enumerate(history):
        span_id = root_id if index == 0 else derived_id(f"{key}#{index}", size=8)
        attributes = _entry_attributes(index, entry, history, prompts)
        if index == 0:
            attributes.update(_label_attributes(doc, subset))
        start = (index + 1) * STEP_NS
        spans.append(
            SpanFrame(
                trace_id=trace_id,
                span_id=span_id,
                parent_span_id=None if index == 0 else root_id,
                name=_label(entry),
                kind="INTERNAL",
                start_ns=start,
                end_ns=start,
                attributes=attributes,
                resource=resource,
                scope_name=SCOPE,
            )
        )
    problems = [jsontext.surrogate_note(replaced)] if replaced else []
    return Decoded(spans=spans, problems=problems)


def _label(entry: Any) -> str:
    """The speaker label an entry shows: its ``name``, else its ``role``."""
    if isinstance(entry, dict):
        for key in ("name", "role"):
            if isinstance(entry.get(key), str) and entry[key]:
                return entry[key]
    return "entry"


def _entry_attributes(
    index: int, entry: Any, history: list[Any], prompts: dict[str, Any]
) -> dict[str, Any]:
    """The ``whowhen.entry.*`` attributes of history entry ``index`` (verbatim values)."""
    attributes: dict[str, Any] = {ENTRY_INDEX: index, ENTRY_CONTEXT: history[:index]}
    if not isinstance(entry, dict):
        attributes[ENTRY_CONTENT] = entry
        return attributes
    for key, attribute in (("role", ENTRY_ROLE), ("name", ENTRY_NAME), ("content", ENTRY_CONTENT)):
        if entry.get(key) is not None:
            attributes[attribute] = entry[key]
    prompt = prompts.get(entry.get("name")) if isinstance(entry.get("name"), str) else None
    if prompt is not None:
        attributes[ENTRY_SYSTEM_PROMPT] = prompt
    for key, value in entry.items():  # keys a future log may add, kept verbatim
        if key not in ("role", "name", "content"):
            attributes[f"{PREFIX}entry.{key}"] = value
    return attributes


def _label_attributes(doc: dict[str, Any], subset: str | None) -> dict[str, Any]:
    """Trace-level attributes (on span 0): every top-level key but ``history``, verbatim."""
    attributes = {PREFIX + key: value for key, value in doc.items() if key != "history"}
    attributes[HISTORY_LENGTH] = len(doc["history"])
    if subset is not None:
        attributes[SUBSET] = subset
    return attributes


#: The formats of this module, registered by the built-in plugin (:mod:`otelcar.plugins`).
FORMATS = (
    ExportFormat(
        FORMAT,
        "Who&When failure-attribution logs (one JSON document per multi-agent run)",
        decode,
        detect=detect,
        decode_value=decode_value,
    ),
)
