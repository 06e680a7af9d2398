"""The claim combiner: one writer per database on this machine, batching the claims
of every local process into shared transactions.

Why: claims racing from many processes pay for the race itself. On SQLite each
transaction that follows another process's write starts with an empty page cache
(SQLite drops a connection's whole cache when another connection has written), and
losers sleep in SQLite's busy handler while the lock sits idle. On PostgreSQL each
claim holds its team's event-sequence lock through its own commit's WAL flush, so a
team's claims commit one at a time. Run by one writer, k claims share one
transaction: one lock hand-off, one warm cache, one commit and one flush. Measured
(one writer running the board's own claim statement): 16 claims per transaction
reach ~3x a lone claim's rate on SQLite and ~2.2x on PostgreSQL. End to end at 12
processes (``bench/claim.py --decompose``): PostgreSQL 2998 claims/s against 1539
direct, SQLite 4554 against 3951.

How:

* The first process that claims on a database (outside a transaction of its own)
  and finds no combiner answering becomes its host: it takes an exclusive
  ``flock`` on the database's lock file, binds a Unix socket, and runs the
  combiner in a daemon thread with its own database connection. Claims on this
  machine then go to that socket, the host's own too once another process is
  connected (alone, the host claims directly).
* The combiner reads whatever requests have arrived, runs up to
  :data:`MAX_BATCH` of them in one write transaction (a request is the claim
  statement its process prepared; :func:`board.store.claims.claim_batch` runs
  them), and answers each after the commit. A request that fails is re-run alone, so it
  fails only itself. The claimer delivers its claim's event to its own listeners
  when the answer arrives: after commit, as a direct claim does.
* When no combiner answers (none yet, the host is starting, or it went away), the
  claim runs directly as before: the combiner is an accelerator, never a
  requirement, and the database still arbitrates every claim.
* If the host dies or the answer is lost after a request went out, the claimer
  first makes sure the host's transaction is over (PostgreSQL would otherwise go on
  running a dead host's pipelined batch, COMMIT included: the claimer ends that
  session and waits for it), then looks its claim up by its own stamp (agent and
  ``updated_at``): a claim that committed is returned, one that did not is run
  directly. The same when the host cannot tell whether its batch committed (its
  connection failed). (On SQLite, a host stopped mid-batch for longer than
  :data:`REPLY_TIMEOUT_SECONDS` that then resumes commits a claim its claimer has
  given up on: nobody renews it, its lease lapses and it is handed out again.)
* Claims go to it only while enough processes claim at once (:data:`CROWD`,
  counted on a shared-memory page every claimer stamps): below that, the round
  trip costs more than batching saves.
* On SQLite the host's WAL checkpoints run beside its batches, on a
  :class:`core.storage.Checkpointer` it pokes after each commit, not inside
  its ``COMMIT`` (where they would wait for two fsyncs with every claimer waiting).
* The host gives up the role after :data:`IDLE_SECONDS` with no claimer
  connected, at exit, and in a forked child (which never inherits it).

The socket lives in a per-user directory (mode 0700) and the combiner serves only
connections from its own user (``SO_PEERCRED``): requests are pickled claim
statements. ``CLAWBOO_CLAIM_COMBINER=0`` switches it off.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import mmap
import os
import pickle
import selectors
import socket
import stat
import struct
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.backends.base.base import BaseDatabaseWrapper

from core import storage

try:
    import fcntl
except ImportError:  # not a POSIX system: no combiner
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

# SO_PEERCRED (who is on the other end of a Unix socket) is Linux's.
SUPPORTED = fcntl is not None and hasattr(socket, "AF_UNIX") and hasattr(socket, "SO_PEERCRED")

MAX_BATCH = 64
IDLE_SECONDS = 10.0
# How long a claimer waits for its answer before it treats the answer as lost. A
# batch is bounded by the write budget (1.5 s) plus its statements; this is slack.
REPLY_TIMEOUT_SECONDS = 10.0

_HEADER = struct.Struct("!I")
_PEERCRED = struct.Struct("3i")  # pid, uid, gid

# How many processes must be claiming at once before a round trip to the combiner
# pays for itself; below that each claims directly. Measured on the 2-core
# reference machine (``bench/claim.py --decompose --procs 2,4,6,8,12``): on SQLite
# the combiner is behind direct claims up to 6 processes, even at 8 and ahead at
# 12 (5133 vs 4266 claims/s); on PostgreSQL behind at 2 and 4, ahead from 6
# (2878 vs 2121/s) and nearly 2x at 12 (2797 vs 1544/s).
# ``CLAWBOO_CLAIM_COMBINER_CROWD`` sets it for every database.
CROWD = {"sqlite": 8, "postgresql": 5}
# A process counts as claiming for this long after its last claim.
CROWD_WINDOW_NS = 1_000_000_000
_CROWD_SLOTS = 64
_CROWD_SLOT = struct.Struct("qq")  # pid, its last claim (CLOCK_MONOTONIC, ns)
_CROWD_RECOUNT_NS = 50_000_000


class _NotRun:
    def __repr__(self) -> str:
        return "NOT_RUN"


NOT_RUN: Any = _NotRun()  # no combiner ran the claim: run it directly


class ReplyLost(Exception):  # noqa: N818 - a condition, handled by the claimer
    """The request went out but no answer came back: it may have committed."""


def enabled() -> bool:
    return SUPPORTED and bool(getattr(settings, "CLAWBOO_CLAIM_COMBINER", True))


def crowd_threshold(vendor: str) -> int:
    return int(getattr(settings, "CLAWBOO_CLAIM_COMBINER_CROWD", 0) or CROWD.get(vendor, 8))


def usable(db: BaseDatabaseWrapper) -> bool:
    """Whether a claim on ``db`` may go to the combiner: it is switched on, the
    claim is not part of a transaction of the caller's, and the database can be
    shared between processes (an in-memory SQLite database cannot)."""
    return (
        enabled()
        and db.alias == DEFAULT_DB_ALIAS
        and not storage.in_write()  # (a write of this thread's own: the combiner would wait on it)
        and db.get_autocommit()
        and _paths(db) is not None
    )


# --- where ------------------------------------------------------------------------


class _Where(NamedTuple):
    sock: str  # the combiner's socket
    lock: str  # flocked by its host
    crowd: str  # who claimed lately (_Crowd)


_paths_cache: dict[tuple[str, str], _Where | None] = {}


def _paths(db: BaseDatabaseWrapper) -> _Where | None:
    """The files of ``db``'s combiner, or None when it has none."""
    name = str(db.settings_dict.get("NAME") or "")
    key = (db.alias, name)
    if key in _paths_cache:
        return _paths_cache[key]
    found = None
    identity = _identity(db, name)
    home = _private_dir() if identity is not None else None
    if identity is not None and home is not None:
        digest = hashlib.sha256(identity.encode()).hexdigest()[:24]
        found = _Where(*(str(home / f"claims-{digest}.{kind}") for kind in _Where._fields))
    _paths_cache[key] = found
    return found


