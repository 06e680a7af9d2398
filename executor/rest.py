"""The remote worker's side of the board: the server's REST API over HTTP, and the
clone of a task's repository the worker runs it in (no Django set-up).
:class:`RestRun` is the REST board port of one run (:class:`executor.attempt.Board`);
the server settles its end by the local rules (:mod:`executor.settle`)."""

from __future__ import annotations

import hashlib
import http.client
import json
import logging
import os
import random
import select
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from board.runs import ErrorClass
from core.procs import run_within
from core.worker_environment import agent_environment
from executor import gitprogress, pricing
from executor.attempt import Answer, Attempt, Stop
from executor.runtimes.base import ProjectBase, RunResult, UsageSoFar
from executor.steps import Step

log = logging.getLogger("clawboo.worker")

# git's calls on the worker's host (the clone, its fetches, the push of a task's
# branch) give up after CLAWBOO_WORKER_GIT_TIMEOUT_S, read from the worker's own
# environment (it has no server settings).
GIT_TIMEOUT_S = 120
# While the server does not answer, the loop asks again after a pause that doubles
# from RECONNECT_FIRST_S up to RECONNECT_MAX_S (jittered, so hosts spread out).
RECONNECT_FIRST_S = 1.0
RECONNECT_MAX_S = 10.0
HTTP_TIMEOUT_S = 30.0
BRANCH_PREFIX = "clawboo/task-"
# What the server answers a call under a claim that is no longer this worker's.
CLAIM_GONE = (403, 404, 409)
# Where a server's intake sends a submission back to its builder, under the same
# claim: the judge's fix round, or a rebase round (executor.intake).
SENT_BACK = frozenset({"fix", "rebase"})


class Revoked(Exception):
    """The server no longer accepts the token (401)."""


class ApiError(Exception):
    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
        self.body = body


class ServerUnreachable(ConnectionError):
    """The server did not answer (refused, reset, timed out): an OSError, so every
    ``except OSError`` of a call still holds; told apart from a local OSError (a
    runtime's missing binary) where the loop waits for the server instead."""


