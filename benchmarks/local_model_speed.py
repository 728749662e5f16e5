"""Decisions per second of the embedded model on the refund agent, before and after, in the
same run.

``before`` is the model server as it was: llama-cpp-python's grammar-first sampler chain
(``OTELCAR_GRAMMAR_SAMPLER=chain``), the server's default ``--logits_all true`` and one
prompt-evaluation thread; ``after`` is today's default: the grammar prefilter,
``--logits_all false`` and every CPU for prompt evaluation. With ``--separate``, ``chain``
(today's server with the old sampler) shows the sampler's share apart.
The servers run side by side on the same GGUF with the thread count ``make demo`` uses. The
script plays ``--episodes`` episodes of ``examples/refund_agent`` (the triage agent's forced
lookup, then the refunds agent's free decision: two tool-mode decisions each) against each
server in turn, rotating the order episode by episode so that whatever else the machine does
weighs on all alike, and reports decisions per second, seconds per decision, the ratios, and
whether all servers decided identically (they must: neither change alters an output).
Timings are printed, never asserted.

    .venv/bin/python benchmarks/local_model_speed.py               # 12 episodes, ~3 min
    .venv/bin/python benchmarks/local_model_speed.py --episodes 4  # a quick look
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


class CountingClient:
    """The openai client, counting chat calls and recording what each decided."""

    def __init__(self, base_url: str) -> None:
        import openai

        self.client = openai.OpenAI(base_url=base_url, api_key="local", max_retries=0, timeout=600)
        self.decisions: list[str] = []
        self.chat = self
        self.completions = self

    def create(self, **body: Any) -> Any:
        response = self.client.chat.completions.create(**body)
        self.decisions.append(json.dumps(response.choices[0].message.model_dump(), sort_keys=True))
        return response


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=12)
    parser.add_argument("--separate", action="store_true", help="also the old sampler alone")
    args = parser.parse_args()
    from examples.refund_agent.agent import run_episode
    from otelcar.model import ModelServer, prepare_model
    from otelcar.model.chat_format import GRAMMAR_SAMPLER_ENV

    path = prepare_model()
    configs = {
        "before": ({GRAMMAR_SAMPLER_ENV: "chain"}, ["--logits_all", "true"], 1),
        "after": ({GRAMMAR_SAMPLER_ENV: "prefilter"}, [], None),
    }
    if args.separate:
        configs["chain"] = ({GRAMMAR_SAMPLER_ENV: "chain"}, [], None)
    samplers = tuple(configs)
    servers = {
        s: ModelServer(path, env=env, extra_args=extra, n_threads_batch=batch_threads)
        for s, (env, extra, batch_threads) in configs.items()
    }
    try:
        for server in servers.values():
            server.start()
        clients = {s: CountingClient(servers[s].base_url) for s in samplers}
        for s in samplers:  # warm-up: load pages, first-request costs
            run_episode(clients[s], servers[s].model, seed=0)
            clients[s].decisions.clear()
        seconds: dict[str, list[float]] = {s: [] for s in samplers}
        calls: dict[str, int] = dict.fromkeys(samplers, 0)
        for episode in range(1, args.episodes + 1):
            shift = episode % len(samplers)
            order = samplers[shift:] + samplers[:shift]
            for s in order:
                before = len(clients[s].decisions)
                start = time.perf_counter()
                run_episode(clients[s], servers[s].model, seed=episode)
                seconds[s].append(time.perf_counter() - start)
                calls[s] += len(clients[s].decisions) - before
            print(
                f"episode {episode}: " + ", ".join(f"{s} {seconds[s][-1]:.2f} s" for s in samplers)
            )
    finally:
        for server in servers.values():
            server.stop()
    rate = {s: calls[s] / sum(seconds[s]) for s in samplers}
    print()
    print(f"{'sampler':10} {'decisions':>9} {'total s':>8} {'s/decision':>10} {'decisions/s':>11}")
    for s in samplers:
        print(
            f"{s:10} {calls[s]:9d} {sum(seconds[s]):8.1f} {sum(seconds[s]) / calls[s]:10.2f} "
            f"{rate[s]:11.3f}"
        )
    for s in samplers[1:]:
        ratios = [a / b for a, b in zip(seconds["before"], seconds[s], strict=True)]
        print(
            f"\n{s} / before: {rate[s] / rate['before']:.2f}x decisions per second "
            f"(median per-episode ratio {statistics.median(ratios):.2f}x)"
        )
    same = all(clients[s].decisions == clients["before"].decisions for s in samplers)
    print(f"identical decisions: {'yes' if same else 'NO'} ({calls['before']} compared)")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
