"""The instrumented agent of tests/clients/otlp_agent.py, run against a receiver."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_sdk_agent(port: int, protocol: str, out: Path, *, compression: str = "none") -> str:
    """Run the instrumented agent (tests/clients/otlp_agent.py) exporting with the official
    SDK exporter to 127.0.0.1:``port`` over ``protocol`` (``grpc``, ``http/protobuf``), its
    file copy written to ``out``; the trace id it printed."""
    env = {
        **os.environ,
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
        "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
        "PYTHONPATH": str(ROOT),
    }
    env.pop("OTEL_EXPORTER_OTLP_COMPRESSION", None)
    if compression != "none":
        env["OTEL_EXPORTER_OTLP_COMPRESSION"] = compression
    run = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "clients" / "otlp_agent.py"), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    return run.stdout.strip().splitlines()[-1]
