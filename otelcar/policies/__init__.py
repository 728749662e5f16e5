"""Resample policies: who re-decides a step (LLM policies) and who answers a tool call the
recording cannot serve (tool policies), keyed by step kind and name."""

from otelcar.policies.base import (
    Decision,
    DecisionRequest,
    LLMPolicy,
    PolicyError,
    PolicyUnavailable,
    ToolPolicy,
    ToolRequest,
)
from otelcar.policies.mocks import RecordedOnlyToolPolicy, StaticLLMPolicy, StaticToolPolicy
from otelcar.policies.openai_compat import OpenAICompatiblePolicy
from otelcar.policies.python import CallableLLMPolicy, CallableToolPolicy, KeywordToolPolicy
from otelcar.policies.registry import PolicyRegistry, policy_types, register_policy_type
from otelcar.policies.simulated import SimulatedToolPolicy

__all__ = [
    "CallableLLMPolicy",
    "CallableToolPolicy",
    "Decision",
    "DecisionRequest",
    "KeywordToolPolicy",
    "LLMPolicy",
    "OpenAICompatiblePolicy",
    "PolicyError",
    "PolicyRegistry",
    "PolicyUnavailable",
    "RecordedOnlyToolPolicy",
    "SimulatedToolPolicy",
    "StaticLLMPolicy",
    "StaticToolPolicy",
    "ToolPolicy",
    "ToolRequest",
    "policy_types",
    "register_policy_type",
]
