"""The request a re-decision sends, part by part: recorded, declared or inferred (DESIGN.md §5).

A re-decision must send what the agent would have sent at that decision: the tools it
offered, its tool choice and its sampling parameters. Many producers record only some of it
(``opentelemetry-instrumentation-openai-v2`` records neither tool definitions nor tool
choice), so :func:`plan_requests` settles each part of each decision's request and says where
it comes from:

- ``recorded``: the trace holds it for this decision;
- ``declared``: the user said it (``[agent]`` in ``otelcar.toml``, :class:`AgentDeclaration`);
- ``live``: read from the user's own agent's request during a live replay (``--agent``;
  :mod:`otelcar.live`);
- ``inferred``: none of these; otelcar chose it from the run's structure, and every output
  that rests on it says so (:meth:`RunRequests.summary`, :meth:`RunRequests.inferred`).

It also settles the run's **structure**, which decides where a rollout ends:

- ``loop``: the agent calls the model until an answer without tool calls, offering the same
  tools each time; a rollout that goes on past the recorded horizon plus ``[replay] slack``
  decisions is cut and counted, never judged;
- ``workflow``: the agent's code makes exactly the recorded decisions, in order, each with
  its own tools; a rollout ends after the last of them, whatever it answered, and an answer
  without tool calls before it does not end it.

Without a declaration the structure is detected: the recorded requests offering different
tools at different decisions, or the agent's code adding a user or system message between
decisions, mark a workflow; otherwise the run reads as a loop. Without recorded or declared
tools, a loop offers every tool the run called at every decision (schemas inferred from the
calls' arguments), and a workflow offers at each decision only the tools it called there (a
decision that called none offers none), so a rollout never takes an action the agent could
not have taken there.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import TYPE_CHECKING, Any

from otelcar.errors import OtelcarError
from otelcar.notes import Note, note
from otelcar.replay.recorded import ActionRef, Literal, ObsRef, RecordedDecision, TemplateItem

if TYPE_CHECKING:
    from otelcar.replay.recorded import RecordedRun

STRUCTURES = ("loop", "workflow")
TOOL_CHOICES = ("auto", "none", "required")
SOURCES = ("recorded", "declared", "live", "inferred")
_UNSET: Any = object()


class RequestError(OtelcarError):
    """A declaration of the agent's requests does not fit the trace or is malformed."""


@dataclass(frozen=True, slots=True)
class Part:
    """One part of a request: its value, where it comes from (``recorded``, ``declared`` or
    ``inferred``) and ``basis``, a clause saying why (shown to the user when inferred)."""

    value: Any
    source: str
    basis: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "source": self.source, "basis": self.basis}


@dataclass(frozen=True, slots=True)
class DeclaredDecision:
    """What the user declares for one decision, addressed by ``step`` (its row in the steps
    table, as every output numbers steps) or ``key`` (:func:`decision_key`, stable across
    traces of the same agent). ``tools``: the names of the tools offered (``()``: none);
    ``tool_choice``: ``auto`` | ``none`` | ``required`` | a tool's name; ``params``: sampling
    parameters laid over the recorded ones. ``None`` / unset: not declared."""

    step: int | None = None
    key: str | None = None
    tools: tuple[str, ...] | None = None
    tool_choice: Any = _UNSET
    params: Mapping[str, Any] | None = None
    agent: str | None = None  # every decision of this agent (a step or key is more specific)

    def describe(self) -> str:
        if self.step is not None:
            return f"step {self.step}"
        if self.key is not None:
            return f"decision {self.key!r}"
        return f"agent {self.agent!r}"

    def over(self, general: DeclaredDecision) -> DeclaredDecision:
        """This declaration laid over a more general one (an agent's): each part it leaves
        unset comes from ``general``."""
        return DeclaredDecision(
            self.step,
            self.key,
            self.tools if self.tools is not None else general.tools,
            self.tool_choice if self.tool_choice is not _UNSET else general.tool_choice,
            {**(general.params or {}), **(self.params or {})}
            if self.params is not None or general.params is not None
            else None,
            self.agent or general.agent,
        )


