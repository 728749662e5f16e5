"""Data flows one way: no module imports a layer above its own, and no set of top-level units
imports each other round a cycle of any length, lazily or not. Imports under
``if TYPE_CHECKING:`` count too: a type is an import, so a type used across layers lives in the
lower one.

Layers, lowest first (DESIGN.md; issue 18): shared basics → ingest → conventions →
trajectory → store/sources → replay → attribution → report → application. A module may import
its own layer and any below. A unit is a top-level subpackage or module of otelcar (the
package's own ``__init__`` is the unit ``__init__``); there are no exemptions.
"""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "otelcar"

#: Top-level unit of otelcar (a subpackage or a module) → its layer.
LAYERS: dict[str, int] = {
    # 0: shared basics every layer may use (the version, the price table); the plugin door
    # (hook specifications, the manager and the registries' lazy hook) is here, as every
    # registry consults it
    **dict.fromkeys(
        [
            *("errors", "config", "identity", "sync", "usercode", "safe_text", "cost"),
            *("pricing", "version", "typeschema", "notes"),
        ],
        0,
    ),
    "plugins": 0,
    "ingest": 1,
    **dict.fromkeys(["messages", "schema", "conventions"], 2),
    "trajectory": 3,
    **dict.fromkeys(["store", "sources", "importer", "readers", "receiver"], 4),
    **dict.fromkeys(
        [
            *("replay", "policies", "outcome", "config_checks", "executors", "live", "model"),
            "testing",
            # otelcar.toml: the policies, the outcome, the agent and the replay settings of a
            # project, built from this layer's pieces; its tables declared as types
            *("project_config", "config_documents"),
        ],
        5,
    ),
    "attribution": 6,
    **dict.fromkeys(["report", "render", "views", "trace_search"], 7),
    # 8: the application: the public API (the package's lazy names), the command line, what
    # generated tests call, and the built-in plugin, which registers every layer's built-ins
    # (the plugin manager loads it by name, as it loads a third party's)
    **dict.fromkeys(
        [
            "__init__",
            "builtin_plugin",
            "cli",
            "starter_config",
            "analyses",
            "live_regression",
            "contracts",
            "pytest_plugin",
            "kept_runs",
            "safe_console",
            "mcp",
            "ui",
            # triage as traces arrive: runs the analyses (issue 41)
            "triage",
        ],
        8,
    ),
}
NAMES = {0: "basics", 1: "ingest", 2: "conventions", 3: "trajectory", 4: "store/sources"}
NAMES |= {5: "replay", 6: "attribution", 7: "report", 8: "application"}

#: A module graph: module → the modules it imports, each with the line of the import.
Graph = Mapping[str, Iterable[tuple[str, int]]]


def unit_of(module: str) -> str:
    """``otelcar.replay.harness`` → ``replay``; ``otelcar`` → ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _layer(unit: str) -> int:
    if unit not in LAYERS:
        raise AssertionError(f"otelcar.{unit} has no layer: add it to LAYERS in {__file__}")
    return LAYERS[unit]


def _is_module(name: str) -> bool:
    return (PACKAGE / f"{name}.py").exists() or (PACKAGE / name / "__init__.py").exists()


def module_imports() -> dict[str, set[tuple[str, int]]]:
    """Module → the otelcar modules it imports (with the line): at the top, in functions
    and under ``if TYPE_CHECKING:`` alike. The sources are parsed once per session (at
    collection, for the units' parameters), and each caller gets its own copy."""
    return {module: set(imports) for module, imports in _parsed_imports().items()}


@functools.cache
def _parsed_imports() -> dict[str, set[tuple[str, int]]]:
    found: dict[str, set[tuple[str, int]]] = defaultdict(set)
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[module]  # a module that imports nothing is still a node
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module] if node.module != "otelcar" else []
                if node.module == "otelcar":  # a submodule, or a name of the package itself
                    names += [
                        f"otelcar.{a.name}" if _is_module(a.name) else "otelcar" for a in node.names
                    ]
                for name in names:
                    if name == "otelcar" or name.startswith("otelcar."):
                        found[module].add((name, node.lineno))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("otelcar."):
                        found[module].add((alias.name, node.lineno))
    return found


