"""The user's agent as a process: one run per rollout (DESIGN.md §5b).

:class:`AgentCommand` is what the user declares (``--agent CMD`` or ``[agent] command``,
``cwd``, ``env``, ``timeout_s``, ``concurrency``). :func:`run_agent` runs it once: split like a
shell line and never run through a shell (write ``sh -c '…'`` for one), in its own process
group, in the user's working directory (or ``cwd``), with a fresh scratch directory of its own
and, in its environment, where its model is (``OPENAI_BASE_URL``, ``OPENAI_API_BASE``,
``ANTHROPIC_BASE_URL``; a placeholder API key where none is set), which rollout it is
(``OTELCAR_ROLLOUT``, ``OTELCAR_SEED``, the ``otelcar.rollout`` resource attribute for its
spans, which go to otelcar's receiver: :mod:`otelcar.live.spans`) and which recorded run it
replays (``OTELCAR_TRACE_ID``, ``OTELCAR_INPUT``: the run's first user message, so one command
serves every trace of a service). The whole process group is killed when the run ends, times out
or is cancelled. The agent's real tools run: its side effects are the user's (``docs/live.md``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from otelcar.errors import OtelcarError

#: How much of the agent's stdout and stderr is kept with its rollout (what an
#: ``output_line`` outcome reads): the last 64 KiB of text; earlier lines are not kept.
OUTPUT_TAIL = 1 << 16


class AgentError(OtelcarError):
    """The agent command is malformed or cannot be started."""


@dataclass(frozen=True)
class AgentCommand:
    """How to run the user's agent (see the module docstring)."""

    argv: tuple[str, ...]
    cwd: Path | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 300.0
    concurrency: int = 1

    @classmethod
    def parse(
        cls,
        command: str | Sequence[str],
        *,
        cwd: str | Path | None = None,
        env: Mapping[str, Any] | None = None,
        timeout_s: float = 300.0,
        concurrency: int = 1,
    ) -> AgentCommand:
        """From a shell-like line (or an argument list); raises :class:`AgentError`."""
        try:
            argv = tuple(shlex.split(command)) if isinstance(command, str) else tuple(command)
        except ValueError as exc:
            raise AgentError(f"agent command {command!r}: {exc}") from None
        if not argv:
            raise AgentError("the agent command is empty")
        if not isinstance(timeout_s, int | float) or timeout_s <= 0:
            raise AgentError(f"agent timeout_s must be a positive number, not {timeout_s!r}")
        if not isinstance(concurrency, int) or concurrency < 1:
            raise AgentError(f"agent concurrency must be a positive integer, not {concurrency!r}")
        if env is not None and not all(isinstance(v, str) for v in env.values()):
            raise AgentError("agent env: every value must be a string")
        return cls(
            argv,
            Path(cwd) if cwd is not None else None,
            dict(env or {}),
            float(timeout_s),
            concurrency,
        )

    @classmethod
    def from_config(cls, table: Mapping[str, Any]) -> AgentCommand | None:
        """From ``[agent]``'s ``command``, ``cwd``, ``env``, ``timeout_s``, ``concurrency``
        (``None`` when it names no command)."""
        if "command" not in table:
            extra = {"cwd", "env", "timeout_s", "concurrency"} & set(table)
            if extra:
                raise AgentError(f"[agent] {', '.join(sorted(extra))} without a command")
            return None
        return cls.parse(
            table["command"],
            cwd=table.get("cwd"),
            env=table.get("env"),
            timeout_s=table.get("timeout_s", 300.0),
            concurrency=table.get("concurrency", 1),
        )

    def describe(self) -> str:
        return shlex.join(self.argv)