@dataclass(frozen=True)
class AgentDeclaration:
    """The user's declaration of the agent (``[agent]`` in ``otelcar.toml``): its
    ``structure`` (``loop`` | ``workflow``), its tool definitions by name (``tools``: each
    ``{"description": …, "parameters": <JSON schema>}``), the ``tool_choice`` of every
    decision that offers tools, and per-decision overrides (``decisions``). Whatever is left
    out is taken from the trace, else inferred (:func:`plan_requests`)."""

    structure: str | None = None
    tools: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    tool_choice: Any = _UNSET
    decisions: tuple[DeclaredDecision, ...] = ()

    @property
    def empty(self) -> bool:
        return (
            self.structure is None
            and not self.tools
            and self.tool_choice is _UNSET
            and not self.decisions
        )

    @classmethod
    def from_config(cls, table: Mapping[str, Any]) -> AgentDeclaration:
        """Parse the ``[agent]`` table; raises :class:`RequestError` naming what is wrong."""
        known = {"structure", "tools", "tool_choice", "decision"}
        unknown = set(table) - known
        if unknown:
            raise RequestError(
                f"[agent]: unknown key(s) {', '.join(sorted(unknown))}; "
                f"known: {', '.join(sorted(known))}"
            )
        structure = table.get("structure")
        if structure is not None and structure not in STRUCTURES:
            raise RequestError(
                f"[agent] structure = {structure!r}: use {' or '.join(map(repr, STRUCTURES))}"
            )
        tools = table.get("tools", {})
        if not isinstance(tools, Mapping):
            raise RequestError("[agent.tools]: a table of tool definitions by name")
        definitions: dict[str, dict[str, Any]] = {}
        for name, definition in tools.items():
            if not isinstance(definition, Mapping) or set(definition) - {
                "description",
                "parameters",
            }:
                raise RequestError(
                    f"[agent.tools.{name}]: a table with description and parameters "
                    "(a JSON schema) only"
                )
            parameters = definition.get("parameters", {"type": "object", "properties": {}})
            if not isinstance(parameters, Mapping):
                raise RequestError(f"[agent.tools.{name}] parameters: a JSON schema (a table)")
            definitions[name] = {
                "description": definition.get("description"),
                "parameters": dict(parameters),
            }
        choice = table.get("tool_choice", _UNSET)
        if choice is not _UNSET:
            _check_choice(choice, "[agent] tool_choice")
        decisions = table.get("decision", [])
        if not isinstance(decisions, list):
            raise RequestError("[[agent.decision]]: an array of tables")
        return cls(
            structure,
            definitions,
            choice,
            tuple(_declared_decision(item, i) for i, item in enumerate(decisions)),
        )


def _check_choice(choice: Any, where: str) -> None:
    if not isinstance(choice, str) or not choice:
        raise RequestError(f"{where} = {choice!r}: use auto, none, required or the name of a tool")


