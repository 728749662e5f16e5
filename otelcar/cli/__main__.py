"""``python -m otelcar.cli``: the ``otelcar`` command."""

from otelcar.cli import main

main()