@dataclass(frozen=True)
class AgentRun:
    """How one run of the agent ended: its exit status (``None``: killed at the timeout),
    the tails of its stderr and stdout (what an ``output_line`` outcome reads:
    :class:`otelcar.outcome.ProcessEnd`), and how long it took."""

    returncode: int | None
    timed_out: bool
    stderr_tail: str
    wall_s: float
    stdout_tail: str = ""

    def failure(self, timeout_s: float, *, exit_judged: bool = False) -> str | None:
        """Why the run counts as failed to run (``None``: it exited 0, or, with
        ``exit_judged`` — the outcome reads the exit status — it exited at all)."""
        if self.timed_out:
            return f"the agent ran past timeout_s = {timeout_s:g} s and was killed"
        if self.returncode != 0 and not exit_judged:
            tail = self.stderr_tail.strip().splitlines()[-1:] or ["(no stderr)"]
            return f"the agent exited with status {self.returncode}: {tail[0]}"
        return None


async def run_agent(
    command: AgentCommand,
    *,
    base_url: str,
    rollout: int,
    seed: int,
    trace_id: str,
    input_text: str | None,
    token: str,
    telemetry: Mapping[str, str] | None = None,
) -> AgentRun:
    """Run the agent once (module docstring), waiting at most ``command.timeout_s``.
    ``telemetry``: variables that point its OpenTelemetry exporter at otelcar
    (:meth:`otelcar.live.spans.RolloutTraces.environment`); they replace the user's own, so
    a rollout's spans never reach the user's backend."""
    with tempfile.TemporaryDirectory(prefix=f"otelcar-rollout-{rollout}-") as scratch:
        env = _environment(command, base_url, rollout, seed, trace_id, input_text, token, scratch)
        env.update(telemetry or {})
        started = time.perf_counter()
        try:
            process = await asyncio.create_subprocess_exec(
                *command.argv,
                cwd=str(command.cwd) if command.cwd is not None else None,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,  # its own process group, killed whole
            )
        except OSError as exc:
            raise AgentError(f"cannot start the agent ({command.describe()}): {exc}") from None
        timed_out = False
        try:
            try:
                stdout, stderr = await asyncio.wait_for(process.communicate(), command.timeout_s)
            except TimeoutError:
                timed_out = True
                _kill_group(process.pid)
                stdout, stderr = await process.communicate()
        finally:
            _kill_group(process.pid)  # whatever it started goes too (also when cancelled)
        return AgentRun(
            None if timed_out else process.returncode,
            timed_out,
            _tail(stderr, OUTPUT_TAIL),
            time.perf_counter() - started,
            _tail(stdout, OUTPUT_TAIL),
        )


def _tail(data: bytes | None, chars: int) -> str:
    """The last ``chars`` characters of what a stream carried, decoded (bad bytes replaced)."""
    return (data or b"")[-4 * chars :].decode("utf-8", "replace")[-chars:]


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # gone already
        os.killpg(pid, signal.SIGKILL)


def agent_environment(command: AgentCommand) -> dict[str, str]:
    """The environment the agent starts from: this process's, with ``[agent] env`` over it."""
    env = dict(os.environ)
    env.update(command.env)
    return env


def _environment(
    command: AgentCommand,
    base_url: str,
    rollout: int,
    seed: int,
    trace_id: str,
    input_text: str | None,
    token: str,
    scratch: str,
) -> dict[str, str]:
    env = agent_environment(command)
    root = base_url.removesuffix("/v1")
    env.update(
        {
            "OPENAI_BASE_URL": base_url,
            "OPENAI_API_BASE": base_url,
            "ANTHROPIC_BASE_URL": root,
            "OTELCAR_ROLLOUT": str(rollout),
            "OTELCAR_SEED": str(seed),
            "OTELCAR_TRACE_ID": trace_id,
            "OTELCAR_INPUT": input_text or "",
            "OTELCAR_ROLLOUT_DIR": scratch,
            "TMPDIR": scratch,
        }
    )
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        env.setdefault(key, "otelcar-live-replay")
    attributes = env.get("OTEL_RESOURCE_ATTRIBUTES", "")
    tag = f"otelcar.rollout={token}"
    env["OTEL_RESOURCE_ATTRIBUTES"] = f"{attributes},{tag}" if attributes else tag
    return env
