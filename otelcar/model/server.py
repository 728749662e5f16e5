"""Serve the local model over the OpenAI-compatible API, as a child process on 127.0.0.1.

:class:`ModelServer` runs llama-cpp-python's FastAPI server (``python -m
otelcar.model.llama_server``: ``llama_cpp.server`` with the ``otelcar-gemma`` chat format
registered) on the prepared GGUF, waits until ``GET /v1/models`` answers, and stops it on
exit: SIGTERM, then SIGKILL after a grace period. Its output goes to a log file whose tail is
quoted in every start error. A server that dies while in use (a crash, the OOM killer) is
reported by :meth:`ModelServer.check` (and :meth:`ModelServer.death`) in one line with its exit
status or signal, its log file and the log's last lines; callers that see a refused
connection ask it why. On Linux the child also gets SIGTERM when the thread that
started it dies, so a killed test run leaves no server behind.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from otelcar.model.chat_format import CHAT_FORMAT
from otelcar.model.errors import INSTALL_HINT, ModelNotInstalled, ServerDied, ServerStartError
from otelcar.model.paths import MODEL_ALIAS, logs_dir
from otelcar.model.prepare import prepare_model

#: The chat format that keeps every message, honours ``seed`` and makes tool calls parse.
DEFAULT_CHAT_FORMAT = CHAT_FORMAT
DEFAULT_N_CTX = 2048
DEFAULT_SEED = 0
#: Prompt batch size. The chat format reuses the cached prompt prefix only in whole batches
#: (``chat_format.keep_aligned_prefix``), so a smaller batch reuses more of a shared prefix;
#: 64 keeps outputs identical to a fresh evaluation (measured) and saves a third of the time.
DEFAULT_N_BATCH = 64
_SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context")
_PORT_RETRIES = 3
# Idle OpenMP threads sleep instead of spinning: on a busy 2-core machine spinning threads
# made calls 3-10x slower and erratic (measured, docs/local-model.md). The caller's env wins.
_CHILD_ENV_DEFAULTS = {"OMP_WAIT_POLICY": "PASSIVE"}
_LIVE: weakref.WeakSet[ModelServer] = weakref.WeakSet()


class ModelServer:
    """A llama-cpp-python server for one model, bound to ``host`` (127.0.0.1 by default).

    Use as a context manager (``with ModelServer() as server: server.base_url``) or call
    :meth:`start` / :meth:`stop`. ``port=0`` picks a free port. ``model_path=None`` prepares
    the embedded default model. ``n_threads=None`` uses :func:`default_threads` (every CPU but
    one) for generation; ``n_threads_batch=None`` uses :func:`default_batch_threads` (every
    CPU) for prompt evaluation. ``env`` adds to the child's environment (which inherits ours,
    with ``OMP_WAIT_POLICY=PASSIVE`` unless set). Clients send ``model=server.model`` (any
    name is accepted).
    """

    def __init__(
        self,
        model_path: Path | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        chat_format: str | None = DEFAULT_CHAT_FORMAT,
        n_ctx: int = DEFAULT_N_CTX,
        seed: int = DEFAULT_SEED,
        n_threads: int | None = None,
        n_threads_batch: int | None = None,
        log_path: Path | None = None,
        startup_timeout_s: float = 120.0,
        stop_timeout_s: float = 10.0,
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.model_path = model_path
        self.host = host
        self.requested_port = port
        self.port: int | None = None
        self.chat_format = chat_format
        self.n_ctx = n_ctx
        self.seed = seed
        self.n_threads = n_threads or default_threads()
        self.n_threads_batch = n_threads_batch or default_batch_threads()
        self.requested_log_path = log_path
        self.log_path: Path | None = None
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.extra_args = tuple(extra_args)
        self.env = {**_CHILD_ENV_DEFAULTS, **os.environ, **(env or {})}
        self.model = MODEL_ALIAS
        self._process: subprocess.Popen[bytes] | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> ModelServer:
        """Start the server and block until it answers; raises :class:`ServerStartError`."""
        if self._process is not None:
            raise ServerStartError("this ModelServer is already started")
        _require_server_packages()
        model_path = prepare_model(self.model_path) if self.model_path is None else self.model_path
        if not Path(model_path).is_file():
            raise ServerStartError(f"model file not found: {model_path}")
        self.model_path = Path(model_path)
        for attempt in range(_PORT_RETRIES):
            self.port = self.requested_port or _free_port(self.host)
            self.log_path = self.requested_log_path or logs_dir() / f"model-server-{self.port}.log"
            self._spawn()
            try:
                self._wait_ready()
                return self
            except ServerStartError:
                in_use = "address already in use" in self.log_tail().lower()
                self.stop()
                if not (in_use and self.requested_port == 0 and attempt + 1 < _PORT_RETRIES):
                    raise
            except BaseException:  # Ctrl-C while waiting: never leave the child behind
                self.stop()
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after ``stop_timeout_s``); idempotent."""
        process, self._process = self._process, None
        _LIVE.discard(self)
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=self.stop_timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- state -----------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL, e.g. ``http://127.0.0.1:8000/v1``."""
        if self.port is None:
            raise ServerStartError("the server is not started")
        return f"http://{self.host}:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        """The server process id while it runs (``None`` before start and after stop)."""
        return self._process.pid if self._process is not None else None

    def poll(self) -> int | None:
        """The server's exit status if it has exited by itself, else ``None``."""
        return self._process.poll() if self._process is not None else None

    def death(self, n_lines: int = 5) -> str | None:
        """``None`` while the server runs (or before it starts), else one line: how it ended
        (exit status, or the signal that killed it), its log file and the log's last lines."""
        if self._process is None:
            return None
        status = self._process.poll()
        if status is None:
            return None
        how = f"exited with status {status}"
        if status < 0:
            try:
                how = f"was killed by signal {-status} ({signal.Signals(-status).name})"
            except ValueError:
                how = f"was killed by signal {-status}"
        tail = " | ".join(line.strip() for line in self.log_tail(n_lines).splitlines() if line)
        last = f"; last lines: {tail}" if tail else ""
        return f"the model server (pid {self._process.pid}) {how}; log: {self.log_path}{last}"

    def check(self) -> None:
        """Raise :class:`ServerDied` (with :meth:`death`'s line) if the server has died."""
        reason = self.death()
        if reason is not None:
            raise ServerDied(reason)

    def command(self) -> list[str]:
        """The command line that starts the server (valid once the port is chosen)."""
        args = [
            sys.executable,
            "-m",
            "otelcar.model.llama_server",
            "--model",
            str(self.model_path),
            "--model_alias",
            self.model,
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--seed",
            str(self.seed),
            "--n_threads",
            str(self.n_threads),
            "--n_threads_batch",
            str(self.n_threads_batch),
            "--n_batch",
            str(DEFAULT_N_BATCH),
            # The server's default keeps the logits of every prompt token (262k floats each,
            # copied after every batch) for logprobs requests otelcar never makes; sampling
            # reads the last token's either way, so outputs are unchanged (measured).
            "--logits_all",
            "false",
        ]
        if self.chat_format:
            args += ["--chat_format", self.chat_format]
        return args + list(self.extra_args)

    def log_tail(self, n_lines: int = 30) -> str:
        """The last lines of the server log ("" when there is none yet)."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        with self.log_path.open("rb") as file:
            file.seek(max(0, file.seek(0, os.SEEK_END) - 64 * 1024))
            text = file.read().decode("utf-8", errors="replace")
        return "\n".join(text.splitlines()[-n_lines:])

    # -- internals -------------------------------------------------------------------------

    def _spawn(self) -> None:
        assert self.log_path is not None
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("wb") as log:
            self._process = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        _LIVE.add(self)

    def _wait_ready(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + self.startup_timeout_s
        url = self.base_url + "/models"
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy
        while time.monotonic() < deadline:
            status = self._process.poll()
            if status is not None:
                raise self._start_error(f"the model server exited with status {status}")
            try:
                with opener.open(url, timeout=2.0) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        raise self._start_error(
            f"the model server did not answer {url} within {self.startup_timeout_s:g} s"
        )

    def _start_error(self, reason: str) -> ServerStartError:
        tail = self.log_tail()
        log = f"\n--- last lines of {self.log_path} ---\n{tail}" if tail else ""
        return ServerStartError(f"{reason}{log}")


def default_threads() -> int:
    """CPU threads for llama.cpp: every CPU but one (at least one).

    Leaves a core to the client (agent loop, rollout engine, tests): with as many threads as
    cores, any other busy process makes llama.cpp's spinning threads collapse (measured on
    2 cores: 8 instead of 53 generated tokens/s; docs/local-model.md).
    """
    return max(1, (os.cpu_count() or 1) - 1)


def default_batch_threads() -> int:
    """CPU threads for prompt evaluation: every CPU. While a prompt is evaluated the client
    waits for the answer, and with passive OpenMP waiting two threads evaluated prompts 1.5-2x
    faster than one on 2 cores (measured, docs/local-model.md). The tokens do not depend on
    the thread counts (``tests/test_local_model.py``)."""
    return max(1, os.cpu_count() or 1)


def _require_server_packages() -> None:
    missing = [name for name in _SERVER_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise ModelNotInstalled(
            f"llama-cpp-python[server] is not installed (missing {', '.join(missing)}): "
            f"{INSTALL_HINT}"
        )


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    pr_set_pdeathsig = 1
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


@atexit.register
def _stop_all() -> None:  # pragma: no cover - interpreter shutdown
    for server in list(_LIVE):
        server.stop()
