"""The main job end to end on the embedded local model (``make demo``).

1. prepare the local model (assembled once into the otelcar data directory);
2. start the model server and ``otelcar collect`` on 127.0.0.1 (free ports);
3. run the refund agent with seeds 1, 2, … until a run fails (at most ``--max-runs``);
4. ``otelcar replay`` (fidelity), ``otelcar attribute``, then on the culprit step of the
   failing trace: its re-decisions kept as a timeline and diffed against the recorded run
   (``otelcar rollout --save``, ``otelcar diff``), ``otelcar why`` and ``otelcar fix``, and
   the fixes as preference pairs (``otelcar export pairs``), with ``otelcar.toml``;
5. write the HTML report (``otelcar report --html``), stop everything it started, and print
   where the results are.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def _otelcar(store: Path, *args: str, env: dict[str, str] | None = None, server: Any = None) -> int:
    """Run ``otelcar --store STORE ARGS``; its exit status. When ``server`` (the model server)
    died meanwhile, raise its :class:`~otelcar.model.ServerDied` instead."""
    command = [sys.executable, "-m", "otelcar.cli", "--store", str(store), *args]
    print("$ otelcar " + " ".join(args), flush=True)
    code = subprocess.call(command, env=env, cwd=ROOT)
    if code != 0 and server is not None:
        server.check()
    return code


def _wait_for_trace(store: Path, trace_id: str, timeout_s: float = 60) -> None:
    from otelcar import Store

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if trace_id in Store(store, create=False).traces()["trace_id"].to_list():
                return
        except Exception:
            pass
        time.sleep(0.5)
    raise SystemExit(f"trace {trace_id} did not reach the store")


def _attribute_why_fix(
    store: Path,
    trace_id: str,
    out: Path,
    args: argparse.Namespace,
    env: dict[str, str],
    server: Any,
) -> int:
    """attribute, then why + fix on the culprit, then the HTML report; 0 when all of it ran."""
    config = str(HERE / "otelcar.toml")
    seed = ["--seed", str(args.seed)]
    attribution = out / "attribution.json"
    if args.rollouts:
        budget = ["--rollouts", str(args.rollouts)]
    else:
        budget = ["--max-rollouts", str(args.max_rollouts)]
    # Refutation on 16 rollouts per plan: enough for the culprit's recheck on the local model.
    refute = ["--refute-rollouts", str(args.refute_rollouts)]
    code = _otelcar(
        store, "attribute", trace_id, "-c", config, *budget, *seed, *refute,
        "--json", str(attribution), env=env, server=server,
    )  # fmt: skip
    if code != 0 or not attribution.exists():
        print("attribution did not finish; see above", flush=True)
        return code or 1
    culprit = json.loads(attribution.read_text()).get("culprit")
    results = [str(attribution)]
    if culprit is None:
        print("no culprit step at this budget: why/fix skipped", flush=True)
    else:
        # Keep re-decisions of the culprit as a timeline, and say where they part from the
        # recorded run (docs/timelines.md).
        redecided = ["--resample", str(culprit), "-n", str(args.timeline_rollouts), *seed]
        keep = ["--save", "redecide-culprit", "--overwrite"]
        rollout = ["rollout", trace_id, "-c", config, *redecided, *keep]
        if args.timeline_rollouts and _otelcar(store, *rollout, env=env, server=server) == 0:
            diff = ["--json", str(out / "diff.json"), "--html", str(out / "diff.html")]
            _otelcar(store, "diff", trace_id, "redecide-culprit", *diff)
        # The same decision = the same tool with the same arguments (the wrong order id).
        common = ["--step", str(culprit), "-c", config, "--same", "tool+args", *seed]
        common += ["--samples", str(args.samples)]
        # `fix` runs `why` first and writes both results.
        why, fix = out / "why.json", out / "fix.json"
        fix_args = ["--json", str(fix), "--why-json", str(why)]
        if _otelcar(store, "fix", trace_id, *common, *fix_args, env=env, server=server) == 0:
            results += [str(why), str(fix)]
            # The validated fixes as preference pairs (no model call: docs/why-fix.md).
            pairs = ["-o", str(out / "pairs.jsonl"), "--format", "dpo"]
            _otelcar(store, "export", "pairs", str(fix), "-c", config, *pairs)
    html = out / "report.html"
    _otelcar(store, "report", *results, "--html", str(html))
    print(f"\nresults in {out}: {', '.join(Path(r).name for r in results)}", flush=True)
    print(f"HTML report: {html}", flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "demo-output")
    parser.add_argument("--max-runs", type=int, default=8)
    parser.add_argument("--rollouts", type=int, help="fixed rollouts per plan (default: adaptive)")
    parser.add_argument(
        "--refute-rollouts", type=int, default=16, help="rollouts per plan of each refutation"
    )
    parser.add_argument(
        "--max-rollouts", type=int, default=32, help="adaptive mode: most rollouts per plan"
    )
    parser.add_argument("--samples", type=int, default=10, help="re-decisions per why/fix arm")
    parser.add_argument(
        "--timeline-rollouts",
        type=int,
        default=8,
        help="re-decisions of the culprit kept as a timeline and diffed (0: skip)",
    )
    parser.add_argument("--seed", type=int, default=0, help="base seed of the replay")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from otelcar.errors import OtelcarError
    from otelcar.model.prepare import prepare_model
    from otelcar.model.server import ModelServer
    from otelcar.receiver.child import start_collect

    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    store = out / "store"
    server = ModelServer()
    collector = None
    try:
        print("preparing the local model (once)…", flush=True)
        prepare_model()
        collector, ports = start_collect(store, out / "collector.ready", cwd=ROOT)
        with server:
            print(f"model server at {server.base_url}", flush=True)
            os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{ports['grpc_port']}"
            os.environ["OTEL_EXPORTER_OTLP_PROTOCOL"] = "grpc"
            return _run(server, store, out, args)
    except (Exception, KeyboardInterrupt) as exc:
        if args.debug:
            raise
        # A dead model server explains whatever failed after it died: say that, in one line.
        death = server.death()
        reason = death or (str(exc) if isinstance(exc, OtelcarError) else repr(exc))
        print(f"error: {reason}", file=sys.stderr, flush=True)
        return 130 if isinstance(exc, KeyboardInterrupt) and death is None else 1
    finally:
        if collector is not None:
            collector.send_signal(signal.SIGTERM)
            collector.wait(120)


def _run(server: Any, store: Path, out: Path, args: argparse.Namespace) -> int:
    """Record runs until one fails, then replay, attribute, why/fix and report it."""
    from examples.refund_agent.agent import traced_episode

    failing = None
    for seed in range(1, args.max_runs + 1):
        episode = traced_episode(server.base_url, server.model, seed=seed)
        print(
            f"run {seed}: trace {episode.trace_id} "
            f"{'FAILED' if episode.failed else 'ok'} refunds={episode.refunds}",
            flush=True,
        )
        if episode.failed:
            failing = episode
            break
    if failing is None:
        print("no failing run recorded; try --max-runs", flush=True)
        return 1
    _wait_for_trace(store, failing.trace_id)
    env = {**os.environ, "OPENAI_BASE_URL": server.base_url}
    _otelcar(store, "show", failing.trace_id, server=server)
    config = str(HERE / "otelcar.toml")
    _otelcar(store, "replay", failing.trace_id, "-c", config, env=env, server=server)
    return _attribute_why_fix(store, failing.trace_id, out, args, env, server)


if __name__ == "__main__":
    sys.exit(main())
