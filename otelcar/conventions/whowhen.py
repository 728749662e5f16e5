"""Who&When logs: each history entry is one step of a shared multi-agent conversation.

Claims the spans of the ``whowhen`` export format (:mod:`otelcar.ingest.exports.whowhen`:
one span per history entry, attributes ``whowhen.entry.*``). Step ``i`` of a trace is history
entry ``i``: there is no container row, so ``mistake_step`` labels index the steps directly.

Who speaks (:func:`speaker_of`): the entry's ``name`` (algorithm-generated logs), else its
``role`` up to `` (`` (hand-crafted: ``Orchestrator (-> WebSurfer)`` is ``Orchestrator``; the
rest, ``-> WebSurfer``, is the *channel*). The raw ``role`` of algorithm-generated entries
(``assistant`` for the first speaker, ``user`` for everyone else) is ignored: it does not tell
agents from the environment. Each speaker is one of:

- ``human`` (``human``/``user`` without a name: the question) → an ``other`` step whose
  ``output`` is the ``user`` message;
- ``environment`` (:data:`ENVIRONMENT_SPEAKERS`, e.g. ``Computer_terminal``,
  ``ComputerTerminal``: code execution) → a ``tool`` step, ``tool_name`` the speaker,
  ``tool_result`` the text (the log records no call arguments);
- ``agent`` (everyone else) → an ``llm`` step, the agent's decision: ``agent_name`` the
  speaker, ``output`` an ``assistant`` message with the text, ``input_messages`` the shared
  conversation before it *as that agent saw it* (DESIGN §5: one history per agent):
  its system prompt (algorithm-generated logs) as ``system``, then every earlier entry, with
  role ``assistant`` for the agent's own messages, ``user`` for the human's, and the
  speaker's name for everyone else's (other agents and the terminal alike). Every message's
  ``name`` is the entry's raw label (``Orchestrator (thought)``, ``Computer_terminal``).

An entry with neither role nor name (or not an object) is an ``other`` step with an issue
and reads as ``user`` in later contexts.

``agent_name`` is the speaker on ``llm`` and ``tool`` steps (the terminal is a participant of
the group chat: benchmarks that label it can score it), ``None`` on the human's step. The
log's labels stay unconsumed on step 0 (``attributes``, ``whowhen.<key>`` verbatim); read
them with :func:`whowhen_labels`.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from otelcar.conventions.base import Attrs, MappedSpan
from otelcar.ingest.exports.whowhen import (
    ENTRY_CONTENT,
    ENTRY_CONTEXT,
    ENTRY_INDEX,
    ENTRY_NAME,
    ENTRY_ROLE,
    ENTRY_SYSTEM_PROMPT,
    HISTORY_LENGTH,
    PREFIX,
    SUBSET,
)
from otelcar.ingest.frames import LogFrame, SpanFrame
from otelcar.messages import Message, text_of

NAME = "whowhen"
PRIORITY = 10
HUMAN, ENVIRONMENT, AGENT, SYSTEM, UNKNOWN = "human", "environment", "agent", "system", "unknown"
HUMAN_SPEAKERS = frozenset({"human", "user"})
#: Speakers that are the execution environment, compared lower-case without ``_ -`` or spaces.
ENVIRONMENT_SPEAKERS = frozenset({"computerterminal", "terminal", "codeexecutor", "executor"})
OPERATIONS = {
    AGENT: "agent_message",
    ENVIRONMENT: "environment_output",
    HUMAN: "human_message",
    SYSTEM: "system_message",
    UNKNOWN: None,
}
#: Label keys with a meaning of their own in :func:`whowhen_labels` (the rest go to ``extra``).
_LABEL_KEYS = (
    "question",
    "question_ID",
    "ground_truth",
    "level",
    "mistake_agent",
    "mistake_step",
    "mistake_reason",
    "mistake_type",
    "is_correct",
    "is_corrected",
)


@dataclass(frozen=True, slots=True)
class Speaker:
    """Who wrote a history entry: ``name`` (agent name, ``human``), the raw ``label`` the
    log shows, the ``channel`` after the name in a hand-crafted role, and the ``kind``
    (``agent`` | ``environment`` | ``human`` | ``system``; ``unknown`` without role and name)."""

    name: str
    label: str
    channel: str | None
    kind: str


def speaker_of(role: Any, name: Any) -> Speaker:
    """The speaker of an entry with this ``role`` and ``name`` (see the module docstring)."""
    return _speaker(
        role if isinstance(role, str) else None, name if isinstance(name, str) else None
    )


@functools.lru_cache(maxsize=4096)
def _speaker(role: str | None, name: str | None) -> Speaker:
    channel = None
    if name:
        speaker, label = name, name
    elif role:
        label = role
        speaker, _, rest = role.partition(" (")
        speaker = speaker.strip() or role
        channel = rest.removesuffix(")").strip() or None
    else:
        return Speaker("?", "?", None, UNKNOWN)
    folded = re.sub(r"[\s_\-]", "", speaker.lower())
    if not name and speaker.lower() in HUMAN_SPEAKERS:
        kind = HUMAN
    elif not name and speaker.lower() == "system":
        kind = SYSTEM
    elif folded in ENVIRONMENT_SPEAKERS:
        kind = ENVIRONMENT
    else:
        kind = AGENT
    return Speaker(speaker, label, channel, kind)


def message_for(entry: Any, viewer: str) -> Message:
    """History ``entry`` as a normalized message in the context of agent ``viewer``."""
    if not isinstance(entry, dict):
        return Message(role="user", content=text_of(entry))
    speaker = speaker_of(entry.get("role"), entry.get("name"))
    if speaker.kind in (HUMAN, UNKNOWN):
        role = "user"
    elif speaker.kind == SYSTEM:
        role = "system"
    elif speaker.name == viewer:
        role = "assistant"
    else:
        role = speaker.name
    return Message(role=role, content=text_of(entry.get("content")), name=speaker.label)


class WhoWhenMapper:
    """Mapper for Who&When history entries (see the module docstring)."""

    name = NAME

    def claim(self, span: SpanFrame) -> int | None:
        return PRIORITY if ENTRY_INDEX in span.attributes else None

    def map(self, span: SpanFrame, logs: Sequence[LogFrame]) -> MappedSpan:
        consumed: set[str] = set()
        attrs = Attrs(span.attributes, consumed)
        index = attrs.int(ENTRY_INDEX)
        speaker = speaker_of(attrs.get(ENTRY_ROLE), attrs.get(ENTRY_NAME))
        content = text_of(attrs.get(ENTRY_CONTENT))
        context = attrs.get(ENTRY_CONTEXT)
        prompt = attrs.text(ENTRY_SYSTEM_PROMPT)
        mapped = MappedSpan(
            kind="other",
            name=speaker.label,
            source=NAME,
            operation=OPERATIONS[speaker.kind],
            consumed=consumed,
            # the log's labels stay in the attributes, where whowhen_labels reads them
            kept={key for key in span.attributes if key.startswith(PREFIX)} - consumed,
        )
        if speaker.kind == UNKNOWN:
            mapped.issues.append(f"history entry {index} has no role or name; kept as 'other'")
            return mapped
        if speaker.kind == AGENT:
            mapped.kind = "llm"
            mapped.agent_name = speaker.name
            mapped.input_messages = _context(context, speaker.name, prompt, mapped.issues)
            mapped.output = Message(role="assistant", content=content, name=speaker.label)
        elif speaker.kind == ENVIRONMENT:
            mapped.kind = "tool"
            mapped.agent_name = speaker.name
            mapped.tool_name = speaker.name
            mapped.tool_result = content
        else:
            role = "user" if speaker.kind == HUMAN else "system"
            mapped.output = Message(role=role, content=content, name=speaker.label)
        return mapped


def _context(context: Any, viewer: str, prompt: str | None, issues: list[str]) -> list[Message]:
    """The conversation before an entry as agent ``viewer`` saw it (system prompt first)."""
    messages = [Message(role="system", content=prompt)] if prompt else []
    if not isinstance(context, list):
        issues.append("the conversation before this entry is missing; input_messages incomplete")
        return messages
    messages.extend(message_for(entry, viewer) for entry in context)
    return messages


def whowhen_labels(steps: pl.DataFrame) -> dict[str, Any]:
    """The Who&When labels of one trace, read back from its steps (step 0's attributes).

    Returns ``subset``, ``question``, ``question_id``, ``ground_truth``, ``level``,
    ``mistake_agent``, ``mistake_step`` (an ``int``: the file stores a string),
    ``mistake_reason``, ``mistake_type``, ``is_correct`` (the file's ``is_correct`` or
    ``is_corrected``), ``history_length`` (missing labels are ``None``), and ``extra``: the
    log's other top-level keys, verbatim (``system_prompt``, ``labels``, ...).

    Raises ``ValueError`` when ``steps`` hold several traces or no Who&When labels.
    """
    traces = steps["trace_id"].unique().to_list() if steps.height else []
    if len(traces) != 1:
        raise ValueError(f"whowhen_labels needs the steps of one trace, got {len(traces)}")
    raw = _label_attributes(steps)
    step = raw.get("mistake_step")
    try:
        mistake_step = None if step is None else int(step)
    except (TypeError, ValueError):
        raise ValueError(f"mistake_step {step!r} is not a step index") from None
    correct = raw.get("is_correct", raw.get("is_corrected"))
    return {
        "subset": raw.get(SUBSET.removeprefix(PREFIX)),
        "question": raw.get("question"),
        "question_id": raw.get("question_ID"),
        "ground_truth": raw.get("ground_truth"),
        "level": raw.get("level"),
        "mistake_agent": raw.get("mistake_agent"),
        "mistake_step": mistake_step,
        "mistake_reason": raw.get("mistake_reason"),
        "mistake_type": raw.get("mistake_type"),
        "is_correct": None if correct is None else bool(correct),
        "history_length": raw.get(HISTORY_LENGTH.removeprefix(PREFIX)),
        "extra": {
            key: value
            for key, value in raw.items()
            if key not in _LABEL_KEYS
            and key not in (SUBSET.removeprefix(PREFIX), HISTORY_LENGTH.removeprefix(PREFIX))
        },
    }


def _label_attributes(steps: pl.DataFrame) -> dict[str, Any]:
    """Step 0's ``whowhen.*`` attributes, prefix removed; ``ValueError`` when there are none."""
    first = steps.filter(pl.col("step") == 0)
    if first.height:
        attributes = json.loads(first["attributes"][0] or "{}")
        if HISTORY_LENGTH in attributes:
            return {
                key.removeprefix(PREFIX): value
                for key, value in attributes.items()
                if key.startswith(PREFIX)
            }
    raise ValueError("these steps carry no Who&When labels (not imported from a Who&When log?)")
