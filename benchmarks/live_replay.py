"""Live replay's costs, each against a baseline measured in the same run (issue 43).

1. **The endpoint's own overhead per request.** The official ``openai`` client sends the same
   chat request (a short conversation, three tools) N times, one after the other:
   *direct* to a model server, and *through otelcar's endpoint* in a live rollout that
   forwards every request to an ``openai`` policy pointing at the same server (the path every
   re-decided request of a live rollout takes: parse, session, request cache, policy call,
   render). Median wall time of each and the difference. Also a *held* request: one the
   endpoint answers from the trace (every request of a live rollout before its intervention),
   which makes no second HTTP call, so its difference from a direct call is the endpoint's
   own overhead, measured rather than subtracted. Two model servers: the scripted one
   of ``tests/agents`` (answers in microseconds: the difference is the endpoint's overhead,
   goal ≤ 2 ms) and, when it is installed, the embedded model (``otelcar model serve``:
   goal ≤ 1.2× the direct call's wall time).
2. **Live rollouts per second against the rebuilt agent** on the same agent and model: the
   workflow agent of ``tests/agents/cleanup.py``, its trace recorded once through the
   openai-v2 instrumentation, ``R`` rollouts of ``resample(act)`` with the agent's own brain as
   the policy, run live (``--concurrency`` agent processes at once) and on the rebuilt agent.

Prints a table; never asserts a timing. ``python benchmarks/live_replay.py`` (about a minute
on 2 cores; ``--no-model`` skips the embedded model, ``--requests N``, ``--rollouts R``).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import openai  # noqa: E402
import polars as pl  # noqa: E402

import otelcar  # noqa: E402
from otelcar.live import AgentCommand, LiveExecutor  # noqa: E402
from otelcar.live.endpoint import ModelEndpoint  # noqa: E402
from otelcar.live.session import RolloutSession  # noqa: E402
from otelcar.policies.openai_compat import OpenAICompatiblePolicy  # noqa: E402
from otelcar.policies.registry import PolicyRegistry  # noqa: E402
from otelcar.replay import Environment, Plan, Resample, load_run, run_plan  # noqa: E402
from otelcar.schema import STEPS_SCHEMA  # noqa: E402
from tests.agents import cleanup  # noqa: E402
from tests.agents.model import ScriptedModel  # noqa: E402

MESSAGES = [
    {"role": "system", "content": cleanup.SYSTEM},
    {"role": "user", "content": cleanup.TASK},
]
TOOLS = [cleanup.LIST, cleanup.INFO, cleanup.DELETE]


def _timed(client: openai.OpenAI, model: str, n: int) -> list[float]:
    """Wall seconds of ``n`` sequential requests (after one warm-up)."""
    out = []
    for i in range(n + 1):
        started = time.perf_counter()
        client.chat.completions.create(
            model=model, messages=MESSAGES, tools=TOOLS, seed=i, max_tokens=16, temperature=0
        )
        if i:
            out.append(time.perf_counter() - started)
    return out


class _Loop:
    """An event loop in a thread: the endpoint answers on it while this thread is a client."""

    def __enter__(self) -> asyncio.AbstractEventLoop:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        return self.loop

    def __exit__(self, *exc: Any) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()


def overhead(base_url: str, model: str, n: int) -> tuple[float, float, float]:
    """(median direct, median through the endpoint, median of the forwarding hop alone: the
    policy's own call to the server, which a direct call does not make), seconds."""
    direct = _timed(openai.OpenAI(base_url=base_url, api_key="x", max_retries=0), model, n)
    empty = pl.DataFrame(schema=STEPS_SCHEMA)
    run = load_run("0" * 32, empty)  # no recorded decision: every request is forwarded
    policy = OpenAICompatiblePolicy(base_url=base_url, model=model, temperature=0)
    registry = PolicyRegistry().register("llm", policy)
    with _Loop() as loop:
        env = Environment(registry)
        with ModelEndpoint(loop) as endpoint:
            session = RolloutSession(run, Plan(), env, 0, 0, endpoint.new_token())
            url = endpoint.open(session)
            through = _timed(openai.OpenAI(base_url=url, api_key="x", max_retries=0), model, n)
        hop = asyncio.run_coroutine_threadsafe(_hop(policy, session, n), loop).result()
    return statistics.median(direct), statistics.median(through), hop


def held(base_url: str, model: str, n: int) -> float:
    """Median seconds of a request the endpoint answers from the trace: each of ``n``
    rollouts of a one-decision run whose recorded context is the benchmark's request sends it
    once (the official client, the same connection pool for all)."""
    from otelcar.messages import Message
    from otelcar.testing.conversations import Turn, conversation_steps

    start = [Message(m["role"], m["content"]) for m in MESSAGES]
    steps = conversation_steps("1" * 32, start, [Turn(Message("assistant", "Done."))])
    run = load_run("1" * 32, steps)
    with _Loop() as loop:
        env = Environment(PolicyRegistry())
        with ModelEndpoint(loop) as endpoint:
            client = openai.OpenAI(base_url=base_url, api_key="x", max_retries=0)
            times = []
            for i in range(n + 1):
                session = RolloutSession(run, Plan(), env, i, 0, endpoint.new_token())
                one = client.with_options(base_url=endpoint.open(session))
                started = time.perf_counter()
                one.chat.completions.create(model=model, messages=MESSAGES, seed=i, max_tokens=16)
                if i:
                    times.append(time.perf_counter() - started)
                assert session.exchanges[-1].answer.content == "Done.", "not held"
    return statistics.median(times)


async def _hop(policy: OpenAICompatiblePolicy, session: RolloutSession, n: int) -> float:
    """Median seconds of the policy's call alone, on the request the endpoint forwarded."""
    from otelcar.policies.base import DecisionRequest

    forwarded = session.exchanges[-1].request
    times = []
    for i in range(n):
        request = DecisionRequest(
            messages=forwarded.messages,
            tools=forwarded.tools,
            params=dict(forwarded.params),
            model=forwarded.model,
            seed=10_000 + i,
            step=None,
        )
        started = time.perf_counter()
        await policy.decide(request)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def embedded(n: int) -> tuple[float, float, float] | None:
    try:
        from otelcar.model.server import ModelServer

        with ModelServer() as server:
            return overhead(server.base_url, server.model, n)
    except Exception as exc:  # not installed here: say so, measure the rest
        print(f"embedded model: not measured ({type(exc).__name__}: {exc})")
        return None


def rollouts_per_second(rollouts: int, concurrency: int) -> tuple[float, float]:
    """(live, rebuilt) rollouts per second of resample(act) on the cleanup agent."""
    with tempfile.TemporaryDirectory() as tmp, ScriptedModel(cleanup.brain) as model:
        trace = Path(tmp) / "cleanup.jsonl"
        subprocess.run(
            [sys.executable, "-m", "tests.agents.run", "cleanup", "--base-url", model.base_url,
             "--out", str(trace), "--instrument", "openai-v2", "--seed", "7"],
            cwd=ROOT, check=True, capture_output=True,
        )  # fmt: skip
        steps = otelcar.read_otlp(trace)
    run = load_run(steps["trace_id"][0], steps)
    plan = Plan((Resample(run.decisions[2].step),))

    def registry() -> PolicyRegistry:
        from tests.test_counterfactual_agents import BrainPolicy

        made = PolicyRegistry().register("llm", BrainPolicy("cleanup"))
        made.register("tool:*", cleanup_tools())
        return made

    command = AgentCommand.parse(
        [sys.executable, "-m", "tests.agents.run", "cleanup", "--seed", "7"],
        cwd=ROOT,
        concurrency=concurrency,
    )
    started = time.perf_counter()
    run_plan(run, plan, Environment(registry()), rollouts=rollouts, executor=LiveExecutor(command))
    live = rollouts / (time.perf_counter() - started)
    started = time.perf_counter()
    run_plan(run, plan, Environment(registry()), rollouts=rollouts)
    rebuilt = rollouts / (time.perf_counter() - started)
    return live, rebuilt


def cleanup_tools() -> Any:
    """The agent's own tools on a fresh workspace per rollout (a sandboxed python policy)."""
    from otelcar.policies.python import KeywordToolPolicy

    return KeywordToolPolicy(factory=cleanup.make_tools, side_effects="sandboxed", name="tools")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--model-requests", type=int, default=8)
    parser.add_argument("--rollouts", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--no-model", action="store_true")
    args = parser.parse_args()

    with ScriptedModel(cleanup.brain) as scripted:
        direct, through, hop = overhead(scripted.base_url, "scripted", args.requests)
        answered = held(scripted.base_url, "scripted", args.requests)
    print(f"scripted model, {args.requests} requests each:")
    print(
        f"  direct {direct * 1e3:.2f} ms, through the endpoint {through * 1e3:.2f} ms, the "
        f"forwarding hop alone (the policy's call) {hop * 1e3:.2f} ms"
    )
    print(
        f"  through − direct {(through - direct) * 1e3:.2f} ms per request; the endpoint's own "
        f"work (through − direct − hop) {(through - direct - hop) * 1e3:.2f} ms (goal ≤ 2 ms)"
    )
    print(
        f"  a held request (answered from the trace, no second call) {answered * 1e3:.2f} ms: "
        f"{(answered - direct) * 1e3:+.2f} ms against a direct call (goal ≤ 2 ms)"
    )
    if not args.no_model:
        measured = embedded(args.model_requests)
        if measured is not None:
            direct, through, _ = measured
            print(f"embedded model, {args.model_requests} requests each (max_tokens 16):")
            print(
                f"  direct {direct:.3f} s, through the endpoint {through:.3f} s: "
                f"{through / direct:.2f}x (goal ≤ 1.2x)"
            )
    live, rebuilt = rollouts_per_second(args.rollouts, args.concurrency)
    print(
        f"rollouts of resample(act) on the cleanup agent ({args.rollouts}, "
        f"{args.concurrency} agent processes at once): live {live:.2f}/s, rebuilt "
        f"{rebuilt:.1f}/s ({rebuilt / live:.0f}x)"
    )


if __name__ == "__main__":
    main()
