"""The order `make test` runs the modules in (tests/conftest.py): longest first, so the two
workers end together (issue 38: the suite within 12 minutes on 2 idle cores)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from tests.conftest import MODULE_SECONDS, pytest_collection_modifyitems

ROOT = Path(__file__).resolve().parents[1]


def _item(nodeid: str, slow: bool = False) -> SimpleNamespace:
    return SimpleNamespace(nodeid=nodeid, get_closest_marker=lambda name: slow or None)


def test_the_longest_modules_go_first_then_the_slow_ones_each_kept_whole() -> None:
    items = [
        _item("tests/test_a.py::test_one"),
        _item("tests/test_b.py::test_one", slow=True),
        _item("tests/test_attribution_calibration.py::test_one"),
        _item("tests/test_a.py::test_two"),
        _item("tests/test_demo_e2e.py::test_one", slow=True),
        _item("tests/test_b.py::test_two"),
        _item("tests/test_demo_e2e.py::test_two", slow=True),
    ]
    pytest_collection_modifyitems(None, items)  # type: ignore[arg-type]
    assert [i.nodeid for i in items] == [
        "tests/test_demo_e2e.py::test_one",
        "tests/test_demo_e2e.py::test_two",
        "tests/test_attribution_calibration.py::test_one",
        "tests/test_b.py::test_one",
        "tests/test_b.py::test_two",
        "tests/test_a.py::test_one",
        "tests/test_a.py::test_two",
    ]


def test_every_module_the_order_names_exists_and_make_test_keeps_the_order() -> None:
    """A renamed module would silently lose its place; xdist's default reorders modules by
    their number of tests, so `make test` turns that off."""
    assert [m for m in MODULE_SECONDS if not (ROOT / m).is_file()] == []
    (line,) = [line for line in (ROOT / "Makefile").read_text().splitlines() if "-m pytest" in line]
    assert "--dist loadscope" in line and "--no-loadscope-reorder" in line
