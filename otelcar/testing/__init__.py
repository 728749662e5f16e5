"""Scripted agents and policies, for trying otelcar and for testing code built on it.

No model and no network: every run is built through the real trajectory builder from GenAI
spans, as an instrumented agent records it, and every policy is seeded.

* **Scenarios with a planted answer** (:mod:`.scenarios`): an agent of ``n`` tool decisions
  whose re-decisions draw from known distributions, so the step a correct attribution names
  is known. :func:`build` gives its steps table, a :class:`~otelcar.PolicyRegistry` of
  seeded policies and its ``function`` outcome; :func:`single_culprit`, :func:`intermittent`,
  :func:`self_correction_trap`, :func:`and_case`, :func:`or_case` and :func:`null_case` are
  the standard shapes.
* **Recorded conversations** (:mod:`.conversations`): :func:`conversation_steps` makes the
  steps table of any conversation from plain messages (:class:`Turn`: an action and its tool
  results), for ``why`` and ``fix``.
* **Fixed policies**: :class:`StaticLLMPolicy` (given answers in turn),
  :class:`StaticToolPolicy` (results by tool name).

>>> from otelcar.testing import build, single_culprit
>>> steps, registry, outcome = build(single_culprit(4, 2))
>>> steps.filter(steps["kind"] == "llm").height  # four tool decisions and the final answer
5
"""

from otelcar.policies.mocks import StaticLLMPolicy, StaticToolPolicy
from otelcar.testing.conversations import Turn, conversation_steps
from otelcar.testing.scenarios import (
    NOISE,
    TRACE_ID,
    Choices,
    Scenario,
    and_case,
    build,
    intermittent,
    null_case,
    or_case,
    self_correction_trap,
    single_culprit,
    steps_table,
    tool_result,
)

__all__ = [
    "NOISE",
    "TRACE_ID",
    "Choices",
    "Scenario",
    "StaticLLMPolicy",
    "StaticToolPolicy",
    "Turn",
    "and_case",
    "build",
    "conversation_steps",
    "intermittent",
    "null_case",
    "or_case",
    "self_correction_trap",
    "single_culprit",
    "steps_table",
    "tool_result",
]
