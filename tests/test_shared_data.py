"""The shared data (``../shared/data``) is read where it is; a test that needs it and does not
find it is skipped outside CI and fails under ``CI=true`` (a green CI run with the external
traces skipped would prove less than it says)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.parts import EXTERNAL, SHARED_DATA, WHOWHEN, need_data


def test_absent_shared_data_skips_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "")
    with pytest.raises(pytest.skip.Exception, match="shared data"):
        need_data(SHARED_DATA / "no-such-folder")


def test_absent_shared_data_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="missing under CI=true"):
        need_data(SHARED_DATA / "no-such-folder")


def test_the_data_is_where_the_tests_read_it() -> None:
    assert EXTERNAL.parent == WHOWHEN.parent == SHARED_DATA
    assert Path(__file__).resolve().parents[2] / "shared" / "data" == SHARED_DATA
    need_data(EXTERNAL)
    need_data(WHOWHEN)
