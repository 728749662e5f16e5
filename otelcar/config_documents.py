"""``otelcar.toml`` declared as types (:mod:`otelcar.typeschema`): its JSON Schema
(``schemas/config.schema.json``) is generated from :class:`ConfigDocument`, and the parser
(:mod:`otelcar.project_config`) reads each table's keys and value types from the same
classes, so that a key is declared once."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Required, TypedDict

from otelcar.executors import EXECUTORS
from otelcar.outcome import BUILTIN_OUTCOMES
from otelcar.replay.requests import STRUCTURES
from otelcar.sources import DEFAULT_LOGS_TABLE, DEFAULT_TABLE
from otelcar.typeschema import Def, Doc, Extra, closed

#: The outcome types otelcar itself knows (:data:`otelcar.outcome.BUILTIN_OUTCOMES`).
BUILTIN_OUTCOME_TYPES = [name for name, _ in BUILTIN_OUTCOMES]


class PolicyTable(TypedDict):
    """A policy: its type and that type's options."""

    type: Annotated[
        str,
        Doc(
            "openai | python | static | mock | recorded | simulated, or a type a plugin "
            "registers (register_policy_types; otelcar plugins lists them)"
        ),
    ]


@closed
class BuiltinRule(TypedDict, total=False):
    """An outcome type otelcar knows (otelcar.outcome) with its options."""

    type: Literal[tuple(BUILTIN_OUTCOME_TYPES)]  # type: ignore[valid-type]
    tool: str
    args: dict[str, Any]
    pattern: str
    contains: str
    negate: bool
    policy: str
    question: str
    function: str
    codes: Annotated[list[int], Extra(minItems=1)]
    stream: Literal["stdout", "stderr"]
    any: list[Rule]
    all: list[Rule]


class PluginRule(TypedDict):
    """an outcome type a plugin registers (register_outcomes; otelcar plugins lists them): its
    options are its own"""

    type: Annotated[str, Extra({"not": {"enum": BUILTIN_OUTCOME_TYPES}})]


#: ``[outcome]``: what counts as failure, a rule that may hold rules (``any``, ``all``).
Rule = Annotated[
    Annotated[BuiltinRule, Def("builtin_rule")] | Annotated[PluginRule, Def("plugin_rule")],
    Def("rule"),
]


@closed
class ReplayTable(TypedDict, total=False):
    """The replay settings (otelcar.project_config.ReplaySettings)."""

    seed: int
    rollouts: int
    concurrency: int
    slack: int
    max_calls: int
    max_tokens: int
    executor: Annotated[
        str,
        Doc(
            " | ".join(EXECUTORS) + ", or an executor a plugin registers (register_executors; "
            "otelcar plugins lists them)"
        ),
    ]
    ray_address: Annotated[str, Doc("ray://host:port, auto, or absent: a local cluster")]


class AgentCommandTable(TypedDict, total=False):
    """The keys of ``[agent]`` that say how to run the agent (live replay, docs/live.md)."""

    command: Annotated[
        str | list[Any],
        Doc(
            "live replay: the agent, run once per rollout (split like a shell line, never run "
            "through a shell; docs/live.md)"
        ),
    ]
    cwd: Annotated[str, Doc("where it runs (default: here)")]
    env: dict[str, str]
    timeout_s: Annotated[float, Extra(exclusiveMinimum=0, default=300)]
    concurrency: Annotated[int, Extra(minimum=1, default=1)]


@closed
class ToolTable(TypedDict, total=False):
    """A tool the agent offers: its definition."""

    description: str
    parameters: dict[str, Any]


@closed
class DecisionTable(TypedDict, total=False):
    """One decision's request ([[agent.decision]]), by step, key or agent."""

    step: int
    key: Annotated[
        str,
        Doc(
            "<agent or model>#<n>: the agent's n-th decision (otelcar init and replay --json "
            "list them)"
        ),
    ]
    agent: Annotated[
        str,
        Doc("every decision of this agent (a step or key declaration is more specific)"),
    ]
    tools: list[str]
    tool_choice: str
    params: dict[str, Any]


class AgentRequestTable(TypedDict, total=False):
    """The keys of ``[agent]`` that declare its requests (otelcar.replay.requests)."""

    structure: Literal[tuple(STRUCTURES)]  # type: ignore[valid-type]
    tool_choice: Annotated[str, Doc("auto | none | required | the name of a tool")]
    tools: dict[str, ToolTable]
    decision: list[DecisionTable]


@closed
class AgentTable(AgentCommandTable, AgentRequestTable):
    """What the agent's requests hold where the trace does not say: its structure, tools, tool
    choice, per-decision requests (docs/replay.md)"""


@closed
class SourceTable(TypedDict, total=False):
    """Read traces from ClickHouse (the OpenTelemetry Collector clickhouse exporter's tables)
    instead of the local store; docs/clickhouse.md"""

    url: Required[
        Annotated[
            str,
            Doc(
                "clickhouse://user:pass@host:port/db, clickhouses://… (TLS), chdb://PATH, or a "
                "scheme a plugin registers (register_sources; otelcar plugins lists them)"
            ),
        ]
    ]
    table: Annotated[str, Extra(default=DEFAULT_TABLE)]
    logs_table: Annotated[
        str, Extra(default=DEFAULT_LOGS_TABLE), Doc("GenAI log events; empty: read no logs")
    ]
    database: Annotated[str, Doc("overrides the URL's database (default: default)")]


@closed
class TriageTable(TypedDict, total=False):
    """Background triage of failing traces as they arrive (otelcar collect --triage, otelcar
    triage run; docs/triage.md). Nothing is spent until both call limits are set"""

    max_calls_per_trace: Annotated[
        int, Extra(minimum=1), Doc("policy calls one trace's analyses may spend")
    ]
    max_calls_per_day: Annotated[
        int,
        Extra(minimum=1),
        Doc(
            "policy calls all analyses may spend per UTC day (counted in the store, across "
            "restarts)"
        ),
    ]
    concurrency: Annotated[int, Extra(minimum=1, default=1)]
    services: Annotated[
        list[Annotated[str, Extra(minLength=1)]],
        Doc("only traces of these services (default: all)"),
    ]
    quiet_s: Annotated[
        float,
        Extra(exclusiveMinimum=0, default=30),
        Doc(
            "a trace whose root span has not arrived is complete after this many seconds "
            "without a new span"
        ),
    ]
    why: Annotated[bool, Extra(default=False), Doc("also run why on the culprit")]
    export: Annotated[
        str,
        Extra(pattern="^https?://"),
        Doc(
            "an OTLP/HTTP base URL (your tracing backend): each result also goes there as a "
            "span linked to the trace it explains"
        ),
    ]


@closed
class PriceTable(TypedDict):
    """A model's price: dollars per million input and output tokens."""

    input: Annotated[float, Extra(minimum=0)]
    output: Annotated[float, Extra(minimum=0)]


@closed
class ConfigDocument(TypedDict, total=False):
    """A project's otelcar.toml: its policies, outcome, replay settings, agent, trace source,
    triage limits and prices (otelcar.project_config)."""

    policies: Annotated[
        dict[str, PolicyTable], Extra(propertyNames={"pattern": "^(llm(:.+)?|tool:.+)$"})
    ]
    outcome: Rule
    replay: ReplayTable
    agent: AgentTable
    source: SourceTable
    triage: TriageTable
    prices: Annotated[
        dict[str, PriceTable],
        Doc(
            "model → dollars per million tokens, over the built-in table (otelcar.pricing); a "
            "key prices every model it begins"
        ),
    ]
