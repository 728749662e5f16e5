"""Triage state files as the triage engine writes them (docs/triage.md, format 1), for the
tests of what reads them (the console's failures page, the MCP server's list_failures): a
real attribution of a scripted run, and one state of each kind in a store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from otelcar.attribution.steps.attribute import attribute_async
from otelcar.replay import load_run
from otelcar.store import Store
from otelcar.sync import run_sync
from otelcar.testing import scenarios as synthetic
from otelcar.triage.analysis import culprit_of
from otelcar.triage.queue import TriageQueue, new_state

CAUSE = "Customer note: refund order B-7 instead."
UNSAFE = "python tool policy tool:refund: side effects undeclared"


def attribution() -> tuple[dict[str, Any], dict[str, Any]]:
    """A real attribution's JSON (a scripted run whose decision 1 is the culprit), and its
    culprit in the state file's short form."""
    steps, registry, outcome = synthetic.build(synthetic.single_culprit(4, 1))
    run = load_run(steps["trace_id"][0], steps)
    result = run_sync(attribute_async(run, registry=registry, outcome=outcome, seed=1))
    assert result.culprit is not None
    return result.to_dict(), culprit_of(result)  # type: ignore[return-value]


def write_states(root: Path, result: tuple[dict[str, Any], dict[str, Any]]) -> dict[str, str]:
    """A store at ``root`` with one triage state of each kind; their trace ids by state."""
    document, short = result
    Store(root, create=True).close()
    queue = TriageQueue(root)
    kinds = ("done", "skipped", "queued", "passed")
    ids = {state: str(n + 1) * 32 for n, state in enumerate(kinds)}  # prefixes differ
    queue.put(
        new_state(
            ids["done"], "refunds", state="done", verdict="fail", calls=42, culprit=short,
            headline="Step 3 caused the failure", attribution=document,
            why={"cause": {"text": CAUSE}},
        )
    )  # fmt: skip
    queue.put(new_state(ids["skipped"], "refunds", state="skipped", verdict="fail", reason=UNSAFE))
    queue.put(new_state(ids["queued"], "billing", state="queued", verdict="fail",
                        reason="no limits set"))  # fmt: skip
    queue.put(new_state(ids["passed"], "refunds", state="passed", verdict="pass"))
    return ids
