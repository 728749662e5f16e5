"""Outcomes: what counts as failure, as a function of a run's steps table.

An outcome looks at a steps table — a recorded trace's (:data:`otelcar.schema.STEPS_SCHEMA`)
or a rollout's (:data:`otelcar.replay.rollout_table.ROLLOUT_SCHEMA`); both have ``kind``,
``tool_name``, ``tool_args``, ``tool_result``, ``output``, ``input_messages`` — and says
whether the run **failed**. Built-ins:

| ``type`` | fails when |
|---|---|
| ``tool_called`` | tool ``tool`` was called (with ``args`` matching, if given) |
| ``tool_not_called`` | tool ``tool`` was never called (with matching ``args``) |
| ``final_answer`` | the final answer matches ``pattern`` (regex) or ``contains`` text |
|   | (``negate`` flips it) |
| ``judge`` | the LLM policy ``policy`` answers yes to ``question`` about the transcript |
| ``function`` | ``module:function(steps) -> bool`` returns True |
| ``exit_status`` | the agent's process exits with a nonzero status (or one of ``codes``) |
| ``output_line`` | a line of the agent's ``stream`` (stdout) matches ``pattern`` (regex) |
|   | (``negate``: no line does) |

``any`` / ``all`` combine rules. Outcome *types* are a registry (:func:`register_outcome_type`),
filled through the ``register_outcomes`` plugin hook (:mod:`otelcar.plugins`) the first time
it is consulted: the built-ins above (:data:`BUILTIN_OUTCOMES`) come in through it exactly as
a third party's do. An argument matcher is a literal (equal, numbers compared
exactly) or a string ``"re:<regex>"`` (full match on the value's text).

The built-ins read a run as its :class:`RunEvent` sequence (the agent's outputs and the tool
calls with their results, in order): :func:`events_of` reads it from a steps table, and the
replay harness makes it from a rollout directly (``otelcar.replay.rollout_table``), so judging
a rollout builds no table. An outcome whose ``judges_events`` is true offers
``failed_on(events)``; any other (a ``function`` outcome, a third party's) gets the table.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import polars as pl

from otelcar.errors import OtelcarError
from otelcar.messages import Message, decode_arguments
from otelcar.plugins.door import RegistryHook
from otelcar.usercode import call_user

MAX_JUDGE_CHARS = 6000


class OutcomeError(OtelcarError):
    """An outcome is misconfigured or could not be evaluated."""


class Outcome(Protocol):
    def describe(self) -> str: ...

    async def failed(self, steps: pl.DataFrame) -> bool: ...


class ProcessEnd(Protocol):
    """How the agent's process ended, as a process outcome reads it
    (:class:`otelcar.live.agent.AgentRun`): ``returncode`` (``None``: killed at its timeout)
    and the tails of what it wrote."""

    returncode: int | None
    stdout_tail: str
    stderr_tail: str


@dataclass(frozen=True, slots=True)
class RunEvent:
    """One event of a run as the built-in outcomes read it: an LLM step's ``output`` (``None``
    when not captured), or a tool call (``tool_name``, decoded ``arguments``, ``result``).
    Events are read-only: a rollout's events share their messages and arguments with other
    rollouts' where the action is the same object (a held or cached decision)."""

    kind: str  # "llm" | "tool"
    output: Message | None = None
    tool_name: str | None = None
    arguments: Any = None
    result: str | None = None


_EVENT_COLUMNS = ("step", "kind", "output", "tool_name", "tool_args", "tool_result")


def events_of(steps: pl.DataFrame) -> list[RunEvent]:
    """The LLM and tool steps of a steps table (recorded or rollout) as events, in step
    order; contexts are not read."""
    events: list[RunEvent] = []
    table = steps.select(_EVENT_COLUMNS).filter(pl.col("kind").is_in(["llm", "tool"]))
    for row in table.sort("step").iter_rows(named=True):
        if row["kind"] == "llm":
            output = row["output"]
            events.append(RunEvent("llm", Message.from_row(output) if output else None))
        else:
            events.append(
                RunEvent(
                    "tool",
                    tool_name=row["tool_name"],
                    arguments=decode_arguments(row["tool_args"]),
                    result=row["tool_result"],
                )
            )
    return events


