"""Live replay: the user's own agent runs the counterfactuals, otelcar answers its model
calls (DESIGN.md §5b, ``docs/live.md``).

- :mod:`.wire` — the model API on the wire (OpenAI Chat Completions, JSON and streamed);
- :mod:`.session` — one rollout: the plan played on the agent's own requests;
- :mod:`.endpoint` — the OpenAI-compatible server each rollout's agent talks to;
- :mod:`.agent` — the agent as a process, one run per rollout;
- :mod:`.executor` — all of it as an :class:`~otelcar.replay.execution.Executor`, the seam
  every analysis already runs its rollouts through.
"""

from otelcar.live.agent import AgentCommand, AgentError, AgentRun, run_agent
from otelcar.live.executor import LiveExecutor
from otelcar.live.session import Exchange, RolloutSession, context_difference

__all__ = [
    "AgentCommand",
    "AgentError",
    "AgentRun",
    "Exchange",
    "LiveExecutor",
    "RolloutSession",
    "context_difference",
    "run_agent",
]
