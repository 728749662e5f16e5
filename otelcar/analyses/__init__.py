"""The application seam: the analyses a user starts on recorded traces, as every front end
(the CLI, the MCP server, the web console) starts them.

- :mod:`.requests`: the frozen request type of each analysis, every option declared once
  (:mod:`.options`); the front ends' options, tool arguments and forms are made from them.
- :mod:`.runs`: :func:`run` of a request, and the coroutine functions it calls, with the
  defaults of the project's ``otelcar.toml`` filled in.
- :mod:`.live`: the run made ready for live replay on the user's agent.
"""

from otelcar.analyses.live import (
    kept_ready,
    live_check,
    live_prepared,
    live_ready,
    live_rollouts,
)
from otelcar.analyses.options import Option, Request, RequestError, Spec, option, specs
from otelcar.analyses.requests import (
    POLICY_CHECK_SAMPLES,
    REQUESTS,
    SAMES,
    AttributeRequest,
    DecisionRequest,
    FixRequest,
    ReplayCheckRequest,
    RolloutRequest,
    WhyRequest,
)
from otelcar.analyses.runs import (
    attribute_run,
    attribute_traces_run,
    budget_for,
    fix_run,
    run,
    step_arg,
    why_run,
)

__all__ = [
    "POLICY_CHECK_SAMPLES",
    "REQUESTS",
    "SAMES",
    "AttributeRequest",
    "DecisionRequest",
    "FixRequest",
    "Option",
    "ReplayCheckRequest",
    "Request",
    "RequestError",
    "RolloutRequest",
    "Spec",
    "WhyRequest",
    "attribute_run",
    "attribute_traces_run",
    "budget_for",
    "fix_run",
    "kept_ready",
    "live_check",
    "live_prepared",
    "live_ready",
    "live_rollouts",
    "option",
    "run",
    "specs",
    "step_arg",
    "why_run",
]
