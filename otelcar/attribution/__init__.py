"""Attribution: which step caused the failure (DESIGN.md §6), kept apart as estimand
(:mod:`curve`), estimator (:mod:`api`, :mod:`sampling`), statistics (:mod:`stats`) and
result (:mod:`result`)."""

from otelcar.attribution.api import AttributionError, attribute, attribute_async
from otelcar.attribution.result import AttributionResult

__all__ = ["AttributionError", "AttributionResult", "attribute", "attribute_async"]
