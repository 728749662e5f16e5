"""The application seam: the analyses a user starts on recorded traces, as every front end
(the CLI, the MCP server, the web console) starts them.

- :mod:`.requests`: the frozen request type of each analysis, every option declared once
  (:mod:`.options`); the front ends' options, tool arguments and forms are made from them.
- :mod:`.project`: :func:`prepare` of a trace and a request in a :class:`Project` (where a
  front end reads): the run, the project configuration and the environment, for the local
  store and every source alike.
- :mod:`.runs`: :func:`run` of a request, and the coroutine functions it calls, with the
  defaults of the project's ``otelcar.toml`` filled in.
- :mod:`.live`: the run made ready for live replay on the user's agent.

The names load on first use (PEP 562): a command that only declares its options from the
request types (``otelcar why --help``) loads neither the replay machinery nor Polars.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Each public name and the module that defines it.
_WHERE = {
    **dict.fromkeys(
        ("kept_ready", "live_check", "live_prepared", "live_ready", "live_rollouts"), "live"
    ),
    **dict.fromkeys(("Option", "Request", "RequestError", "Spec", "option", "specs"), "options"),
    **dict.fromkeys(
        (
            "BudgetRefused",
            "Prepared",
            "Project",
            "configured",
            "has_outcome",
            "load_trace",
            "prepare",
        ),
        "project",
    ),
    **dict.fromkeys(
        (
            "POLICY_CHECK_SAMPLES",
            "REQUESTS",
            "SAMES",
            "AggregateRequest",
            "AttributeRequest",
            "AttributionOptions",
            "DecisionRequest",
            "FixRequest",
            "PairsRequest",
            "ReplayCheckRequest",
            "RolloutRequest",
            "WhyRequest",
        ),
        "requests",
    ),
    **dict.fromkeys(
        (
            "aggregate_run",
            "attribute_run",
            "attribute_traces_run",
            "budget_for",
            "fix_run",
            "pairs_run",
            "run",
            "step_arg",
            "why_run",
        ),
        "runs",
    ),
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
