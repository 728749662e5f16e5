"""Live replay of a Node.js agent (issue 43): any language, only a settable base URL.

``tests/agents/node/agent.mjs`` is the refund loop of ``tests/agents/refund_loop.py`` written
as a Node developer writes it: the official ``openai`` npm client, **streamed** chat
completions whose tool-call deltas it accumulates, traced by OpenInference's OpenAI
instrumentation for JavaScript plus its own AGENT and TOOL spans, exported as OTLP/JSON over
HTTP. Its trace is recorded once against the Python brain of ``refund_loop`` served as
server-sent events (:class:`StreamingModel`) and collected by a tiny OTLP/HTTP receiver
(:class:`Collector`); then the agent runs live against otelcar's endpoint:

- a held live replay makes every recorded request again, the agent streaming;
- a resample of the refund decision sends the policy the agent's own three tools;
- ``attribute`` on the live Node agent names the refund decision as the culprit.

``npm ci`` installs the locked packages into ``tests/agents/node/node_modules`` (ignored by
git); without ``node``/``npm`` the module is skipped outside CI and fails under ``CI=true``.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import otelcar
from otelcar.analyses import attribute_run
from otelcar.live import AgentCommand, LiveExecutor
from otelcar.live.check import check_live
from otelcar.live.wire import chat_stream, parse_chat
from otelcar.messages import Message, ToolCall
from otelcar.outcome import outcome_from_config
from otelcar.policies.registry import PolicyRegistry
from otelcar.project_config import ProjectConfig
from otelcar.replay import Environment, Plan, Resample, load_run, run_plan
from otelcar.report.notes import worded
from otelcar.report.prose import headline
from otelcar.sync import run_sync
from tests.agents.model import answer, offered
from tests.agents.refund_loop import TOOLS, brain
from tests.helpers.agents import OUTCOMES, Seeing
from tests.parts import missing

ROOT = Path(__file__).resolve().parents[1]
AGENT_DIR = ROOT / "tests" / "agents" / "node"
SEED = 7
NODE = shutil.which("node")
NPM = shutil.which("npm")


class StreamingModel:
    """The scripted model of ``tests/agents/model.py`` (its brain, through its public
    :func:`~tests.agents.model.answer`) answering as server-sent events, as a hosted model
    does for ``stream: true``; the chunks are written by otelcar's own
    :func:`~otelcar.live.wire.chat_stream`, as the official clients read them. Every request
    body is kept (:attr:`requests`)."""

    def __init__(self, brain: Any) -> None:
        self.requests: list[dict[str, Any]] = []
        model = self
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                body = json.loads(read_body(self))
                with lock:
                    model.requests.append(body)
                    index = len(model.requests) - 1
                seed = int(body.get("seed") or 0)
                message = answer(brain, body["messages"], body.get("tools"), seed)
                reply = Message(
                    "assistant",
                    message.get("content"),
                    tuple(
                        ToolCall(c["name"], c["arguments"], f"call_{index}_{i}")
                        for i, c in enumerate(message.get("tool_calls") or ())
                    ),
                )
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                for event in chat_stream(reply, parse_chat(body), ref=str(index), usage=(10, 5)):
                    self.wfile.write(event)
                self.close_connection = True

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> StreamingModel:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()


def read_body(handler: BaseHTTPRequestHandler) -> bytes:
    """A request's body, sized or chunked (Node's http module sends an unsized body in
    chunks), inflated when gzipped."""
    if handler.headers["Content-Length"] is not None:
        data = handler.rfile.read(int(handler.headers["Content-Length"]))
    else:
        parts = []
        while size := int(handler.rfile.readline().split(b";")[0], 16):
            parts.append(handler.rfile.read(size))
            handler.rfile.readline()
        handler.rfile.readline()
        data = b"".join(parts)
    if handler.headers["Content-Encoding"] == "gzip":
        data = gzip.decompress(data)
    return data


class Collector:
    """An OTLP/HTTP receiver of JSON export requests (``POST /v1/traces``), each written as
    one line of ``path`` (otelcar's ``otlp-jsonl``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                data = read_body(self)
                ok = self.path == "/v1/traces" and "json" in self.headers["Content-Type"]
                if ok:
                    line = json.dumps(json.loads(data), separators=(",", ":"))
                    with lock, path.open("a") as out:
                        out.write(line + "\n")
                self.send_response(200 if ok else 400)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> Collector:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()


def command(**options: Any) -> AgentCommand:
    return AgentCommand.parse(
        [NODE or "node", "tests/agents/node/agent.mjs", "--seed", str(SEED)], cwd=ROOT, **options
    )


class Recorded:
    """The Node agent's run, recorded once: its trace and the requests the model saw."""

    def __init__(self, out: Path) -> None:
        self.path = out / "refund_node.traces.jsonl"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI_"))}
        with StreamingModel(brain) as model, Collector(self.path) as collector:
            env |= {
                "OPENAI_BASE_URL": model.base_url,
                "OPENAI_API_KEY": "not-a-key",
                "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
            }
            done = subprocess.run(
                [NODE or "node", "tests/agents/node/agent.mjs", "--seed", str(SEED)],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, done.stderr[-2000:]
        self.answer = done.stdout.strip()
        self.requests = model.requests
        self.steps = otelcar.read_otlp(self.path)
        self.trace_id = self.steps["trace_id"][0]

    def run(self) -> Any:
        return load_run(self.trace_id, self.steps)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    if NODE is None or NPM is None:
        missing("Node.js (node and npm on PATH)", "the Debian packages nodejs and npm (Node >= 20)")
    install = subprocess.run(
        [NPM, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=AGENT_DIR,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert install.returncode == 0, f"npm ci failed: {install.stderr[-2000:]}"
    return Recorded(tmp_path_factory.mktemp("node"))


def registry_with(policy: Seeing) -> PolicyRegistry:
    return PolicyRegistry().register("llm", policy)


def test_the_recording_streams_and_the_trace_is_the_agents_run(recorded: Recorded) -> None:
    assert all(body["stream"] is True for body in recorded.requests)
    assert [offered(body["tools"]) for body in recorded.requests] == [
        ["lookup_order", "issue_refund", "escalate"]
    ] * 3
    # one tree: the agent's span, OpenInference's model spans, the agent's tool spans
    steps = recorded.steps.sort("step")
    assert steps["kind"].to_list() == ["agent", "llm", "tool", "llm", "tool", "llm"]
    assert steps["tool_result"].to_list()[4] == "refunded order B-7"
    run = recorded.run()
    assert run.horizon == len(recorded.requests) == 3
    called = [c.name for d in run.decisions if d.action for c in d.action.tool_calls]
    assert called == ["lookup_order", "issue_refund"]
    refund = run.decisions[1].action.tool_calls[0]
    assert refund.arguments == {"order_id": "B-7"}  # seed 7: the planted note was followed
    assert recorded.answer == "Your refund is on its way."


def test_a_held_live_replay_of_the_streaming_node_agent_makes_every_request(
    recorded: Recorded,
) -> None:
    run = recorded.run()
    registry = registry_with(Seeing("refund_loop"))
    outcome = outcome_from_config(OUTCOMES["refund_loop"], registry)
    check = run_sync(check_live(run, command(), Environment(registry), outcome=outcome))
    assert check.reproduced, check.first_difference()
    assert check.made == run.horizon and check.recorded_failed and check.replayed_failed
    # OpenInference's JS instrumentation records the tools too: the agent offered the same
    assert [r.tools for r in check.requests] == [["lookup_order", "issue_refund", "escalate"]] * 3
    # its JS OTLP exporter (chunked HTTP) sent the rollout's own trace, which was judged
    assert check.judged_on == "trace", headline(check)


def test_a_live_resample_sends_the_policy_the_node_agents_own_tools(recorded: Recorded) -> None:
    run = recorded.run()
    policy = Seeing("refund_loop")
    registry = registry_with(policy)
    outcome = outcome_from_config(OUTCOMES["refund_loop"], registry)
    refund = run.decisions[1].step
    executor = LiveExecutor(command(concurrency=2), keep_sessions=True)
    result = run_plan(
        run,
        Plan((Resample(refund),)),
        Environment(registry),
        rollouts=4,
        outcome=outcome,
        executor=executor,
    )
    assert result.summary()["status"] == {"final": 4}
    # every request of every rollout streamed, and was answered as a stream
    requests = [e.request for s in executor.sessions or () for e in s.exchanges]
    assert len(requests) >= 4 * 2 and all(r.stream and r.api == "chat" for r in requests)
    resampled = [r for r in policy.requests if r.step == refund]
    assert len(resampled) == 4
    for request in resampled:
        assert request.tools == tuple({"type": "function", **t["function"]} for t in TOOLS)
        assert request.tool_choice is None and request.params == {"temperature": 0.8}


def test_live_attribute_on_the_node_agent_names_the_refund(recorded: Recorded) -> None:
    run = recorded.run()
    registry = registry_with(Seeing("refund_loop"))
    config = ProjectConfig(registry, outcome_from_config(OUTCOMES["refund_loop"], registry))
    config.agent_command = command(concurrency=4)
    result = run_sync(
        attribute_run(run, config, seed=1, rollouts=16, refutation=False, policy_check=0)
    )
    refund = run.decisions[1]
    assert refund.action is not None and refund.action.tool_calls[0].name == "issue_refund"
    assert result.culprit is not None and result.culprit.step == refund.step, headline(result)
    assert any("made every recorded request again" in n for n in worded(result.notes))
    assert not any("no tool policy" in n for n in worded(result.notes))
