"""The public API: top-level names, readers named for what they read, a lazy store scan,
explicit keyword-only signatures, and docstring examples that run."""

from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import otelcar
from otelcar.errors import FormatError, StoreError

ROOT = Path(__file__).resolve().parent.parent
OTLP = ROOT / "fixtures" / "otlp"
LS = ROOT / "fixtures" / "langsmith"
LF = ROOT / "fixtures" / "langfuse" / "export"


def test_every_public_name_resolves() -> None:
    for name in otelcar.__all__:
        assert getattr(otelcar, name) is not None, name
    assert set(otelcar.__all__) <= set(dir(otelcar))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        otelcar.nope  # noqa: B018


def test_import_otelcar_loads_neither_polars_nor_the_readers() -> None:
    code = (
        "import sys, otelcar; "
        "print(sorted(m for m in ('polars', 'otelcar.readers') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    assert out.strip() == "[]"


def test_the_statistics_import_without_polars_or_the_estimators() -> None:
    """``otelcar.attribution.stats`` is pure: importing it runs the package's lazy
    ``__init__`` and nothing else of attribution (issue 38), and its names still resolve."""
    code = (
        "import sys, otelcar.attribution.stats; "
        "print('polars' in sys.modules, sorted(m for m in sys.modules if m.startswith('otelcar')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    assert out.strip() == (
        "False ['otelcar', 'otelcar.attribution', 'otelcar.attribution.stats', "
        "'otelcar.errors', 'otelcar.version']"
    )
    from otelcar import attribution
    from otelcar.attribution.steps.attribute import attribute

    assert attribution.attribute is attribute
    assert set(attribution.__all__) <= set(dir(attribution))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        attribution.nope  # noqa: B018


@pytest.mark.parametrize(
    ("sync", "coroutine"),
    [
        ("attribute", "attribute_async"),
        ("why", "why_async"),
        ("fix", "fix_async"),
        ("export_pairs", "export_pairs_async"),
    ],
)
def test_sync_entry_points_take_the_async_keyword_only_arguments(sync: str, coroutine: str) -> None:
    blocking, awaited = getattr(otelcar, sync), getattr(otelcar, coroutine)
    assert not inspect.iscoroutinefunction(blocking)
    assert inspect.iscoroutinefunction(awaited)
    signature = inspect.signature(blocking)
    assert signature == inspect.signature(awaited)
    parameters = list(signature.parameters.values())
    assert parameters[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD  # the run / traces
    assert len(parameters) > 3
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters[1:]), sync
    assert blocking.__name__ == sync
    assert blocking.__doc__ and awaited.__doc__ and awaited.__doc__ in blocking.__doc__


def test_sync_attribute_gives_the_async_result() -> None:
    from otelcar.sync import run_sync
    from otelcar.testing import build, single_culprit

    steps, registry, outcome = build(single_culprit(5, 2))
    run = otelcar.load_run(steps["trace_id"][0], steps)
    options = {"registry": registry, "outcome": outcome, "seed": 4, "rollouts": 8}
    blocking = otelcar.attribute(run, **options).to_dict()
    awaited = run_sync(otelcar.attribute_async(run, **options)).to_dict()
    for result in (blocking, awaited):
        result["cost"].pop("wall_s", None)
    assert blocking == awaited


def test_readers_read_their_family_and_name_the_right_reader_for_others() -> None:
    langsmith = otelcar.read_langsmith(LS / "sdk.list_runs.jsonl")
    assert langsmith.height > 0
    assert langsmith.equals(otelcar.read_traces(LS / "sdk.list_runs.jsonl"))
    with pytest.raises(FormatError, match=r"sdk\.list_runs\.jsonl.*langsmith-runs.*read_langsmith"):
        otelcar.read_otlp(LS / "sdk.list_runs.jsonl")
    otlp = otelcar.read_otlp(OTLP / "new_content.traces.jsonl")
    assert otlp.schema == otelcar.STEPS_SCHEMA and otlp.height > 0
    with pytest.raises(FormatError, match="read_otlp"):
        otelcar.read_langsmith(OTLP / "new_content.traces.jsonl")
    with pytest.raises(
        FormatError, match=r"read_otlp reads .*not 'langsmith-runs'.*read_langsmith"
    ):
        otelcar.read_otlp(LS / "sdk.list_runs.jsonl", format="langsmith-runs")


def test_read_langfuse_reads_every_langfuse_export() -> None:
    heights = {}
    for path in sorted(LF.iterdir()):
        steps = otelcar.read_langfuse(path)
        assert steps.equals(otelcar.read_traces(path)), path.name
        heights[path.name] = steps.height
    assert heights["ui_observations.json"] > 0 and heights["ui_observations.csv"] > 0, heights


def test_read_whowhen_reads_the_benchmark_logs() -> None:
    from tests.parts import WHOWHEN, need_data

    first = need_data(WHOWHEN / "hand-crafted" / "1.json")
    steps = otelcar.read_whowhen(first)
    assert steps.height > 0
    with pytest.raises(FormatError, match="read_whowhen"):
        otelcar.read_otlp(first)


def test_scan_store_is_lazy_and_equals_the_store_steps(tmp_path: Path) -> None:
    store = otelcar.Store(tmp_path / "store")
    otelcar.import_files([OTLP], store=store)
    lazy = otelcar.scan_store(tmp_path / "store")
    assert isinstance(lazy, pl.LazyFrame)
    assert lazy.collect_schema() == otelcar.STEPS_SCHEMA
    assert lazy.collect().equals(store.steps())
    one = store.traces()["trace_id"][0]
    assert lazy.filter(pl.col("trace_id") == one).collect().equals(store.scan_steps(one).collect())
    assert store.scan_steps(one).collect().equals(store.steps(one))


def test_scan_store_never_creates_a_store(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no otelcar store"):
        otelcar.scan_store(tmp_path / "absent")
    assert not (tmp_path / "absent").exists()


def _modules_with_examples() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(otelcar.__path__, "otelcar."):
        spec = importlib.util.find_spec(info.name)
        origin = spec.origin if spec else None
        if origin and origin.endswith(".py") and ">>>" in Path(origin).read_text(encoding="utf-8"):
            names.append(info.name)
    return ["otelcar", *names] if ">>>" in (otelcar.__doc__ or "") else names


@pytest.mark.parametrize("module", _modules_with_examples())
def test_docstring_examples_run(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{module} has '>>>' but no example ran"
    assert result.failed == 0, module


def test_the_api_page_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    page = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    marker = "<!-- runs as a test: tests/test_public_api.py::test_the_api_page_example_runs -->"
    assert marker in page
    block = page.split(marker, 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(block, "docs/api.md", "exec"), {})
    out = capsys.readouterr().out
    assert "caused the failure" in out and "rollouts still fail" in out
