"""Habits of the test suite itself (issue 38).

A test module is never a fixture library: what several test modules share lives in
``tests/helpers/`` (or ``tests/conftest.py``). Importing a test module from another runs its
module-level code twice under different names, couples unrelated tests, and hides the shared
part among tests.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def is_test_module(name: str) -> bool:
    """Whether the dotted module ``name`` is one of the suite's test modules."""
    parts = name.split(".")
    return parts[-1].startswith("test_") and parts[:-1] in ([], ["tests"])


def imported_test_modules(source: str) -> list[str]:
    """The test modules ``source`` imports (absolutely, from the ``tests`` package, or
    relatively), at module level or inside a function."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if is_test_module(alias.name)]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if is_test_module(module):
                found.append(module)
            elif module in ("tests", "") and (node.module == "tests" or node.level > 0):
                found += [alias.name for alias in node.names if is_test_module(alias.name)]
    return found


def test_the_detector_finds_each_way_of_importing_a_test_module() -> None:
    source = (
        "import tests.test_live\n"
        "from tests.test_live import Seeing\n"
        "from tests import test_ui, parts\n"
        "from .test_report import payload\n"
        "def f():\n    from tests.test_cli import run\n"
        "from tests.helpers.agents import Seeing\nfrom tests import triage_states\n"
        "import test_fixtures\n"
    )
    assert sorted(imported_test_modules(source)) == [
        "test_fixtures",
        "test_report",
        "test_ui",
        "tests.test_cli",
        "tests.test_live",
        "tests.test_live",
    ]


def test_no_test_module_imports_another() -> None:
    offenders = {
        str(path.relative_to(TESTS.parent)): imported
        for path in sorted(TESTS.rglob("*.py"))
        if "node_modules" not in path.parts
        if (imported := imported_test_modules(path.read_text(encoding="utf-8")))
    }
    assert not offenders, (
        f"test modules imported as libraries: {offenders}; move what they share to "
        "tests/helpers/ (or a conftest fixture) and import it from there"
    )
