"""A starting ``otelcar.toml`` for one trace (``otelcar init TRACE``).

:func:`starting_config` writes what a new user needs to declare before the rebuilt agent can
be trusted: the run's structure, the tools the agent offers (each with a policy that says how
a rollout gets a result the recording lacks), every decision's request with what the trace
recorded and what otelcar inferred (:mod:`otelcar.replay.requests`), an LLM policy for the
recorded model, and an outcome drawn from the trace's errors. Every inferred line says so in
a comment, so the user knows what to check. The document parses back into the same
declaration (``tests/test_init.py``).
"""

from __future__ import annotations

from typing import Any

import tomlkit
from tomlkit.items import Table

from otelcar.replay.recorded import RecordedRun
from otelcar.replay.requests import Part

HEADER = """\
otelcar.toml for trace {trace_id},
written by `otelcar init` from the trace alone.
Each part of a re-decided request is recorded in the trace, declared here, or inferred;
lines marked "inferred" are otelcar's reading of the trace: check them against your agent
(docs/replay.md, "The rebuilt agent's requests"). Then: otelcar replay TRACE, otelcar
attribute TRACE."""


def starting_config(run: RecordedRun, *, base_url: str = "http://127.0.0.1:8080/v1") -> str:
    """The TOML text of a starting ``otelcar.toml`` for ``run`` (see the module doc)."""
    document = tomlkit.document()
    outcome = _outcome(run)
    if outcome is not None:
        document.add("outcome", outcome)
    lines = [f"# {line}" for line in HEADER.format(trace_id=run.trace_id).splitlines()]
    lines += ["", *_policies(run, base_url), ""]
    if outcome is not None:
        lines.append(tomlkit.dumps(document).rstrip())
    else:
        lines.append(
            "# [outcome]: what counts as failure; the trace records no error to start from."
        )
        lines += [f"# {line}" for line in _outcome_examples(run)]
    lines += ["", *_agent(run)]
    return "\n".join(lines) + "\n"


def _policies(run: RecordedRun, base_url: str) -> list[str]:
    models = sorted({d.model for d in run.decisions if d.model})
    lines = [
        "# re-decisions: any OpenAI-compatible server (otelcar model serve, vLLM, Ollama)",
        "[policies.llm]",
        'type = "openai"',
        f"base_url = {_value(base_url)}",
        *([f"model = {_value(models[0])}"] if models else []),
    ]
    definitions = run.tool_definitions()
    if definitions:
        lines += [
            "",
            "# How a rollout gets a tool result the recording lacks: recorded (refuse: the",
            '# rollout fails and is counted), mock (results = { name = "text" }), simulated',
            '# (llm = "llm"), or python (function = "module:fn", side_effects = "none" |',
            '# "sandboxed" | "allowed": it runs your real tool; docs/replay.md).',
        ]
    for definition in definitions:
        lines += [f"[policies.{_value('tool:' + str(definition.get('name')))}]"]
        lines += ['type = "recorded"']
    return lines


def _outcome(run: RecordedRun) -> Table | None:
    """``tool_called`` on the first tool call whose step failed, with its recorded arguments
    (``None`` when no tool step failed)."""
    for decision in run.decisions:
        for observation in decision.observations:
            if observation.error is None or not observation.call.name:
                continue
            outcome = tomlkit.table()
            outcome.comment(
                f"inferred: the run failed where {observation.call.name} raised "
                f"({_short(observation.error)}); edit args into re: patterns"
            )
            outcome.add("type", "tool_called")
            outcome.add("tool", observation.call.name)
            if isinstance(observation.call.arguments, dict) and observation.call.arguments:
                outcome.add("args", _inline(observation.call.arguments))
            return outcome
    return None


def _outcome_examples(run: RecordedRun) -> list[str]:
    last = next(
        (
            call
            for decision in reversed(run.decisions)
            for call in reversed(decision.action.tool_calls if decision.action else ())
            if call.name
        ),
        None,
    )
    if last is None:
        return ["[outcome]", 'type = "final_answer"', 'pattern = "re:.*refund.*"']
    arguments = last.arguments if isinstance(last.arguments, dict) else {}
    first = next(iter(arguments), "arg")
    return [
        "[outcome]",
        'type = "tool_called"',
        f'tool = "{last.name}"',
        f'args = {{ {first} = "re:<what a failing call passes>" }}',
    ]


def _agent(run: RecordedRun) -> list[str]:
    """The ``[agent]`` section as lines: what the trace recorded is written as is, what
    otelcar inferred is written commented out with why, so that nothing it guessed counts as
    declared until the user uncomments it."""
    requests = run.requests
    lines = [
        "[agent]",
        '# "loop": the agent calls the model until an answer without tool calls; '
        '"workflow": it makes exactly the recorded decisions',
        *_declare(f"structure = {_value(requests.structure.value)}", requests.structure),
    ]
    for definition in run.tool_definitions():
        name = str(definition.get("name"))
        inferred = bool(definition.get("inferred"))
        lines += [
            "",
            "# inferred from its calls: add a description, enums and required arguments"
            if inferred
            else "# recorded with the trace's requests",
        ]
        prefix = "# " if inferred else ""
        lines += [
            f"{prefix}[agent.tools.{_key(name)}]",
            f"{prefix}description = {_value(definition.get('description') or '')}",
            f"{prefix}parameters = {_value(definition.get('parameters') or {'type': 'object'})}",
        ]
    for spec, decision in zip(requests.decisions, run.decisions, strict=True):
        names = [str(t.get("name")) for t in spec.tools.value]
        lines += ["", f"# {spec.key}: {_action(decision)}", "[[agent.decision]]"]
        lines.append(f"step = {spec.step}")
        lines += _declare(f"tools = {_value(names)}", spec.tools)
        if names:
            choice = spec.tool_choice
            shown = _choice_name(choice.value) if choice.value is not None else "auto"
            lines += _declare(f"tool_choice = {_value(shown)}", choice)
    return lines


def _declare(line: str, part: Part) -> list[str]:
    """``line`` as it is when ``part`` was recorded or declared, else commented out under a
    comment that says why otelcar inferred it."""
    if part.source != "inferred":
        return [f"{line}  # {part.source}"]
    return [f"# inferred ({part.basis}):", f"# {line}"]


def _value(value: Any) -> str:
    return tomlkit.item(_inline(value)).as_string()


def _key(name: str) -> str:
    return name if name.replace("_", "").replace("-", "").isalnum() else _value(name)


def _source(part: Part) -> str:
    return f"{part.source}: {part.basis}" if part.basis else part.source


def _choice_name(choice: Any) -> str:
    if isinstance(choice, dict):
        return str((choice.get("function") or {}).get("name") or choice.get("name"))
    return str(choice)


def _action(decision: Any) -> str:
    action = decision.action
    if action is None:
        return "action not recorded"
    if action.tool_calls:
        return "called " + ", ".join(str(c.name) for c in action.tool_calls)
    return "answered " + _short(action.content or "")


def _short(text: str, limit: int = 60) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _inline(value: Any) -> Any:
    """``value`` as TOML inline values (nested tables inline, so a definition stays on one
    line)."""
    if isinstance(value, dict):
        table = tomlkit.inline_table()
        for key, item in value.items():
            if item is not None:
                table.append(key, _inline(item))
        return table
    if isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, list | tuple):
        array = tomlkit.array()
        for item in value:
            array.append(_inline(item))
        return array
    return value