def _declared_decision(item: Any, position: int) -> DeclaredDecision:
    where = f"[[agent.decision]] #{position + 1}"
    if not isinstance(item, Mapping):
        raise RequestError(f"{where}: a table")
    known = {"step", "key", "agent", "tools", "tool_choice", "params"}
    unknown = set(item) - known
    if unknown:
        raise RequestError(
            f"{where}: unknown key(s) {', '.join(sorted(unknown))}; known: "
            f"{', '.join(sorted(known))}"
        )
    step, key, agent = item.get("step"), item.get("key"), item.get("agent")
    if sum(x is not None for x in (step, key, agent)) != 1:
        raise RequestError(
            f"{where}: give exactly one of step (a decision's step), key (<agent>#<n>) or "
            "agent (every decision of that agent)"
        )
    if agent is not None and not isinstance(agent, str):
        raise RequestError(f"{where}: agent must be a name")
    if step is not None and (isinstance(step, bool) or not isinstance(step, int)):
        raise RequestError(f"{where}: step must be an integer")
    tools = item.get("tools")
    if tools is not None and (
        not isinstance(tools, list) or not all(isinstance(t, str) for t in tools)
    ):
        raise RequestError(f"{where}: tools must be a list of tool names ([] offers none)")
    choice = item.get("tool_choice", _UNSET)
    if choice is not _UNSET:
        _check_choice(choice, f"{where} tool_choice")
    params = item.get("params")
    if params is not None and not isinstance(params, Mapping):
        raise RequestError(f"{where}: params must be a table")
    return DeclaredDecision(
        step, key, tuple(tools) if tools is not None else None, choice, params, agent
    )


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """What a re-decision of one decision sends. ``tools``: a tuple of definitions
    (``()``: none offered); ``tool_choice``: ``None`` (not sent: the policy's own setting,
    else the server's default) or what to send; ``params``: the sampling parameters."""

    index: int | None  # the decision's position; None: a decision past the recorded horizon
    step: int | None
    key: str
    tools: Part
    tool_choice: Part
    params: Part
    agent: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "key": self.key,
            "tools": {
                "names": [t.get("name") for t in self.tools.value],
                "source": self.tools.source,
                "basis": self.tools.basis,
            },
            "tool_choice": self.tool_choice.to_dict(),
            "params": self.params.to_dict(),
        }


@dataclass(frozen=True)
class RunRequests:
    """Every decision's :class:`RequestSpec`, the run's structure and what a decision past
    the recorded horizon sends (``beyond``; ``None`` for a workflow, which has none)."""

    structure: Part
    decisions: tuple[RequestSpec, ...]
    beyond: RequestSpec | None
    tools: tuple[dict[str, Any], ...] = ()  # every definition a request may offer
    #: a loop that stops after its recorded number of decisions (the recording ends on a
    #: tool call, not on an answer): a rollout ends there, or earlier at an answer
    bounded: bool = False

    def catalogue(self) -> tuple[dict[str, Any], ...]:
        """Every tool definition a re-decision may offer (declared, recorded or inferred)."""
        return self.tools

    @property
    def workflow(self) -> bool:
        return self.structure.value == "workflow"

    def spec(self, decision: RecordedDecision | None, agent: str | None = None) -> RequestSpec:
        """The request of ``decision``; ``None``: a decision past the recorded horizon, which
        a loop makes with the request of ``agent``'s last recorded decision (the same
        tools, tool choice and parameters: the loop goes on), else of the run's last."""
        if decision is None:
            if self.beyond is None:
                raise RequestError("a workflow has no decision past its recorded end")
            if agent is not None:
                for spec in reversed(self.decisions):
                    if spec.agent == agent:
                        return spec
            return self.beyond
        return self.decisions[decision.index]

    def inferred(self) -> list[str]:
        """One clause per inferred part, steps grouped by basis ("tools at steps 1, 3
        (…)"); empty when everything a re-decision sends is recorded or declared."""
        out: list[str] = []
        if self.structure.source == "inferred":
            out.append(f"structure {self.structure.value} ({self.structure.basis})")
        for part in ("tools", "tool_choice", "params"):
            groups: dict[str, list[int]] = {}
            for spec in self.decisions:
                value: Part = getattr(spec, part)
                if value.source == "inferred" and spec.step is not None:
                    groups.setdefault(value.basis, []).append(spec.step)
            label = part.replace("_", " ")
            for basis, steps in groups.items():
                out.append(f"{label} at {_steps(steps)} ({basis})")
        return out

    def note(self) -> Note | None:
        """The note for every output that rests on re-decisions: what is inferred (the
        clauses of :meth:`inferred`, worded with how to declare it by
        :mod:`otelcar.report.notes`); ``None`` when nothing is."""
        parts = self.inferred()
        return note("inferred_requests", parts=parts) if parts else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "structure": self.structure.to_dict(),
            "decisions": [spec.to_dict() for spec in self.decisions],
            "inferred": self.inferred(),
        }


def _steps(steps: Sequence[int]) -> str:
    if len(steps) == 1:
        return f"step {steps[0]}"
    return "steps " + ", ".join(str(s) for s in steps)


