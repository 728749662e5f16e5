"""The progress of attribute/why/fix (:mod:`otelcar.cli.progress`): a bar with its total and
the time left on a terminal, a plain line at most every ``every_s`` seconds on a pipe."""

from __future__ import annotations

import io
import time

from rich.console import Console
from rich.progress import TimeRemainingColumn

from otelcar.cli.progress import AnalysisProgress


def _terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=160), out


def _pipe() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    console = Console(file=out, width=160)
    assert not console.is_terminal
    return console, out


def test_on_a_terminal_the_bar_counts_policy_calls_against_the_budget_with_time_left():
    console, out = _terminal()
    spent = [0]
    with AnalysisProgress(
        "attribute", calls=lambda: spent[0], budget=200, most=41, console=console
    ) as progress:
        assert progress.progress is not None
        for _ in range(3):
            progress.tick()
        spent[0] = 37
        progress.poll()
        (task,) = progress.progress.tasks
        assert (task.total, task.completed, task.fields["done"]) == (200, 37, 3)
        columns = progress.progress.columns
        assert any(isinstance(c, TimeRemainingColumn) for c in columns)
        progress.progress.refresh()
    shown = out.getvalue()
    assert "37/200 policy calls (budget), 3 rollouts" in shown and "left" in shown


def test_without_a_budget_the_bar_counts_units_against_the_most_the_design_runs():
    console, out = _terminal()
    with AnalysisProgress("attribute", calls=lambda: 12, most=41, console=console) as progress:
        progress.tick()
        progress.poll()
        (task,) = progress.progress.tasks
        assert (task.total, task.completed) == (41, 1)
        progress.progress.refresh()
    assert "1 of at most 41 rollouts, 12 policy calls" in out.getvalue()
    console, _ = _terminal()
    with AnalysisProgress("why", calls=lambda: 0, unit="re-decisions", console=console) as bare:
        assert bare.progress.tasks[0].total is None  # nothing bounds it in advance


def test_on_a_pipe_a_plain_line_comes_at_most_every_every_s_seconds():
    console, out = _pipe()
    now = [100.0]
    spent = [0]
    progress = AnalysisProgress(
        "attribute",
        calls=lambda: spent[0],
        budget=500,
        console=console,
        every_s=10,
        clock=lambda: now[0],
    )
    progress.tick()
    for at, calls in [(104.0, 20), (110.0, 120), (115.0, 130), (121.0, 200)]:
        now[0], spent[0] = at, calls
        progress.poll()
        progress.tick()
    assert out.getvalue().splitlines() == [
        "attribute: 120 of 500 policy calls, 2 rollouts, 10 s",
        "attribute: 200 of 500 policy calls, 4 rollouts, 21 s",
    ]
    assert "\x1b" not in out.getvalue()


def test_on_a_pipe_the_lines_come_while_the_analysis_runs_and_stop_after():
    console, out = _pipe()
    with AnalysisProgress(
        "why", calls=lambda: 3, unit="re-decisions", console=console, every_s=0.05
    ) as progress:
        assert progress.progress is None
        time.sleep(0.4)
    lines = out.getvalue().splitlines()
    assert len(lines) >= 2 and all(line.startswith("why: 3 policy calls, 0 re") for line in lines)
    time.sleep(0.2)
    assert out.getvalue().splitlines() == lines  # the thread stopped with the block