def judges_events(outcome: Any) -> bool:
    """Whether ``outcome`` can judge a run from its events (``failed_on``) alone."""
    return bool(getattr(outcome, "judges_events", False))


def judges_process(outcome: Any) -> bool:
    """Whether ``outcome`` judges the agent's process (``failed_on_process``), not a trace."""
    return bool(getattr(outcome, "judges_process", False))


def judges_exit(outcome: Any) -> bool:
    """Whether ``outcome`` reads the agent's exit status: a nonzero exit is then a judged
    outcome, not a rollout that failed to run."""
    return bool(getattr(outcome, "judges_exit", False))


def _matches(expected: Any, actual: Any) -> bool:
    if not isinstance(expected, str):  # the common case first: not a pattern
        return expected == actual
    if expected.startswith("re:"):
        text = actual if isinstance(actual, str) else json.dumps(actual, ensure_ascii=False)
        return re.fullmatch(expected[3:], text) is not None
    return expected == actual


def tool_calls(events: list[RunEvent], tool: str) -> list[Any]:
    """Arguments of every call of ``tool`` among a run's events."""
    return [e.arguments for e in events if e.kind == "tool" and e.tool_name == tool]


def final_answer(events: list[RunEvent]) -> str | None:
    """The text of the last captured LLM output if it requested no tool call (else ``None``:
    the run did not end with an answer)."""
    for event in reversed(events):
        if event.kind == "llm" and event.output is not None:
            return event.output.content if not event.output.tool_calls else None
    return None


class _EventOutcome:
    """A built-in outcome: ``failed(steps)`` is ``failed_on(events_of(steps))``."""

    judges_events = True

    async def failed(self, steps: pl.DataFrame) -> bool:
        return await self.failed_on(events_of(steps))

    async def failed_on(self, events: list[RunEvent]) -> bool:
        raise NotImplementedError


@dataclass(frozen=True)
class ToolCalled(_EventOutcome):
    tool: str
    args: Mapping[str, Any] | None = None
    negate: bool = False

    def describe(self) -> str:
        what = f"{self.tool}({', '.join(f'{k}={v!r}' for k, v in (self.args or {}).items())})"
        return f"{'no call of' if self.negate else 'a call of'} {what}"

    def _hit(self, arguments: Any) -> bool:
        if not self.args:
            return True
        if not isinstance(arguments, dict):
            return False
        for key, expected in self.args.items():  # a loop: every rollout's calls pass here
            if key not in arguments or not _matches(expected, arguments[key]):
                return False
        return True

    async def failed_on(self, events: list[RunEvent]) -> bool:
        called = False
        tool = self.tool
        for event in events:
            if event.tool_name == tool and event.kind == "tool" and self._hit(event.arguments):
                called = True
                break
        return not called if self.negate else called


@dataclass(frozen=True)
class FinalAnswer(_EventOutcome):
    pattern: str | None = None
    contains: str | None = None
    negate: bool = False

    def __post_init__(self) -> None:
        if (self.pattern is None) == (self.contains is None):
            raise OutcomeError("final_answer needs exactly one of 'pattern' or 'contains'")

    @functools.cached_property
    def _regex(self) -> re.Pattern[str]:
        """The pattern compiled once per outcome, not once per judged rollout."""
        return re.compile(self.pattern or "")

    def describe(self) -> str:
        what = (
            f"matches /{self.pattern}/"
            if self.pattern is not None
            else f"contains {self.contains!r}"
        )
        return f"the final answer {'does not ' if self.negate else ''}{what}"

    async def failed_on(self, events: list[RunEvent]) -> bool:
        answer = final_answer(events) or ""
        if self.pattern is not None:
            hit = self._regex.search(answer) is not None
        else:
            hit = (self.contains or "") in answer
        return not hit if self.negate else hit