def _identity(db: BaseDatabaseWrapper, name: str) -> str | None:
    if db.vendor == "sqlite":
        if not name or name == ":memory:" or "mode=memory" in name:
            return None  # one process's own database: nobody to combine with
        return "sqlite:" + os.path.realpath(name)
    if db.vendor == "postgresql":
        sd = db.settings_dict
        where = ":".join(str(sd.get(part) or "") for part in ("HOST", "PORT", "USER"))
        return f"postgresql:{where}:{name}"
    return None


def _private_dir() -> Path | None:
    """A directory only this user can enter, for the sockets (None if the one
    there is not ours or not private: then there is no combiner)."""
    home = Path(tempfile.gettempdir()) / f"clawboo-{os.getuid()}"
    try:
        home.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(home)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        log.warning("claim combiner off: %s is not a private directory of this user", home)
        return None
    return home


# --- who claims ---------------------------------------------------------------------


class _Crowd:
    """Who claimed on a database lately: a page of shared memory (a file mapped by
    every claiming process of this user) where each process stamps its slot
    (by pid) at every claim. Counting the fresh stamps says how many processes
    claim at once, without a round trip; two pids on one slot count once."""

    def __init__(self, path: str) -> None:
        size = _CROWD_SLOTS * _CROWD_SLOT.size
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            if os.fstat(fd).st_size < size:
                os.ftruncate(fd, size)
            self.map = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        self._layout = struct.Struct(f"{_CROWD_SLOTS * 2}q")
        self.counted_at = 0
        self.counted = 0

    def stamp(self, at: int) -> None:
        pid = os.getpid()
        _CROWD_SLOT.pack_into(self.map, (pid % _CROWD_SLOTS) * _CROWD_SLOT.size, pid, at)

    def count(self, at: int) -> int:
        """Processes that claimed within :data:`CROWD_WINDOW_NS` (recounted at most
        every 50 ms)."""
        if at - self.counted_at > _CROWD_RECOUNT_NS:
            stamps = self._layout.unpack_from(self.map)[1::2]
            horizon = at - CROWD_WINDOW_NS
            # A stamp from the future is from before a reboot (a new monotonic clock).
            self.counted = sum(1 for stamped in stamps if horizon < stamped <= at + CROWD_WINDOW_NS)
            self.counted_at = at
        return self.counted


