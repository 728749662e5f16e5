"""Attribution (DESIGN.md §6), one subpackage per question, on one experiment layer:

* :mod:`.stats` — pure statistics (intervals, exact tests, multiplicity, spending);
* :mod:`.experiment` — seed spaces and arms of seeded samples, shared by every estimator;
* :mod:`.steps` — which step caused the failure (``attribute``);
* :mod:`.context` — which text made a decision (``why``);
* :mod:`.fixes` — which fix prevents it (``fix``, regression tests);
* :mod:`.aggregate` — what many traces' attributions say together.

The names below load on first use (PEP 562): importing a submodule such as the pure
:mod:`.stats` runs this package first, and it imports nothing, so it loads neither the
estimators nor Polars.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from otelcar.attribution.steps.attribute import (
        AttributionError,
        attribute,
        attribute_async,
    )
    from otelcar.attribution.steps.result import AttributionResult

#: Public name → the module that defines it.
_LAZY = {
    "AttributionError": "otelcar.attribution.steps.attribute",
    "attribute": "otelcar.attribution.steps.attribute",
    "attribute_async": "otelcar.attribution.steps.attribute",
    "AttributionResult": "otelcar.attribution.steps.result",
}

__all__ = ["AttributionError", "AttributionResult", "attribute", "attribute_async"]


def __getattr__(name: str) -> Any:
    """The public name ``name``, imported from its module on first access; a submodule
    (``otelcar.attribution.stats``) is found by the import system, not here."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'otelcar.attribution' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next access is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
