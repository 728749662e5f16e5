"""No function in ``otelcar/`` is over :data:`MOST_LINES` lines (issue 38): a longer one does
several things that want names of their own (stages, tool or route groups, schema parts). The
estimators are stages: no function body in ``otelcar/attribution/`` (its code after the
signature and docstring) is over :data:`MOST_STAGE_LINES`."""

from __future__ import annotations

import ast
from pathlib import Path

#: The most lines a function may span, from its ``def`` to its last line (nested functions
#: count in the function that holds them).
MOST_LINES = 120
#: The most lines of an estimator stage's body (``otelcar/attribution/``).
MOST_STAGE_LINES = 80
PACKAGE = Path(__file__).resolve().parents[1] / "otelcar"


def long_bodies(root: Path, most: int = MOST_STAGE_LINES) -> list[str]:
    """``path:line name (n lines)`` of each function under ``root`` whose body, from its
    first statement after the docstring to its last line, is over ``most`` lines."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            body = node.body[1:] if ast.get_docstring(node) is not None else node.body
            if not body:
                continue
            lines = (node.end_lineno or node.lineno) - body[0].lineno + 1
            if lines > most:
                where = path.relative_to(root).as_posix()
                found.append(f"{where}:{node.lineno} {node.name} ({lines} lines)")
    return found


def long_functions(root: Path, most: int = MOST_LINES) -> list[str]:
    """``path:line name (n lines)`` of each function under ``root`` over ``most`` lines."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > most:
                    where = path.relative_to(root).as_posix()
                    found.append(f"{where}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_is_over_the_limit():
    over = long_functions(PACKAGE)
    assert not over, f"functions over {MOST_LINES} lines:\n" + "\n".join(over)


def test_the_check_finds_a_long_function(tmp_path: Path):
    body = "".join(f"    x{i} = {i}\n" for i in range(MOST_LINES))
    (tmp_path / "long.py").write_text(f"def long():\n{body}\n\ndef short():\n    return 1\n")
    (tmp_path / "fits.py").write_text("async def fits():\n" + body[: -len("    x0 = 0\n")])
    assert long_functions(tmp_path) == [f"long.py:1 long ({MOST_LINES + 1} lines)"]


def test_no_estimator_stage_is_over_the_limit():
    over = long_bodies(PACKAGE / "attribution")
    assert not over, f"attribution bodies over {MOST_STAGE_LINES} lines:\n" + "\n".join(over)


def test_the_check_counts_a_body_without_its_docstring(tmp_path: Path):
    doc = '    """' + "\n" * 30 + '    """\n'
    body = "".join(f"    x{i} = {i}\n" for i in range(MOST_STAGE_LINES))
    (tmp_path / "stage.py").write_text(
        f"def fits():\n{doc}{body}\n\ndef over():\n{body}    y = 1\n"
    )
    assert long_bodies(tmp_path) == [
        f"stage.py:{MOST_STAGE_LINES + 35} over ({MOST_STAGE_LINES + 1} lines)"
    ]
