"""Open HTTP connections of the receiver: whole-request deadlines, fair permits, draining.

A thread-per-connection server is only as fair as what a connection may hold. Here a
connection holds nothing scarce while it waits for its client: a request must arrive whole
within its deadline (headers within ``header_timeout_s`` of their first byte; the body within
``body_timeout_s`` plus one second per ``min_upload_bytes_per_s`` bytes received, the rule
of Apache's mod_reqtimeout), and a processing permit is taken only once the body is in. A
:class:`Reaper` thread cuts the read side of a connection past its deadline, so its handler
answers 408 and closes. :class:`Permits` keeps one busy client from taking every permit, and
:meth:`Connections.drain` closes idle keep-alive connections while letting requests already
arriving finish, for a graceful stop.
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

log = logging.getLogger("otelcar.receiver")

IDLE, READING, WORKING = "idle", "reading", "working"


@dataclass(frozen=True, slots=True)
class Deadlines:
    """How long a client may take to send one request."""

    header_timeout_s: float = 10.0
    body_timeout_s: float = 10.0
    min_upload_bytes_per_s: int = 32 * 1024
    idle_timeout_s: float = 30.0  # a keep-alive connection with no request coming

    def body_deadline(self, started: float, received: int) -> float:
        return started + self.body_timeout_s + received / self.min_upload_bytes_per_s


@dataclass(eq=False, slots=True)
class Connection:
    """One client connection and the phase it is in."""

    sock: socket.socket
    peer: str
    state: str = IDLE
    deadline: float | None = None
    expired: bool = False  # the reaper cut it: the handler answers 408
    closed: bool = False
    opened: float = field(default_factory=time.monotonic)

    def cut(self) -> None:
        """Stop reading from the client; a handler blocked in a read sees end of input."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RD)


class Connections:
    """The live connections of one HTTP server (thread-safe)."""

    def __init__(self, deadlines: Deadlines, max_connections: int, max_buffered_bytes: int) -> None:
        self.deadlines = deadlines
        self.max_connections = max_connections
        self.max_buffered_bytes = max_buffered_bytes
        self.buffered_bytes = 0  # request bodies read but not yet handed to the writer
        self.draining = False
        self.timed_out = 0  # requests cut at their deadline
        self._live: set[Connection] = set()
        self._cond = threading.Condition()

    def __len__(self) -> int:
        with self._cond:
            return len(self._live)

    def open(self, sock: socket.socket, peer: str) -> Connection | None:
        """Register a new connection; ``None`` when the server is full or draining. When full,
        the oldest idle connection of the peer holding the most is closed to make room, so
        idle keep-alives of one client cannot lock the others out."""
        with self._cond:
            if self.draining:
                return None
            if len(self._live) >= self.max_connections and not self._evict_idle():
                return None
            conn = Connection(sock, peer)
            self._live.add(conn)
            return conn

    def _evict_idle(self) -> bool:
        idle = [c for c in self._live if c.state == IDLE and not c.closed]
        if not idle:
            return False
        per_peer = Counter(c.peer for c in self._live)
        victim = min(idle, key=lambda c: (-per_peer[c.peer], c.opened))
        victim.closed = True
        victim.cut()
        return True

    def close(self, conn: Connection) -> None:
        with self._cond:
            conn.closed = True
            self._live.discard(conn)
            self._cond.notify_all()

    def idle(self, conn: Connection) -> bool:
        """Between requests. ``False``: stop serving this connection (draining or cut)."""
        with self._cond:
            conn.state, conn.deadline = IDLE, None
            return not (self.draining or conn.closed or conn.expired)

    def reading(self, conn: Connection, deadline: float) -> bool:
        """A request began arriving. ``False`` when the connection was already cut (a
        drain or an eviction raced the client's first byte)."""
        with self._cond:
            if conn.closed:
                return False
            conn.state, conn.deadline = READING, deadline
            return True

    def extend(self, conn: Connection, deadline: float) -> None:
        with self._cond:
            if not conn.expired:
                conn.deadline = deadline

    def working(self, conn: Connection) -> None:
        """The request is in: no deadline while the receiver works on it."""
        with self._cond:
            conn.state, conn.deadline = WORKING, None

    def buffer(self, size: int) -> bool:
        """Count ``size`` more body bytes held in memory; ``False`` (nothing counted) when
        that passes ``max_buffered_bytes``. Give them back with :meth:`unbuffer`."""
        with self._cond:
            if self.buffered_bytes + size > self.max_buffered_bytes:
                return False
            self.buffered_bytes += size
            return True

    def unbuffer(self, size: int) -> None:
        with self._cond:
            self.buffered_bytes -= size

    def reap(self, now: float | None = None) -> int:
        """Cut every connection past its deadline; returns how many."""
        now = time.monotonic() if now is None else now
        cut = 0
        with self._cond:
            for conn in self._live:
                if conn.deadline is not None and now > conn.deadline and not conn.expired:
                    conn.expired = True
                    conn.cut()
                    cut += 1
            self.timed_out += cut
        if cut:
            log.warning("cut %d connection(s) that did not send a whole request in time", cut)
        return cut

    def drain(self, grace_s: float) -> int:
        """Stop taking connections, close idle ones, wait up to ``grace_s`` for requests in
        progress, then cut what is left; returns how many were cut unfinished."""
        deadline = time.monotonic() + grace_s
        with self._cond:
            self.draining = True
            while True:
                for conn in self._live:  # idle, with no request on its way: close it
                    if conn.state == IDLE and not conn.closed and not _has_input(conn.sock):
                        conn.closed = True
                        conn.cut()
                if not self._live or time.monotonic() >= deadline:
                    break
                self._cond.wait(max(0.0, min(0.1, deadline - time.monotonic())))
            left = list(self._live)
            for conn in left:
                conn.closed = True
                conn.cut()
        if left:
            log.warning("stopped with %d request(s) unfinished after %g s", len(left), grace_s)
        return len(left)


def _has_input(sock: socket.socket) -> bool:
    """Whether the client has sent bytes not read yet (a request on its way)."""
    try:
        poller = select.poll()
        poller.register(sock.fileno(), select.POLLIN)
        if not poller.poll(0):
            return False
        return bool(sock.recv(1, socket.MSG_PEEK))  # readable: data, or b"" at end of input
    except (OSError, ValueError):
        return False


class Reaper:
    """A thread cutting connections past their deadline every ``every_s``."""

    def __init__(self, connections: Connections, every_s: float = 0.25) -> None:
        self.connections = connections
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="otelcar-reaper", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.connections.reap()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


class Permits:
    """At most ``total`` requests processed at once. While more than half are taken, a peer
    may hold no more than its share (``total`` divided by the peers holding permits or
    asking), so one client sending in parallel cannot starve the others; alone it may use
    them all. Clients behind one address (a proxy, or every test on 127.0.0.1) share one."""

    def __init__(self, total: int) -> None:
        self.total = total
        self._held: Counter[str] = Counter()
        self._used = 0
        self._lock = threading.Lock()

    def try_acquire(self, peer: str) -> bool:
        with self._lock:
            if self._used >= self.total:
                return False
            if self._used * 2 >= self.total:
                peers = len(set(self._held) | {peer})
                if self._held[peer] >= max(1, self.total // peers):
                    return False
            self._held[peer] += 1
            self._used += 1
            return True

    def release(self, peer: str) -> None:
        with self._lock:
            self._used -= 1
            self._held[peer] -= 1
            if self._held[peer] <= 0:
                del self._held[peer]

    def held(self, peer: str | None = None) -> int:
        with self._lock:
            return self._used if peer is None else self._held[peer]
