"""Data flows one way: no module imports a layer above its own, and no two packages import
each other (a cycle), lazily or not. Imports under ``if TYPE_CHECKING:`` are types only and
are not counted.

Layers, lowest first (DESIGN.md; issue 18): shared basics → ingest → conventions →
trajectory → store/sources → replay → attribution → report → cli. A module may import its
own layer and any below.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "otelcar"

#: Top-level unit of otelcar (a subpackage or a module) → its layer.
LAYERS: dict[str, int] = {
    # 0: shared basics every layer may use; the plugin door (hook specifications, the
    # manager and the registries' lazy hook) is here, as every registry consults it
    **dict.fromkeys(
        ["errors", "config", "identity", "sync", "usercode", "safe_text", "cost", "__init__"], 0
    ),
    "plugins": 0,
    "ingest": 1,
    **dict.fromkeys(["messages", "schema", "conventions"], 2),
    "trajectory": 3,
    **dict.fromkeys(["store", "sources", "importer", "readers", "receiver"], 4),
    **dict.fromkeys(
        ["replay", "policies", "outcome", "config_checks", "executors", "live", "model", "testing"],
        5,
    ),
    "attribution": 6,
    **dict.fromkeys(["report", "render", "views", "pricing", "trace_search"], 7),
    # 8: the application: command line, project configuration, what generated tests call,
    # and the built-in plugin, which registers every layer's built-ins (the plugin manager
    # loads it by name, as it loads a third party's)
    **dict.fromkeys(
        [
            "project_config",
            "starter_config",
            "analyses",
            "live_regression",
            "contracts",
            "pytest_plugin",
            "kept_runs",
            "safe_console",
            "plugins.builtins",
            # the import path of regression tests written by earlier versions (it reads
            # otelcar.toml); nothing in otelcar imports it
            "attribution.regression",
            "mcp",
            "ui",
            # triage as traces arrive: runs the analyses (issue 41)
            "triage",
        ],
        8,
    ),
}
NAMES = {0: "basics", 1: "ingest", 2: "conventions", 3: "trajectory", 4: "store/sources"}
NAMES |= {5: "replay", 6: "attribution", 7: "report", 8: "cli"}


def _unit(module: str) -> str:
    """``otelcar.replay.harness`` → ``replay``; ``otelcar.cli.repair`` → ``cli``; a
    module named in :data:`LAYERS` (``plugins.builtins``) is its own unit."""
    parts = module.split(".")
    for end in range(len(parts), 2, -1):
        dotted = ".".join(parts[1:end])
        if dotted in LAYERS:
            return dotted
    return parts[1] if len(parts) > 1 else "__init__"


def _layer(unit: str) -> int:
    if unit.startswith("cli"):
        return 8
    if unit not in LAYERS:
        raise AssertionError(f"otelcar.{unit} has no layer: add it to LAYERS in {__file__}")
    return LAYERS[unit]


def _is_module(name: str) -> bool:
    return (PACKAGE / f"{name}.py").exists() or (PACKAGE / name / "__init__.py").exists()


def _imports() -> dict[str, set[tuple[str, int]]]:
    """Module → the otelcar modules it imports (with the line), TYPE_CHECKING blocks aside."""
    found: dict[str, set[tuple[str, int]]] = defaultdict(set)
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        typing_only = {
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for inner in ast.walk(node)
        }
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module] if node.module != "otelcar" else []
                if node.module == "otelcar":  # a submodule, or a name of the package itself
                    names += [
                        f"otelcar.{a.name}" if _is_module(a.name) else "otelcar" for a in node.names
                    ]
                for name in names:
                    if name.startswith("otelcar"):
                        found[module].add((name, node.lineno))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("otelcar."):
                        found[module].add((alias.name, node.lineno))
    return found


def test_no_import_runs_up_a_layer() -> None:
    upward = []
    for module, targets in sorted(_imports().items()):
        here = _layer(_unit(module))
        for target, line in sorted(targets):
            there = _layer(_unit(target))
            if there > here and _unit(module) != "__init__":
                upward.append(
                    f"{module} (line {line}, {NAMES[here]}) imports {target} ({NAMES[there]})"
                )
    assert not upward, "imports that run up a layer:\n" + "\n".join(upward)


def test_no_two_packages_import_each_other() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    where: dict[tuple[str, str], str] = {}
    for module, targets in _imports().items():
        for target, line in targets:
            a, b = _unit(module), _unit(target)
            if a != b and "__init__" not in (a, b):
                graph[a].add(b)
                where.setdefault((a, b), f"{module} line {line} → {target}")
    cycles = sorted(
        f"{a} ⇄ {b}: {where[(a, b)]}; {where[(b, a)]}"
        for a in graph
        for b in graph[a]
        if a < b and a in graph.get(b, set())
    )
    assert not cycles, "packages that import each other:\n" + "\n".join(cycles)


@pytest.mark.parametrize("unit", sorted({_unit(m) for m in _imports()}))
def test_every_unit_has_a_layer(unit: str) -> None:
    _layer(unit)
