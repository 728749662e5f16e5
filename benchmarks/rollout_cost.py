"""Framework CPU per policy call of ``attribute``, by outcome kind and trace length.

For each length ``n`` the script builds the scripted ``single_culprit(n, n // 2)`` scenario
(:mod:`otelcar.testing.scenarios`: a seeded policy that costs one dict look-up, so all CPU is the
framework's) and attributes it twice in the same run, with the same seed:

* ``function``: the scenario's own ``function`` outcome (a Python function over the
  rollout's steps table, as a user writes one): every rollout's steps table is built;
* ``tool_called``: the equivalent built-in outcome (``act`` called with ``v = "BAD"``),
  judged on the rollout's events: no table is built.

Both must give the same verdict, rollouts and policy calls (the script exits 1 otherwise).
When the peer agent_replay is installed (``pip install -r benchmarks/requirements-peers.txt``:
a benchmark-only requirement), its ``attribute`` runs in the same process on two agents, and
the ratio of CPU per policy call is printed for each: the chain agent of
``reference/peers.md`` §4.1 (LLM steps only: the agent of issue 19's figure), and the same
chain with a tool call after every LLM step (the shape of otelcar's scenario, whose every
decision calls a tool: the same work per policy call on both sides).
It prints CPU time (this process), policy calls, rollouts, CPU per policy call and per
rollout, and the ratio of the two outcome kinds. Timings are printed, never asserted.

Each measurement runs in a fresh interpreter (``--in-process`` keeps them in this one), in
``--repeat`` interleaved rounds, and the table keeps each one's least CPU. Run ``python
benchmarks/rollout_cost.py`` (``--sizes 10,30`` by default, about three minutes on 2 cores).
See ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

from otelcar.attribution import attribute
from otelcar.outcome import ToolCalled
from otelcar.replay import load_run
from otelcar.testing import scenarios as synthetic


def measure(n: int, outcome_kind: str, seed: int, rollouts: int | None) -> dict:
    scenario = synthetic.single_culprit(n, n // 2)
    steps, registry, function_outcome = synthetic.build(scenario)
    outcome = function_outcome if outcome_kind == "function" else ToolCalled("act", {"v": "BAD"})
    run = load_run(steps["trace_id"][0], steps)
    options = {"seed": seed} if rollouts is None else {"seed": seed, "rollouts": rollouts}
    start = time.process_time()
    result = attribute(run, registry=registry, outcome=outcome, **options).to_dict()
    cpu = time.process_time() - start
    cost = result["cost"]
    return {
        "cpu_s": cpu,
        "calls": cost["llm_calls"],
        "rollouts": cost["rollouts_run"],
        "verdict": (result.get("verdict"), result.get("culprit")),
    }


PEER_ROLLOUTS = 60


def measure_peer(steps: int, seed: int, *, tools: bool = False) -> dict | None:
    """agent_replay's framework CPU per policy call, on the chain agent of
    ``reference/peers.md`` §4.1 with ``steps`` steps (each step's inputs hold the previous
    output, 3-way benign noise everywhere, step ``0.6 · steps`` emits BAD w.p. 0.6;
    contrastive, R = 60), in this process. With ``tools`` every LLM step is followed by a
    tool call (``ctx.tool("act", …)``, not resamplable) whose result is the next step's
    input: the shape of otelcar's scenario, where every decision calls the tool ``act``.
    Policy calls are the LLM steps' ``produce`` calls. ``None`` when agent_replay is not
    installed (``pip install -r benchmarks/requirements-peers.txt``)."""
    try:
        import agent_replay
    except ImportError:
        return None
    calls = [0]

    def agent(ctx) -> dict:
        previous, bad = "start", False
        for i in range(steps):

            def produce(i: int = i) -> str:
                calls[0] += 1
                if i == round(0.6 * steps) and ctx.rng.random() < 0.6:
                    return "BAD"
                return f"s{i}-{ctx.rng.randrange(3)}"

            action = ctx.llm(f"step{i}", produce, previous=previous)
            bad = bad or action == "BAD"
            previous = (
                ctx.tool("act", lambda a=action: f"ok: {a}", resamplable=False, action=action)
                if tools
                else action
            )
        return {"bad": bad}

    def verifier(result: dict) -> float:
        return 0.0 if result["bad"] else 1.0

    for record_seed in range(seed, seed + 100):  # the first seed whose run fails
        trajectory = agent_replay.record(
            agent, session_id="bench", seed=record_seed, verifier=verifier
        )
        if trajectory.outcome_score is not None and trajectory.outcome_score < 0.5:
            break
    calls[0] = 0
    start = time.process_time()
    result = agent_replay.attribute(trajectory, agent, verifier, rollouts=PEER_ROLLOUTS)
    cpu = time.process_time() - start
    found = getattr(result, "culprit", None)
    culprit = getattr(found, "name", None) or getattr(found, "index", None)
    return {
        "cpu_s": cpu,
        "calls": calls[0],
        "culprit": culprit,
        "version": agent_replay.__version__,
    }


def isolated(what: str, n: int, seed: int, rollouts: int | None) -> dict | None:
    """One measurement (``function``, ``tool_called``, ``peer`` or ``peer-tools``) in a fresh
    interpreter, warmed on a 3-step trace first, so no measurement runs on a heap another one
    grew (both libraries remember things per process, and a bigger heap makes every later
    garbage collection slower)."""
    command = [sys.executable, __file__, "--measure", what, "--sizes", str(n), "--seed", str(seed)]
    if rollouts is not None:
        command += ["--rollouts", str(rollouts)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"measurement {what} n={n} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure_one(
    what: str, n: int, seed: int, rollouts: int | None, *, warm: bool = False
) -> dict | None:
    """One measurement; ``warm``: after the same one on a 3-step trace, so the timed run pays
    no first-use costs (modules loaded on first use, code paths run once) but shares no
    remembered values with it (another trace)."""
    if warm:
        measure_one(what, 3, seed + 1, rollouts)
    if what in ("function", "tool_called"):
        row = measure(n, what, seed, rollouts)
        row["verdict"] = list(row["verdict"])
        return row
    return measure_peer(n, seed, tools=what == "peer-tools")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,30", help="trace lengths (decisions)")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--rollouts", type=int, default=None, help="fixed rollouts per plan")
    parser.add_argument(
        "--no-peer", action="store_true", help="skip agent_replay even when it is installed"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="rounds per size, each running otelcar's two outcome kinds and the peer in turn; "
        "the table keeps each one's least CPU (the machine's speed drifts between runs)",
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="run every measurement in this process (quicker; by default each runs in a "
        "fresh interpreter)",
    )
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # one isolated measurement
    args = parser.parse_args(argv)
    if args.measure:
        n = int(args.sizes.split(",")[0])
        print(json.dumps(measure_one(args.measure, n, args.seed, args.rollouts, warm=True)))
        return 0
    run_one = measure_one if args.in_process else isolated
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parent,
        check=False,
    ).stdout.strip()
    print(f"machine: {platform.platform()}; Python {platform.python_version()}; otelcar {commit}")
    print(
        "| n | outcome | CPU s | policy calls | rollouts | CPU ms / call | CPU ms / rollout |"
        "\n|---|---|---|---|---|---|---|"
    )
    failed = False
    rounds = max(1, args.repeat)
    for n in (int(x) for x in args.sizes.split(",")):
        rows: dict[str, dict] = {}
        peers: dict[bool, dict] = {}
        for _ in range(rounds):  # interleaved, so a slow spell of the machine hits all
            for kind in ("function", "tool_called"):
                row = run_one(kind, n, args.seed, args.rollouts)
                assert row is not None
                if kind not in rows or row["cpu_s"] < rows[kind]["cpu_s"]:
                    rows[kind] = row
            for tools in (False, True):
                what = "peer-tools" if tools else "peer"
                mine = None if args.no_peer else run_one(what, n, args.seed, args.rollouts)
                if mine is not None and (
                    tools not in peers or mine["cpu_s"] < peers[tools]["cpu_s"]
                ):
                    peers[tools] = mine
        for kind, row in rows.items():
            print(
                f"| {n} | {kind} | {row['cpu_s']:.2f} | {row['calls']} | {row['rollouts']} | "
                f"{row['cpu_s'] / max(row['calls'], 1) * 1e3:.3f} | "
                f"{row['cpu_s'] / max(row['rollouts'], 1) * 1e3:.2f} |"
            )
        a, b = rows["function"], rows["tool_called"]
        ours = b["cpu_s"] / max(b["calls"], 1)
        ours_function = a["cpu_s"] / max(a["calls"], 1)
        same = (a["calls"], a["rollouts"], a["verdict"]) == (
            b["calls"],
            b["rollouts"],
            b["verdict"],
        )
        print(
            f"n={n}: tool_called / function CPU = {b['cpu_s'] / a['cpu_s']:.2f}; "
            f"same result: {same}"
        )
        failed |= not same
        if not peers:
            print(
                "agent_replay: skipped (--no-peer)"
                if args.no_peer
                else "agent_replay: not measured (pip install -r benchmarks/requirements-peers.txt)"
            )
            continue
        for tools, peer in sorted(peers.items()):
            peer_ms = peer["cpu_s"] / max(peer["calls"], 1) * 1e3
            agent = (
                "the same shape as otelcar's scenario (a tool call after every LLM step)"
                if tools
                else "the chain agent of peers.md §4.1 (LLM steps only, no tool calls)"
            )
            print(
                f"agent_replay {peer['version']} (same run), {n} steps, {agent}: contrastive "
                f"R={PEER_ROLLOUTS}: CPU {peer['cpu_s']:.2f} s, {peer['calls']} policy calls, "
                f"{peer_ms:.3f} ms / call, culprit {peer['culprit']}; otelcar (tool_called) / "
                f"agent_replay CPU per policy call = {ours * 1e3 / peer_ms:.1f}× (goal: ≤ 2×); "
                f"least CPU of {rounds} interleaved rounds"
            )
            print(
                f"  otelcar (function outcome: a steps table per rollout) / agent_replay CPU per "
                f"policy call = {ours_function * 1e3 / peer_ms:.1f}×"
            )
    if failed:
        print("FAILED: the two outcome kinds disagreed", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
