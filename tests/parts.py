"""What to do when a part a test needs is missing (Chromium, the local model, Ray, chDB).

Outside CI the test is skipped with what to install. Under ``CI=true`` it fails: CI runs the
README's command, which installs every part, so a missing one means the run would prove less
than it claims (a green run with the browser tests skipped says nothing about the browser).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

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


#: The project's shared data beside the clone (``../shared/data``): read where it is, never
#: copied into the project.
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
#: Other projects' trace files, each folder with its ``SOURCE.md``.
EXTERNAL = SHARED_DATA / "external"
#: The Who&When failure-attribution benchmark (184 labelled logs).
WHOWHEN = SHARED_DATA / "whowhen"


def need_data(path: Path) -> Path:
    """``path`` under ``../shared/data``, or :func:`missing` (skipped outside CI, failed
    under ``CI=true``, where the shared data must be beside the clone)."""
    if not path.exists():
        missing(f"{path} (the project's shared data)", "../shared/data beside the clone")
    return path


def need_module(name: str, hint: str) -> ModuleType:
    """``import name``, or :func:`missing` when it cannot be imported."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        missing(f"the Python package {name!r} ({exc})", hint)


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,1600",
)


@contextlib.contextmanager
def headless_chromium(profile: Path) -> Iterator[Any]:
    """A selenium driver of headless Chromium (profile in ``profile``, browser console logs
    kept), quit after; skips (fails under CI) when chromium or chromedriver is missing."""
    if CHROMIUM is None or CHROMEDRIVER is None:
        missing(
            "headless Chromium (chromium and chromedriver on PATH)",
            "Debian packages chromium and chromium-driver, which `make test` installs",
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


@contextlib.contextmanager
def console_server(store: Path, *args: str) -> Iterator[str]:
    """``otelcar --store STORE ui --port 0 ARGS`` as a process, on the port it says it took,
    once it answers; yields its base URL and stops it after."""
    import re
    import subprocess
    import sys
    import time
    import urllib.request

    command = [sys.executable, "-m", "otelcar.cli", "--store", str(store), "ui", "--port", "0"]
    process = subprocess.Popen([*command, *args], stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        port = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert port is not None and port.group(1) != "0", f"otelcar ui said: {line!r}"
        url = f"http://127.0.0.1:{port.group(1)}"
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(url + "/traces", timeout=5).read()
                break
            except OSError:
                assert time.monotonic() < deadline, "otelcar ui did not answer"
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(10)


def browser_errors(driver: Any) -> list[dict[str, Any]]:
    """The errors a page logged in the browser's console."""
    return [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