_crowds: dict[str, _Crowd | None] = {}


def _crowd(path: str) -> _Crowd | None:
    if path not in _crowds:
        try:
            _crowds[path] = _Crowd(path)
        except OSError:
            log.warning("claim combiner: cannot map %s; counting no crowd", path)
            _crowds[path] = None
    return _crowds[path]


# --- the claimer's side -------------------------------------------------------------


class _Client(threading.local):
    def __init__(self) -> None:
        self.sock: socket.socket | None = None
        self.path = ""
        self.pid = 0
        # The claim statements this connection has sent, by text: each goes once,
        # then by number (a claim's SQL is a few kB, its parameters a few dozen bytes).
        self.sent: dict[str, int] = {}
        # The combiner's database session (PostgreSQL: backend pid and start), from
        # its hello and each answer: what to end before reading back a lost claim.
        self.session: Any = None


_client = _Client()
# Combiners that went silent, by socket: claims go direct until then (monotonic s).
_silent_until: dict[str, float] = {}
SILENT_PAUSE_SECONDS = 10.0


def claim(db: BaseDatabaseWrapper, prepared: Any) -> Any:
    """Have the combiner run ``prepared``'s claim: what its statements returned, as
    a plain tuple (None: nothing to claim), :data:`NOT_RUN` when no combiner
    answers, or raises :class:`ReplyLost` when the request went out and no answer
    came back — by then the combiner's transaction has ended, so the claim can be
    read back."""
    where = _paths(db)
    if where is None:
        return NOT_RUN
    crowd = _crowd(where.crowd)
    if crowd is not None:
        at = time.monotonic_ns()
        crowd.stamp(at)
        if crowd.count(at) < crowd_threshold(db.vendor):
            return NOT_RUN  # too few claim at once for batching to pay
    host = _hosts.get(where.sock)
    if host is not None and not host.others:
        return NOT_RUN  # we host it and nobody else is here: nothing to combine with
    if _silent_until.get(where.sock, 0.0) > time.monotonic():
        return NOT_RUN
    sock = _connection(db, where.sock, where.lock)
    if sock is None:
        return NOT_RUN
    client = _client
    ident = client.sent.get(prepared.sql)
    # A plain tuple on the wire (a NamedTuple pickles by class, several times slower).
    if ident is None:
        ident = client.sent[prepared.sql] = len(client.sent)
        message = (ident, *prepared)
    else:
        message = (ident, "", *prepared[1:])
    try:
        _send(sock, message)
    except BaseException as exc:
        # Nothing went out whole (sendall raises only then): the combiner drops a
        # torn frame when the connection closes, and nothing ran.
        _forget(sock)
        if isinstance(exc, OSError):
            return NOT_RUN
        raise
    try:
        kind, value, client.session = pickle.loads(_receive(sock))  # noqa: S301 - our combiner
    except BaseException as exc:
        session = client.session
        _forget(sock)
        if not isinstance(exc, OSError | EOFError | pickle.UnpicklingError):
            raise  # interrupted: the connection is gone, the claim may stand
        if isinstance(exc, TimeoutError):
            _silent_until[where.sock] = time.monotonic() + SILENT_PAUSE_SECONDS
        _end_session(db, session)
        raise ReplyLost(str(exc) or type(exc).__name__) from exc
    if kind == "lost":  # the combiner cannot tell whether its batch committed
        _end_session(db, client.session)
        raise ReplyLost("the combiner's transaction failed with its outcome unknown")
    if kind == "error":
        raise value
    return value