def upward_imports(
    graph: Graph, unit: Callable[[str], str], layer: Callable[[str], int]
) -> list[str]:
    """Every import in ``graph`` from a module to one whose unit is in a higher layer."""
    upward = []
    for module, targets in sorted(graph.items()):
        here = layer(unit(module))
        for target, line in sorted(targets):
            there = layer(unit(target))
            if there > here:
                upward.append(f"{module} (line {line}, layer {here}) imports {target} ({there})")
    return upward


def strongly_connected(nodes: Iterable[str], edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of a directed graph (Tarjan's algorithm, iterative
    so that a long chain does not hit the recursion limit), each sorted, in no set order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in nodes:
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(edges.get(root, ())))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, pending = work[-1]
            if pending:
                nxt = pending.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(edges.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


def unit_cycles(graph: Graph, unit: Callable[[str], str]) -> list[str]:
    """Every set of two or more units that import each other round a cycle, with one import
    of each edge inside it, as readable lines."""
    edges: dict[str, set[str]] = defaultdict(set)
    where: dict[tuple[str, str], str] = {}
    for module, targets in graph.items():
        for target, line in sorted(targets):
            a, b = unit(module), unit(target)
            if a != b:
                edges[a].add(b)
                where.setdefault((a, b), f"{module} line {line} → {target}")
    units = sorted({unit(m) for m in graph} | {b for bs in edges.values() for b in bs})
    cycles = []
    for component in strongly_connected(units, edges):
        if len(component) > 1:
            inside = sorted(where[(a, b)] for a in component for b in edges[a] if b in component)
            cycles.append(" ⇄ ".join(component) + ":\n    " + "\n    ".join(inside))
    return sorted(cycles)


def test_no_import_runs_up_a_layer() -> None:
    upward = upward_imports(module_imports(), unit_of, _layer)
    assert not upward, "imports that run up a layer:\n" + "\n".join(upward)


def test_no_units_import_each_other_round_a_cycle() -> None:
    cycles = unit_cycles(module_imports(), unit_of)
    assert not cycles, "units that import each other round a cycle:\n" + "\n".join(cycles)


@pytest.mark.parametrize("unit", sorted({unit_of(m) for m in module_imports()}))
def test_every_unit_has_a_layer(unit: str) -> None:
    _layer(unit)


def test_the_checks_find_a_long_cycle_and_an_upward_import() -> None:
    """The checkers on a made-up graph: a three-unit cycle a → b → c → a (no two of them
    import each other) and an import from layer 0 up to layer 1 are both found; a chain and
    an import within one unit are not."""
    graph = {
        "otelcar.a.x": {("otelcar.b.y", 1), ("otelcar.a.z", 2)},
        "otelcar.a.z": set(),
        "otelcar.b.y": {("otelcar.c", 3)},
        "otelcar.c": {("otelcar.a.x", 4), ("otelcar.d", 5)},
        "otelcar.d": {("otelcar.e", 6)},
        "otelcar.e": set(),
    }
    layers = {"a": 0, "b": 0, "c": 0, "d": 1, "e": 1}
    cycles = unit_cycles(graph, unit_of)
    assert len(cycles) == 1 and cycles[0].startswith("a ⇄ b ⇄ c:"), cycles
    assert upward_imports(graph, unit_of, layers.__getitem__) == [
        "otelcar.c (line 5, layer 0) imports otelcar.d (1)"
    ]
    assert sorted(map(sorted, strongly_connected("abcd", {"a": "b", "b": "c", "c": "a"}))) == [
        ["a", "b", "c"],
        ["d"],
    ]
