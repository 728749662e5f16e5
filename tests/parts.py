"""What to do when a part a test needs is missing (Chromium, the local model, Ray, chDB).

Outside CI the test is skipped with what to install. Under ``CI=true`` it fails: CI runs the
README's command, which installs every part, so a missing one means the run would prove less
than it claims (a green run with the browser tests skipped says nothing about the browser).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import NoReturn

import pytest


def in_ci() -> bool:
    """Whether this run is CI's (``CI`` set to true, 1 or yes, as CI services do)."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def missing(part: str, hint: str) -> NoReturn:
    """Skip (outside CI) or fail (under CI) because ``part`` is missing; ``hint`` says how to
    install it."""
    if in_ci():
        pytest.fail(f"{part} is missing under CI=true: {hint}", pytrace=False)
    pytest.skip(f"{part} is missing: {hint}", allow_module_level=True)


def need_module(name: str, hint: str) -> ModuleType:
    """``import name``, or :func:`missing` when it cannot be imported."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        missing(f"the Python package {name!r} ({exc})", hint)
