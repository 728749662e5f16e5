"""``otelcar collect`` as a child process on free ports: for demos, tests and benchmarks that
need a real receiver in another process (to kill it, measure it, or keep it apart)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from otelcar.errors import OtelcarError


class CollectorStartError(OtelcarError):
    """The ``otelcar collect`` child exited, or was not ready in time."""


def start_collect(
    store: Path,
    ready_file: Path,
    *,
    stdout: int | IO[Any] | None = subprocess.DEVNULL,
    text: bool = False,
    timeout_s: float = 60.0,
    cwd: Path | None = None,
    options: Sequence[str] = (),
) -> tuple[subprocess.Popen[Any], dict[str, int]]:
    """Start ``python -m otelcar.cli --store STORE collect`` with gRPC and HTTP on free ports
    of 127.0.0.1 and wait until it has written ``ready_file``; return the process and its
    ports (``{"grpc_port": …, "http_port": …}``). Its output (stderr folded into stdout)
    goes to ``stdout`` (as text with ``text``, as for ``subprocess.Popen``). Raises
    :class:`CollectorStartError` when the child exits first (quoting its output when
    ``stdout`` is ``subprocess.PIPE``) or is not ready after ``timeout_s`` (the child is
    killed then). ``options`` are more ``collect`` options (``--max-lag``, ``--derive``). The
    caller stops it (SIGTERM drains; see ``collect``).
    """
    ready_file.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "otelcar.cli", "--store", str(store), "collect"]
    argv += ["--grpc-port", "0", "--http-port", "0", "--ready-file", str(ready_file), *options]
    process = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.STDOUT, cwd=cwd, text=text)
    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            output = process.stdout.read() if process.stdout else ""
            if isinstance(output, bytes):
                output = output.decode(errors="replace")
            raise CollectorStartError(
                f"otelcar collect exited with status {process.returncode} before it was "
                f"ready{': ' + output if output else ''}"
            )
        try:
            ports = json.loads(ready_file.read_text())
            return process, {"grpc_port": ports["grpc_port"], "http_port": ports["http_port"]}
        except (OSError, ValueError, KeyError):
            pass  # not written yet, or half written
        if time.monotonic() > deadline:
            process.kill()
            process.wait()
            raise CollectorStartError(f"otelcar collect was not ready after {timeout_s} s")
        time.sleep(0.05)
