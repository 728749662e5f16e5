"""``otelcar ui``: a local web console over the store (or a ``--source``).

:func:`create_app` builds the Starlette app (:mod:`otelcar.ui.app`: the trace pages and the
app; :mod:`otelcar.ui.routes`: the other route groups; :mod:`otelcar.ui.console`: what they
share; rendered on the server with Jinja2 from ``templates/``); :mod:`otelcar.ui.listing`
filters, sorts and pages the trace index in Polars; :mod:`otelcar.ui.runs` starts, watches,
cancels and keeps ``attribute``/``why``/``fix`` runs. Nothing is loaded from the network:
CSS and the one script are inline. See docs/ui.md.
"""

from otelcar.ui.app import create_app

__all__ = ["create_app"]
