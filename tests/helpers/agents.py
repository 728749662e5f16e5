"""The agents of ``tests/agents`` recorded once against the scripted model, what counts as
their failure, and their brain as otelcar's policy (tests of live and counterfactual replay)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import otelcar
from otelcar.policies.base import Decision, DecisionRequest
from otelcar.replay import load_run
from otelcar.replay.requests import AgentDeclaration
from tests.agents.model import ScriptedModel, offered

ROOT = Path(__file__).resolve().parents[2]


SEED = 7
#: What counts as failure per agent: the call the planted text asks for.
OUTCOMES = {
    "cleanup": {"type": "tool_called", "tool": "delete_file", "args": {"name": "q3-revenue.xlsx"}},
    "refund_loop": {"type": "tool_called", "tool": "issue_refund", "args": {"order_id": "B-7"}},
    "handoff": {"type": "tool_called", "tool": "issue_refund", "args": {"order_id": "Z-9"}},
}
#: The tool whose call is the misled decision (its first call is the culprit).
CULPRIT_TOOL = {"cleanup": "delete_file", "refund_loop": "issue_refund", "handoff": "issue_refund"}


def agent_module(name: str) -> ModuleType:
    return importlib.import_module(f"tests.agents.{name}")


class Recorded:
    """One agent run once under one instrumentation: its trace and its live requests."""

    def __init__(self, agent: str, instrumentation: str, out: Path) -> None:
        self.agent = agent
        self.instrumentation = instrumentation
        path = out / f"{agent}.{instrumentation}.traces.jsonl"
        with ScriptedModel(agent_module(agent).brain) as model:
            command = [sys.executable, "-m", "tests.agents.run", agent]
            command += ["--base-url", model.base_url, "--out", str(path)]
            command += ["--instrument", instrumentation, "--seed", str(SEED)]
            done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stderr[-2000:]
        self.live_tools = [offered(body.get("tools")) for body in model.requests]
        self.live_choice = [body.get("tool_choice") for body in model.requests]
        self.path = path
        self.steps = otelcar.read_otlp(path)
        self.trace_id = self.steps["trace_id"][0]

    def run(self, declared: AgentDeclaration | None = None) -> Any:
        return load_run(self.trace_id, self.steps, declared)


class Seeing:
    """The agent's brain as otelcar's policy, keeping every request it is sent."""

    max_concurrency = 8

    def __init__(self, agent: str) -> None:
        self.decide_message = agent_module(agent).decide
        self.name = f"brain:{agent}"
        self.requests: list[DecisionRequest] = []

    async def decide(self, request: DecisionRequest) -> Decision:
        self.requests.append(request)
        return Decision(self.decide_message(request), policy=self.name)
