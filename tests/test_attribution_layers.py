"""The attribution package's layers: pure statistics, then the experiment layer every
estimator shares, then one subpackage per question, each importing only from below (or
from its own subpackage)."""

from __future__ import annotations

import ast
from pathlib import Path

import otelcar.attribution

PACKAGE = Path(otelcar.attribution.__file__).parent
# Lower numbers are lower layers. ``why --step culprit`` runs ``attribute`` first (context
# above steps); ``fix`` runs ``why`` first (fixes above context); ``aggregate`` attributes
# many traces; ``reliability`` estimates a whole run's failure rate; ``faithfulness``
# re-decides recorded decisions as ``why`` does; ``pairs`` turns attribution and fix results
# into training data (its fresh rollouts reuse the steps' plans); ``*_documents`` declare
# the JSON each writes (what their schemas are generated from). ``regression`` is the
# import path of tests written by earlier versions (it reads the project configuration).
# ``frozen`` makes finished results' sequences tuples (every result type uses it).
LEVELS = {
    "stats": 0,
    "frozen": 0,
    "experiment": 1,
    "steps": 2,
    "context": 3,
    "fixes": 4,
    "reliability": 2,
    "faithfulness": 3,
    "aggregate": 5,
    "aggregate_documents": 5,
    "pairs": 5,
    "pairs_documents": 5,
    "regression": 6,
    "__init__": 6,
}


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("otelcar.")}


def _layer(module: str) -> str:
    return module.removeprefix("otelcar.attribution.").split(".")[0]


def test_every_attribution_module_imports_only_from_its_layer_or_below():
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 20
    upward = []
    for path in modules:
        relative = path.relative_to(PACKAGE).with_suffix("")
        layer = relative.parts[0]
        assert layer in LEVELS, f"{relative}: a module of no declared layer"
        for name in _imports(path):
            if name.startswith(("otelcar.report", "otelcar.cli")):
                upward.append(f"{relative} imports {name} (reports and the CLI are above)")
            if not name.startswith("otelcar.attribution."):
                continue
            target = _layer(name)
            if target != layer and LEVELS[target] > LEVELS[layer]:
                upward.append(f"{relative} imports {name}")
    assert not upward, "\n".join(upward)


def test_the_experiment_layer_serves_every_estimator():
    """Every estimator draws through the experiment layer (its seeds and its arms) and
    reports its effects as one :class:`Contrast`."""
    users = {"contrast": set(), "seeds": set()}
    for path in PACKAGE.rglob("*.py"):
        for name in _imports(path):
            for part in users:
                if name == f"otelcar.attribution.experiment.{part}":
                    users[part].add(path.relative_to(PACKAGE).parts[0])
    assert {"steps", "context", "fixes"} <= users["contrast"]
    assert {"steps", "context", "fixes"} <= users["seeds"]
