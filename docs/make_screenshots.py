"""The console's screenshots in docs/ui.md, made again from scratch: a store with a long trace
(250 chat turns), three traces of two sessions and the project's openai-v2 fixture, served
by ``otelcar ui`` and photographed by headless Chromium.

    .venv/bin/python docs/make_screenshots.py      # writes docs/images/console-*.png
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from otelcar import Store, import_files  # noqa: E402
from otelcar.testing.long_traces import long_conversation  # noqa: E402
from tests.parts import console_server, headless_chromium  # noqa: E402

IMAGES = ROOT / "docs" / "images"
DAY = 1_764_892_800 * 10**9  # 2025-12-05 00:00 UTC
SHOTS = {
    "console-list.png": "/traces",
    "console-long-trace.png": "/traces/" + "5" * 32 + "?page=3",
    "console-search.png": "/search?q=timed+out",
    "console-session.png": "/sessions/conv-1",
}
#: Run on a page before its shot: the long trace shows one decision opened (its context
#: folded to what it adds) and the failed tool call before it.
OPEN = {
    "console-long-trace.png": """
        for (const n of [239, 240, 241]) {
          const step = document.getElementById('step-' + n);
          step.open = true;
          step.querySelectorAll('details').forEach(d => { d.open = true; });
        }
        document.getElementById('step-239').scrollIntoView();
    """,
}


def build(store: Path, tmp: Path) -> None:
    documents = {
        "long.json": long_conversation(250, fail_every=40, start_ns=DAY),
        "a.json": long_conversation(
            3, trace_id="a" * 32, conversation="conv-1", start_ns=DAY + 3_600 * 10**9
        ),
        "b.json": long_conversation(
            4,
            trace_id="b" * 32,
            conversation="conv-1",
            model="claude-3-5-haiku",
            start_ns=DAY + 7_200 * 10**9,
        ),
        "c.json": long_conversation(
            2, trace_id="c" * 32, conversation="conv-2", start_ns=DAY + 9_000 * 10**9
        ),
    }
    paths = []
    for name, document in documents.items():
        path = tmp / name
        path.write_text(json.dumps(document), encoding="utf-8")
        paths.append(path)
    paths += sorted((ROOT / "fixtures" / "otlp").glob("new_content.*.jsonl"))  # a real one
    import_files(paths, store=Store(store, create=True))


def main() -> None:
    IMAGES.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        build(tmp / "store", tmp)
        with console_server(tmp / "store") as url, headless_chromium(tmp / "chrome") as web:
            web.set_window_size(1400, 1000)
            for name, path in SHOTS.items():
                web.get(url + path)
                if name in OPEN:
                    web.execute_script(OPEN[name])
                time.sleep(0.5)
                web.save_screenshot(str(IMAGES / name))
                print(f"wrote docs/images/{name}")


if __name__ == "__main__":
    main()
