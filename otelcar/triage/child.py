"""The triage engine as a child process of ``otelcar collect --triage``: analyses never share
the receiver's interpreter (intake keeps acknowledging and storing whatever triage does),
and a child that dies is started again, resuming its queue from the store."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

#: Seconds before a child that died is started again, and how many restarts at most.
RESTART_DELAY_S = 1.0
MAX_RESTARTS = 20


class TriageChild:
    """``python -m otelcar.cli --store STORE triage run [--config PATH] --background``,
    supervised on a thread: :meth:`start`, then :meth:`stop` (SIGTERM, then a kill after
    ``grace_s``). Its lines go to this process's stdout and stderr."""

    def __init__(self, store: Path, config: Path | None, *, debug: bool = False) -> None:
        self.argv = [sys.executable, "-m", "otelcar.cli", "--store", str(store)]
        self.argv += ["--debug"] if debug else []
        self.argv += ["triage", "run", "--background"]
        self.argv += ["--config", str(config)] if config is not None else []
        self.process: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._supervise, name="triage", daemon=True)

    def start(self) -> None:
        self._spawn()
        self._thread.start()

    def _spawn(self) -> None:
        with self._lock:
            if not self._stopping.is_set():
                self.process = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL)

    def _supervise(self) -> None:
        while not self._stopping.is_set():
            process = self.process
            if process is None:
                return
            status = process.wait()
            if self._stopping.is_set():
                return
            if status == 2 or self.restarts >= MAX_RESTARTS:  # a usage or config error
                print(f"triage: stopped (status {status}); intake goes on", flush=True)
                return
            self.restarts += 1
            print(f"triage: the triage process ended (status {status}); restarting", flush=True)
            if self._stopping.wait(RESTART_DELAY_S):
                return
            self._spawn()

    def stop(self, grace_s: float = 10.0) -> None:
        with self._lock:
            self._stopping.set()
            process = self.process
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
