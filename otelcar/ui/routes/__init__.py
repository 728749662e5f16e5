"""The console's routes, one module per group over a :class:`~otelcar.ui.console.Console`:
:mod:`.lists` (the trace list, search, sessions), :mod:`.failures` (triage) and :mod:`.runs`
(starting, watching and reading runs); the trace pages are :mod:`otelcar.ui.app`'s."""
