"""benchmarks/README.md keeps the current figures of every benchmark, not a log of every run.

Each script in ``benchmarks/`` that can be run (it has a ``__main__`` block; a helper such as
``peers_baseline.py``, imported by another benchmark, need not) has a ``## `name.py`…`` section
that shows how to run it and lists every option it declares. A section holds at most one dated
figures block — one ``### Current figures (YYYY-MM-DD)`` heading naming the commit measured —
and no second dated heading or dated bold lead (``**2026-12-02, …**``), which is how a log of
runs grows. Older figures live in git history (``git log -p benchmarks/README.md``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
README = BENCHMARKS / "README.md"

SECTION = re.compile(r"^## `(?P<name>[a-z0-9_]+)\.py`", re.M)
DATE = r"20\d\d-\d\d-\d\d"
FIGURES_HEADING = re.compile(rf"^### Current figures \({DATE}\)$")
# What a second block of figures looks like: any dated or results heading, or a paragraph
# that opens with a date in bold.
DATED_BLOCK = re.compile(rf"^(###.*{DATE}|### Results\b|### Current figures\b|\*\*{DATE})")
COMMIT = re.compile(r"`[0-9a-f]{7,40}`")
OPTION = re.compile(r"add_argument\(\s*\"(--[a-z0-9-]+)\"")


def sections(text: str) -> dict[str, str]:
    """Each ``## `name.py`…`` section's text, heading included, up to the next ``## ``."""
    found = {}
    for chunk in re.split(r"^(?=## )", text, flags=re.M):
        match = SECTION.match(chunk)
        if match:
            found[match["name"]] = chunk
    return found


def figure_blocks(section: str) -> list[str]:
    """The lines of a section that open a block of figures."""
    lines = section.splitlines()
    inside_fence = False
    opened = []
    for line in lines:
        if line.startswith("```"):
            inside_fence = not inside_fence
        elif not inside_fence and DATED_BLOCK.match(line):
            opened.append(line)
    return opened


def problems_of(name: str, section: str, options: list[str]) -> list[str]:
    """What is wrong with one script's section (empty when nothing is)."""
    problems = []
    if f"benchmarks/{name}.py" not in section:
        problems.append("no command that runs it")
    tables = "\n".join(line for line in section.splitlines() if line.startswith("|"))
    missing = [
        option
        for option in options
        if not re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", tables)
    ]
    if missing:
        problems.append(f"options not in its table: {', '.join(missing)}")
    if options and "| option | default | meaning |" not in section:
        problems.append("no options table")
    blocks = figure_blocks(section)
    if len(blocks) > 1:
        problems.append(f"{len(blocks)} dated figures blocks: {blocks}")
    for line in blocks:
        if not FIGURES_HEADING.match(line):
            problems.append(f"figures block not headed `### Current figures (YYYY-MM-DD)`: {line}")
    if blocks and FIGURES_HEADING.match(blocks[0]):
        after = section.split(blocks[0], 1)[1]
        if not COMMIT.search(after):
            problems.append("its figures name no commit")
    return problems


def declared_options(script: Path) -> list[str]:
    """The options a benchmark's argparse declares, less those hidden with SUPPRESS."""
    source = script.read_text("utf-8")
    options = []
    for match in OPTION.finditer(source):
        call = source[match.start() : source.find(")\n", match.start()) + 1]
        if "SUPPRESS" not in call:
            options.append(match[1])
    return options


def runnable_scripts() -> list[Path]:
    return sorted(
        path
        for path in BENCHMARKS.glob("*.py")
        if 'if __name__ == "__main__":' in path.read_text("utf-8")
    )


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    text = heading.lstrip("#").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def test_every_runnable_benchmark_has_a_current_section() -> None:
    text = README.read_text("utf-8")
    found = sections(text)
    scripts = runnable_scripts()
    assert len(scripts) >= 15, "the benchmarks were not found"
    problems = {}
    for script in scripts:
        name = script.stem
        if name not in found:
            problems[name] = ["no `## `" + name + ".py`` section"]
            continue
        issues = problems_of(name, found[name], declared_options(script))
        if issues:
            problems[name] = issues
    assert not problems, problems


def test_readme_says_where_the_older_figures_are() -> None:
    text = README.read_text("utf-8")
    assert "git log -p benchmarks/README.md" in text.split("\n## ", 1)[0]


def test_links_inside_the_readme_reach_a_heading() -> None:
    text = README.read_text("utf-8")
    anchors = {github_anchor(line) for line in text.splitlines() if line.startswith("#")}
    links = re.findall(r"\]\(#([^)]+)\)", text)
    assert links
    assert sorted(set(links) - anchors) == []


LOG_STYLE = """\
## `demo.py`: a benchmark

```sh
.venv/bin/python benchmarks/demo.py --size 3
```

| option | default | meaning |
|---|---|---|
| `--size N` | 3 | size |

### Current figures (2026-12-05)

Measured at `abc1234`.

| size | s |
|---|---|
| 3 | 1.0 |

**2026-12-06, after the change** (`def5678`):

| size | s |
|---|---|
| 3 | 0.5 |
"""


ONE_BLOCK = LOG_STYLE.split("**2026-12-06")[0]


@pytest.mark.parametrize(
    ("text", "options", "expected"),
    [
        (LOG_STYLE, ["--size"], "2 dated figures blocks"),
        (LOG_STYLE.replace("Current figures (2026-12-05)", "Results"), ["--size"], "2 dated"),
        (ONE_BLOCK, ["--size", "--seed"], "options not in its table: --seed"),
        (ONE_BLOCK.replace("`abc1234`", "HEAD"), ["--size"], "no commit"),
        (ONE_BLOCK.replace("Current figures", "Results"), ["--size"], "not headed"),
        (ONE_BLOCK.replace("benchmarks/demo.py", "demo"), ["--size"], "no command"),
    ],
)
def test_the_check_catches_a_log_of_runs(text: str, options: list[str], expected: str) -> None:
    problems = problems_of("demo", sections(text)["demo"], options)
    assert any(expected in problem for problem in problems), problems


def test_the_check_passes_one_current_block() -> None:
    assert problems_of("demo", sections(ONE_BLOCK)["demo"], ["--size"]) == []