@dataclass(frozen=True)
class Judge(_EventOutcome):
    """Asks an LLM policy a yes/no question about the transcript ("yes" = failure)."""

    policy: Any
    question: str

    def describe(self) -> str:
        return f"judge {getattr(self.policy, 'name', '?')}: {self.question}"

    async def failed_on(self, events: list[RunEvent]) -> bool:
        from otelcar.policies.base import DecisionRequest

        transcript = _transcript(events)
        if len(transcript) > MAX_JUDGE_CHARS:  # small models have small context windows
            transcript = "…" + transcript[-MAX_JUDGE_CHARS:]
        request = DecisionRequest(
            messages=(
                Message("system", "You grade an AI agent's run. Answer only yes or no."),
                Message("user", f"{transcript}\n\nQuestion: {self.question}"),
            ),
            tools=None,
            params={"temperature": 0, "max_tokens": 8},
            model=None,
            seed=0,
            step=None,
        )
        answer = (await self.policy.decide(request)).message.content or ""
        word = answer.strip().lower()
        if word.startswith("yes"):
            return True
        if word.startswith("no"):
            return False
        raise OutcomeError(f"judge answered {answer[:80]!r}, not yes or no")


def _transcript(events: list[RunEvent]) -> str:
    lines = []
    for event in events:
        if event.kind == "llm" and event.output is not None:
            message = event.output
            calls = ", ".join(f"{c.name}({json.dumps(c.arguments)})" for c in message.tool_calls)
            lines.append(f"agent: {message.content or ''} {calls}".strip())
        elif event.kind == "tool":
            lines.append(f"tool {event.tool_name} → {event.result}")
    return "\n".join(lines)


class _ProcessOutcome:
    """An outcome on the agent's process: a trace has none to judge."""

    judges_process = True
    judges_exit = False

    def describe(self) -> str:
        raise NotImplementedError

    async def failed(self, steps: pl.DataFrame) -> bool:
        raise OutcomeError(
            f"the outcome '{self.describe()}' judges the agent's process, which a trace does "
            "not record: run with --agent CMD (the recorded run's is then its held live "
            "replay's)"
        )

    def failed_on_process(self, process: ProcessEnd) -> bool:
        raise NotImplementedError


@dataclass(frozen=True)
class ExitStatus(_ProcessOutcome):
    """Fails when the agent exits with a nonzero status, or with one of ``codes``."""

    codes: tuple[int, ...] | None = None
    judges_exit = True

    def __post_init__(self) -> None:
        if self.codes is not None and (
            not self.codes or not all(type(c) is int for c in self.codes)
        ):
            raise OutcomeError("exit_status: codes must be a non-empty list of integers")

    def describe(self) -> str:
        if self.codes is None:
            return "the agent exits with a nonzero status"
        return f"the agent exits with status {' or '.join(map(str, self.codes))}"

    def failed_on_process(self, process: ProcessEnd) -> bool:
        code = process.returncode
        if code is None:
            raise OutcomeError("the agent was killed at its timeout: it has no exit status")
        return code != 0 if self.codes is None else code in self.codes


@dataclass(frozen=True)
class OutputLine(_ProcessOutcome):
    """Fails when a line of the agent's ``stream`` matches ``pattern`` (``negate``: when
    none does). Only the tail the agent run keeps is read (:data:`otelcar.live.agent`'s
    ``OUTPUT_TAIL``)."""

    pattern: str
    stream: str = "stdout"
    negate: bool = False

    def __post_init__(self) -> None:
        if self.stream not in ("stdout", "stderr"):
            raise OutcomeError(f"output_line: stream must be stdout or stderr, not {self.stream!r}")
        try:
            re.compile(self.pattern)
        except re.error as exc:
            raise OutcomeError(f"output_line: pattern {self.pattern!r}: {exc}") from None

    @functools.cached_property
    def _regex(self) -> re.Pattern[str]:
        """The pattern compiled once per outcome, not once per judged rollout."""
        return re.compile(self.pattern)

    def describe(self) -> str:
        return (
            f"{'no' if self.negate else 'a'} line of the agent's {self.stream} matches "
            f"/{self.pattern}/"
        )

    def failed_on_process(self, process: ProcessEnd) -> bool:
        text = process.stdout_tail if self.stream == "stdout" else process.stderr_tail
        regex = self._regex
        hit = any(regex.search(line) for line in text.splitlines())
        return not hit if self.negate else hit


