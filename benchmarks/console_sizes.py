"""The console at the size of real traces (issue 39): a long trace's page, and the list while
long pages are served.

The trace: :func:`otelcar.testing.long_traces.long_conversation` with ``--turns`` chat turns
(250: a 500-step trace; each chat span carries the whole conversation so far, as
instrumentations record it), imported with ``otelcar import`` into a fresh store; ``otelcar
ui`` started as a process on a free port (uvicorn, as users run it). Measured, printed, never
asserted:

1. **The first page of the trace**: bytes transferred and wall time of the request (median
   of ``--repeat``), and with headless Chromium when it is installed, the first contentful
   paint of the page (``performance.getEntriesByType('paint')``). Goals: ≤ 1 MB, ≤ 1 s.
2. **The whole step**: the last step's own page (its whole context), bytes and time.
3. **``/traces`` while long pages are served**: the issue's case — one client fetches the
   long trace's pages in a loop while an MCP server (its own process, the official client in
   process) answers ``show_trace`` on the same trace in a loop — and a harsher one,
   ``--clients`` threads fetching the pages; meanwhile one client fetches ``/traces``
   ``--list-requests`` times. p50 and p99 of the list's latency, against the same list
   fetched with nothing else running (the baseline in the same run). Goal: p99 ≤ 100 ms.
   Each is measured twice: the list as kept while the store is unchanged
   (:mod:`otelcar.store.stamp`), and drawn anew at every request (the store's
   ``derived/state.json`` touched before each, as a build that wrote a trace touches it:
   what a request costs when a trace arrived since the last one).

4. **Search at 20,000 traces** (``--search-traces``): that many short runs (3 chat turns each,
   120,000 spans) imported into a store of their own; the median of ``--repeat`` searches
   (:func:`otelcar.trace_search.matching_steps`, what the console's ``/search`` and the MCP
   server's ``search_traces`` run) for a text in every trace, in some, and in none, and the
   console's whole ``/search`` page for the common one. Goal: ≤ 500 ms.

Before this page was paged and folded (2026-12-04), the same trace drew every context whole:
24.3 MB and 4.3 s (TestClient, the same host), with ``/traces`` waiting behind it.

``python benchmarks/console_sizes.py`` (about a minute on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from otelcar.testing.long_traces import long_conversation  # noqa: E402

TRACE = "5" * 32
#: An MCP server answering show_trace on the long trace in a loop, in a process of its own.
MCP_LOOP = """
import sys, anyio
from pathlib import Path
from mcp import Client
from otelcar.mcp.runs import RunContext
from otelcar.mcp.server import build_server
async def main():
    async with Client(build_server(RunContext(Path(sys.argv[1])))) as client:
        while True:
            await client.call_tool("show_trace", {"trace_id": sys.argv[2]})
anyio.run(main)
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _get(url: str) -> tuple[float, int]:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as response:
        size = len(response.read())
    return time.perf_counter() - started, size


