"""Progress of a long analysis (``attribute``, ``why``, ``fix``) on stderr, for a person at a
terminal and for a log or a pipe alike.

- **Terminal**: a rich bar with its total and the time left. The total is the budget in
  policy calls when one is set (the time left is then until the budget is spent: an upper
  bound), else the most units the design can run (``at most N rollouts``), else none (a
  pulsing bar: nothing bounds the run in advance).
- **Not a terminal**: one plain line at most every ``every_s`` seconds (10), such as
  ``attribute: 120 policy calls, 14 rollouts, 45 s``, so a run piped into a file or a CI log
  is seen to be alive; no control sequences.

A daemon thread refreshes the bar (and writes the lines) while the analysis runs in the
calling thread; it reads two counters only (the budget's calls, the units ticked).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

#: Seconds between two plain progress lines when stderr is not a terminal.
EVERY_S = 10.0
#: Seconds between two refreshes of the terminal bar.
REFRESH_S = 0.25


class AnalysisProgress:
    """Progress of one analysis (see the module docstring), used as a context manager.

    ``what``: the analysis' name (``attribute``); ``calls``: the policy calls spent so far
    (its budget's ``calls``); ``budget``: the budget's cap on them (``None``: no cap);
    ``unit``: what :meth:`tick` counts (``rollouts``, ``re-decisions``); ``most``: the most
    units the design can run, when known (the bar's total without a budget). ``console``:
    where to show it (default: stderr); ``clock``: seconds, monotonic (tests pass their own).
    """

    def __init__(
        self,
        what: str,
        *,
        calls: Callable[[], int],
        budget: int | None = None,
        unit: str = "rollouts",
        most: int | None = None,
        console: Console | None = None,
        every_s: float = EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from otelcar.cli.common import console as stderr_console

        self.what = what
        self.calls = calls
        self.budget = budget
        self.unit = unit
        self.most = most
        self.console = console or stderr_console(stderr=True)
        self.every_s = every_s
        self.clock = clock
        self.done = 0
        self.started = clock()
        self.last_line = self.started
        self.lines = 0
        self.progress: Progress | None = None
        self._task: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def terminal(self) -> bool:
        return bool(self.console.is_terminal)

    def tick(self, _item: object = None) -> None:
        """One unit done: the ``on_rollout`` / ``on_sample`` callback of the analysis."""
        self.done += 1

    def line(self) -> str:
        """The plain progress line: ``attribute: 120 policy calls, 14 rollouts, 45 s``."""
        spent = self.calls()
        cap = f" of {self.budget}" if self.budget is not None else ""
        elapsed = self.clock() - self.started
        return f"{self.what}: {spent}{cap} policy calls, {self.done} {self.unit}, {elapsed:.0f} s"

    def poll(self) -> None:
        """Bring the display up to date: the bar's count on a terminal; elsewhere a plain
        line when ``every_s`` has passed since the last (the thread calls this)."""
        if self.progress is not None:
            count = self.calls() if self.budget is not None else self.done
            self.progress.update(self._task, completed=count, calls=self.calls(), done=self.done)
            return
        now = self.clock()
        if now - self.last_line >= self.every_s:
            self.last_line = now
            self.lines += 1
            file = self.console.file
            file.write(self.line() + "\n")
            file.flush()

    def _columns(self) -> tuple[Any, ...]:
        from rich.progress import (
            BarColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        unit = self.unit
        if self.budget is not None:
            text = "{task.completed}/{task.total} policy calls (budget), {task.fields[done]} "
        elif self.most is not None:
            text = "{task.completed} of at most {task.total} " + unit + ", {task.fields[calls]} "
            unit = "policy calls"
        else:
            text = "{task.fields[done]} " + unit + ", {task.fields[calls]} "
            unit = "policy calls"
        count = TextColumn(text + unit)
        return (
            TextColumn(self.what),
            BarColumn(),
            count,
            TimeElapsedColumn(),
            TextColumn("left"),
            TimeRemainingColumn(),
        )

    def __enter__(self) -> AnalysisProgress:
        if self.terminal:
            from rich.progress import Progress

            self.progress = Progress(*self._columns(), console=self.console, transient=True)
            total = self.budget if self.budget is not None else self.most
            self._task = self.progress.add_task(self.what, total=total, calls=0, done=0)
            self.progress.start()
        interval = REFRESH_S if self.terminal else min(REFRESH_S * 4, self.every_s)
        self._thread = threading.Thread(
            target=self._run, args=(interval,), name=f"otelcar-progress-{self.what}", daemon=True
        )
        self._thread.start()
        return self

    def _run(self, interval: float) -> None:
        while not self._stop.wait(interval):
            self.poll()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.progress is not None:
            self.progress.stop()
