"""Attribution (DESIGN.md §6), one subpackage per question, on one experiment layer:

* :mod:`.stats` — pure statistics (intervals, exact tests, multiplicity, spending);
* :mod:`.experiment` — seed spaces and arms of seeded samples, shared by every estimator;
* :mod:`.steps` — which step caused the failure (``attribute``);
* :mod:`.context` — which text made a decision (``why``);
* :mod:`.fixes` — which fix prevents it (``fix``, regression tests);
* :mod:`.aggregate` — what many traces' attributions say together.
"""

from otelcar.attribution.steps.attribute import AttributionError, attribute, attribute_async
from otelcar.attribution.steps.result import AttributionResult

__all__ = ["AttributionError", "AttributionResult", "attribute", "attribute_async"]
