"""The committed refund trace (fixtures/otlp, new content) imported into a store, with an
otelcar.toml whose LLM policy is a scripted one: what the CLI, console and MCP tests run on."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from otelcar.cli import cli
from tests.conftest import OTLP

POLICY = """
import random
from otelcar.messages import Message, ToolCall

def decide(request):
    tools = [m for m in request.messages if m.role == "tool"]
    if not tools:
        return Message("assistant", None, (
            ToolCall("lookup_order", {"order_id": "A-1001"}, "c1"),
            ToolCall("get_refund_policy", {"category": "electronics"}, "c2")))
    if len(tools) == 2:
        if random.Random(request.seed).random() < 0.1:
            return Message("assistant", None, (
                ToolCall("issue_refund", {"order_id": "A-1001", "amount": 129.99}, "c3"),))
        return Message("assistant", "This needs a manager's approval.")
    return Message("assistant", "Done.")
"""


def imported_trace_with_policy(tmp_path: Path) -> tuple[CliRunner, list[str], Path]:
    """A store with the new-content fixture imported and an otelcar.toml whose 'llm' policy
    is :data:`POLICY` (also used by other test modules)."""
    (tmp_path / "agent_policy.py").write_text(POLICY)
    config = tmp_path / "otelcar.toml"
    config.write_text(
        '[policies.llm]\ntype = "python"\nfunction = "agent_policy:decide"\n[replay]\nseed = 4\n'
    )
    runner = CliRunner()
    store = ["--store", str(tmp_path / "store")]
    runner.invoke(
        cli, [*store, "import", str(OTLP / "new_content.traces.jsonl")], catch_exceptions=False
    )
    return runner, store, config


def never_called(tmp_path: Path, config: Path) -> None:
    """Point ``config``'s LLM policy at one that fails the test if it is ever called (a
    module name of its own: ``agent_policy`` stays the working one other tests import)."""
    (tmp_path / "never_called_policy.py").write_text(
        "def decide(request):\n    raise AssertionError('a policy call was made')\n"
    )
    text = config.read_text().replace("agent_policy:decide", "never_called_policy:decide")
    config.write_text(text)


#: The outcome the console and timeline tests add to that otelcar.toml: the refund was issued.
OUTCOME = '[outcome]\ntype = "tool_called"\ntool = "issue_refund"\n'
