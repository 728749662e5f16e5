"""``otelcar mcp``: a Model Context Protocol server over the store, for coding agents.

Built on the official ``mcp`` SDK (the ``mcp`` extra). One job per module:
:mod:`.queries` reads traces and steps as JSON views, :mod:`.runs` runs ``attribute``,
``why`` and ``fix`` with progress, :mod:`.results` keeps finished runs, :mod:`.tools`
declares the tools (one module per group, over :mod:`.toolkit`), :mod:`.server` their
schemas and the server, :mod:`.transport` serves them on stdio or on
streamable HTTP at 127.0.0.1. docs/mcp.md says how to add it to a coding agent.
"""

from __future__ import annotations