def _serve(store: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    command = [sys.executable, "-m", "otelcar.cli", "--store", str(store), "ui"]
    process = subprocess.Popen([*command, "--port", str(port)], stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            _get(url + "/traces")
            return process, url
        except OSError:
            if time.monotonic() > deadline:
                process.kill()
                raise SystemExit("otelcar ui did not start") from None
            time.sleep(0.2)


def _first_paint(url: str, profile: Path) -> float | None:
    """Seconds to the first contentful paint in headless Chromium (``None``: not installed)."""
    try:
        from tests.parts import headless_chromium

        with headless_chromium(profile) as driver:
            driver.get(url)
            painted, deadline = None, time.monotonic() + 5
            while painted is None and time.monotonic() < deadline:  # recorded after load
                paints = driver.execute_script(
                    "return performance.getEntriesByType('paint').map(e => [e.name, e.startTime])"
                )
                painted = dict(paints).get("first-contentful-paint")
                if painted is None:
                    time.sleep(0.1)
            if painted is None:  # a page not painted yet when read: no figure, not 0 ms
                print("first paint: not measured (Chromium recorded no contentful paint)")
                return None
            return painted / 1000
    except BaseException as exc:  # pytest's skip is a BaseException
        print(f"first paint: not measured ({type(exc).__name__}: {exc})")
        return None


def _list_latencies(url: str, n: int, *, arrived: Path | None = None) -> list[float]:
    """``n`` fetches of ``/traces``, one after the other: their wall seconds. ``arrived``
    (the store's ``derived/state.json``): before each fetch its modification time moves on,
    as a build that wrote a new trace moves it, so the console reads and draws the list anew
    every time (nothing it kept applies)."""
    out = []
    for i in range(n):
        if arrived is not None:
            moment = time.time_ns() + i
            os.utime(arrived, ns=(moment, moment))
        out.append(_get(url + "/traces")[0])
    return out


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def search(n: int, repeat: int) -> None:
    """Time the search over ``n`` short traces (item 4 of the module docstring)."""
    from starlette.testclient import TestClient

    from otelcar.store import Store
    from otelcar.trace_search import matching_steps
    from otelcar.ui import create_app

    with tempfile.TemporaryDirectory() as tmp:
        dump = Path(tmp) / "many.jsonl"
        with dump.open("w", encoding="utf-8") as out:
            for i in range(n):
                document = long_conversation(
                    3,
                    trace_id=f"{i + 1:032x}",
                    seed=i,
                    payload=200,
                    start_ns=(17 * 10**8 + i) * 10**9,
                )
                out.write(json.dumps(document) + "\n")
        store = Path(tmp) / "store"
        subprocess.run(
            [sys.executable, "-m", "otelcar.cli", "--store", str(store), "import", str(dump)],
            check=True,
            capture_output=True,
        )
        print(f"search over {n:,} traces ({3 * n:,} LLM steps):")
        with Store(store) as source:
            for query in ("search", "warranty policy", "no such words"):
                times, found = [], 0
                for _ in range(repeat):
                    started = time.perf_counter()
                    found = len(matching_steps(source, query))
                    times.append(time.perf_counter() - started)
                print(
                    f"  {query!r}: {found:,} traces, median {statistics.median(times) * 1e3:.0f} ms"
                )
        app = create_app(
            open_source=lambda: Store(store), runs_dir=Path(tmp) / "runs", store_root=store
        )
        with TestClient(app, base_url="http://127.0.0.1") as client:
            times = []
            for _ in range(repeat):
                started = time.perf_counter()
                client.get("/search?q=warranty+policy")
                times.append(time.perf_counter() - started)
        median = statistics.median(times) * 1e3
        print(f"  the console's /search page: median {median:.0f} ms (goal ≤ 500 ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=250)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--list-requests", type=int, default=200)
    parser.add_argument("--search-traces", type=int, default=20_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        dump = work / "long.json"
        dump.write_text(json.dumps(long_conversation(args.turns, fail_every=40)), "utf-8")
        dump_mb = dump.stat().st_size / 1e6
        store = work / "store"
        subprocess.run(
            [sys.executable, "-m", "otelcar.cli", "--store", str(store), "import", str(dump)],
            check=True,
            capture_output=True,
        )
        process, url = _serve(store)
        state = store / "derived" / "state.json"
        try:
            page = f"{url}/traces/{TRACE}"
            first = [_get(page) for _ in range(args.repeat)]
            step = [_get(f"{page}/steps/{2 * args.turns - 1}") for _ in range(args.repeat)]
            paint = _first_paint(page, work / "chromium")
            alone = _list_latencies(url, args.list_requests)
            alone_fresh = _list_latencies(url, args.list_requests, arrived=state)
            stop = threading.Event()

            def load() -> None:
                pages = [f"{page}?page={p}" for p in range(1, 6)] + [
                    f"{page}/steps/{2 * args.turns - 1}"
                ]
                i = 0
                while not stop.is_set():
                    _get(pages[i % len(pages)])
                    i += 1

            mcp = subprocess.Popen([sys.executable, "-c", MCP_LOOP, str(store), TRACE])
            page_loop = threading.Thread(target=load)
            page_loop.start()
            time.sleep(1.0)
            mixed = _list_latencies(url, args.list_requests)
            mixed_fresh = _list_latencies(url, args.list_requests, arrived=state)
            mcp.terminate()
            mcp.wait(10)
            threads = [threading.Thread(target=load) for _ in range(args.clients - 1)]
            for thread in threads:
                thread.start()
            time.sleep(0.5)
            busy = _list_latencies(url, args.list_requests)
            busy_fresh = _list_latencies(url, args.list_requests, arrived=state)
            stop.set()
            for thread in [page_loop, *threads]:
                thread.join()
        finally:
            process.terminate()
            process.wait(10)
    steps = 2 * args.turns
    print(f"{steps}-step trace ({dump_mb:.1f} MB of OTLP/JSON), otelcar ui:")
    print(
        f"  first page: {first[0][1] / 1e3:.0f} KB, "
        f"{statistics.median(t for t, _ in first) * 1e3:.0f} ms (median of {args.repeat})"
        + (f", first contentful paint {paint * 1e3:.0f} ms" if paint is not None else "")
        + " (goals ≤ 1 MB, ≤ 1 s)"
    )
    print(
        f"  the last step's own page (its whole context): {step[0][1] / 1e3:.0f} KB, "
        f"{statistics.median(t for t, _ in step) * 1e3:.0f} ms"
    )
    if args.search_traces:
        search(args.search_traces, args.repeat)
    print("  /traces (p50 / p99; kept: the store unchanged since the last request; drawn anew:")
    print("  the store's state touched before each, as when a trace arrived in between):")
    for what, kept, fresh in (
        ("alone", alone, alone_fresh),
        (
            "while one client loads the long trace's pages and an MCP server answers "
            "show_trace on it (goal p99 ≤ 100 ms)",
            mixed,
            mixed_fresh,
        ),
        (f"while {args.clients} clients load the long trace's pages", busy, busy_fresh),
    ):
        print(
            f"    {what}: kept {statistics.median(kept) * 1e3:.1f} / {_p99(kept) * 1e3:.1f} ms, "
            f"drawn anew {statistics.median(fresh) * 1e3:.1f} / {_p99(fresh) * 1e3:.1f} ms"
        )


if __name__ == "__main__":
    main()