def decision_keys(run: RecordedRun) -> list[str]:
    """Every decision's :func:`decision_key`, in the run's order."""
    ordinals: dict[str, int] = {}
    keys = []
    for decision in run.decisions:
        who = decision.agent or decision.name
        ordinals[who] = ordinals.get(who, 0) + 1
        keys.append(decision_key(decision, ordinals[who]))
    return keys


def decision_key(decision: RecordedDecision, ordinal: int) -> str:
    """The decision's stable key: its agent (else its name, the model's for a single agent)
    and its 1-based position among that agent's decisions — ``"refunds#2"`` — the same in
    every trace of the same agent whose decisions come in the same order."""
    return f"{decision.agent or decision.name}#{ordinal}"


def _called(decision: RecordedDecision) -> list[str]:
    names: list[str] = []
    for call in decision.action.tool_calls if decision.action else ():
        if call.name and call.name not in names:
            names.append(call.name)
    return names


def detect_structure(run: RecordedRun) -> Part:
    """The run's structure read from the trace (always ``inferred``; see the module doc). A
    loop whose recording ends on a tool call says so in its basis (:func:`ends_bounded`)."""
    offered: dict[str | None, set[tuple[str, ...]]] = {}
    for d in run.decisions:
        if d.tools is not None:  # each agent of a handoff has its own tools
            names = tuple(sorted(str(t.get("name")) for t in d.tools))
            offered.setdefault(d.agent, set()).add(names)
    for agent, sets in offered.items():
        if len(sets) > 1:
            who = f" of agent {agent}" if len(offered) > 1 else ""
            return Part(
                "workflow",
                "inferred",
                f"the recorded requests{who} offer different tools at different decisions",
            )
    added = _message_added_between_decisions(run)
    if added is not None:
        return added
    basis = "each context is the previous one plus the action and its tool results"
    if ends_bounded(run):
        basis += (
            f"; the recording ends on a tool call (step {run.decisions[-1].step}), not on an "
            f"answer, so the agent stops after {run.horizon} decisions"
        )
    return Part("loop", "inferred", basis)


def _message_added_between_decisions(run: RecordedRun) -> Part | None:
    """A workflow when a template (after the first decision's) has a user or system message
    after a reference to an earlier action or observation: the agent's code adds it. A
    template that starts with the previous one read (a checked one) is read from its new
    items on, where the previous one's reading left off."""
    checked: list[TemplateItem] | None = None  # the latest template read, found clean
    after_reference = False
    for decision in run.decisions[1:]:
        template = decision.template
        start = 0
        if (
            checked is not None
            and len(checked) <= len(template)
            and template[: len(checked)] == checked
        ):
            start = len(checked)
        else:
            after_reference = False
        for item in islice(template, start, None):
            if isinstance(item, ActionRef | ObsRef):
                after_reference = True
            elif (
                after_reference
                and isinstance(item, Literal)
                and item.message.role in ("user", "system")
            ):
                return Part(
                    "workflow",
                    "inferred",
                    f"the agent's code adds a {item.message.role} message between decisions "
                    f"(before step {decision.step})",
                )
        checked = template
    return None


def ends_bounded(run: RecordedRun) -> bool:
    """The recording's last decision called a tool: the agent stopped after a number of
    decisions (a bounded loop, a template reply), not at an answer without tool calls."""
    last = run.decisions[-1] if run.decisions else None
    return last is not None and last.action is not None and bool(last.action.tool_calls)


