"""Re-deciding one decision on an edited context: what counts as the same decision, what the
agent did instead (the arms themselves: :mod:`otelcar.attribution.experiment.redecisions`).

**Same decision** (``same=``) — a re-decision repeats the recorded decision when:

- ``outcome`` (the default): it makes the call the outcome counts — for a ``tool_called``
  outcome, a call of its tool whose arguments match the outcome's ``args`` the way the
  outcome matches them (any arguments when it names none); for any other outcome, the
  recorded target call with equal arguments (as ``tool+args``). A harmful call that uses the
  same tool as the good one (``run_command(make db-reset)`` vs ``run_command(make
  lag-report)``) is then told apart from it;
- ``tool``: it calls the target tool (the recorded call the outcome names, else the first);
- ``tool+args``: it calls the target tool with equal arguments;
- ``regex:PATTERN``: the pattern matches one of its calls written ``name {canonical JSON
  arguments}``; when the pattern matches none of the recorded calls, its reply text too;
- ``judge`` / ``judge:KEY``: the LLM policy ``llm:judge`` (or ``KEY``; else ``llm``) answers
  SAME when shown the recorded and the new action.

**What the agent did instead** (every re-decision that is not the same decision):
``different`` — another tool call; ``refetch`` — a call already made in the context (same
name and arguments), or a call of the tool that produced a removed piece with ≥ 60 % of its
argument tokens; ``ask`` — a reply asking for something; ``stop`` — an empty reply, or one
saying the information is missing; ``answer`` — any other reply without a tool call.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from otelcar.attribution.context.pieces import Piece, action_text, tokens
from otelcar.attribution.experiment.redecisions import (
    DecisionError,
    SameDecision,
    Sampler,
    canonical,
    describe_action,
)
from otelcar.messages import Message, ToolCall
from otelcar.policies.base import DecisionRequest, PolicyError
from otelcar.policies.registry import PolicyRegistry
from otelcar.replay.harness import Environment
from otelcar.replay.recorded import RecordedDecision, RecordedRun

KINDS = ("different", "answer", "refetch", "ask", "stop")
CAUSE_KINDS = frozenset({"different", "answer"})
_ASK = re.compile(
    r"\?|\b(?:please|could you|can you|would you)\s+(?:provide|confirm|share|send|tell|check)\b",
    re.IGNORECASE,
)
_STOP = re.compile(
    r"\b(?:can(?:no|')t (?:find|see|access|locate|proceed)|unable to|(?:do not|don't) have|"
    r"no (?:information|record|records|details|data)\b|missing)",
    re.IGNORECASE,
)


# -- same decision -----------------------------------------------------------------------------
@dataclass(frozen=True)
class SameTool:
    name: str
    spec: str = "tool"

    def describe(self) -> str:
        return f"calls {self.name}"

    async def matches(self, action: Message, env: Environment) -> bool:
        return any(c.name == self.name for c in action.tool_calls)


@dataclass(frozen=True)
class SameCall:
    name: str
    arguments: Any
    spec: str = "tool+args"

    def describe(self) -> str:
        return f"calls {self.name}({canonical(self.arguments)})"

    async def matches(self, action: Message, env: Environment) -> bool:
        want = canonical(self.arguments)
        return any(
            c.name == self.name and canonical(c.arguments) == want for c in action.tool_calls
        )


@dataclass(frozen=True)
class OutcomeCall:
    """A call the ``tool_called`` outcome ``outcome`` counts (its tool, its ``args``)."""

    outcome: Any
    spec: str = "outcome"

    def describe(self) -> str:
        args = getattr(self.outcome, "args", None) or {}
        shown = ", ".join(f"{k}={v!r}" for k, v in args.items())
        return f"calls {self.outcome.tool}" + (f"({shown})" if shown else "")

    async def matches(self, action: Message, env: Environment) -> bool:
        return any(
            c.name == self.outcome.tool and self.outcome._hit(c.arguments)
            for c in action.tool_calls
        )


@dataclass(frozen=True)
class RegexMatch:
    pattern: str
    calls_only: bool
    spec: str = "regex"

    def describe(self) -> str:
        where = "a call" if self.calls_only else "a call or the reply"
        return f"{where} matches /{self.pattern}/"

    async def matches(self, action: Message, env: Environment) -> bool:
        regex = re.compile(self.pattern)
        if any(regex.search(f"{c.name} {canonical(c.arguments)}") for c in action.tool_calls):
            return True
        return not self.calls_only and bool(regex.search(action.content or ""))


JUDGE_SYSTEM = (
    "You compare two actions of an AI agent taken in the same situation. Answer with one "
    "word: SAME if the new action is the same decision as the recorded one (the same kind of "
    "action with the same effect), DIFFERENT otherwise."
)


@dataclass(frozen=True)
class JudgeMatch:
    policy: Any  # LLMPolicy
    recorded: Message
    spec: str = "judge"

    def describe(self) -> str:
        return f"judge {self.policy.name} says SAME as {describe_action(self.recorded)}"

    async def matches(self, action: Message, env: Environment) -> bool:
        request = DecisionRequest(
            messages=(
                Message("system", JUDGE_SYSTEM),
                Message(
                    "user",
                    f"Recorded action: {describe_action(self.recorded)}\n"
                    f"New action: {describe_action(action)}\nSAME or DIFFERENT?",
                ),
            ),
            tools=None,
            params={"temperature": 0, "max_tokens": 8},
            model=None,
            seed=0,
            step=None,
        )
        decision, _ = await env.decide(self.policy, request)
        word = (decision.message.content or "").strip().upper()
        if word.startswith("SAME"):
            return True
        if word.startswith("DIFFERENT"):
            return False
        raise PolicyError(f"judge answered {word[:60]!r}, not SAME or DIFFERENT")


def target_call(action: Message, outcome: Any = None) -> ToolCall | None:
    """The recorded call the decision is about: the one the outcome names, else the first."""
    wanted = getattr(outcome, "tool", None)
    for call in action.tool_calls:
        if wanted is not None and call.name == wanted:
            return call
    return action.tool_calls[0] if action.tool_calls else None


def same_decision(
    spec: str, recorded: Message, registry: PolicyRegistry, *, outcome: Any = None
) -> SameDecision:
    """The rule ``spec`` (see the module docstring) for the recorded action ``recorded``."""
    call = target_call(recorded, outcome)
    if spec == "outcome":
        tool = getattr(outcome, "tool", None)
        if tool is not None and callable(getattr(outcome, "_hit", None)):
            if not any(c.name == tool for c in recorded.tool_calls):
                raise DecisionError(
                    f"the recorded decision makes no call of {tool!r}, the outcome's tool: "
                    "pick the step that made it, or use --same regex:PATTERN or judge"
                )
            return OutcomeCall(outcome)
        spec = "tool+args"
    if spec in ("tool", "tool+args"):
        if call is None or not call.name:
            raise DecisionError(
                "the recorded decision makes no tool call: use --same regex:PATTERN or judge"
            )
        return SameTool(call.name) if spec == "tool" else SameCall(call.name, call.arguments)
    if spec.startswith("regex:"):
        pattern = spec[6:]
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise DecisionError(f"--same {spec!r}: invalid regex ({exc})") from None
        on_call = any(
            regex.search(f"{c.name} {canonical(c.arguments)}") for c in recorded.tool_calls
        )
        return RegexMatch(pattern, calls_only=on_call, spec=spec)
    if spec == "judge" or spec.startswith("judge:"):
        key = spec[6:] or None
        if key is None:
            known = registry.keys()
            key = "llm:judge" if "llm:judge" in known else "llm"
        return JudgeMatch(registry.llm(key), recorded, spec=spec)
    raise DecisionError(
        f"unknown --same {spec!r}; use outcome, tool, tool+args, regex:PATTERN or judge"
    )


# -- what the agent did instead ----------------------------------------------------------------
def _argument_overlap(a: Any, b: Any) -> float:
    x, y = set(tokens(canonical(a))), set(tokens(canonical(b)))
    return len(x & y) / len(y) if y else float(not x)


def classify(action: Message, context: Sequence[Message], removed: Sequence[Piece]) -> str:
    """What a re-decision that did not repeat the decision did instead (module docstring)."""
    if action.tool_calls:
        made = {
            (c.name, canonical(c.arguments))
            for m in context
            if m.role != "tool"
            for c in m.tool_calls
        }
        sources = {p.message for p in removed if p.role == "tool"}
        ids = {context[i].tool_call_id for i in sources}
        producers = [c for m in context for c in m.tool_calls if c.id and c.id in ids]
        for call in action.tool_calls:
            if (call.name, canonical(call.arguments)) in made:
                return "refetch"
            if any(
                call.name == p.name and _argument_overlap(call.arguments, p.arguments) >= 0.6
                for p in producers
            ):
                return "refetch"
        return "different"
    text = (action.content or "").strip()
    if not text:
        return "stop"
    if _ASK.search(text):
        return "ask"
    if _STOP.search(text):
        return "stop"
    return "answer"


def label_of(kinds: Counter[str]) -> str:
    """``cause`` when the agent most often decides differently (another call, an answer),
    ``prerequisite`` when it most often re-fetches, asks or stops."""
    if not kinds:
        return "cause"
    top = max(KINDS, key=lambda k: (kinds.get(k, 0), -KINDS.index(k)))
    return "cause" if top in CAUSE_KINDS else "prerequisite"


def decision_sampler(
    run: RecordedRun,
    decision: RecordedDecision,
    env: Environment,
    same: SameDecision,
    **options: Any,
) -> Sampler:
    """A :class:`~otelcar.attribution.experiment.redecisions.Sampler` of ``decision`` that
    labels what the agent did instead with :func:`classify` (``options``: the sampler's
    keyword arguments: ``seed``, ``policy``, ``on_sample``)."""
    return Sampler(run, decision, env, same, label=classify, **options)


def decision_text(decision: RecordedDecision) -> str:
    """The recorded decision as text (for ranking pieces by wording overlap)."""
    return action_text(decision.action)
