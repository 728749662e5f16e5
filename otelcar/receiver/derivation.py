"""Deriving steps beside intake, and how far behind it is.

Intake (decoding checks, fsync-ed appends, acknowledgements) and derivation (mapping spans to
steps, writing the derived tables) both hold Python's interpreter lock when they run in one
process, so a receiver deriving on a thread leaves the machine's other cores idle and slows
its own intake. :class:`Derivation` derives in a child process instead (``mode="process"``,
the default), which works on another core; ``mode="thread"`` keeps it in the receiver's
process (one core, no child).

Either way derivation is :meth:`otelcar.store.Store.catch_up`: the store's locks and its
state file make it safe beside the receiver's appends, and a derivation cut short (the
receiver killed) is redone from the raw records by the next writer. A child whose receiver
is gone (killed with SIGKILL, say) notices within a second and stops.
:meth:`Derivation.lag_bytes` is how many bytes of raw records wait to be derived (measured
at most :data:`LAG_MAX_AGE_S` ago); the receiver refuses new batches while it exceeds its
bound (backpressure).
"""

from __future__ import annotations

import contextlib
import logging
import math
import multiprocessing
import os
import threading
import time
from pathlib import Path
from typing import Any

from otelcar.errors import StoreBusy
from otelcar.store import Store
from otelcar.store.sink import TraceSink

log = logging.getLogger("otelcar.receiver")

MODES = ("process", "thread")
LAG_MAX_AGE_S = 0.1  # how stale the backlog figure the receiver checks may be


def derive_until_stopped(store: TraceSink, stop: Any, every_s: float, errors: Any) -> None:
    """Derive whatever raw records are pending, until ``stop`` (an ``Event``) is set; wait
    ``every_s`` when nothing is pending. ``errors`` (a shared ``Value``) counts failures
    (the raw records stay safe and are retried)."""
    busy_logged = False
    while not stop.is_set():
        derived = False
        try:
            if store.pending_bytes() > 0:
                store.catch_up(lock_timeout_s=0)
                derived = True
                busy_logged = False
        except StoreBusy as exc:
            if not busy_logged:  # an import derives; ours wait for it (not an error)
                log.info("deriving steps later: %s", exc)
                busy_logged = True
        except Exception as exc:
            with errors.get_lock():
                errors.value += 1
            log.error("deriving steps failed (raw records are safe; will retry): %s", exc)
        if not derived:
            stop.wait(every_s)


def _stop_when_orphaned(stop: Any, parent: int, every_s: float = 0.5) -> None:
    """Set ``stop`` once the process that started this one is gone (killed, crashed): a
    derivation child never outlives its receiver."""
    while not stop.wait(every_s):
        if os.getppid() != parent:
            log.warning("the receiver (pid %d) is gone: derivation stops", parent)
            stop.set()


def _child_main(root: str, stop: Any, every_s: float, errors: Any, parent: int) -> None:
    logging.basicConfig(level=logging.WARNING, format="otelcar derive: %(message)s")
    watch = threading.Thread(
        target=_stop_when_orphaned, args=(stop, parent), name="otelcar-orphan", daemon=True
    )
    watch.start()
    with contextlib.suppress(KeyboardInterrupt):  # the receiver's Ctrl-C reaches it too
        derive_until_stopped(Store(Path(root)), stop, every_s, errors)


class Derivation:
    """Derivation of one sink's pending records, in a child process (a :class:`Store`
    only: the child opens it by path) or a thread (any :class:`TraceSink`)."""

    def __init__(self, store: TraceSink, *, mode: str = "process", every_s: float = 0.5) -> None:
        if mode not in MODES:
            raise ValueError(f"derivation mode {mode!r} is not one of {', '.join(MODES)}")
        if mode == "process" and not isinstance(store, Store):
            raise ValueError(
                f"a {type(store).__name__} is derived on a thread (mode 'thread'): a child "
                "process can only open a Store, by its path"
            )
        self.store = store
        self.mode = mode
        self.every_s = every_s
        self._context = multiprocessing.get_context("spawn")
        self._stop: Any = None
        self._errors: Any = None
        self._worker: Any = None
        self._lag = 0
        self._lag_at = -math.inf
        self._lag_lock = threading.Lock()

    def start(self) -> None:
        if self.mode == "process":
            self._stop = self._context.Event()
            self._errors = self._context.Value("i", 0)
            self._worker = self._context.Process(
                target=_child_main,
                args=(str(self.store.root), self._stop, self.every_s, self._errors, os.getpid()),
                name="otelcar-derive",
                daemon=True,
            )
        else:
            self._stop = threading.Event()
            self._errors = multiprocessing.Value("i", 0, lock=True)
            self._worker = threading.Thread(
                target=derive_until_stopped,
                args=(self.store, self._stop, self.every_s, self._errors),
                name="otelcar-derive",
                daemon=True,
            )
        self._worker.start()

    @property
    def errors(self) -> int:
        """Derivations that failed so far (each is retried)."""
        return 0 if self._errors is None else int(self._errors.value)

    def lag_bytes(self, max_age_s: float = LAG_MAX_AGE_S) -> int:
        """Bytes of raw records not yet derived, measured at most ``max_age_s`` ago (file
        sizes and the state file: cheap, but not on every request)."""
        with self._lag_lock:
            now = time.monotonic()
            if now - self._lag_at >= max_age_s:
                try:
                    self._lag = self.store.pending_bytes()
                except Exception as exc:  # a state file being replaced: keep the last figure
                    log.debug("could not measure the derivation backlog: %s", exc)
                self._lag_at = now
            return self._lag

    def stop(self) -> None:
        """Stop deriving once the derivation in progress is done (it derives everything
        pending when it started, in bounded builds; the backlog bound keeps that short).
        What arrives after it is left to the caller's last :meth:`Store.catch_up`."""
        if self._worker is None:
            return
        self._stop.set()
        self._worker.join()
        self._worker = None
