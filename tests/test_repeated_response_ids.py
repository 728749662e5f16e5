"""Two sequential calls that a server answered with one response id stay two LLM steps.

The spans come from the real openai client traced by the real
opentelemetry-instrumentation-openai-v2 (tests/clients/repeated_id_agent.py), against a
scripted server that repeats ``chatcmpl-fake1`` as mock servers, proxies and caches do.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from otelcar import Store, import_files

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "clients"))
from repeated_id_agent import FINAL_ANSWER, REPEATED_ID  # noqa: E402


def test_sequential_calls_with_one_response_id_are_two_steps(tmp_path: Path):
    dump = tmp_path / "weather.traces.jsonl"
    run = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "clients" / "repeated_id_agent.py"), str(dump)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    trace_id = run.stdout.strip().splitlines()[-1]
    store = Store(tmp_path / "store")
    import_files([dump], store=store)
    steps = store.steps(trace_id)
    llm = steps.filter(steps["kind"] == "llm").to_dicts()
    assert len(llm) == 2, [s["name"] for s in steps.to_dicts()]
    first, second = llm
    assert first["output"]["tool_calls"][0]["name"] == "get_weather"
    assert second["output"]["content"] == FINAL_ANSWER
    assert any(m["role"] == "tool" for m in second["input_messages"])  # the tool result
    for step in llm:
        assert any(REPEATED_ID in issue and "did not overlap" in issue for issue in step["issues"])
