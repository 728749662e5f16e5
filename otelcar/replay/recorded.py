"""The recorded run as the replay harness sees it: decisions, their contexts and observations.

A trace's steps table becomes a :class:`RecordedRun`: the decision steps (LLM calls) in
order, each with its recorded context, its recorded action (the assistant message) and the
observations of its tool calls, plus a *template* of its context. The template says, for
every message of the recorded context, where it came from:

- :class:`ActionRef` — the action of an earlier decision (the assistant message it emitted);
- :class:`ObsRef` — the observation of an earlier decision's i-th tool call;
- :class:`Literal` — anything else (system prompt, user turns, framework-inserted messages).

Replaying with every step held expands every template to exactly the recorded context; when
an earlier action or observation changes, the same template carries the change forward, so
"messages the framework inserted between steps" stay where they were, and each agent of a
multi-agent run keeps the view of the conversation it had (DESIGN.md §5).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import islice
from typing import TYPE_CHECKING, Any

import polars as pl

from otelcar.conventions.base import UNREAD
from otelcar.messages import Message, ToolCall

if TYPE_CHECKING:
    from otelcar.replay.requests import AgentDeclaration, RunRequests

#: Said of a context or action the trace holds but otelcar did not read (the step's
#: *content unread* issue), apart from one the producer did not capture (capture off).
UNREAD_WHY = "unread: the trace holds it, otelcar did not read it (see the step's issues)"


@dataclass(frozen=True, slots=True)
class Literal:
    message: Message


@dataclass(frozen=True, slots=True)
class ActionRef:
    decision: int
    message: Message  # as it appeared in this context (kept verbatim when unchanged)


@dataclass(frozen=True, slots=True)
class ObsRef:
    decision: int
    call: int
    message: Message


TemplateItem = Literal | ActionRef | ObsRef


@dataclass(frozen=True, slots=True)
class RecordedObservation:
    """The recorded result of one tool call (``result`` is ``None`` when not recorded)."""

    call: ToolCall
    result: str | None
    tool_step: int | None  # the steps-table row of the tool step, when there is one
    error: str | None = None


@dataclass(slots=True)
class RecordedDecision:
    """One decision step (an LLM call) of the recorded run."""

    index: int  # position among decisions (0-based)
    step: int  # row in the steps table
    agent: str | None
    name: str
    context: list[Message] | None
    action: Message | None
    observations: list[RecordedObservation]
    tools: list[dict[str, Any]] | None
    params: dict[str, Any]
    model: str | None
    provider: str | None
    template: list[TemplateItem] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    #: the recorded tool choice (the steps table's form: auto | none | required | the JSON of
    #: a named tool); ``None`` when the producer did not record it
    tool_choice: str | None = None

    @property
    def is_final(self) -> bool:
        """Whether the recorded action ends the run (no tool calls)."""
        return self.action is not None and not self.action.tool_calls


@dataclass(frozen=True, slots=True)
class ContextLink:
    """How decision ``index``'s context template relates to an earlier one.

    ``parent`` is the latest earlier decision with a captured context whose template is the
    first ``shared`` items of this one, such that expanding those items gives the same
    messages under both templates in any rollout (``None``: build from scratch).
    ``observed`` is the set of decisions whose observations this template references (an
    action that changes is followed by its new observations only where it is not)."""

    parent: int | None
    shared: int
    observed: frozenset[int]


@dataclass(slots=True)
class RecordedRun:
    """Everything the harness needs from one trace.

    Derived views (the requests, context links) are computed once, on first use: a run
    is not changed after :func:`load_run` builds it."""

    trace_id: str
    decisions: list[RecordedDecision]
    steps: pl.DataFrame
    #: how the agent's process ended in the held live replay that reproduced this run (a
    #: trace records no process; :func:`otelcar.replay.rollout_table.recorded_failed`)
    process: Any = None
    _links: tuple[ContextLink, ...] | None = field(default=None, repr=False, compare=False)
    _requests: RunRequests | None = field(default=None, repr=False, compare=False)

    @property
    def requests(self) -> RunRequests:
        """What each re-decision sends and where every part comes from, and the run's
        structure (:func:`otelcar.replay.requests.plan_requests`; set by :func:`load_run`
        with the user's declaration, else planned from the trace alone on first use)."""
        if self._requests is None:
            from otelcar.replay.requests import plan_requests

            self._requests = plan_requests(self)
        return self._requests

    @property
    def horizon(self) -> int:
        return len(self.decisions)

    def decision_at_step(self, step: int) -> RecordedDecision:
        for decision in self.decisions:
            if decision.step == step:
                return decision
        raise KeyError(f"step {step} is not a decision (LLM) step of trace {self.trace_id}")

    def tool_definitions(self) -> list[dict[str, Any]]:
        """Every tool a re-decision may offer: declared, else recorded with any request,
        else inferred from the run's calls (:mod:`otelcar.replay.requests`)."""
        return [dict(t) for t in self.requests.catalogue()]

    def request_tools(self, decision: RecordedDecision | None) -> tuple[dict[str, Any], ...]:
        """The tools a re-decision of ``decision`` (``None``: past the horizon) offers
        (``()``: none), as :meth:`requests` settled them. The same tuple object for every
        call with the same decision, so its digest is computed once."""
        return self.requests.spec(decision).tools.value

    def context_links(self) -> tuple[ContextLink, ...]:
        """One :class:`ContextLink` per decision (computed once per run)."""
        if self._links is None:
            self._links = _context_links(self.decisions)
        return self._links


def _context_links(decisions: list[RecordedDecision]) -> tuple[ContextLink, ...]:
    """Link each decision's template to the previous captured one when it extends it.

    Expanding an item depends on the rollout's changes to the decisions it references, and
    for an action on whether the template references that action's observations. Between
    the parent and this decision only decisions at or after the parent change (the parent's
    template references none of them), so the shared items expand alike when every action
    they reference has its observations referenced by both templates or by neither.

    A template that starts with its parent's has the parent's references plus those of its
    new items: only the new items are read (templates that share their items compare in
    time linear in them, object by object)."""
    links: list[ContextLink] = []
    acted: list[frozenset[int]] = []  # per decision: the actions its template references
    parent: RecordedDecision | None = None
    for decision in decisions:
        template = decision.template
        shared = len(parent.template) if parent is not None else 0
        extends = (
            parent is not None and shared <= len(template) and template[:shared] == parent.template
        )
        added: frozenset[int] = frozenset()
        if extends:
            assert parent is not None
            new = template[shared:]
            earlier = links[parent.index].observed
            added = frozenset(item.decision for item in new if isinstance(item, ObsRef)) - earlier
            observed = earlier | added
            actions = acted[parent.index].union(
                item.decision for item in new if isinstance(item, ActionRef)
            )
        else:
            observed = frozenset(item.decision for item in template if isinstance(item, ObsRef))
            actions = frozenset(item.decision for item in template if isinstance(item, ActionRef))
        link = ContextLink(None, 0, observed)
        # the parent's actions are referenced with their observations by both or by neither:
        # those that only this template observes are the ones ``added``
        if extends and decision.context is not None and acted[parent.index].isdisjoint(added):
            link = ContextLink(parent.index, shared, observed)
        links.append(link)
        acted.append(actions)
        if decision.context is not None:
            parent = decision
    return tuple(links)


class _MessageReader:
    """Table rows of messages as :class:`Message`, one object per distinct content: a long
    run's steps repeat their history, and each message is decoded once."""

    def __init__(self) -> None:
        self._seen: dict[tuple[Any, ...], Message] = {}

    def __call__(self, row: dict[str, Any]) -> Message:
        calls = tuple(
            (c.get("id"), c.get("name"), c.get("arguments")) for c in row.get("tool_calls") or ()
        )
        key = (
            row["role"],
            row.get("content"),
            row.get("tool_call_id"),
            row.get("name"),
            row.get("reasoning"),
            calls,
        )
        held = self._seen.get(key)
        if held is None:
            held = self._seen[key] = Message.from_row(row)
        return held


def ends_run(action: Message | None, recorded: RecordedDecision | None, run: RecordedRun) -> bool:
    """Whether the rollout ends after this decision. A workflow (:mod:`otelcar.replay.requests`)
    ends after its last recorded decision, whatever it answered, and never before; a bounded
    loop (its recording ends on a tool call) ends there too, or earlier at an answer. In a loop
    an action without tool calls is a final answer, unless the recording went on after a
    tool-free action at this position (multi-agent turn-taking, a user follow-up): then the
    next recorded turn comes, as it did."""
    requests = run.requests
    if requests.workflow:
        return recorded is None or recorded.index == run.horizon - 1
    if requests.bounded and recorded is not None and recorded.index == run.horizon - 1:
        return True  # the agent stops after this many decisions
    if action is None or action.tool_calls:
        return False
    if recorded is None or recorded.index == run.horizon - 1:
        return True
    recorded_tool_free = recorded.action is not None and not recorded.action.tool_calls
    return not recorded_tool_free


def same_message(a: Message, b: Message) -> bool:
    """Equality of messages as decisions: role, text (empty and missing are the same) and
    tool calls by name and arguments (no arguments recorded, ``{}`` and ``""`` are the same:
    producers leave out an empty argument object). Call ids are ignored: providers mint new
    ones."""
    if a is b:  # a held or cached decision: the recorded object itself
        return True
    if a.role != b.role or (a.content or "") != (b.content or ""):
        return False
    if len(a.tool_calls) != len(b.tool_calls):
        return False
    return all(
        x.name == y.name and (x.arguments == y.arguments or (not x.arguments and not y.arguments))
        for x, y in zip(a.tool_calls, b.tool_calls, strict=True)
    )


def _tools(row: dict[str, Any]) -> list[dict[str, Any]] | None:
    if row["tools_available"] is None:
        return None
    return [
        {
            **tool,
            "parameters": None if tool["parameters"] is None else json.loads(tool["parameters"]),
        }
        for tool in row["tools_available"]
    ]


def load_run(
    trace_id: str,
    steps: pl.DataFrame,
    agent: AgentDeclaration | None = None,
    live: Mapping[int, Mapping[str, Any]] | None = None,
    *,
    live_rollouts: bool = True,
) -> RecordedRun:
    """Build the recorded run of one trace from its steps table; ``agent``: the user's
    declaration of the agent's requests and structure (``[agent]`` in ``otelcar.toml``),
    checked against the trace here (:class:`~otelcar.replay.requests.RequestError`);
    ``live``: what the live agent's requests carried, by step, and ``live_rollouts``:
    whether the rollouts run on that agent (:func:`~otelcar.replay.requests.plan_requests`)."""
    ordered = steps if steps["step"].is_sorted() else steps.sort("step")
    rows = ordered.drop("input_messages").to_dicts()
    tools_by_call_step: dict[Any, list[dict[str, Any]]] = {}
    for r in rows:
        if r["kind"] == "tool":
            tools_by_call_step.setdefault(r["call_step"], []).append(r)
    message = _MessageReader()
    contexts = iter(_read_contexts(ordered.filter(pl.col("kind") == "llm"), message))
    decisions: list[RecordedDecision] = []
    for row in rows:
        if row["kind"] != "llm":
            continue
        captured = bool(row["content_captured"])
        context = next(contexts)
        action = message(row["output"]) if row["output"] is not None else None
        decision = RecordedDecision(
            index=len(decisions),
            step=row["step"],
            agent=row["agent_name"],
            name=row["name"],
            context=context,
            action=action,
            observations=[],
            tools=_tools(row),
            params=dict(row["params"] or {}),
            model=row["request_model"] or row["response_model"],
            provider=row["provider"],
            tool_choice=row.get("tool_choice"),
        )
        unread = any(str(i).startswith(UNREAD) for i in row.get("issues") or ())
        if context is None:
            decision.problems.append(
                "context truncated by an attribute length limit"
                if row["content_truncated"]
                else f"context {UNREAD_WHY}"
                if unread
                else "context not captured (content capture was off)"
            )
        if action is None:
            decision.problems.append(
                f"action (model output) {UNREAD_WHY}"
                if unread
                else "action (model output) not captured"
            )
        elif not captured:
            decision.problems.append(
                f"action's content {UNREAD_WHY}"
                if unread
                else "action recorded without content (tool names and ids only)"
            )
        decisions.append(decision)
    for decision in decisions:
        calls = decision.action.tool_calls if decision.action else ()
        linked = tools_by_call_step.get(decision.step, [])
        for index, call in enumerate(calls):
            row = next((r for r in linked if call.id and r["tool_call_id"] == call.id), None)
            if row is None and index < len(linked) and not call.id:
                row = linked[index]
            result = row["tool_result"] if row else None
            error = row["error"] if row and row["status"] == "ERROR" else None
            decision.observations.append(
                RecordedObservation(call, result, row["step"] if row else None, error)
            )
    templates = _Templates(decisions)
    for decision in decisions:
        decision.template = templates.of(decision)
    run = RecordedRun(trace_id, decisions, steps)
    run.context_links()  # once, here: linear in the recorded messages, like the templates
    from otelcar.replay.requests import plan_requests

    run._requests = plan_requests(run, agent, live, live_rollouts=live_rollouts)
    return run


def _read_contexts(llm: pl.DataFrame, message: _MessageReader) -> list[list[Message] | None]:
    """The contexts of the LLM rows (in step order), read through ``message``; ``None`` where
    the context is missing or its content was not captured. A context that starts with the
    previous row's messages (compared in Polars) is that context followed by its new messages,
    so only new messages are converted: a run whose contexts each repeat the conversation so
    far is read in time linear in its messages, not in the sum of its contexts' lengths."""
    m, texts = pl.col("input_messages"), pl.col("texts")
    ok = m.is_not_null() & pl.col("content_captured").fill_null(False)
    before = m.list.len().shift(1)
    extends = (
        ok
        & ok.shift(1).fill_null(False)
        & (m.list.len() >= before)
        # exact: each message as its JSON text (comparing the structs is slower)
        & texts.list.head(before).eq_missing(texts.shift(1))
    )
    read = llm.with_columns(texts=m.list.eval(pl.element().struct.json_encode())).select(
        ok=ok,
        extends=extends.fill_null(False),
        new=pl.when(ok).then(pl.when(extends).then(m.list.slice(before)).otherwise(m)),
    )
    contexts: list[list[Message] | None] = []
    previous: list[Message] | None = None
    for captured, extended, new in read.iter_rows():
        context = None
        if captured:
            context = [message(row) for row in new]
            if extended and previous is not None:
                context = previous + context
        contexts.append(context)
        previous = context
    return contexts


class _Templates:
    """The context templates of a run's decisions, in order (:meth:`of`, decision by
    decision): each message of a recorded context explained by an earlier action or
    observation.

    A context that extends the previous captured one reuses its template for the shared
    messages and explains only the new ones, when that gives what explaining every message
    would (``reuse=False``): no call id that the shared messages answer was (re)assigned by
    the decisions since, and no message of them was left unexplained that a decision since
    could have produced. Otherwise the template is built from scratch."""

    def __init__(self, decisions: list[RecordedDecision], *, reuse: bool = True) -> None:
        self._decisions = decisions
        self._reuse = reuse
        #: the earlier decisions' observations by call id, later ones winning
        self._by_call_id: dict[str, tuple[int, int]] = {}
        self._last: RecordedDecision | None = None  # the latest decision with a template
        self._state: tuple[int, int | None, list[int]] = (0, None, [])
        self._answered: set[str] = set()  # call ids the last template's tool messages carry
        self._unexplained = False  # a message there that a later action could explain
        self._assigned: set[str] = set()  # call ids assigned since the last template

    def of(self, decision: RecordedDecision) -> list[TemplateItem]:
        """``decision``'s template (the decisions before it were given theirs)."""
        items = self._template(decision) if decision.context is not None else []
        for i, obs in enumerate(decision.observations):
            if obs.call.id:
                self._by_call_id[obs.call.id] = (decision.index, i)
                self._assigned.add(obs.call.id)
        return items

    def _extends_last(self, context: list[Message]) -> bool:
        last = self._last
        if not self._reuse or last is None or last.context is None:
            return False
        shared = len(last.context)
        return (
            not self._unexplained
            and not (self._assigned & self._answered)
            and len(context) >= shared
            and context[:shared] == last.context
        )

    def _template(self, decision: RecordedDecision) -> list[TemplateItem]:
        context = decision.context
        assert context is not None
        if self._extends_last(context):
            assert self._last is not None and self._last.context is not None
            items = list(self._last.template)
            cursor, last_action, pending = self._state
            pending = list(pending)
            new = context[len(self._last.context) :]
        else:
            items, cursor, last_action, pending, new = [], 0, None, [], context
            self._answered, self._unexplained = set(), False
        decisions, by_call_id = self._decisions, self._by_call_id
        end = decision.index  # the earlier decisions: decisions[:end]
        for message in new:
            if message.role == "tool":
                self._answered.add(message.tool_call_id or "")
                ref = by_call_id.get(message.tool_call_id or "")
                if ref is None and last_action is not None and pending:
                    ref = (last_action, pending[0])  # no ids: by position after the action
                if ref is not None:
                    if ref[0] == last_action and ref[1] in pending:
                        pending.remove(ref[1])
                    items.append(ObsRef(ref[0], ref[1], message))
                    continue
            match = None
            if message.role not in ("user", "system"):
                # the first earlier action from the cursor on that is this message; contexts
                # are chronological, so it is nearly always the one at the cursor: tried first
                if cursor < end and _produced(decisions[cursor], message):
                    match = decisions[cursor]
                else:
                    found = (d for d in islice(decisions, cursor, end) if _produced(d, message))
                    match = next(found, None)
                self._unexplained |= match is None
            if match is not None:
                items.append(ActionRef(match.index, message))
                cursor = match.index + 1
                last_action = match.index
                pending = list(range(len(match.observations)))
                continue
            items.append(Literal(message))
        self._last, self._state, self._assigned = decision, (cursor, last_action, pending), set()
        return items


def _produced(decision: RecordedDecision, message: Message) -> bool:
    """Whether ``message`` (a context message) is ``decision``'s recorded action."""
    action = decision.action
    return action is not None and (
        action is message or same_message(action, _as_role(message, decision))
    )


def _as_role(message: Message, decision: RecordedDecision) -> Message:
    """``message`` with the role the decision's action carries, for multi-agent contexts where
    another agent's message appears under that agent's name or as ``assistant``."""
    if decision.action is None:
        return message
    if message.role in ("assistant", decision.action.role, decision.agent):
        return Message(
            role=decision.action.role,
            content=message.content,
            tool_calls=message.tool_calls,
            tool_call_id=message.tool_call_id,
            name=message.name,
            reasoning=message.reasoning,
        )
    return message
