"""The replay harness with the OpenAI-compatible policy against the real local model server
(llama-cpp-python with gemma-3-270m, started by the session fixture in conftest.py)."""

from __future__ import annotations

import asyncio

import pytest

from otelcar import read_otlp
from otelcar.messages import Message
from otelcar.policies import (
    DecisionRequest,
    OpenAICompatiblePolicy,
    PolicyRegistry,
    StaticToolPolicy,
)
from otelcar.replay import Environment, Plan, Resample, load_run, run_plan
from tests.conftest import NEW_CONTENT, OTLP

pytestmark = pytest.mark.slow


def _policy(server) -> OpenAICompatiblePolicy:
    return OpenAICompatiblePolicy(
        base_url=server.base_url,
        model=server.model,
        temperature=1.0,
        max_tokens=64,
        max_concurrency=1,
    )


def _rollouts(server, seed: int) -> list[tuple]:
    run = load_run(NEW_CONTENT, read_otlp([OTLP / "new_content.traces.jsonl"]))
    registry = PolicyRegistry().register("llm", _policy(server))
    registry.register("tool:*", StaticToolPolicy({"*": "ok"}))  # new calls: a mock result
    result = run_plan(
        run, Plan((Resample(1),)), Environment(registry), rollouts=1, seed=seed, concurrency=1
    )
    # A rollout the model keeps going past the horizon + slack is cut ("truncated", not
    # judged): that is where it ends, not a failure of the replay.
    assert all(r.status in ("final", "horizon", "truncated") for r in result.rollouts), (
        result.errors
    )
    assert result.cost["llm_calls"] >= 1
    return [[(d.origin, d.action) for d in r.decisions] for r in result.rollouts]


def test_seeded_rollouts_reproduce_exactly(local_model_server):
    first = _rollouts(local_model_server, seed=3)
    assert first[0][0][0].startswith("policy:")
    assert _rollouts(local_model_server, seed=3) == first


def test_the_policy_passes_the_seed_to_the_server(local_model_server):
    policy = _policy(local_model_server)

    def answer(seed: int) -> str | None:
        request = DecisionRequest(
            messages=(Message("user", "Invent a name for a cat. Answer with the name only."),),
            tools=None,
            params={},
            model=None,
            seed=seed,
            step=None,
        )
        return asyncio.run(policy.decide(request)).message.content

    answers = [answer(seed) for seed in (1, 2, 3, 4)]
    assert answer(1) == answers[0]
    assert len(set(answers)) > 1


def test_in_process_llama_cpp_policy_from_config_reproduces(local_model_path):
    from otelcar.project_config import parse_config

    config = parse_config(
        {
            "policies": {
                "llm": {
                    "type": "llama-cpp",
                    "model_path": str(local_model_path),
                    "temperature": 1.0,
                    "max_tokens": 16,
                }
            }
        }
    )
    policy = config.registry.llm("llm")
    request = DecisionRequest(
        messages=(Message("user", "Invent a name for a dog. Answer with the name only."),),
        tools=None,
        params={},
        model=None,
        seed=7,
        step=None,
    )
    first = asyncio.run(policy.decide(request)).message.content
    assert first and asyncio.run(policy.decide(request)).message.content == first
