"""A live rollout's own trace: the agent's spans, received by otelcar (DESIGN.md §5b).

Each live rollout gets an OTLP receiver of its own (:class:`RolloutTrace`: the receiver
``otelcar collect`` runs, :mod:`otelcar.receiver`, on 127.0.0.1, on free ports, writing into
memory), so whatever arrives there is that rollout's, whether or not the agent's spans carry
the ``otelcar.rollout`` resource attribute (:mod:`otelcar.live.agent` adds it to
``OTEL_RESOURCE_ATTRIBUTES``, but an agent that sets its resource in code drops it).

The agent run is pointed at it (:meth:`RolloutTrace.environment`): ``OTEL_EXPORTER_OTLP_ENDPOINT``
(and ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``…_LOGS_ENDPOINT``, the per-signal forms some
exporters read first) name the HTTP port, with ``OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf``,
unless the agent's environment already asks for gRPC (``OTEL_EXPORTER_OTLP_PROTOCOL=grpc``):
then the gRPC port. They replace the user's own, so a rollout's spans never reach the user's
backend. ``OTELCAR_OTLP_HTTP_ENDPOINT`` and ``OTELCAR_OTLP_GRPC_ENDPOINT`` name both, for an
agent that builds its exporter in code.

The traces are built into a steps table exactly as an imported trace is
(:mod:`otelcar.trajectory`): the outcome judges a rollout on it with the same ``[outcome]`` as
the recorded run. An agent that sends no spans (no instrumentation, an exporter pointed
elsewhere) leaves ``None``; the executor then judges what the model endpoint saw and says so.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import polars as pl

from otelcar.receiver.service import Receiver, ReceiverConfig
from otelcar.schema import STEPS_SCHEMA
from otelcar.store.sink import InMemorySink

_ENDPOINT_VARIABLES = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
)


class RolloutTrace:
    """The receiver of one rollout's spans (see the module docstring): :meth:`start` it,
    run the agent with :meth:`environment`, read :meth:`steps` once it exited, then
    :meth:`stop` it (starting and stopping take milliseconds)."""

    def __init__(self) -> None:
        self.sink = InMemorySink()
        self.receiver = Receiver(
            self.sink,
            ReceiverConfig(
                grpc_port=0,
                http_port=0,
                derive="thread",
                max_lag_bytes=None,
                poll_interval_s=0.01,
            ),
        )

    def start(self) -> None:
        self.receiver.start()

    def stop(self) -> None:
        with contextlib.suppress(Exception):  # stopping must not hide the rollout's result
            self.receiver.stop(grace_s=1.0)

    def environment(self, agent_env: Mapping[str, str]) -> dict[str, str]:
        """The variables that point an agent whose environment is ``agent_env`` here."""
        endpoints = self.receiver.endpoints()
        protocol = (
            agent_env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            or agent_env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
            or "http/protobuf"
        ).strip()
        env = {
            "OTELCAR_OTLP_HTTP_ENDPOINT": endpoints["http"],
            "OTELCAR_OTLP_GRPC_ENDPOINT": endpoints["grpc"],
        }
        if protocol == "grpc":
            env.update(dict.fromkeys(_ENDPOINT_VARIABLES, endpoints["grpc"]))
        else:
            http = endpoints["http"]
            env.update(
                {
                    "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                    "OTEL_EXPORTER_OTLP_ENDPOINT": http,
                    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{http}/v1/traces",
                    "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": f"{http}/v1/logs",
                }
            )
        return env

    def steps(self) -> pl.DataFrame | None:
        """The steps table of the traces received (:data:`~otelcar.schema.STEPS_SCHEMA`;
        several traces one after the other, in order of their first span, steps renumbered),
        or ``None`` when none arrived or none is a step of the run (an LLM call or a tool
        call): there is then nothing to judge. Read it after the agent exited: an exporter's
        batches are acknowledged only once received."""
        self.sink.catch_up()
        builds = self.sink.traces()
        if not any(row["kind"] in ("llm", "tool") for b in builds for row in b.steps):
            return None
        builds.sort(key=lambda b: min((row["start_ns"] or 0 for row in b.steps), default=0))
        rows: list[dict[str, Any]] = []
        for build in builds:
            offset = len(rows)
            for row in build.steps:
                rows.append(_shifted(row, offset) if offset else row)
        return pl.DataFrame(rows, schema=STEPS_SCHEMA)


def _shifted(row: dict[str, Any], offset: int) -> dict[str, Any]:
    """A step of a later trace numbered after the earlier traces' steps."""
    moved = dict(row)
    for key in ("step", "call_step"):
        if moved.get(key) is not None:
            moved[key] = moved[key] + offset
    return moved
