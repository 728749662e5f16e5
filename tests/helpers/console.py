"""The console (``otelcar ui``) over the scripted refund project, for Starlette's TestClient."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from otelcar.store import Store
from tests.conftest import NEW_CONTENT
from tests.helpers.scripted_refund import OUTCOME, imported_trace_with_policy

#: The refund trace the project holds.
TRACE = NEW_CONTENT


@pytest.fixture(name="project")
def project_fixture(tmp_path: Path) -> tuple[Path, Path]:
    """``(store, otelcar.toml)``: the new-content fixture imported, the scripted policy of
    tests/helpers/scripted_refund.py and an outcome (the refund was issued)."""
    _, _, config = imported_trace_with_policy(tmp_path)
    config.write_text(config.read_text() + OUTCOME)
    return tmp_path / "store", config


def app_for(store: Path, config: Path | None = None) -> Any:
    """The console's app over ``store`` (runs kept in ``store/runs``) with ``config``."""
    from otelcar.ui import create_app  # the 'ui' extra: test modules skip without it

    return create_app(
        open_source=lambda: Store(store, create=False),
        runs_dir=store / "runs",
        config_path=config,
        allowed_hosts=["testserver"],
        store_root=store,
    )
