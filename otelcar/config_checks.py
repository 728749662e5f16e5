"""Does ``otelcar.toml`` fit the trace it is used on? Names in the config that the trace does
not know — a tool policy's key, an outcome's tool or argument — are errors before anything
runs, with the names the trace does know and a did-you-mean.

Every front end readies a run with :func:`otelcar.analyses.prepare`, which calls
:func:`check_config_fits` once the run and the outcome are settled: the CLI, the MCP server
(:mod:`otelcar.mcp.runs`) and the web console (:mod:`otelcar.ui.runs`) alike.

**What the trace knows.** Its tools are the ones its decisions called, its tool steps ran,
and its requests defined (recorded with a decision, or declared in ``[agent.tools]``). A
tool's arguments are the names its recorded calls used and the parameters its definition
lists. When no definition is recorded or declared, the trace knows only what this run
happened to call, so a name it does not know may still be the agent's (a tool this run
never called, an optional argument it never passed): such a name is an error only when it
is close to a known one (a misspelling); otherwise it is left alone, and
:func:`outcome_hints` says why the outcome may never fire on this trace.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from otelcar.errors import OtelcarError

if TYPE_CHECKING:
    from otelcar.project_config import ProjectConfig
    from otelcar.replay.recorded import RecordedRun


class ConfigMismatch(OtelcarError):
    """The project config (or a ``--fail-if`` rule) names a tool or an argument that the
    trace it is used on cannot have (see the module docstring)."""


@dataclass(frozen=True)
class TraceTools:
    """The tools a recorded run knows of (see the module docstring).

    ``names``: every tool called, run or defined; ``defined``: the tools whose definition is
    recorded or declared; ``complete``: some definition is recorded or declared, so ``names``
    is the agent's whole tool list, not only what this run called; ``arguments``: per tool,
    the argument names its calls used and its definition's parameters; ``parameters``: the
    tools whose recorded or declared definition lists its parameters (their ``arguments``
    are the whole list)."""

    names: tuple[str, ...]
    defined: frozenset[str]
    complete: bool
    arguments: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    parameters: frozenset[str] = frozenset()


def trace_tools(run: RecordedRun) -> TraceTools:
    """What ``run`` knows of its tools: its calls (``decisions[*].action.tool_calls``), its
    tool steps (``kind == "tool"`` rows of ``run.steps``), the definitions recorded with its
    decisions (``decision.tools``) and the ones its requests offer
    (:meth:`~otelcar.replay.recorded.RecordedRun.tool_definitions`, which include the
    ``[agent.tools]`` declaration; inferred ones count as calls, not definitions)."""
    names: dict[str, None] = {}
    arguments: dict[str, dict[str, None]] = {}
    defined: set[str] = set()
    parameters: set[str] = set()

    def used(name: Any, args: Any) -> None:
        if not isinstance(name, str) or not name:
            return
        names.setdefault(name)
        known = arguments.setdefault(name, {})
        if isinstance(args, Mapping):
            for key in args:
                known.setdefault(str(key))

    def definition(tool: Mapping[str, Any]) -> None:
        name = tool.get("name")
        used(name, None)
        if not isinstance(name, str) or not name or tool.get("inferred"):
            return
        defined.add(name)
        schema = tool.get("parameters")
        if isinstance(schema, str):
            try:
                schema = json.loads(schema)
            except ValueError:
                schema = None
        properties = schema.get("properties") if isinstance(schema, Mapping) else None
        if isinstance(properties, Mapping):
            parameters.add(name)
            used(name, properties)

    for decision in run.decisions:
        for call in decision.action.tool_calls if decision.action else ():
            used(call.name, call.arguments)
        for tool in decision.tools or ():
            definition(tool)
    for tool in run.tool_definitions():
        definition(tool)
    for name, args in _tool_steps(run.steps):
        used(name, args)
    return TraceTools(
        names=tuple(sorted(names)),
        defined=frozenset(defined),
        complete=bool(defined),
        arguments={name: tuple(sorted(known)) for name, known in arguments.items()},
        parameters=frozenset(parameters),
    )


def _tool_steps(steps: pl.DataFrame) -> Iterable[tuple[Any, Any]]:
    """``(tool name, decoded arguments or None)`` of every tool step of a steps table."""
    if not {"kind", "tool_name", "tool_args"} <= set(steps.columns):
        return
    rows = steps.filter(pl.col("kind") == "tool").select("tool_name", "tool_args")
    for name, text in rows.iter_rows():
        try:
            args = json.loads(text) if isinstance(text, str) else None
        except ValueError:
            args = None
        yield name, args


def _close(name: str, known: Iterable[str]) -> str | None:
    found = difflib.get_close_matches(name, list(known), n=1)
    return found[0] if found else None


def _listed(names: Iterable[str]) -> str:
    shown = ", ".join(names)
    return shown or "none"


def policy_key_problems(run: RecordedRun, keys: Iterable[str]) -> list[str]:
    """One message per tool-policy key (``tool:NAME``) of ``keys`` that names no tool of
    ``run``: always when the trace's tool list is complete, else when the name is close to
    one the trace knows. ``tool:*`` and LLM keys are never a problem."""
    tools = trace_tools(run)
    problems = []
    for key in keys:
        if not key.startswith("tool:") or key == "tool:*":
            continue
        name = key[len("tool:") :]
        if name in tools.names:
            continue
        close = _close(name, tools.names)
        if close is None and not tools.complete:
            continue
        hint = f"; did you mean 'tool:{close}'?" if close else ""
        problems.append(
            f'[policies."{key}"] matches no tool of trace {run.trace_id} '
            f"(its tools: {_listed(tools.names)}){hint}"
        )
    return problems


@dataclass(frozen=True)
class OutcomeFindings:
    """What :func:`outcome_findings` found: ``errors`` (names the trace cannot have) and
    ``hints`` (names this run never used, which the agent may still have)."""

    errors: list[str] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)


def outcome_findings(run: RecordedRun, outcome: Any) -> OutcomeFindings:
    """Check every ``tool_called`` / ``tool_not_called`` rule of ``outcome`` (inside
    ``any``/``all`` too) against ``run``: its ``tool`` must be a tool of the trace, and each
    key of its ``args`` an argument of that tool. A name the trace cannot have (the tool list
    or the tool's parameters are complete, or the name is close to a known one) is an error
    with a did-you-mean; one that this run merely never used is a hint. Other outcome types
    (``final_answer``, ``judge``, ``function``, a plugin's) are not looked into."""
    from otelcar.outcome import AllOf, AnyOf, ToolCalled

    tools = trace_tools(run)
    found = OutcomeFindings()

    def visit(rule: Any) -> None:
        if isinstance(rule, AnyOf | AllOf):
            for inner in rule.rules:
                visit(inner)
            return
        if not isinstance(rule, ToolCalled):
            return
        kind = "tool_not_called" if rule.negate else "tool_called"
        where = f"outcome {kind} {rule.tool!r}"
        if rule.tool not in tools.names:
            close = _close(rule.tool, tools.names)
            text = (
                f"{where}: trace {run.trace_id} never calls or defines this tool "
                f"(its tools: {_listed(tools.names)})"
            )
            if close or tools.complete:
                found.errors.append(text + (f"; did you mean {close!r}?" if close else ""))
            else:
                found.hints.append(text)
            return
        known = tools.arguments.get(rule.tool, ())
        for key in rule.args or {}:
            if key in known:
                continue
            close = _close(key, known)
            text = (
                f"{where}: {key!r} is not an argument of {rule.tool} in trace {run.trace_id} "
                f"(its arguments: {_listed(known)})"
            )
            if close or rule.tool in tools.parameters:
                found.errors.append(text + (f"; did you mean {close!r}?" if close else ""))
            else:
                found.hints.append(text + ": no recorded call of it passes that argument")

    if outcome is not None:
        visit(outcome)
    return found


def outcome_hints(run: RecordedRun, outcome: Any) -> list[str]:
    """The names of ``outcome`` that this run never used but the agent may have (see
    :func:`outcome_findings`): the likely reason an outcome does not fire on the recorded
    run."""
    return outcome_findings(run, outcome).hints


def check_config_fits(run: RecordedRun, config: ProjectConfig) -> None:
    """Raise :class:`ConfigMismatch` naming every tool-policy key (:func:`policy_key_problems`)
    and every outcome tool or argument (:func:`outcome_findings`) of ``config`` that ``run``
    cannot have, each with the trace's names and a did-you-mean. Call it once the config's
    outcome is final (after ``--fail-if``)."""
    where = config.path or "config"
    problems = [f"{where}: {p}" for p in policy_key_problems(run, config.registry.keys())]
    problems += outcome_findings(run, config.outcome).errors
    if problems:
        raise ConfigMismatch("; ".join(problems))
