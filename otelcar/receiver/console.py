"""Running a receiver in the foreground: banner, live counts, clean stop on signals."""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from pathlib import Path

from rich.console import Console
from rich.live import Live
from rich.text import Text

from otelcar.receiver.service import Receiver

PLAIN_REPORT_EVERY_S = 10.0


def banner(receiver: Receiver) -> list[str]:
    """Where it listens and how to point an agent at it."""
    endpoints = receiver.endpoints()
    where = getattr(receiver.sink, "root", None)
    lines = [f"otelcar collect: store {where}" if where else "otelcar collect: in memory"]
    for name, url in endpoints.items():
        lines.append(f"  listening for OTLP/{name} on {url}")
    lines.append("point your agent at it with the standard OpenTelemetry variables:")
    if "grpc" in endpoints:
        lines.append(
            f"  OTEL_EXPORTER_OTLP_ENDPOINT={endpoints['grpc']} OTEL_EXPORTER_OTLP_PROTOCOL=grpc"
        )
    if "http" in endpoints:
        lines.append(
            f"  OTEL_EXPORTER_OTLP_ENDPOINT={endpoints['http']} "
            "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"
        )
    lines.append("  (GenAI content: OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY)")
    lines.append("Ctrl-C stops after writing everything received.")
    return lines


def run_until_stopped(
    receiver: Receiver,
    console: Console,
    *,
    ready_file: Path | None = None,
    grace_s: float = 10.0,
) -> None:
    """Start, print the banner and live counts; on SIGINT/SIGTERM stop accepting, give
    requests in progress ``grace_s`` to finish, write and derive everything accepted."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    started = time.monotonic()
    receiver.start()  # recovery of interrupted writes is logged as a warning when it happens
    for line in banner(receiver):
        console.print(line, highlight=False)
    if ready_file is not None:
        ready_file.write_text(
            json.dumps(
                {
                    "grpc_port": receiver.grpc_port,
                    "http_port": receiver.http_port,
                    "start_s": round(time.monotonic() - started, 4),  # start() to listening
                }
            )
        )
    if console.is_terminal:
        with Live(Text(receiver.stats.line()), console=console, refresh_per_second=2) as live:
            while not stop.wait(0.5):
                live.update(Text(receiver.stats.line()))
    else:
        last = ""
        while not stop.wait(PLAIN_REPORT_EVERY_S):
            line = receiver.stats.line()
            if line != last:
                console.print(line, highlight=False)
                last = line
    console.print("stopping: writing and deriving what was received…", highlight=False)
    receiver.stop(grace_s)
    if receiver.unfinished:
        console.print(
            Text(
                f"{receiver.unfinished} HTTP request(s) were still arriving after {grace_s:g} s "
                "and were not acknowledged (their clients retry)",
                style="yellow",
            )
        )
    console.print("stopped; " + receiver.stats.line(), highlight=False)
