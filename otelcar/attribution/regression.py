"""The import path of the regression tests ``otelcar fix --write-test`` wrote before the
attribution package had one subpackage per question: those files say
``from otelcar.attribution.regression import check_decision``, and keep working. New tests
import :mod:`otelcar.attribution.fixes.regression`."""

from otelcar.attribution.fixes.regression import check_decision

__all__ = ["check_decision"]
