"""Shared test fixtures: paths of the committed OTLP fixtures and a fresh store."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from otelcar import Store
from tests.parts import missing

ROOT = Path(__file__).resolve().parents[1]
OTLP = ROOT / "fixtures" / "otlp"
BAD = OTLP / "bad"

# Trace ids of the committed fixtures (seeded id generator in fixtures/otlp/make_fixtures.py).
NEW_CONTENT = "c2b9546e0f0220f3edb7f1d5cbf15150"
NEW_NOCONTENT = "e638bca46bd70d89987fc91e855cdff8"
LEGACY_CONTENT = "38b1f9a35c2855ba8f0f9d8c7f51c46e"
LEGACY_NOCONTENT = "b8004092f9e22b921b38eefa6bced784"
LENGTH_LIMIT = "662e0001e6f57713ca1ebac97bad1f68"
MIXED_HTTP = "71985eb13a8839190e4bd00558bc15e5"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


# -- the embedded local model (otelcar.model): one real llama-cpp-python server per session ----

import importlib.util  # noqa: E402


def _require_local_model() -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        missing(
            "llama-cpp-python (the embedded local model)",
            "install the `local` extra: `make test` does (scripts/llama-wheel.sh builds it)",
        )


@pytest.fixture(scope="session")
def local_model_path() -> Path:
    """The prepared GGUF of the embedded model (assembled once into $OTELCAR_DATA_DIR)."""
    _require_local_model()
    from otelcar.model import prepare_model

    return prepare_model()


@pytest.fixture(scope="session")
def local_model_server(local_model_path: Path, tmp_path_factory: pytest.TempPathFactory):
    """A real model server on 127.0.0.1 for the whole session: ``.base_url``, ``.model``.

    Its log is in the session's temp dir; it is stopped (and must be gone) at the end.
    """
    from otelcar.model import ModelServer

    log = tmp_path_factory.mktemp("local-model") / "server.log"
    with ModelServer(local_model_path, log_path=log) as server:
        yield server


#: The longest modules' cost in seconds on one idle core (measured with ``--durations``;
#: rough: it only orders them). On `make test`'s three workers (``--dist loadscope`` with
#: ``--no-loadscope-reorder``: a module is one unit, and a worker takes the next unit when it
#: is almost done with its own) the units start longest first, so the reduced demo starts at
#: once on one worker while the next longest go to the others, and the many short modules
#: fill in behind them: the workers end together instead of one waiting on a long module it took
#: last (longest-first list scheduling). A module not listed here counts as short; one with a
#: ``slow`` test still goes before the unmarked ones.
MODULE_SECONDS: dict[str, float] = {
    "tests/test_demo_e2e.py": 400,
    "tests/test_live.py": 210,
    "tests/test_attribution_calibration.py": 200,
    "tests/test_local_model.py": 60,
    "tests/test_triage.py": 60,
    "tests/test_ray_executor.py": 60,
    "tests/test_store_kill.py": 55,
    "tests/test_attribution.py": 45,
    "tests/test_counterfactual_agents.py": 40,
    "tests/test_mcp_bounded.py": 40,
    "tests/test_live_aggregate_mcp.py": 35,
    "tests/test_replay_local_model.py": 35,
    "tests/test_why_fix.py": 30,
    "tests/test_live_node.py": 30,
    "tests/test_live_agents_sdk.py": 30,
    "tests/test_live_write_test.py": 30,
    "tests/test_receiver.py": 28,
    "tests/test_live_process_outcome.py": 25,
    "tests/test_fuzz_decoders.py": 23,
}


def _cpu_seconds() -> float:
    """CPU seconds of this process and of its children that have ended (user + system)."""
    import resource

    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """With ``OTELCAR_TEST_CPU=FILE``: each test's CPU seconds (setup, call and teardown, its
    ended child processes included, so a module's model server counts where its fixture ends
    it) appended to ``FILE`` as ``nodeid<TAB>seconds`` lines, to tell which tests the suite's
    CPU goes to (``--durations`` times wall clock, which three workers on two cores blur)."""
    path = os.environ.get("OTELCAR_TEST_CPU")
    before = _cpu_seconds() if path else 0.0
    yield
    if path:
        with open(path, "a") as ledger:  # one short line per append: workers do not interleave
            ledger.write(f"{item.nodeid}\t{_cpu_seconds() - before:.2f}\n")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The modules in :data:`MODULE_SECONDS`, longest first; then the other modules with a
    ``slow`` test; then the rest, each group in its usual order. A module's tests stay
    together (its module fixtures set up once)."""

    def module(item: pytest.Item) -> str:
        return item.nodeid.split("::", 1)[0]

    slow_modules = {module(item) for item in items if item.get_closest_marker("slow")}
    items.sort(  # stable
        key=lambda item: (-MODULE_SECONDS.get(module(item), 0), module(item) not in slow_modules)
    )
