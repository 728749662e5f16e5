"""Start-up time of the ``otelcar`` command next to the bare interpreter, in the same run.

Runs ``python -c pass``, ``otelcar --version`` and ``otelcar --help`` (the console script of
this venv) ``--repeat`` times each, interleaved, and prints the median wall time of each and
the ratio to ``python -c pass``. ``--version`` only needs click; ``--help``
imports every command module to list them. Timings are printed, never asserted.

    .venv/bin/python benchmarks/startup.py            # 20 repeats, a few seconds
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path


def _run(command: list[str]) -> float:
    """Wall seconds of one run."""
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    script = str(Path(sys.executable).with_name("otelcar"))
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "otelcar --version": [script, "--version"],
        "otelcar --help": [script, "--help"],
    }
    walls: dict[str, list[float]] = {name: [] for name in commands}
    for command in commands.values():  # one run each to warm the file cache
        _run(command)
    for _ in range(args.repeat):
        for name, command in commands.items():
            walls[name].append(_run(command))
    base = statistics.median(walls["python -c pass"])
    print(f"{'command':20} {'median s':>9} {'ratio':>6}")
    for name in commands:
        median = statistics.median(walls[name])
        print(f"{name:20} {median:9.3f} {median / base:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