@dataclass(frozen=True)
class FunctionOutcome:
    """``function(steps, **args)`` is true when the run failed; ``args`` come from the
    config's ``args = {…}`` table (thresholds, expected values)."""

    function: Callable[..., Any]
    name: str = "function"
    args: Mapping[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        if not self.args:
            return self.name
        return f"{self.name}({', '.join(f'{k}={v!r}' for k, v in self.args.items())})"

    async def failed(self, steps: pl.DataFrame) -> bool:
        return bool(
            await call_user(self.function, "outcome function", args=(steps,), kwargs=self.args)
        )


@dataclass(frozen=True)
class _Rules:
    """Rules combined: :class:`AnyOf` fails when any rule fails, :class:`AllOf` when all do.
    Judging stops at the first rule that decides (``_decides``: the verdict that does)."""

    rules: tuple[Outcome, ...]
    _word: ClassVar[str] = ""
    _decides: ClassVar[bool] = True

    def describe(self) -> str:
        return f" {self._word} ".join(r.describe() for r in self.rules)

    @property
    def judges_events(self) -> bool:
        return all(judges_events(rule) for rule in self.rules)

    @property
    def judges_process(self) -> bool:
        return all(judges_process(rule) for rule in self.rules)

    @property
    def judges_exit(self) -> bool:
        return any(judges_exit(rule) for rule in self.rules)

    async def failed(self, steps: pl.DataFrame) -> bool:
        for rule in self.rules:
            if bool(await rule.failed(steps)) is self._decides:
                return self._decides
        return not self._decides

    async def failed_on(self, events: list[RunEvent]) -> bool:
        for rule in self.rules:
            if bool(await rule.failed_on(events)) is self._decides:  # type: ignore[attr-defined]
                return self._decides
        return not self._decides

    def failed_on_process(self, process: ProcessEnd) -> bool:
        for rule in self.rules:
            if bool(rule.failed_on_process(process)) is self._decides:  # type: ignore[attr-defined]
                return self._decides
        return not self._decides


@dataclass(frozen=True)
class AnyOf(_Rules):
    _word: ClassVar[str] = "or"
    _decides: ClassVar[bool] = True


@dataclass(frozen=True)
class AllOf(_Rules):
    _word: ClassVar[str] = "and"
    _decides: ClassVar[bool] = False


#: ``factory(options, registry) -> Outcome``: ``options`` is the ``[outcome]`` table less
#: ``type``, ``registry`` the :class:`~otelcar.policies.PolicyRegistry` (or ``None``).
OutcomeFactory = Callable[[dict[str, Any], Any], Outcome]
_TYPES: dict[str, OutcomeFactory] = {}
COMBINATORS = ("any", "all")


def _add(name: str, factory: OutcomeFactory) -> None:
    if name in COMBINATORS:
        raise OutcomeError(f"outcome type {name!r}: 'any' and 'all' combine rules, not a type")
    if not callable(factory):
        raise OutcomeError(f"outcome type {name!r}: the factory is not callable")
    _TYPES[name] = factory


_PLUGINS = RegistryHook("register_outcomes", _add)


def register_outcome_type(name: str, factory: OutcomeFactory) -> None:
    """Make ``[outcome] type = "<name>"`` usable: ``factory(options, registry)`` builds the
    outcome from the table's other keys (raising :class:`OutcomeError`, ``KeyError`` or
    ``TypeError`` for bad options). Replaces a type of the same name (the plugins' types are
    registered first)."""
    _PLUGINS.ensure()
    _add(name, factory)


def outcome_types() -> list[str]:
    """The registered outcome types, in registration order."""
    _PLUGINS.ensure()
    return list(_TYPES)


def outcome_from_config(config: Mapping[str, Any], registry: Any = None) -> Outcome:
    """Build an outcome from the ``[outcome]`` table of ``otelcar.toml``: ``any``/``all``
    combine rules, anything else is built by the factory of its ``type``."""
    if "any" in config or "all" in config:
        key = "any" if "any" in config else "all"
        rules = tuple(outcome_from_config(rule, registry) for rule in config[key])
        if not rules:
            raise OutcomeError(f"outcome '{key}' has no rules")
        on_process = [judges_process(rule) for rule in rules]
        if any(on_process) and not all(on_process):
            raise OutcomeError(
                f"outcome '{key}': rules on the agent's process (exit_status, output_line) "
                "cannot be combined with rules on its trace: the recorded trace has no "
                "process, and a rollout is judged on one or the other"
            )
        return AnyOf(rules) if key == "any" else AllOf(rules)
    _PLUGINS.ensure()
    kind = config.get("type")
    factory = _TYPES.get(kind) if isinstance(kind, str) else None
    if factory is None:
        raise OutcomeError(
            f"unknown outcome type {kind!r}; known: {', '.join(_TYPES)} (and any/all)"
        )
    options = {k: v for k, v in config.items() if k != "type"}
    try:
        return factory(options, registry)
    except (KeyError, TypeError) as exc:
        raise OutcomeError(f"outcome {kind!r}: bad or missing option ({exc})") from None


def _tool_called(options: dict[str, Any], _registry: Any) -> Outcome:
    return ToolCalled(options.pop("tool"), options.pop("args", None), **options)


def _tool_not_called(options: dict[str, Any], _registry: Any) -> Outcome:
    return ToolCalled(options.pop("tool"), options.pop("args", None), negate=True)


def _final_answer(options: dict[str, Any], _registry: Any) -> Outcome:
    return FinalAnswer(**options)


def _judge(options: dict[str, Any], registry: Any) -> Outcome:
    if registry is None:
        raise OutcomeError("a judge outcome needs the policy registry")
    return Judge(registry.llm(options.get("policy", "llm")), options["question"])


def _function(options: dict[str, Any], _registry: Any) -> Outcome:
    from otelcar.policies.python import load_callable

    args = options.get("args", {})
    if not isinstance(args, Mapping):
        raise OutcomeError(
            f"outcome 'function': args must be a table of keyword arguments, not "
            f"{type(args).__name__}"
        )
    unknown = set(options) - {"function", "args"}
    if unknown:
        raise OutcomeError(
            f"outcome 'function': unknown option(s) {', '.join(sorted(unknown))}; "
            "known: function, args"
        )
    return FunctionOutcome(load_callable(options["function"]), options["function"], args)


def _exit_status(options: dict[str, Any], _registry: Any) -> Outcome:
    codes = options.pop("codes", None)
    if options:
        raise OutcomeError(
            f"outcome 'exit_status': unknown option(s) {', '.join(sorted(options))}; known: codes"
        )
    if codes is not None and not isinstance(codes, list | tuple):
        raise OutcomeError("exit_status: codes must be a list of integers")
    return ExitStatus(tuple(codes) if codes is not None else None)


def _output_line(options: dict[str, Any], _registry: Any) -> Outcome:
    return OutputLine(**options)


def asks_a_judge(outcome: Outcome) -> bool:
    """Whether judging needs an LLM judge (a ``judge`` rule, in any ``any``/``all``)."""
    if isinstance(outcome, AnyOf | AllOf):
        return any(asks_a_judge(inner) for inner in outcome.rules)
    return isinstance(outcome, Judge)


async def recorded_verdict(outcome: Outcome, steps: pl.DataFrame) -> tuple[str, str | None]:
    """A recorded run judged as it was recorded, with no policy call: ``("fail", None)``,
    ``("pass", None)``, ``("judge", None)`` when the outcome asks an LLM judge (not run),
    ``("agent", None)`` when it judges the agent's process (not in a trace), or
    ``("error", reason)`` when the outcome raised. What ``otelcar traces`` and the console's
    list show in their outcome column."""
    if asks_a_judge(outcome):
        return "judge", None
    if judges_process(outcome):
        return "agent", None
    try:
        failed = await outcome.failed(steps)
    except OtelcarError as exc:
        return "error", str(exc)
    return ("fail" if failed else "pass"), None


#: The built-in outcome types ``(name, factory)``, registered by the built-in plugin.
BUILTIN_OUTCOMES: tuple[tuple[str, OutcomeFactory], ...] = (
    ("tool_called", _tool_called),
    ("tool_not_called", _tool_not_called),
    ("final_answer", _final_answer),
    ("judge", _judge),
    ("function", _function),
    ("exit_status", _exit_status),
    ("output_line", _output_line),
)
