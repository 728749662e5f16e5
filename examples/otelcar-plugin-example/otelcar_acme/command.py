"""``otelcar acme-info``: what this plugin adds, as otelcar sees it (a command a plugin adds
through ``register_commands``)."""

from __future__ import annotations

import click


@click.command("acme-info")
def acme_info() -> None:
    """Show what the ACME example plugin registered in otelcar."""
    from otelcar.conventions import mapper_names
    from otelcar.executors import executor_names
    from otelcar.ingest.formats import export_formats
    from otelcar.outcome import outcome_types
    from otelcar.policies.registry import policy_types
    from otelcar.sources import source_schemes
    from otelcar_acme import __version__

    click.echo(f"otelcar-plugin-example {__version__}")
    present = {
        "mapper acme": "acme" in mapper_names(),
        "format acme-jsonl": "acme-jsonl" in [f.name for f in export_formats()],
        "policy type acme-canned": "acme-canned" in policy_types(),
        "outcome answer_length": "answer_length" in outcome_types(),
        "executor acme-counting": "acme-counting" in executor_names(),
        "source dumpdir://": "dumpdir" in source_schemes(),
    }
    for what, registered in present.items():
        click.echo(f"  {what}: {'registered' if registered else 'MISSING'}")