def _end_session(db: BaseDatabaseWrapper, session: Any) -> None:
    """Make sure the combiner's transaction is over before a lost claim is read back.

    PostgreSQL keeps running what a dead host had sent (its whole pipelined batch,
    COMMIT included), so the claim could commit after the read-back found nothing:
    end that session and wait for it to go (``pg_terminate_backend`` with a timeout
    aborts a transaction that has not committed). SQLite's transactions die with
    their process, and a live host's batch is bounded by the write budget.
    """
    if session is None or db.vendor != "postgresql":
        return
    pid, started = session
    alive = "FROM pg_stat_activity WHERE pid = %s AND backend_start = %s"
    with db.cursor() as cursor:
        try:
            cursor.execute(f"SELECT pg_terminate_backend(pid, 5000) {alive}", [pid, started])
            cursor.fetchall()
            return
        except DatabaseError:  # not allowed to end it: wait for it to end instead
            log.warning("claim combiner: cannot end session %s; waiting for it", pid)
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            cursor.execute(f"SELECT 1 {alive}", [pid, started])
            if cursor.fetchone() is None:
                return
            time.sleep(0.05)


def _connection(db: BaseDatabaseWrapper, sock_path: str, lock_path: str) -> socket.socket | None:
    client = _client
    if client.pid != os.getpid():
        # A forked child: the parent's connection is the parent's; this child's
        # answers would interleave with its parent's on it.
        client.sock, client.pid = None, os.getpid()
    if client.sock is not None and client.path == sock_path:
        return client.sock
    if client.sock is not None:
        _forget(client.sock)
    sock = _connect(sock_path)
    if sock is None and _host_start(db, sock_path, lock_path):
        sock = _connect(sock_path)
    if sock is None:
        return None
    try:  # the combiner says hello with its database session first
        kind, _, session = pickle.loads(_receive(sock))  # noqa: S301 - our combiner
    except Exception:  # noqa: BLE001 - no working combiner there: claim directly
        sock.close()
        return None
    if kind != "hello":
        sock.close()
        return None
    client.sock, client.path, client.sent, client.session = sock, sock_path, {}, session
    return sock


def _connect(path: str) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        return None
    sock.settimeout(REPLY_TIMEOUT_SECONDS)
    return sock


def _forget(sock: socket.socket) -> None:
    if _client.sock is sock:
        _client.sock = None
    with contextlib.suppress(OSError):
        sock.close()


def _send(sock: socket.socket, message: Any) -> None:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(_HEADER.pack(len(body)) + body)


_frame = _send  # one frame, either way


def _receive(sock: socket.socket) -> bytes:
    header = _exactly(sock, _HEADER.size)
    return _exactly(sock, _HEADER.unpack(header)[0])


def _exactly(sock: socket.socket, size: int) -> bytes:
    chunks = []
    while size:
        chunk = sock.recv(min(size, 1 << 20))
        if not chunk:
            raise EOFError("the claim combiner closed the connection")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


# --- the host's side ---------------------------------------------------------------


class _Peer:
    """One claimer's connection: what it has sent so far, and its statements."""

    __slots__ = ("pid", "buffer", "statements")

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.buffer = bytearray()
        self.statements: dict[int, str] = {}