def plan_requests(
    run: RecordedRun,
    declared: AgentDeclaration | None = None,
    live: Mapping[int, Mapping[str, Any]] | None = None,
    *,
    live_rollouts: bool = True,
) -> RunRequests:
    """Settle every decision's request and the run's structure (module doc). ``live``: what
    the live agent's own requests carried, by recorded step (``tools``, ``tool_choice`` in
    the steps table's form, ``params``; :attr:`otelcar.live.check.LiveCheck.captured`):
    each part is then ``live``, below a declaration and above the recording.
    ``live_rollouts``: the rollouts run on that agent, whose own code ends each (an
    undeclared structure is then ``live``); ``False`` for requests kept from an earlier live
    check (:mod:`otelcar.live.kept`), replayed by the rebuilt agent, whose structure stays
    detected. Raises :class:`RequestError` when a declaration names a step, key or tool the
    trace lacks."""
    declared = declared or AgentDeclaration()
    live = live or {}
    structure = (
        Part(declared.structure, "declared", "[agent] structure")
        if declared.structure
        else detect_structure(run)
    )
    if live and live_rollouts and structure.source == "inferred":
        structure = Part(structure.value, "live", "the live agent's own code ends each rollout")
    catalogue = _Catalogue(run, declared)
    keys = decision_keys(run)
    overrides = _overrides(run, declared, keys)
    recorded_somewhere = [d.step for d in run.decisions if d.tools is not None]
    specs: list[RequestSpec] = []
    for decision, key in zip(run.decisions, keys, strict=True):
        own = overrides.get(decision.index, DeclaredDecision())
        tools = _tools(decision, own, structure, catalogue, recorded_somewhere, declared)
        choice = _tool_choice(own, declared, tools, decision.tool_choice)
        params = _params(decision, own)
        seen = live.get(decision.step)
        if seen is not None:
            tools, choice, params = _live(seen, own, tools, choice, params)
        specs.append(
            RequestSpec(decision.index, decision.step, key, tools, choice, params, decision.agent)
        )
    beyond = None
    if structure.value == "loop" and specs:
        beyond = specs[-1]  # the loop goes on with the request it last made
    elif structure.value == "loop":
        beyond = RequestSpec(
            None,
            None,
            "beyond",
            catalogue.everything(),
            _tool_choice(DeclaredDecision(), declared, catalogue.everything()),
            Part({}, "inferred", "past the recorded run: the policy's defaults"),
        )
    return RunRequests(
        structure,
        tuple(specs),
        beyond,
        tuple(definition for definition, _ in catalogue.definitions.values()),
        bounded=structure.source in ("inferred", "live") and ends_bounded(run),
    )


class _Catalogue:
    """The tool definitions a request can offer, by name: declared, else recorded with any
    request of the run, else inferred from the run's calls (the minimal schema of their
    arguments)."""

    def __init__(self, run: RecordedRun, declared: AgentDeclaration) -> None:
        self.definitions: dict[str, tuple[dict[str, Any], str]] = {}
        self.agents = {d.agent for d in run.decisions if d.agent}
        self.called_by: dict[str | None, list[str]] = {}
        for decision in run.decisions:
            names = self.called_by.setdefault(decision.agent, [])
            names.extend(n for n in _called(decision) if n not in names)
        for decision in run.decisions:
            for call in decision.action.tool_calls if decision.action else ():
                if call.name and call.name not in self.definitions:
                    self.definitions[call.name] = (_inferred_definition(call), "inferred")
        for decision in run.decisions:
            for tool in decision.tools or ():
                name = tool.get("name")
                if name and self.definitions.get(name, ({}, ""))[1] != "recorded":
                    self.definitions[name] = (tool, "recorded")
        for name, definition in declared.tools.items():
            self.definitions[name] = (
                {"type": "function", "name": name, **definition},
                "declared",
            )
        self._everything: Part | None = None
        self._declared_all = bool(declared.tools)

    def get(self, name: str, where: str) -> tuple[dict[str, Any], str]:
        found = self.definitions.get(name)
        if found is None:
            close = difflib.get_close_matches(name, list(self.definitions), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise RequestError(
                f"{where}: tool {name!r} is neither declared in [agent.tools] nor seen in "
                f"the trace (known: {', '.join(sorted(self.definitions)) or 'none'}){hint}"
            )
        return found

    def part(self, names: Sequence[str], source: str, basis: str, where: str) -> Part:
        """The definitions of ``names`` as a part whose source is ``source`` for the set, and
        ``inferred`` when any definition's schema is only inferred from calls."""
        found = [self.get(name, where) for name in names]
        tools = tuple(definition for definition, _ in found)
        if source != "inferred" and any(kind == "inferred" for _, kind in found):
            schemas = [n for n, (_, kind) in zip(names, found, strict=True) if kind == "inferred"]
            return Part(
                tools,
                "inferred",
                f"{basis}; the schemas of {', '.join(schemas)} are inferred from the "
                "recorded calls (declare them in [agent.tools])",
            )
        return Part(tools, source, basis)

    def everything(self) -> Part:
        if self._everything is None:
            names = list(self.definitions)
            if self._declared_all:
                self._everything = self.part(names, "declared", "[agent.tools]", "[agent]")
            elif all(kind == "recorded" for _, kind in self.definitions.values()):
                self._everything = self.part(
                    names, "inferred", "the tools recorded with the run's requests", "trace"
                )
            else:
                self._everything = self.part(
                    names,
                    "inferred",
                    "the trace records no tool definitions: every tool the run called, "
                    "schemas inferred from their arguments",
                    "trace",
                )
        return self._everything


def _inferred_definition(call: Any) -> dict[str, Any]:
    """The minimal definition of a tool known only from a call: its name and the JSON types
    of the arguments it was called with (no description, no enum, nothing required)."""
    properties = (
        {key: _json_type(value) for key, value in call.arguments.items()}
        if isinstance(call.arguments, dict)
        else {}
    )
    return {
        "type": "function",
        "name": call.name,
        "description": None,
        "parameters": {"type": "object", "properties": properties},
        "inferred": True,
    }


def _json_type(value: Any) -> dict[str, Any]:
    """A minimal JSON schema for a recorded argument value."""
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int | float):
        return {"type": "number"}
    if isinstance(value, str):
        return {"type": "string"}
    if isinstance(value, list):
        return {"type": "array"}
    if isinstance(value, dict):
        return {"type": "object"}
    return {}


