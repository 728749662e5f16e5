"""otelcar: which step of a failed LLM-agent run caused the failure, from its OTel trace.

The public API, in the order data flows::

    import otelcar
    steps = otelcar.read_traces("dump.jsonl")     # a Polars DataFrame (otelcar.STEPS_SCHEMA)
    store = otelcar.Store()                       # ./.otelcar or $OTELCAR_HOME
    otelcar.import_files(["dump.jsonl"], store=store)
    lazy = otelcar.scan_store()                   # every stored step, as a LazyFrame
    run = otelcar.load_run(trace_id, store.steps(trace_id))
    result = otelcar.attribute(run, registry=registry, outcome=outcome)
    cause = otelcar.why(run, step=result.culprit.step, registry=registry, outcome=outcome)
    print(otelcar.headline(result))               # one sentence: what, where, how sure
    otelcar.document(result)                      # the JSON `otelcar attribute --json` writes
    pairs = otelcar.export_pairs(run, result=result.to_dict(), registry=registry,
                                 outcome=outcome)  # preference pairs, on fresh rollouts

Readers are named for what they read (:mod:`otelcar.readers`); ``attribute``, ``why`` and
``fix`` block, and their ``*_async`` twins take the same keyword-only arguments.
:mod:`otelcar.testing` has scripted agents to try it all without a model.

The names load on first use (PEP 562): ``import otelcar`` alone loads neither polars nor the
readers, so the command line starts fast and a library user pays for what they touch.

>>> import otelcar
>>> from otelcar.testing import build, single_culprit
>>> steps, registry, outcome = build(single_culprit(6, 3, p_bad=0.05))
>>> run = otelcar.load_run(steps["trace_id"][0], steps)
>>> result = otelcar.attribute(run, registry=registry, outcome=outcome, seed=1)
>>> result.verdict, result.culprit.step == run.decisions[3].step
('culprit', True)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from otelcar.errors import FormatError, OtelcarError, StoreError, TraceNotFound
from otelcar.version import __version__

if TYPE_CHECKING:
    from otelcar.attribution.aggregate import (
        AggregateResult,
        aggregate,
        attribute_traces,
        attribute_traces_async,
    )
    from otelcar.attribution.context.result import WhyResult
    from otelcar.attribution.context.why import why, why_async
    from otelcar.attribution.fixes.fix import fix, fix_async
    from otelcar.attribution.fixes.result import FixResult
    from otelcar.attribution.pairs import (
        PairsResult,
        PreferencePair,
        export_pairs,
        export_pairs_async,
    )
    from otelcar.attribution.steps.attribute import attribute, attribute_async
    from otelcar.attribution.steps.result import AttributionResult
    from otelcar.importer import import_files
    from otelcar.messages import Message, ToolCall
    from otelcar.notes import Note
    from otelcar.policies.registry import PolicyRegistry
    from otelcar.readers import (
        read_langfuse,
        read_langsmith,
        read_otlp,
        read_phoenix,
        read_traces,
        read_whowhen,
    )
    from otelcar.replay.engine import RolloutSet, run_plan, run_plan_async
    from otelcar.replay.harness import Budget, Environment
    from otelcar.replay.plan import Plan
    from otelcar.replay.recorded import RecordedRun, load_run
    from otelcar.report.notes import worded
    from otelcar.report.prose import document, headline
    from otelcar.schema import STEPS_SCHEMA, TRACES_SCHEMA
    from otelcar.store import ImportReport, Store, scan_store

#: Public name → the module that defines it.
_LAZY = {
    # reading and storing traces
    "read_traces": "otelcar.readers",
    "read_otlp": "otelcar.readers",
    "read_langsmith": "otelcar.readers",
    "read_langfuse": "otelcar.readers",
    "read_phoenix": "otelcar.readers",
    "read_whowhen": "otelcar.readers",
    "import_files": "otelcar.importer",
    "ImportReport": "otelcar.store",
    "Store": "otelcar.store",
    "scan_store": "otelcar.store",
    "Message": "otelcar.messages",
    "ToolCall": "otelcar.messages",
    "STEPS_SCHEMA": "otelcar.schema",
    "TRACES_SCHEMA": "otelcar.schema",
    # replay
    "load_run": "otelcar.replay.recorded",
    "RecordedRun": "otelcar.replay.recorded",
    "Plan": "otelcar.replay.plan",
    "Budget": "otelcar.replay.harness",
    "Environment": "otelcar.replay.harness",
    "PolicyRegistry": "otelcar.policies.registry",
    "RolloutSet": "otelcar.replay.engine",
    "run_plan": "otelcar.replay.engine",
    "run_plan_async": "otelcar.replay.engine",
    "AgentDeclaration": "otelcar.replay.requests",
    # live replay (docs/live.md)
    "AgentCommand": "otelcar.live.agent",
    "LiveExecutor": "otelcar.live.executor",
    # attribution
    "attribute": "otelcar.attribution.steps.attribute",
    "attribute_async": "otelcar.attribution.steps.attribute",
    "AttributionResult": "otelcar.attribution.steps.result",
    "why": "otelcar.attribution.context.why",
    "why_async": "otelcar.attribution.context.why",
    "WhyResult": "otelcar.attribution.context.result",
    "fix": "otelcar.attribution.fixes.fix",
    "fix_async": "otelcar.attribution.fixes.fix",
    "FixResult": "otelcar.attribution.fixes.result",
    "attribute_traces": "otelcar.attribution.aggregate",
    "attribute_traces_async": "otelcar.attribution.aggregate",
    "aggregate": "otelcar.attribution.aggregate",
    "AggregateResult": "otelcar.attribution.aggregate",
    "export_pairs": "otelcar.attribution.pairs",
    "export_pairs_async": "otelcar.attribution.pairs",
    "PreferencePair": "otelcar.attribution.pairs",
    "PairsResult": "otelcar.attribution.pairs",
    # the words and JSON of a result, as every front end writes them
    "headline": "otelcar.report.prose",
    "document": "otelcar.report.prose",
    "Note": "otelcar.notes",
    "worded": "otelcar.report.notes",
}

__all__ = [
    "STEPS_SCHEMA",
    "TRACES_SCHEMA",
    "AgentCommand",
    "AgentDeclaration",
    "AggregateResult",
    "AttributionResult",
    "Budget",
    "Environment",
    "FixResult",
    "FormatError",
    "ImportReport",
    "LiveExecutor",
    "Message",
    "Note",
    "OtelcarError",
    "PairsResult",
    "Plan",
    "PolicyRegistry",
    "PreferencePair",
    "RecordedRun",
    "RolloutSet",
    "Store",
    "StoreError",
    "ToolCall",
    "TraceNotFound",
    "WhyResult",
    "__version__",
    "aggregate",
    "attribute",
    "attribute_async",
    "attribute_traces",
    "attribute_traces_async",
    "document",
    "export_pairs",
    "export_pairs_async",
    "fix",
    "fix_async",
    "headline",
    "import_files",
    "load_run",
    "read_langfuse",
    "read_langsmith",
    "read_otlp",
    "read_phoenix",
    "read_traces",
    "read_whowhen",
    "run_plan",
    "run_plan_async",
    "scan_store",
    "why",
    "why_async",
    "worded",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'otelcar' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next access is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
