"""No function in ``otelcar/`` is over :data:`MOST_LINES` lines (issue 38): a longer one does
several things that want names of their own (stages, tool or route groups, schema parts)."""

from __future__ import annotations

import ast
from pathlib import Path

#: The most lines a function may span, from its ``def`` to its last line (nested functions
#: count in the function that holds them).
MOST_LINES = 120
PACKAGE = Path(__file__).resolve().parents[1] / "otelcar"


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