def _overrides(
    run: RecordedRun, declared: AgentDeclaration, keys: list[str]
) -> dict[int, DeclaredDecision]:
    """Declared decisions by decision index (``keys``: :func:`decision_keys`); a step, key or
    agent the run lacks is an error."""
    by_step = {d.step: d.index for d in run.decisions}
    by_key = {key: d.index for d, key in zip(run.decisions, keys, strict=True)}
    agents = {d.agent for d in run.decisions if d.agent}
    general: dict[str, DeclaredDecision] = {}
    for item in declared.decisions:
        if item.agent is None:
            continue
        if item.agent not in agents:
            close = difflib.get_close_matches(item.agent, sorted(agents), n=1)
            raise RequestError(
                f"[[agent.decision]] agent {item.agent!r} made no decision in trace "
                f"{run.trace_id} (its agents: {', '.join(sorted(agents)) or 'none named'})"
                + (f"; did you mean {close[0]!r}?" if close else "")
            )
        if item.agent in general:
            raise RequestError(f"[[agent.decision]]: agent {item.agent!r} is declared twice")
        general[item.agent] = item
    out: dict[int, DeclaredDecision] = {
        d.index: general[d.agent] for d in run.decisions if d.agent in general
    }
    specific: set[int] = set()
    for item in declared.decisions:
        if item.agent is not None:
            continue
        if item.step is not None:
            index = by_step.get(item.step)
            known = ", ".join(str(s) for s in by_step)
        else:
            index = by_key.get(item.key or "")
            close = difflib.get_close_matches(item.key or "", list(by_key), n=1)
            known = ", ".join(by_key) + (f"; did you mean {close[0]!r}?" if close else "")
        if index is None:
            raise RequestError(
                f"[[agent.decision]] {item.describe()} is not a decision of trace "
                f"{run.trace_id} (its decisions: {known or 'none'})"
            )
        if index in specific:
            raise RequestError(f"[[agent.decision]]: {item.describe()} is declared twice")
        specific.add(index)
        out[index] = item.over(out[index]) if index in out else item
    return out


