"""Shared test fixtures: paths of the committed OTLP fixtures and a fresh store."""

from __future__ import annotations

from pathlib import Path

import pytest

from otelcar import Store

ROOT = Path(__file__).resolve().parents[1]
OTLP = ROOT / "fixtures" / "otlp"
BAD = OTLP / "bad"

# Trace ids of the committed fixtures (seeded id generator in fixtures/otlp/make_fixtures.py).
NEW_CONTENT = "c2b9546e0f0220f3edb7f1d5cbf15150"
NEW_NOCONTENT = "e638bca46bd70d89987fc91e855cdff8"
LEGACY_CONTENT = "38b1f9a35c2855ba8f0f9d8c7f51c46e"
LEGACY_NOCONTENT = "b8004092f9e22b921b38eefa6bced784"
LENGTH_LIMIT = "662e0001e6f57713ca1ebac97bad1f68"
MIXED_HTTP = "71985eb13a8839190e4bd00558bc15e5"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")