class _Host:
    """This process's combiner for one database: its lock, socket and thread."""

    def __init__(
        self, sock_path: str, lock_fd: int, listener: socket.socket, sqlite_path: str | None
    ) -> None:
        self.sock_path = sock_path
        # SQLite: the file whose WAL a checkpointer backfills beside the batches.
        self.sqlite_path = sqlite_path
        self.checkpointer: storage.Checkpointer | None = None
        self.lock_fd = lock_fd
        self.listener = listener
        self.inode = os.stat(sock_path).st_ino
        self.stopping = threading.Event()
        self.wake_r, self.wake_w = os.pipe()
        self.closed = False  # under _hosts_guard: the wake pipe is gone
        self.selector = selectors.DefaultSelector()
        self.thread = threading.Thread(
            target=self.serve, name="clawboo-claim-combiner", daemon=True
        )
        self.peers: dict[socket.socket, _Peer] = {}
        self._session: Any = None
        self._session_of: Any = None
        self.others = 0  # connected claimers in other processes
        self.served = 0  # requests answered, and in how many transactions
        self.batches = 0

    # The thread ---------------------------------------------------------------

    def serve(self) -> None:
        selector = self.selector
        selector.register(self.listener, selectors.EVENT_READ)
        selector.register(self.wake_r, selectors.EVENT_READ)
        idle_since = time.monotonic()
        try:
            if self.sqlite_path is not None:
                # Checkpoints off this thread: see storage.Checkpointer. Without one
                # (no thread to be had) the host's commits checkpoint as any writer's.
                try:
                    self.checkpointer = storage.Checkpointer(self.sqlite_path)
                except RuntimeError:
                    log.warning("claim combiner: no checkpointer thread", exc_info=True)
            while not self.stopping.is_set():
                batch: list[tuple[socket.socket, Any]] = []
                for key, _ in selector.select(timeout=1.0):
                    if key.fileobj is self.listener:
                        self._accept(selector)
                    elif key.fileobj is not self.wake_r:
                        self._read(key.fileobj, selector, batch)  # type: ignore[arg-type]
                if batch:
                    for start in range(0, len(batch), MAX_BATCH):
                        self._answer(batch[start : start + MAX_BATCH], selector)
                    idle_since = time.monotonic()
                elif not self.peers and time.monotonic() - idle_since > IDLE_SECONDS:
                    break  # nobody connected for a while: give the role back
        except Exception:  # a combiner that breaks must only stop accelerating claims
            log.exception("claim combiner stopped")
        finally:
            self._close(selector)

    def _accept(self, selector: selectors.BaseSelector) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        try:
            pid, uid, _ = _PEERCRED.unpack(
                conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
            )
            if uid != os.getuid():
                raise PermissionError(f"a claimer of another user (uid {uid})")
            conn.settimeout(5.0)  # for answers; reads only follow select()
            _frame(conn, ("hello", None, self.session()))
            selector.register(conn, selectors.EVENT_READ)
        except Exception:  # noqa: BLE001 - that claimer claims directly
            conn.close()
            return
        self.peers[conn] = _Peer(pid)
        self.others = sum(1 for peer in self.peers.values() if peer.pid != os.getpid())

    def session(self) -> Any:
        """This thread's database session, as claimers name it to end it
        (PostgreSQL: backend pid and start; SQLite: None)."""
        db = connections[DEFAULT_DB_ALIAS]
        if db.vendor != "postgresql":
            return None
        db.ensure_connection()
        if self._session_of is not db.connection:
            with db.connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()"
                )
                self._session = tuple(cursor.fetchone() or ())
            self._session_of = db.connection
        return self._session

    def _read(
        self,
        conn: socket.socket,
        selector: selectors.BaseSelector,
        batch: list[tuple[socket.socket, Any]],
    ) -> None:
        try:
            data = conn.recv(1 << 16)
        except OSError:
            data = b""
        if not data:  # the claimer went away (a torn request is dropped with it)
            self._drop(conn, selector)
            return
        peer = self.peers[conn]
        buffer = peer.buffer
        buffer += data
        while len(buffer) >= _HEADER.size:
            size = _HEADER.unpack_from(buffer)[0]
            if len(buffer) < _HEADER.size + size:
                break
            body = bytes(buffer[_HEADER.size : _HEADER.size + size])
            del buffer[: _HEADER.size + size]
            try:
                ident, sql, *rest = pickle.loads(body)  # noqa: S301 - same user, private socket
                if sql:
                    peer.statements[ident] = sql
                else:
                    sql = peer.statements[ident]
                prepared = _prepared(sql, *rest)
            except Exception:  # noqa: BLE001 - not a claimer of ours: hang up on it
                self._drop(conn, selector)
                return
            batch.append((conn, prepared))

    def _answer(
        self, batch: list[tuple[socket.socket, Any]], selector: selectors.BaseSelector
    ) -> None:
        # The session that runs the batch, named before it runs: a batch that fails
        # closes it, and the claimers must end this one, not its successor.
        try:
            session = self.session()
        except Exception:  # noqa: BLE001 - no connection: the batch fails on its own
            session = None
        answers = _run_batch([request for _, request in batch])
        if self.checkpointer is not None and any(kind == "ok" for kind, _ in answers):
            self.checkpointer.poke()  # a transaction committed: backfill it
        self.batches += 1
        self.served += len(batch)  # before any answer: a claimer may look at once
        for (conn, _), (kind, value) in zip(batch, answers, strict=True):
            if kind == "ok" and value is not None:
                value = tuple(value)  # plain, as its request came (see claim())
            try:
                body = pickle.dumps((kind, value, session), protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as exc:  # noqa: BLE001 - an unpicklable error
                body = pickle.dumps(("error", RuntimeError(repr(exc)), session))
            try:
                conn.sendall(_HEADER.pack(len(body)) + body)
            except OSError:
                # The claimer is gone; its claim stands and its lease will lapse.
                self._drop(conn, selector)

    def _drop(self, conn: socket.socket, selector: selectors.BaseSelector) -> None:
        if self.peers.pop(conn, None) is not None:
            selector.unregister(conn)
            self.others = sum(1 for peer in self.peers.values() if peer.pid != os.getpid())
        with contextlib.suppress(OSError):
            conn.close()

    def _close(self, selector: selectors.BaseSelector) -> None:
        # The socket path goes first (if it is still ours), then the lock: a
        # process that takes the lock next finds no live socket of ours to talk to.
        with _hosts_guard:
            if _hosts.get(self.sock_path) is self:
                del _hosts[self.sock_path]
        with contextlib.suppress(OSError):
            if os.stat(self.sock_path).st_ino == self.inode:
                os.unlink(self.sock_path)
        for conn in list(self.peers):
            self._drop(conn, selector)
        selector.close()
        with _hosts_guard:  # stop() writes to the wake pipe under it
            self.closed = True
            for closing in (
                self.listener.close,
                lambda: os.close(self.wake_r),
                lambda: os.close(self.wake_w),
            ):
                with contextlib.suppress(OSError):
                    closing()
        if self.checkpointer is not None:
            self.checkpointer.stop()
        with contextlib.suppress(OSError):
            os.close(self.lock_fd)  # releases the flock
        connections.close_all()  # this thread's own connection

    # Control ------------------------------------------------------------------

    def stop(self, timeout: float = 5.0) -> None:
        self.stopping.set()
        with _hosts_guard, contextlib.suppress(OSError):
            if not self.closed:  # (a closed pipe's number may be another file's now)
                os.write(self.wake_w, b"x")
        if self.thread is not threading.current_thread() and self.thread.ident is not None:
            self.thread.join(timeout)


def _prepared(*fields: Any) -> Any:
    from board.store.claims import _Prepared

    return _Prepared(*fields)


def _run_batch(requests: list[Any]) -> list[tuple[str, Any]]:
    """Each request's claim, all in one write transaction; a batch that fails is
    re-run one request at a time, so an error belongs to its own request only."""
    from board.store.claims import claim_batch

    try:
        return [("ok", claimed) for claimed in claim_batch(requests)]
    except storage.WriteBudgetExceeded as exc:
        # Locked for the whole budget, nothing written: each alone would wait as long.
        return [("error", exc)] * len(requests)
    except Exception as exc:  # noqa: BLE001 - sorted out below
        if not _rolled_back(exc):
            # Whether the batch committed is unknown: each claimer reads its claim back.
            connections[DEFAULT_DB_ALIAS].close()
            return [("lost", None)] * len(requests)
        # A statement failed, so the transaction rolled back: run each alone, and
        # the error stays with its own request.
        if len(requests) == 1:
            return [("error", exc)]
    answers: list[tuple[str, Any]] = []
    for prepared in requests:
        try:
            answers.append(("ok", claim_batch([prepared])[0]))
        except Exception as exc:  # noqa: BLE001 - as above
            if _rolled_back(exc):
                answers.append(("error", exc))
            else:
                connections[DEFAULT_DB_ALIAS].close()
                answers.append(("lost", None))
    return answers


def _rolled_back(exc: BaseException) -> bool:
    """Whether a failed batch certainly wrote nothing. SQLite: always (a failed
    statement or COMMIT is rolled back in this process). PostgreSQL: when the
    server said why (an SQLSTATE), unless it was about the connection (class 08);
    a connection lost without one may have lost a COMMIT's answer, not its effect."""
    if connections[DEFAULT_DB_ALIAS].vendor != "postgresql":
        return True
    seen: BaseException | None = exc
    for _ in range(8):  # (a chain can loop)
        if seen is None:
            break
        sqlstate = getattr(seen, "sqlstate", None)
        if sqlstate:
            return not str(sqlstate).startswith("08")
        seen = seen.__cause__ or seen.__context__
    return False


_hosts: dict[str, _Host] = {}
_hosts_guard = threading.Lock()


def _host_start(db: BaseDatabaseWrapper, sock_path: str, lock_path: str) -> bool:
    """Become ``db``'s combiner host if nobody is: False when another process
    holds the role (or is taking it: this claim then runs directly)."""
    with _hosts_guard:
        if sock_path in _hosts:
            return True  # ours, still starting or just gone: connect() will tell
        try:
            lock_fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError:
            return False
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(lock_fd)
            return False
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            # The lock is ours, so a socket file there is a dead host's.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(sock_path)
            listener.bind(sock_path)
            listener.listen(128)
        except OSError:
            listener.close()
            os.close(lock_fd)
            return False
        sqlite_path = str(db.settings_dict["NAME"]) if db.vendor == "sqlite" else None
        host = _Host(sock_path, lock_fd, listener, sqlite_path)
        _hosts[sock_path] = host
        host.thread.start()  # under the guard: stop() never meets an unstarted thread
    log.debug("claim combiner started for %s", db.settings_dict.get("NAME"))
    return True


def stop_all(timeout: float = 5.0) -> None:
    """Stop this process's combiners (their claimers fall back to direct claims)."""
    with _hosts_guard:
        hosts = list(_hosts.values())
    for host in hosts:
        host.stop(timeout)


def reset() -> None:
    """Stop this process's combiners and drop this thread's connection to any: the
    next claim finds, or becomes, a combiner afresh."""
    stop_all()
    if _client.sock is not None:
        _forget(_client.sock)


def hosted() -> list[_Host]:
    with _hosts_guard:
        return list(_hosts.values())


def _after_fork_in_child() -> None:
    # The child holds copies of the host's lock and sockets but none of its threads:
    # drop the copies (the parent keeps the role), and the parent's connection.
    global _hosts_guard
    _hosts_guard = threading.Lock()  # another thread may have held it at the fork
    for host in list(_hosts.values()):
        # Every copy goes, the claimers' connections included: a copy kept open
        # here would hide the host's death from them (no EOF).
        for fd in (host.lock_fd, host.wake_r, host.wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        for sock in (host.listener, *host.peers):
            with contextlib.suppress(OSError):
                sock.close()
        with contextlib.suppress(Exception):
            host.selector.close()
    _hosts.clear()
    if _client.sock is not None:
        with contextlib.suppress(OSError):
            _client.sock.close()
    _client.sock, _client.pid = None, os.getpid()


os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(stop_all, 2.0)