class Reachability:
    """Whether the server answers, as the worker's threads last found it: one line
    when it stops answering ("server unreachable, retrying…"), one when it answers
    again ("reconnected"), however many threads and retries meet the outage."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._down = False
        self._pause = RECONNECT_FIRST_S
        self._answered_at = 0.0

    def answered(self) -> None:
        with self._lock:
            self._answered_at = time.monotonic()
            if self._down:
                self._down = False
                log.info("reconnected")
            self._pause = RECONNECT_FIRST_S

    def unreachable(self, exc: BaseException) -> None:
        with self._lock:
            if not self._down:
                self._down = True
                log.warning("server unreachable (%s), retrying…", _reason(exc))

    def answered_within(self, seconds: float) -> bool:
        return time.monotonic() - self._answered_at < seconds

    def backoff(self) -> float:
        """The next pause before asking again (doubling, capped, jittered)."""
        with self._lock:
            pause = self._pause
            self._pause = min(pause * 2, RECONNECT_MAX_S)
        return pause * random.uniform(0.8, 1.2)  # noqa: S311 - spreading hosts out


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:200]


@dataclass
class Api:
    """The server's API over one kept-alive connection per thread (the loop, the
    beat, the log's sender): a claim costs its request, not a TCP and HTTP set-up
    too. Through a proxy the environment names, plain ``urllib`` (a connection per
    request) as before."""

    server: str
    token: str

    def __post_init__(self) -> None:
        parts = urllib.parse.urlsplit(self.server)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or "localhost"
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")
        proxies = urllib.request.getproxies()
        self._proxied = bool(proxies.get(parts.scheme)) and not urllib.request.proxy_bypass(
            parts.netloc
        )
        self._local = threading.local()
        self.reach = Reachability()

    def call_patiently(
        self, method: str, path: str, body: Any = None, *, stop: threading.Event | None = None
    ) -> tuple[int, Any]:
        """:meth:`call`, asked again with a growing pause while the server does not
        answer (stopped, restarting, the network down), as long as ``stop`` is not
        set: for the loop's own calls (a claim, a look-up), which lose nothing by
        waiting. The outage is logged once (:class:`Reachability`)."""
        while True:
            try:
                return self.call(method, path, body)
            except ServerUnreachable:
                pause = self.reach.backoff()
                if stop is not None:
                    if stop.wait(pause):
                        raise
                else:
                    time.sleep(pause)

    def call_thrice(self, path: str, body: Any, idempotency_key: str | None = None) -> Any:
        """POST ``path``, asked again twice (after 1 s, then 2 s) while the server does
        not answer: for a run's open and close, which a repeat answers the same."""
        for attempt in range(3):
            try:
                return self.call("POST", path, body, idempotency_key=idempotency_key)[1]
            except OSError:
                if attempt == 2:
                    raise
                time.sleep(1.0 + attempt)
        raise AssertionError("unreachable")

    def call(
        self, method: str, path: str, body: Any = None, *, idempotency_key: str | None = None
    ) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        headers = {
            "Authorization": f"Token {self.token}",
            "Content-Type": "application/json",
            "Accept": "application/json",
        }
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        try:
            if self._proxied:
                status, raw = self._via_urllib(method, path, data, headers)
            else:
                status, raw = self._kept_alive(method, path, data, headers)
        except OSError as exc:
            self.reach.unreachable(exc)
            raise ServerUnreachable(_reason(exc)) from exc
        self.reach.answered()
        if status < 300:  # a redirect is not followed: the URL to give is the API's own
            return status, json.loads(raw) if raw else None
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw.decode(errors="replace")
        if status == 401:
            # The API's sentence, not its envelope: it is printed to a person.
            detail = parsed.get("detail") if isinstance(parsed, dict) else None
            raise Revoked(str(detail or parsed))
        raise ApiError(status, parsed)

    def _kept_alive(
        self, method: str, path: str, data: bytes | None, headers: dict[str, str]
    ) -> tuple[int, bytes]:
        conn = self._connection()
        try:
            conn.request(method, self._prefix + path, body=data, headers=headers)
            answer = conn.getresponse()
            raw = answer.read()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            self._local.conn = None
            if isinstance(exc, OSError):
                raise
            raise ConnectionError(f"{type(exc).__name__}: {exc}") from exc
        if answer.will_close:
            conn.close()
            self._local.conn = None
        return answer.status, raw

    def _connection(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is not None and conn.sock is not None:
            # Readable while idle means the server closed it (its keep-alive ran
            # out): a request must not be sent into it, or it would be lost.
            readable, _, _ = select.select([conn.sock], [], [], 0)
            if readable:
                conn.close()
                conn = None
        if conn is None:
            kind = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            conn = kind(self._host, self._port, timeout=HTTP_TIMEOUT_S)
            self._local.conn = conn
        return conn

    def release(self) -> None:
        """Close this thread's connection (a thread that is about to end)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def _via_urllib(
        self, method: str, path: str, data: bytes | None, headers: dict[str, str]
    ) -> tuple[int, bytes]:
        # The scheme was checked in main (http or https only).
        request = urllib.request.Request(  # noqa: S310
            self.server.rstrip("/") + path, data=data, method=method, headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as answer:  # noqa: S310
                return answer.status, answer.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()


def git_timeout_s() -> int:
    """``CLAWBOO_WORKER_GIT_TIMEOUT_S``; missing, malformed or under one second reads
    as :data:`GIT_TIMEOUT_S`, as the server's own settings read (``env_int``)."""
    raw = os.environ.get("CLAWBOO_WORKER_GIT_TIMEOUT_S", "").strip()
    try:
        value = int(raw)
    except ValueError:
        return GIT_TIMEOUT_S
    return value if 1 <= value <= 2**31 - 1 else GIT_TIMEOUT_S


class GitFailed(RuntimeError):
    """A git call of the worker's own failed or gave up: its sentence says which and why."""


class NoCheckout(RuntimeError):
    """The task's checkout cannot be made on a remote host, whatever it runs: its
    repository has no ``remote`` to clone. The sentence says what to set."""


# The worker's git runs in a checkout the agent's run wrote to, whose git directory
# (hooks, config) the run could write too: no hooks or fsmonitor run, and git (with
# whatever it starts) gets none of the worker's own configuration -- its machine
# token (CLAWBOO_TOKEN) least of all (core.worker_environment).
_GIT_CONFIG = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false")


def git(argv: Sequence[str], cwd: Path | None = None) -> str:
    timeout = git_timeout_s()
    done = run_within(["git", *_GIT_CONFIG, *argv], timeout, cwd=cwd, env=agent_environment())
    if done is None:
        raise GitFailed(f"git {argv[0]}: no answer within {timeout}s")
    if done.returncode != 0:
        raise GitFailed(f"git {' '.join(argv)}: {done.stderr.strip()[-500:]}")
    return done.stdout.strip()


class Waker:
    """Sets ``wake`` on every board frame of the team (``hello`` too), reconnecting
    while the worker runs. ``connected`` tells the loop whether to poll slowly."""

    def __init__(
        self,
        server: str,
        token: str,
        team: str,
        wake: threading.Event,
        reach: Reachability | None = None,
    ) -> None:
        parts = urllib.parse.urlsplit(server)
        # The server's outage is the HTTP side's to tell (once): the socket says
        # only what is its own (a handshake refused while HTTP answers), once.
        self.reach = reach
        scheme = "wss" if parts.scheme == "https" else "ws"
        query = urllib.parse.urlencode({"team": team, "token": token})
        self.url = f"{scheme}://{parts.netloc}/ws/board/?{query}"
        # Shared by the worker's wakers: the loop sleeps on it and wakes at once.
        self.wake = wake
        self.connected = threading.Event()
        self.stop = threading.Event()
        threading.Thread(target=self._loop, name=f"ws-{team}", daemon=True).start()

    def _loop(self) -> None:
        from websockets.sync.client import connect

        while not self.stop.is_set():
            try:
                with connect(self.url, open_timeout=10, proxy=None) as ws:
                    for raw in ws:
                        frame = json.loads(raw)
                        if frame.get("type") == "hello":
                            self.connected.set()
                        self.wake.set()  # hello too: anything missed while away
                        if self.stop.is_set():
                            return
            except Exception as exc:  # dropped or refused: poll until it is back
                self._failed(exc)
            self.connected.clear()
            self.stop.wait(2.0)

    def _failed(self, exc: BaseException) -> None:
        was_up = self.connected.is_set()
        if isinstance(exc, OSError) and self.reach is not None:
            # Refused or unreachable: the server is away (unless HTTP just answered:
            # a restart's race between its two listeners is not an outage).
            if not self.reach.answered_within(5.0):
                self.reach.unreachable(exc)
            return
        if was_up or not getattr(self, "_said", False):
            self._said = True
            log.debug("board socket down (%s); polling until it is back", _reason(exc))


@dataclass(frozen=True)
class Checkout:
    """Where a remote run works: ``cwd``, in this host's bare ``clone`` of the
    repository's remote (None: a scratch directory); ``registered``: the server's
    registered repository, which takes the pushed branch in (``submit``)."""

    cwd: Path
    clone: Path | None = None
    registered: bool = False
    # The base branch's commit as the remote holds it, fetched for this round.
    base: str | None = None

    def project_base(self) -> ProjectBase | None:
        """Where the run reads the project's own files: the base, not the worktree
        (which may carry an earlier attempt's branch)."""
        if self.clone is None or self.base is None:
            return None
        return ProjectBase(self.clone, self.base)


def workspace(cache_dir: Path, task: dict[str, Any], repo: dict[str, Any]) -> Checkout:
    """The task's worktree in this host's bare clone of the remote the claim's answer
    names (``repo``: :meth:`board.repository.RunRepository.as_body`), or a scratch
    directory when the task has no repository."""
    # Absolute: git makes the worktree relative to the clone it runs in, the run starts
    # in it relative to the worker's cwd; `--cache-dir worker-cache` made two paths.
    cache_dir = cache_dir.expanduser().resolve()
    remote, registered = repo.get("remote"), bool(repo.get("id"))
    if registered and not remote:
        raise NoCheckout(
            f"repository {repo['id']!r} has no remote to clone: a remote worker works in a"
            " clone of the repository's `remote`, a git URL this host reaches (set it with"
            f" PATCH /api/repositories/{repo['id']} or in the admin)"
        )
    if not remote:
        scratch = cache_dir / "scratch" / task["id"]
        scratch.mkdir(parents=True, exist_ok=True)
        return Checkout(scratch)
    clone = cache_dir / "repos" / hashlib.sha256(remote.encode()).hexdigest()[:16]
    if not (clone / "HEAD").exists():
        clone.parent.mkdir(parents=True, exist_ok=True)
        # The first task of a repository on this host: a large remote's clone takes a
        # while, and the log says how far it is.
        log.info("task %s: cloning %s (the first of its tasks on this host)…", task["id"], remote)
        clone_remote(remote, clone, lambda line: log.info("task %s: cloning: %s", task["id"], line))
    fetch_remote(clone)
    start = "refs/remotes/origin/" + (
        repo.get("base_branch") or git(["symbolic-ref", "--short", "HEAD"], clone)
    )
    base = git(["rev-parse", "--verify", "--quiet", f"{start}^{{commit}}"], clone)
    # A dependency's pushed branch carries the work this task builds on -- unless
    # the server lands its repository's tasks (``registered``): a dependency is
    # done only once landed on the base, which the server pushed back. The task's
    # own branch (an earlier attempt sent back) carries its work, on the base it
    # had then: the current base is at hand as origin/<base>, which the feedback
    # of a rebase round says to merge.
    deps = [] if registered else list(task.get("depends_on") or [])
    for dep in [*deps, task["id"]]:
        ref = f"refs/remotes/origin/{BRANCH_PREFIX}{dep}"
        verify = ["git", "rev-parse", "--verify", "--quiet", ref]
        found = subprocess.run(  # noqa: S603
            verify,
            cwd=clone,
            capture_output=True,
            timeout=git_timeout_s(),
            check=False,
            env=agent_environment(),
        )
        if found.returncode == 0:
            start = ref
    tree = cache_dir / "worktrees" / task["id"]
    if tree.exists():
        shutil.rmtree(tree)
        git(["worktree", "prune"], clone)
    tree.parent.mkdir(parents=True, exist_ok=True)
    branch = f"{BRANCH_PREFIX}{task['id']}"
    git(["worktree", "add", "--quiet", "-B", branch, str(tree), start], clone)
    return Checkout(tree, clone, registered, base)


def clone_remote(remote: str, clone: Path, say: Callable[[str], None]) -> None:
    """A bare clone of ``remote`` at ``clone``, its progress said to ``say`` as it goes
    (:mod:`executor.gitprogress`), given up after :func:`git_timeout_s` as every git
    call of the worker's is; one that was still moving says how far it got."""
    timeout = git_timeout_s()
    argv = ["clone", "--bare", "--progress", remote, str(clone)]
    done = gitprogress.run(["git", *_GIT_CONFIG, *argv], timeout, say, env=agent_environment())
    if done.returncode != 0:
        # A clone killed half-way leaves a directory the next task would take for one.
        shutil.rmtree(clone, ignore_errors=True)
    if done.returncode is None:
        if done.last is None:
            raise GitFailed(f"git clone: no answer within {timeout}s")
        raise GitFailed(
            f"git clone: not done within {timeout}s (it reached {done.last.line()}): a large"
            " repository needs more time, CLAWBOO_WORKER_GIT_TIMEOUT_S on this host"
        )
    if done.returncode != 0:
        raise GitFailed(f"git {' '.join(argv)}: {done.said.strip()[-500:]}")


def fetch_remote(clone: Path) -> None:
    """Bring the clone's ``origin/*`` up to date with the remote: what a round sees
    of the base (``origin/<base>``) is what the server last landed and pushed."""
    git(["fetch", "--quiet", "--prune", "origin", "+refs/heads/*:refs/remotes/origin/*"], clone)


def push(cwd: Path, task: dict[str, Any], host: str) -> dict[str, Any]:
    """Commit what the run left in the worktree and push its branch to the remote."""
    branch = f"{BRANCH_PREFIX}{task['id']}"
    git(["add", "-A"], cwd)
    if git(["status", "--porcelain"], cwd):
        who = ["-c", "user.name=clawboo worker", "-c", f"user.email=worker@{host}"]
        message = f"{task.get('title') or task['id']}"
        git([*who, "commit", "--quiet", "-m", message], cwd)
    git(["push", "--quiet", "origin", f"+refs/heads/{branch}:refs/heads/{branch}"], cwd)
    return {"branch": branch, "commit": git(["rev-parse", "HEAD"], cwd)}


class RestTask:
    """A task this worker claimed, through the API under the claim's ticket: its
    lease, its prompt, its settling, and the wait for the server's intake."""

    def __init__(
        self,
        api: Api,
        task_id: str,
        ticket: str,
        *,
        lease_ms: int | None,
        heartbeat_s: float,
        revoked: threading.Event,
        wake: threading.Event,
    ) -> None:
        self.api, self.ticket, self.lease_ms, self.heartbeat_s = api, ticket, lease_ms, heartbeat_s
        self.revoked, self.wake = revoked, wake
        self.task_id = task_id
        self.base = f"/api/board/tasks/{urllib.parse.quote(task_id)}"
        # The code of the last settle the server refused (``verification_required``).
        self.refused: str | None = None

    def heartbeat(self, *, keep_span: bool = False) -> bool:
        """Renew the lease (``keep_span``: at the span the server last set, not this
        worker's ``lease_ms``); True when the claim is gone (the run must stop)."""
        beat: dict[str, Any] = {"ticket": self.ticket}
        if self.lease_ms and not keep_span:
            beat["lease_ms"] = self.lease_ms
        try:
            self.api.call("POST", f"{self.base}/heartbeat", beat)
        except ApiError as exc:
            if exc.status in CLAIM_GONE:
                return True
            log.warning("heartbeat: %s", exc)
        except OSError as exc:  # briefly unreachable: the next beat tries again
            log.warning("heartbeat: %s", exc)
        return False

    def prompt(self, task: dict[str, Any]) -> str:
        """The run's prompt as the server renders it for every run (the feedback of a
        round its judge sent back to fix included); an older server without
        ``…/prompt``: the task's title and description."""
        try:
            return str(self.api.call("GET", f"{self.base}/prompt")[1]["prompt"])
        except ApiError as exc:
            if exc.status != 404:
                raise
        return "\n\n".join(filter(None, [task.get("title"), task.get("description")]))

    def settle(self, verb: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """Settle the task (``complete``, ``fail``, ``submit``) under the claim; the
        task answered, or None when it was declined. Sent again while the server does
        not answer (a settle it took already is answered ``declined``/``lost-claim``:
        nothing is recorded twice)."""
        path = f"{self.base}/{verb}"
        try:
            answer = self.api.call_patiently(
                "POST", path, {**body, "ticket": self.ticket}, stop=self.revoked
            )
            return answer[1] or {}
        except ApiError as exc:  # lost meanwhile (409): nothing of ours to record
            log.warning("%s: %s", path, exc)
            self.refused = exc.body.get("error") if isinstance(exc.body, dict) else None
            return None

    def to_review(self) -> bool:
        """Hand the held task to a person in review (``in_progress → in_review``);
        False when the server declined it."""
        try:
            self.api.call_patiently(
                "POST", f"{self.base}/transition", {"to": "in_review"}, stop=self.revoked
            )
            return True
        except ApiError as exc:
            log.warning("%s/transition: %s", self.base, exc)
            return False

    def sent_back_to_fix(self, submitted: dict[str, Any]) -> bool:
        """Wait, holding the claim, for the server's intake of a submission to end:
        True when it sent the task back to its builder (its judge's fix round, or a
        rebase round: the work no longer merges onto its base) and the claim is
        still this worker's. Woken by the board's socket (any frame: the intake's
        end is one), the lease renewed every ``heartbeat_s`` -- at the span the
        submit gave it, which covers the intake -- and the task read again at each
        wake. A worker that dies here leaves the lease to lapse, as anywhere else;
        one whose intake never ends within that span leaves the task to the server's
        recovery."""
        span_s = (submitted.get("lease_duration_ms") or 600_000) / 1000
        deadline = time.monotonic() + span_s
        due = time.monotonic() + self.heartbeat_s
        while True:
            if self.revoked.is_set():
                raise Revoked("the worker beat was refused")
            # Cleared before the look: a frame during it wakes the next wait at once.
            self.wake.clear()
            try:
                task = self.api.call("GET", self.base)[1]
            except ApiError as exc:  # gone, or no longer ours to see
                log.warning("task %s: %s", self.base, exc)
                return False
            except OSError as exc:  # briefly unreachable: the next look tries again
                log.warning("task %s: %s", self.base, exc)
                task = {"status": "in_progress", "output": {"intake": {"state": "pending"}}}
            intake = (task.get("output") or {}).get("intake") or {}
            if task.get("status") != "in_progress" or intake.get("state") != "pending":
                break
            now = time.monotonic()
            if now >= deadline:
                log.warning("%s: no intake outcome within %.0f s", self.base, span_s)
                return False
            if now >= due:
                due = now + self.heartbeat_s
                # No lease_ms: the span the submit set stays (it covers the intake).
                if self.heartbeat(keep_span=True):
                    return False
            self.wake.wait(max(min(due, deadline) - time.monotonic(), 0.0))
        state = intake.get("state")
        log.info(
            "task %s: the server's intake ended: %s (the task is %s)",
            self.task_id, state, task.get("status"),
        )  # fmt: skip
        if state not in SENT_BACK or task.get("status") != "in_progress":
            return False
        # Back to its builder under the claim's own span: confirm it is still ours.
        return not self.heartbeat()


@dataclass(frozen=True)
class LogLimits:
    """A run's log goes to the server in chunks of at most ``chunk_lines`` lines and
    ``chunk_chars`` characters, one chunk in flight at a time; at most
    ``buffer_chars`` wait behind it. The server may be unreachable for ``stall_s``
    before the run's output is no longer sent (the run goes on); the end of a run
    waits ``flush_s`` for its log to be taken."""

    chunk_lines: int = 1000
    chunk_chars: int = 64 * 1024
    buffer_chars: int = 1024 * 1024
    stall_s: float = 60.0
    flush_s: float = 30.0


class LogSender:
    """A run's output, sent to ``…/executions/{id}/log`` from a thread of its own, a
    bounded chunk at a time (the next waits for the answer to the last, so a slow
    server gets fewer, larger chunks); when ``buffer_chars`` are waiting the reader
    blocks, the process's pipe fills and it waits too -- the run is slowed, its
    output never dropped, while the server takes it."""

    def __init__(self, api: Api, base: str, ticket: str, limits: LogLimits) -> None:
        self.api, self.base, self.ticket, self.limits = api, base, ticket, limits
        self._cond = threading.Condition()
        self._lines: deque[tuple[str, str]] = deque()
        self._chars = 0
        self._closing = False
        self._dead = False  # no more lines are sent (the server gave up on them)
        self.dropped = 0
        self.offset = 0
        self._sender = threading.Thread(target=self._send_loop, name=f"log-{base}", daemon=True)
        self._sender.start()

    def output(self, stream: str, line: str) -> None:
        line = line.rstrip("\n")[: self.limits.chunk_chars]
        size = len(line) + 1
        with self._cond:
            while self._chars and self._chars + size > self.limits.buffer_chars and not self._dead:
                self._cond.wait()  # back-pressure: see the class's docstring
            if self._dead or self._closing:
                self.dropped += 1
                return
            self._lines.append((stream, line))
            self._chars += size
            self._cond.notify_all()

    def finish(self) -> None:
        """Send what is left (waiting at most ``flush_s``), then take no more lines."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._sender.join(self.limits.flush_s)
        with self._cond:
            self._dead = True
            self._cond.notify_all()
        if self.dropped:
            log.warning("%s: %d log lines not sent", self.base, self.dropped)

    def _send_loop(self) -> None:
        try:
            self._send_all()
        finally:
            self.api.release()

    def _send_all(self) -> None:
        while True:
            with self._cond:
                while not self._lines and not self._closing and not self._dead:
                    self._cond.wait()
                if not self._lines or self._dead:
                    return
                chunk: list[tuple[str, str]] = []
                chars = 0
                while self._lines and len(chunk) < self.limits.chunk_lines:
                    size = len(self._lines[0][1]) + 1
                    if chunk and chars + size > self.limits.chunk_chars:
                        break
                    chunk.append(self._lines.popleft())
                    chars += size
            sent = self._send_chunk(chunk)
            with self._cond:
                self._chars -= chars
                if not sent:
                    self._dead = True
                    self.dropped += len(self._lines)
                    self._lines.clear()
                    self._chars = 0
                self._cond.notify_all()

    def _send_chunk(self, chunk: list[tuple[str, str]]) -> bool:
        """Deliver one chunk (retried while the server is unreachable, at most
        self.limits.stall_s); False when no more should be sent."""
        lines = [{"stream": stream, "line": line} for stream, line in chunk]
        deadline, pause = time.monotonic() + self.limits.stall_s, 0.2
        while True:
            # The offset makes a retry safe: a chunk the server took already is
            # not written twice.
            body = {"ticket": self.ticket, "offset": self.offset, "lines": lines}
            try:
                answer = self.api.call("POST", f"{self.base}/log", body)[1]
            except Revoked:
                return False
            except ApiError as exc:
                if exc.status < 500 and exc.status != 429:  # closed, refused: stop
                    log.warning("run log: %s", exc)
                    return False
            except OSError as exc:
                log.info("run log: %s; retrying", exc)
            else:
                self.offset = int(answer["size"])
                return not answer.get("full")
            if time.monotonic() > deadline:
                log.warning("run log: the server did not take it for %.0f s", self.limits.stall_s)
                return False
            time.sleep(pause)
            pause = min(pause * 2, 5.0)


class RestRun:
    """A run's execution on the server, reported through the API as it goes: the
    board port of a remote run (:class:`executor.attempt.Board`).

    Usage goes to ``…/usage`` from the run's loop, latest totals only; the answer
    gives the run's ceiling and the model's rates, with which the next reports are
    priced here, on the reader's thread (:meth:`over`), as the local executor does:
    not a server round-trip later. An answer ``stop`` stops the run; a 403/404/409
    means its claim is gone. :meth:`close` sends the run's end to ``…/close``."""

    def __init__(
        self,
        api: Api,
        task_id: str,
        ticket: str,
        execution_id: int,
        *,
        claim: RestTask | None = None,
        heartbeat_s: float = 10.0,
        land: Callable[[RunResult], str] | None = None,
        log_limits: LogLimits | None = None,
    ) -> None:
        self.api = api
        self.ticket = ticket
        self.execution_id = execution_id
        self.base = f"/api/board/tasks/{urllib.parse.quote(task_id)}/executions/{execution_id}"
        self.claim, self._land = claim, land
        self.heartbeat_s = heartbeat_s
        self._lock = threading.Lock()
        # What the server's answers said: the run's ceiling, each model's rates.
        self._ceiling: int | None = None
        self._rates: dict[str | None, dict[str, Any] | None] = {}
        self.log = LogSender(api, self.base, ticket, log_limits or LogLimits())
        self.attempt = Attempt(self, heartbeat_s)
        self.meter = self.attempt.meter

    @classmethod
    def open(
        cls, api: Api, task_id: str, ticket: str, runtime: str, fix_round: int = 0, **kw: Any
    ) -> Any:
        """Open the execution of the claim's run (its ``fix_round``-th fix round);
        None when the claim is gone already."""
        path = f"/api/board/tasks/{urllib.parse.quote(task_id)}/executions"
        # One key per run of a claim: an open whose answer was lost is asked again
        # and answered with the execution it opened, not refused as a second one;
        # a fix round is a run of its own.
        run = ticket if not fix_round else f"{ticket}#fix-{fix_round}"
        key = "open-" + hashlib.sha256(run.encode()).hexdigest()[:40]
        try:
            opened = api.call_thrice(path, {"ticket": ticket, "runtime": runtime}, key)
        except ApiError as exc:
            if exc.status not in CLAIM_GONE:
                raise
            log.warning("task %s: no execution opened: %s", task_id, exc)
            return None
        return cls(api, task_id, ticket, int(opened["id"]), **kw)

    @classmethod
    def of(cls, api: Api, task_id: str, ticket: str, runtime: str, execution_id: int | None) -> Any:
        """The claim's run: ``execution_id`` when the claim opened it, else opened now
        (an older server); None when the claim is gone."""
        if execution_id is not None:
            return cls(api, task_id, ticket, execution_id)
        return cls.open(api, task_id, ticket, runtime)

    # --- the port ---------------------------------------------------------------

    def beat(self) -> float | None:
        return None if self.claim is not None and self.claim.heartbeat() else self.heartbeat_s

    def report(self, usage: UsageSoFar) -> Answer:
        if self.meter.stop is not None:  # the close carries the totals
            return Answer()
        try:
            _, answer = self.api.call(
                "POST", f"{self.base}/usage", {"ticket": self.ticket, **usage.as_body()}
            )
        except ApiError as exc:
            if exc.status in CLAIM_GONE:  # the run was closed
                return Answer(lost=True)
            log.warning("usage report: %s", exc)
            return Answer()
        except OSError as exc:  # the next report carries the totals again
            log.warning("usage report: %s", exc)
            return Answer()
        with self._lock:
            ceiling = answer.get("max_run_cents")
            self._ceiling = ceiling if isinstance(ceiling, int) else None
            rates = answer.get("rates")
            self._rates[usage.model] = rates if isinstance(rates, dict) else None
        why = str(answer.get("reason") or "stopped for spend")
        return Answer(stop=Stop(why) if answer.get("stop") else None)

    def over(self, usage: UsageSoFar) -> Stop | None:
        with self._lock:
            ceiling, known = self._ceiling, usage.model in self._rates
            rates = self._rates.get(usage.model)
        if ceiling is None or (usage.cost_cents is None and not known):
            return None
        how = "reported" if usage.cost_cents is not None else "estimated"
        why = pricing.ceiling_reached(pricing.running_cents(usage, rates), ceiling, how)
        return None if why is None else Stop(why, ceiling=True)

    def output(self, stream: str, line: str) -> None:
        self.log.output(stream, line)

    def steps(self, steps: list[Step]) -> None:
        self._tell("steps", {"steps": [step.as_body() for step in steps]})

    def stalled(self, silent_s: float) -> bool:
        answer = self._tell("stalled", {"silent_s": silent_s})
        return not isinstance(answer, dict) or bool(answer.get("marked", True))

    def _tell(self, what: str, body: dict[str, Any]) -> Any:
        """Best effort: a trace's step or a stall the server did not take is lost,
        not the run (the log still has the output). The server's answer, or None."""
        try:
            return self.api.call("POST", f"{self.base}/{what}", {"ticket": self.ticket, **body})[1]
        except (ApiError, OSError) as exc:
            log.warning("run %s: %s not reported: %s", self.execution_id, what, exc)
            return None

    @property
    def dropped(self) -> int:
        return self.log.dropped

    # --- the run's end: the server settles it (executor.settle) -------------------

    def claim_lost(self, result: RunResult | None) -> None:
        self.close(result, None if result is not None else "the claim was lost")

    def ended(self, result: RunResult, stop: Stop | None) -> str | None:
        closed = self.close(result, None) or {}
        if closed.get("error_class") == ErrorClass.BUDGET:
            return str(closed.get("error") or stop or "stopped for spend")
        return None

    def fail(self, result: RunResult, message: str) -> None:
        if self.claim is not None:
            self.claim.settle("fail", {"error": message})

    def land(self, result: RunResult) -> str:
        """The worker's hand-in (push, submit or complete: :mod:`executor.remote`)."""
        return self._land(result) if self._land is not None else "done"

    # --- the test's and the worker's names ----------------------------------------

    def usage(self, usage: UsageSoFar) -> None:
        self.meter.report(usage)

    def send_usage(self) -> None:
        """Send the latest usage report, if one came since the last."""
        self.attempt.write_usage()

    @property
    def stop(self) -> str | None:
        return None if self.meter.stop is None else self.meter.stop.why

    @property
    def cancel(self) -> Callable[[], None] | None:
        return self.meter.cancel

    @cancel.setter
    def cancel(self, cancel: Callable[[], None] | None) -> None:
        self.meter.cancel = cancel

    def close(
        self, result: RunResult | None, error: str | None, *, started: bool = True
    ) -> dict[str, Any] | None:
        """Close the execution with the run's end (``result`` None: the worker itself
        failed, ``error`` says how; ``started`` False: the run never started, ``error``
        says why, and the server hands the task back), after what is left of its log.
        The server's answer (the closed execution), or None if it could not be had."""
        self.log.finish()
        body: dict[str, Any] = {"ticket": self.ticket}
        last = self.meter.last
        if not started:
            body.update(outcome="cancelled", error=error, started=False)
        elif result is None:
            body.update(outcome="failed", error=error, **(last.as_body() if last else {}))
        else:
            final = result.usage
            if final == UsageSoFar() and last is not None:
                final = last  # a run cut short reports nothing at its end
            body.update(
                outcome=str(result.outcome),
                exit_code=result.exit_code,
                error=result.error or None,
                log=(result.log_tail or "")[-64_000:],
                native_session_id=result.native_session_id,
                **final.as_body(),
            )
        try:  # closing twice changes nothing: a close whose answer was lost is resent
            answer: dict[str, Any] | None = self.api.call_thrice(f"{self.base}/close", body)
            return answer
        except (OSError, ApiError, Revoked) as exc:
            log.warning("execution %s not closed: %s", self.execution_id, exc)
            return None