def _tools(
    decision: RecordedDecision,
    own: DeclaredDecision,
    structure: Part,
    catalogue: _Catalogue,
    recorded_somewhere: list[int],
    declared: AgentDeclaration,
) -> Part:
    where = f"[[agent.decision]] {own.describe()}"
    if own.tools is not None:
        return catalogue.part(own.tools, "declared", "[[agent.decision]] tools", where)
    if decision.tools is not None:
        names = [str(t.get("name")) for t in decision.tools if t.get("name")]
        if declared.tools:  # the user's definitions of the recorded set
            return catalogue.part(names, "recorded", "recorded with the request", where)
        return Part(tuple(decision.tools), "recorded", "recorded with the request")
    if recorded_somewhere:
        return Part(
            (),
            "inferred",
            f"the trace records tools with other requests ({_steps(recorded_somewhere)}) and "
            "none with this one: none offered",
        )
    if structure.value == "loop":
        if len(catalogue.agents) > 1:
            names = catalogue.called_by.get(decision.agent, [])
            return catalogue.part(
                names,
                "inferred",
                f"a loop of several agents: every tool agent {decision.agent} called"
                + ("" if declared.tools else "; the trace records no tool definitions"),
                where,
            )
        return catalogue.everything()
    called = _called(decision)
    if declared.tools and not called:
        return Part((), "inferred", "a workflow decision that called no tool: none offered")
    return catalogue.part(
        called,
        "inferred",
        "a workflow decision offers the tools it called"
        + (" (none)" if not called else "")
        + "; the trace records no tool definitions",
        where,
    )


def _live(
    seen: Mapping[str, Any], own: DeclaredDecision, tools: Part, choice: Part, params: Part
) -> tuple[Part, Part, Part]:
    """A decision's parts with what the live agent sent laid over the recorded and inferred
    ones (a declaration stays: the user's word is above what one run showed)."""
    basis = "read from the live agent's request"
    if tools.source != "declared":
        tools = Part(tuple(seen.get("tools") or ()), "live", basis)
    if choice.source != "declared":
        text = seen.get("tool_choice")
        value = _recorded_choice(text) if text and tools.value else None
        choice = Part(value, "live", basis if tools.value else "no tools offered")
    if params.source != "declared":
        params = Part({**params.value, **(seen.get("params") or {})}, "live", basis)
    return tools, choice, params


def _tool_choice(
    own: DeclaredDecision, declared: AgentDeclaration, tools: Part, recorded: str | None = None
) -> Part:
    """The decision's own declaration, else none when no tool is offered, else the recorded
    choice, else ``[agent] tool_choice``, else inferred (the policy's or the server's)."""
    if own.tool_choice is not _UNSET:
        return Part(_wire_choice(own.tool_choice), "declared", "[[agent.decision]] tool_choice")
    if not tools.value:
        return Part(None, "recorded", "no tools offered: no tool choice sent")
    if recorded is not None:
        return Part(_recorded_choice(recorded), "recorded", "recorded with the request")
    if declared.tool_choice is not _UNSET:
        return Part(_wire_choice(declared.tool_choice), "declared", "[agent] tool_choice")
    return Part(
        None,
        "inferred",
        "not recorded: the policy's tool_choice, else the server's default (auto)",
    )


def _recorded_choice(text: str) -> Any:
    """The steps table's tool choice (:func:`otelcar.conventions.openai_shapes.tool_choice_text`)
    as the OpenAI wire format has it."""
    return json.loads(text) if text.startswith("{") else text


def _wire_choice(choice: str) -> Any:
    """A declared tool choice as the OpenAI wire format has it."""
    if choice in TOOL_CHOICES:
        return choice
    return {"type": "function", "function": {"name": choice}}


def _params(decision: RecordedDecision, own: DeclaredDecision) -> Part:
    recorded = {k: v for k, v in decision.params.items() if v is not None}
    if own.params is not None:
        return Part({**decision.params, **own.params}, "declared", "[[agent.decision]] params")
    if recorded:
        return Part(decision.params, "recorded", "recorded with the request")
    return Part(
        decision.params,
        "inferred",
        "no sampling parameter recorded: the policy's defaults",
    )
