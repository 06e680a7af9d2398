"""``clawboo worker --server URL --token KEY [--agent A ...]``: a remote worker.

A plain HTTP client: it never sets Django up and never opens the database, so a
host needs the server's URL and a machine token, nothing else. It waits on the
board's websocket (any frame after ``hello`` wakes it; a slow poll only while the
socket is down), claims through ``POST /api/board/claim-next`` (routes, limits and
budgets apply: they are in the claim), heartbeats the lease through the API, runs
the agent in a worktree of its own clone of the task's repository, pushes the
branch ``clawboo/task-<id>`` to the repository's remote and settles the task with
``complete``/``fail`` -- or, for a registered repository's task, ``submit``: the
server fetches the branch, judges it and sends it to review, and approving lands
it (:mod:`executor.intake`). The worker holds the claim until that intake ends: a
task its judge sends back to fix is run again here, in the same worktree under the
same claim, with the feedback in the prompt the server renders
(``GET …/prompt``), as a local fix round. A 401 (the token was revoked) stops it.

The repository: the task's registered repository (or the agent's default one) read
from ``/api/repositories``, whose ``remote`` this host clones; else ``repo_remote``
in the task's metadata or the agent's settings. Without one the agent runs in a
scratch directory.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import logging
import os
import select
import shutil
import socket
import subprocess
import sys
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
from executor import pricing
from executor.runtimes.base import RunHandle, RunRequest, RunResult, UsageSoFar, start_run
from executor.runtimes.registry import adapter_for, capabilities

log = logging.getLogger("clawboo.worker")

GIT_TIMEOUT_S = 120.0
HTTP_TIMEOUT_S = 30.0
EXIT_REVOKED = 3
EXIT_REFUSED = 2
BRANCH_PREFIX = "clawboo/task-"
# How often the run's loop looks for its end between usage reports.
USAGE_CHECK_S = 0.05
# The run's log goes to the server in chunks of at most this many lines and
# characters, one chunk in flight at a time; at most LOG_BUFFER_CHARS wait behind it.
LOG_CHUNK_LINES = 1000
LOG_CHUNK_CHARS = 64 * 1024
LOG_BUFFER_CHARS = 1024 * 1024
# How long the server may be unreachable before the run's output is no longer sent
# (the run goes on), and how long the end of a run waits for its log to be taken.
LOG_STALL_S = 60.0
LOG_FLUSH_S = 30.0


class Revoked(Exception):
    """The server no longer accepts the token (401)."""


class ApiError(Exception):
    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
        self.body = body


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
        if self._proxied:
            status, raw = self._via_urllib(method, path, data, headers)
        else:
            status, raw = self._kept_alive(method, path, data, headers)
        if status < 300:  # a redirect is not followed: the URL to give is the API's own
            return status, json.loads(raw) if raw else None
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw.decode(errors="replace")
        if status == 401:
            raise Revoked(str(parsed))
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


def git(argv: Sequence[str], cwd: Path | None = None) -> str:
    done = subprocess.run(  # noqa: S603
        ["git", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=GIT_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(argv)}: {done.stderr.strip()[-500:]}")
    return done.stdout.strip()


class Waker:
    """Sets ``wake`` on every board frame of the team (``hello`` too), reconnecting
    while the worker runs. ``connected`` tells the loop whether to poll slowly."""

    def __init__(self, server: str, token: str, team: str, wake: threading.Event) -> None:
        parts = urllib.parse.urlsplit(server)
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
                log.info("board socket down (%s); retrying", exc)
            self.connected.clear()
            self.stop.wait(2.0)


class Worker:
    def __init__(
        self,
        api: Api,
        agents: Sequence[str],
        cache_dir: Path,
        heartbeat_s: float,
        poll_s: float,
        run_timeout_s: float,
        lease_ms: int | None = None,
    ) -> None:
        self.api = api
        self.agents = list(agents)
        self.cache_dir = cache_dir
        self.heartbeat_s = heartbeat_s
        self.poll_s = poll_s
        self.run_timeout_s = run_timeout_s
        self.lease_ms = lease_ms
        self.host = socket.gethostname()
        self.started = time.time()
        self.running: list[str] = []
        self.revoked = threading.Event()
        self.wake = threading.Event()
        self.paused: dict[str, Any] = {}  # agent → why its claims are refused now

    # --- the loop -------------------------------------------------------------

    def serve(self, once: bool = False) -> None:
        teams = sorted({self.agent(a)["team"] for a in self.agents})
        wakers = [Waker(self.api.server, self.api.token, team, self.wake) for team in teams]
        self.beat()
        threading.Thread(target=self._beat_loop, name="worker-beat", daemon=True).start()
        try:
            while True:
                if self.revoked.is_set():
                    raise Revoked("the worker beat was refused")
                # Cleared before the look: a frame that arrives during it wakes the
                # next wait at once, so no board change is slept through.
                self.wake.clear()
                worked = any([self.work_one(agent) for agent in self.agents])
                if worked:
                    continue
                if once:
                    return
                # Up: sleep until a frame (or a heartbeat's worth, to stay seen);
                # down: a slow poll.
                wait = (
                    self.poll_s
                    if all(w.connected.is_set() for w in wakers)
                    else min(self.poll_s, 5.0)
                )
                self._wait_any(wakers, wait)
        finally:
            for waker in wakers:
                waker.stop.set()

    def _wait_any(self, wakers: Sequence[Waker], seconds: float) -> None:
        # One event for every waker (and the revoking beat): woken the moment a
        # frame arrives, not at the next look of a poll.
        self.wake.wait(seconds)

    def _beat_loop(self) -> None:
        # Its own thread: a host stays seen while a long run holds the main loop.
        while not self.revoked.wait(self.heartbeat_s):
            try:
                self.beat()
            except Revoked:
                self.revoked.set()
                self.wake.set()
            except OSError as exc:  # the server is briefly unreachable
                log.warning("worker beat: %s", exc)

    def beat(self) -> None:
        body = {"pid": os.getpid(), "agents": self.agents, "running": list(self.running)}
        try:
            self.api.call("POST", "/api/workers/beat", body)
        except ApiError as exc:
            if exc.status != 404:  # an older server without the endpoint
                log.warning("worker beat refused: %s", exc)

    def agent(self, agent_id: str) -> dict[str, Any]:
        return self.api.call("GET", f"/api/agents/{urllib.parse.quote(agent_id)}")[1]

    def work_one(self, agent_id: str) -> bool:
        claim: dict[str, Any] = {"agent_id": agent_id}
        if self.lease_ms:
            claim["lease_ms"] = self.lease_ms
        try:
            status, claimed = self.api.call("POST", "/api/board/claim-next", claim)
        except ApiError as exc:
            refusal = exc.body.get("error") if isinstance(exc.body, dict) else None
            if exc.status != 409 or refusal not in ("agent_paused", "budget_paused"):
                raise
            # A pause is waited out, as the local executor does: its resume (or a
            # new budget window) is a board change, which wakes this worker.
            if self.paused.get(agent_id) != exc.body.get("detail"):
                log.info("agent %s takes no work now: %s", agent_id, exc.body.get("detail"))
            self.paused[agent_id] = exc.body.get("detail")
            return False
        self.paused.pop(agent_id, None)
        if status == 204 or not claimed:
            return False
        task, ticket = claimed["task"], claimed["ticket"]
        self.running.append(task["id"])
        try:
            self.run_task(self.agent(agent_id), task, ticket)
        finally:
            self.running.remove(task["id"])
        return True

    # --- one task ---------------------------------------------------------------

    def run_task(self, agent: dict[str, Any], task: dict[str, Any], ticket: str) -> None:
        task_id = task["id"]
        base = f"/api/board/tasks/{urllib.parse.quote(task_id)}"
        try:
            if not capabilities(agent["runtime"]).automated:
                raise RuntimeError(f"runtime {agent['runtime']!r} needs a person")
            remote, base_branch = self.repository(agent, task)
            cwd, clone = self.workspace(
                task, remote, base_branch, landed_deps=registered_repository(agent, task)
            )
        except Revoked:
            raise
        except Exception as exc:
            log.exception("task %s failed on this host", task_id)
            self.settle(f"{base}/fail", {"error": f"remote worker: {exc}", "ticket": ticket})
            return
        # A round the server's judge sends back to fix runs here again, in the same
        # worktree under the same claim, as a local fix round does: the judge counts
        # the rounds (CLAWBOO_MAX_FIX_CYCLES), never a new claim.
        fix_round = 0
        while self.run_round(agent, task, ticket, cwd, clone, fix_round):
            fix_round += 1

    def run_round(
        self,
        agent: dict[str, Any],
        task: dict[str, Any],
        ticket: str,
        cwd: Path,
        clone: Path | None,
        fix_round: int,
    ) -> bool:
        """One run of the task and its hand-in; True when the server's judge sent it
        back to fix and the claim is still this worker's (run it again)."""
        task_id = task["id"]
        base = f"/api/board/tasks/{urllib.parse.quote(task_id)}"
        try:
            result = self.run_agent(agent, task, ticket, cwd, fix_round=fix_round)
        except Revoked:
            raise
        except Exception as exc:
            log.exception("task %s failed on this host", task_id)
            self.settle(f"{base}/fail", {"error": f"remote worker: {exc}", "ticket": ticket})
            return False
        if result is None:  # the lease was lost: the task is someone else's now
            return False
        output: dict[str, Any] = {
            "summary": result.summary,
            "exit_code": result.exit_code,
            "tokens_in": result.tokens_in,
            "tokens_out": result.tokens_out,
            "cost_cents": result.cost_cents,
            "host": self.host,
        }
        if not result.succeeded:
            error = result.error or f"run {result.outcome}"
            self.settle(f"{base}/fail", {"error": error, "ticket": ticket})
            return False
        if clone is not None:
            try:
                output.update(self.push(clone, cwd, task))
            except Exception as exc:
                self.settle(f"{base}/fail", {"error": f"push failed: {exc}", "ticket": ticket})
                return False
            if registered_repository(agent, task) and task.get("file_mutating", True):
                # The server takes the pushed branch in: judged there, then review --
                # or back here to fix.
                body = {"ticket": ticket, "branch": output["branch"], "commit": output["commit"]}
                submitted = self.settle(f"{base}/submit", {**body, "output": output})
                return submitted is not None and self.sent_back_to_fix(base, ticket, submitted)
        self.settle(f"{base}/complete", {"ticket": ticket, "output": output})
        return False

    def sent_back_to_fix(self, base: str, ticket: str, submitted: dict[str, Any]) -> bool:
        """Wait, holding the claim, for the server's intake of a submission to end:
        True when its judge sent the task back to fix and the claim is still this
        worker's. Woken by the board's socket (any frame: the intake's end is one),
        the lease renewed every ``heartbeat_s`` -- at the span the submit gave it,
        which covers the intake -- and the task read again at each wake. A worker
        that dies here leaves the lease to lapse, as anywhere else; one whose intake
        never ends within that span leaves the task to the server's recovery."""
        span_s = (submitted.get("lease_duration_ms") or 600_000) / 1000
        deadline = time.monotonic() + span_s
        due = time.monotonic() + self.heartbeat_s
        while True:
            if self.revoked.is_set():
                raise Revoked("the worker beat was refused")
            # Cleared before the look: a frame during it wakes the next wait at once.
            self.wake.clear()
            try:
                task = self.api.call("GET", base)[1]
            except ApiError as exc:  # gone, or no longer ours to see
                log.warning("task %s: %s", base, exc)
                return False
            except OSError as exc:  # briefly unreachable: the next look tries again
                log.warning("task %s: %s", base, exc)
                task = {"status": "in_progress", "output": {"intake": {"state": "pending"}}}
            intake = (task.get("output") or {}).get("intake") or {}
            if task.get("status") != "in_progress" or intake.get("state") != "pending":
                break
            now = time.monotonic()
            if now >= deadline:
                log.warning("%s: no intake outcome within %.0f s", base, span_s)
                return False
            if now >= due:
                due = now + self.heartbeat_s
                # No lease_ms: the span the submit set stays (it covers the intake).
                if self._heartbeat(base, ticket, keep_span=True):
                    return False
            self.wake.wait(max(min(due, deadline) - time.monotonic(), 0.0))
        state = intake.get("state")
        log.info("%s: the intake ended %s (task %s)", base, state, task.get("status"))
        if state != "fix" or task.get("status") != "in_progress":
            return False
        # Back to its builder under the claim's own span: confirm it is still ours.
        return not self._heartbeat(base, ticket)

    def settle(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """Send a settle; the task body answered, or None when it was declined."""
        try:
            return self.api.call("POST", path, body)[1] or {}
        except ApiError as exc:  # lost meanwhile (409): nothing of ours to record
            log.warning("%s: %s", path, exc)
            return None

    def repository(self, agent: dict[str, Any], task: dict[str, Any]) -> tuple[str | None, str]:
        """(remote URL, base branch) of the task's repository: the registered one the
        task names (``/api/repositories``), else the agent's default, else a
        ``repo_remote`` in the task's metadata or the agent's settings."""
        conf = agent.get("settings") or {}
        meta = task.get("metadata") or {}
        for repo_id in (task.get("repository"), conf.get("repository")):
            if isinstance(repo_id, str) and repo_id:
                repo = self.api.call("GET", f"/api/repositories/{urllib.parse.quote(repo_id)}")[1]
                if not repo.get("remote"):
                    raise RuntimeError(f"repository {repo_id!r} has no remote to clone")
                return repo["remote"], meta.get("base_branch") or repo.get("base_branch") or ""
        remote = meta.get("repo_remote") or conf.get("repo_remote")
        return (remote if isinstance(remote, str) and remote else None), meta.get(
            "base_branch"
        ) or ""

    def workspace(
        self,
        task: dict[str, Any],
        remote: str | None,
        base_branch: str = "",
        landed_deps: bool = False,
    ) -> tuple[Path, Path | None]:
        if not remote:
            scratch = self.cache_dir / "scratch" / task["id"]
            scratch.mkdir(parents=True, exist_ok=True)
            return scratch, None
        clone = self.cache_dir / "repos" / hashlib.sha256(remote.encode()).hexdigest()[:16]
        if not (clone / "HEAD").exists():
            clone.parent.mkdir(parents=True, exist_ok=True)
            git(["clone", "--bare", "--quiet", remote, str(clone)])
        git(["fetch", "--quiet", "--prune", "origin", "+refs/heads/*:refs/remotes/origin/*"], clone)
        base = base_branch or git(["symbolic-ref", "--short", "HEAD"], clone)
        start = f"refs/remotes/origin/{base}"
        # A dependency's pushed branch carries the work this task builds on -- unless
        # the server lands its repository's tasks (``landed_deps``): a dependency is
        # done only once landed on the base, which the server pushed back. The
        # task's own branch (an earlier attempt sent back to fix) carries its work.
        deps = [] if landed_deps else list(task.get("depends_on") or [])
        for dep in [*deps, task["id"]]:
            ref = f"refs/remotes/origin/{BRANCH_PREFIX}{dep}"
            if (
                subprocess.run(  # noqa: S603
                    ["git", "rev-parse", "--verify", "--quiet", ref],
                    cwd=clone,
                    capture_output=True,
                    timeout=GIT_TIMEOUT_S,
                    check=False,
                ).returncode
                == 0
            ):
                start = ref
        tree = self.cache_dir / "worktrees" / task["id"]
        if tree.exists():
            shutil.rmtree(tree)
            git(["worktree", "prune"], clone)
        tree.parent.mkdir(parents=True, exist_ok=True)
        branch = f"{BRANCH_PREFIX}{task['id']}"
        git(["worktree", "add", "--quiet", "-B", branch, str(tree), start], clone)
        return tree, clone

    def run_agent(
        self,
        agent: dict[str, Any],
        task: dict[str, Any],
        ticket: str,
        cwd: Path,
        *,
        fix_round: int = 0,
    ) -> RunResult | None:
        """Run the agent with its execution on the server (:class:`RunReport`): the
        lines it prints streamed to the run's log, its usage reported as it streams
        (an answer ``stop`` cancels it), the lease renewed every ``heartbeat_s``,
        and the execution closed with the run's end. None when the task is no longer
        this worker's to settle: the claim was lost, or the run was stopped for
        spend (the server sent the task back to ``todo``)."""
        base = f"/api/board/tasks/{urllib.parse.quote(task['id'])}"
        prompt = self.prompt(task)
        report = RunReport.open(self.api, task["id"], ticket, agent["runtime"], fix_round)
        if report is None:  # the claim was lost before the run began
            return None
        request = RunRequest(
            task_id=task["id"],
            title=task.get("title") or "",
            prompt=prompt,
            cwd=cwd,
            timeout_s=self.run_timeout_s,
            settings=dict(agent.get("settings") or {}),
            on_usage=report.usage,
            attempt_id=str(report.execution_id),
        )
        lost = False
        handle: RunHandle | None = None
        try:
            handle = start_run(adapter_for(agent["runtime"]), request, on_output=report.output)
            report.cancel = handle.cancel
            if report.stop is not None:  # reached before the handle was known
                handle.cancel()
            due = time.monotonic() + self.heartbeat_s  # the claim just set the lease
            cancelled = False
            while not handle.done():
                if time.monotonic() >= due:
                    due = time.monotonic() + self.heartbeat_s
                    lost = self._heartbeat(base, ticket) or lost
                if not lost:
                    report.send_usage()
                if (lost or report.lost or report.stop is not None) and not cancelled:
                    cancelled = True
                    handle.cancel()
                # Usage is sent as soon as it is reported; the run's end is seen
                # within USAGE_CHECK_S.
                report.reported.wait(min(max(due - time.monotonic(), 0.0), USAGE_CHECK_S))
            result = handle.result()
        except BaseException as exc:
            if handle is not None:  # never leave the process behind (a revoked token)
                handle.cancel()
                handle.wait(30)
            report.close(None, f"remote worker: {type(exc).__name__}: {exc}")
            raise
        closed = report.close(result, None)
        if lost or report.lost or (closed or {}).get("error_class") == ErrorClass.BUDGET:
            return None
        return result

    def prompt(self, task: dict[str, Any]) -> str:
        """The run's prompt as the server renders it for every run (the feedback of a
        round its judge sent back to fix included); an older server without
        ``…/prompt``: the task's title and description."""
        try:
            path = f"/api/board/tasks/{urllib.parse.quote(task['id'])}/prompt"
            return str(self.api.call("GET", path)[1]["prompt"])
        except ApiError as exc:
            if exc.status != 404:
                raise
        return "\n\n".join(filter(None, [task.get("title"), task.get("description")]))

    def _heartbeat(self, base: str, ticket: str, *, keep_span: bool = False) -> bool:
        """Renew the lease (``keep_span``: at the span the server last set, not this
        worker's ``lease_ms``); True when the claim is gone (the run must stop)."""
        beat: dict[str, Any] = {"ticket": ticket}
        if self.lease_ms and not keep_span:
            beat["lease_ms"] = self.lease_ms
        try:
            self.api.call("POST", f"{base}/heartbeat", beat)
        except ApiError as exc:
            if exc.status in (403, 404, 409):
                return True
            log.warning("heartbeat: %s", exc)
        except OSError as exc:  # briefly unreachable: the next beat tries again
            log.warning("heartbeat: %s", exc)
        return False

    def push(self, clone: Path, cwd: Path, task: dict[str, Any]) -> dict[str, Any]:
        branch = f"{BRANCH_PREFIX}{task['id']}"
        git(["add", "-A"], cwd)
        if git(["status", "--porcelain"], cwd):
            git(
                [
                    "-c",
                    "user.name=clawboo worker",
                    "-c",
                    f"user.email=worker@{self.host}",
                    "commit",
                    "--quiet",
                    "-m",
                    f"{task.get('title') or task['id']}",
                ],
                cwd,
            )
        git(["push", "--quiet", "origin", f"+refs/heads/{branch}:refs/heads/{branch}"], cwd)
        return {"branch": branch, "commit": git(["rev-parse", "HEAD"], cwd)}


class RunReport:
    """A run's execution on the server, reported through the API as it goes.

    The runtime's reader threads hand it each line (:meth:`output`) and each usage
    report (:meth:`usage`). Lines go to ``…/executions/{id}/log`` from a thread of
    their own, a bounded chunk at a time (the next waits for the answer to the
    last, so a slow server gets fewer, larger chunks); when LOG_BUFFER_CHARS are
    waiting the reader blocks, the process's pipe fills and it waits too -- the
    run is slowed, its output never dropped, while the server takes it. Usage goes
    to ``…/usage`` from the run's loop (:meth:`send_usage`), latest totals only;
    an answer ``stop`` sets :attr:`stop`. :meth:`close` sends what is left of the
    log, then the run's end to ``…/close``."""

    def __init__(self, api: Api, task_id: str, ticket: str, execution_id: int) -> None:
        self.api = api
        self.ticket = ticket
        self.execution_id = execution_id
        self.base = f"/api/board/tasks/{urllib.parse.quote(task_id)}/executions/{execution_id}"
        # Set by answers: the run was stopped for spend (why), or its claim is gone.
        self.stop: str | None = None
        self.lost = False
        self.reported = threading.Event()
        self._usage_lock = threading.Lock()
        self._usage: UsageSoFar | None = None
        self._last_usage: UsageSoFar | None = None
        # What the server's answers said: the run's ceiling, each model's rates.
        self._ceiling: int | None = None
        self._rates: dict[str | None, dict[str, Any] | None] = {}
        # Stops the run (set once it is started).
        self.cancel: Callable[[], None] | None = None
        self._cond = threading.Condition()
        self._lines: deque[tuple[str, str]] = deque()
        self._chars = 0
        self._closing = False
        self._dead = False  # no more lines are sent (the server gave up on them)
        self.dropped = 0
        self.offset = 0
        self._sender = threading.Thread(
            target=self._send_loop, name=f"log-{execution_id}", daemon=True
        )
        self._sender.start()

    @classmethod
    def open(
        cls, api: Api, task_id: str, ticket: str, runtime: str, fix_round: int = 0
    ) -> RunReport | None:
        """Open the execution of the claim's run (its ``fix_round``-th fix round);
        None when the claim is gone already."""
        path = f"/api/board/tasks/{urllib.parse.quote(task_id)}/executions"
        # One key per run of a claim: an open whose answer was lost is asked again
        # and answered with the execution it opened, not refused as a second one;
        # a fix round is a run of its own.
        run = ticket if not fix_round else f"{ticket}#fix-{fix_round}"
        key = "open-" + hashlib.sha256(run.encode()).hexdigest()[:40]
        body = {"ticket": ticket, "runtime": runtime}
        for attempt in range(3):
            try:
                _, opened = api.call("POST", path, body, idempotency_key=key)
                return cls(api, task_id, ticket, int(opened["id"]))
            except ApiError as exc:
                if exc.status in (403, 404, 409):
                    log.warning("task %s: no execution opened: %s", task_id, exc)
                    return None
                raise
            except OSError:
                if attempt == 2:
                    raise
                time.sleep(1.0 + attempt)
        raise AssertionError("unreachable")

    # --- from the runtime's reader threads ----------------------------------------

    def output(self, stream: str, line: str) -> None:
        line = line.rstrip("\n")[:LOG_CHUNK_CHARS]
        size = len(line) + 1
        with self._cond:
            while self._chars and self._chars + size > LOG_BUFFER_CHARS and not self._dead:
                self._cond.wait()  # back-pressure: see the class's docstring
            if self._dead or self._closing:
                self.dropped += 1
                return
            self._lines.append((stream, line))
            self._chars += size
            self._cond.notify_all()

    def usage(self, usage: UsageSoFar) -> None:
        with self._usage_lock:
            self._usage = self._last_usage = usage
        self.reported.set()
        self._check_ceiling(usage)

    # --- from the run's loop ----------------------------------------------------

    def send_usage(self) -> None:
        """Send the latest usage report, if one came since the last."""
        with self._usage_lock:
            usage, self._usage = self._usage, None
            self.reported.clear()
        if usage is None or self.stop is not None:  # the close carries the totals
            return
        try:
            _, answer = self.api.call(
                "POST", f"{self.base}/usage", {"ticket": self.ticket, **usage.as_body()}
            )
        except ApiError as exc:
            if exc.status in (403, 404, 409):  # the run was closed: the claim is gone
                self.lost = True
            else:
                log.warning("usage report: %s", exc)
            return
        except OSError as exc:  # the next report carries the totals again
            log.warning("usage report: %s", exc)
            return
        with self._usage_lock:
            ceiling = answer.get("max_run_cents")
            self._ceiling = ceiling if isinstance(ceiling, int) else None
            rates = answer.get("rates")
            self._rates[usage.model] = rates if isinstance(rates, dict) else None
        if answer.get("stop"):
            self._stopped(str(answer.get("reason") or "stopped for spend"))
        elif self._last_usage is not None:
            self._check_ceiling(self._last_usage)  # a report that came meanwhile

    def _check_ceiling(self, usage: UsageSoFar) -> None:
        """Price the report with what the server said (the ceiling, the model's
        rates) and stop the run at the one that reaches its ceiling, on the reader's
        thread, as the local executor does: not a server round-trip later."""
        with self._usage_lock:
            ceiling, known = self._ceiling, usage.model in self._rates
            rates = self._rates.get(usage.model)
        if ceiling is None or (usage.cost_cents is None and not known):
            return
        cents = pricing.running_cents(usage, rates)
        if cents is not None and cents >= ceiling:
            self._stopped(f"the run cost {cents}¢, reaching its ceiling of {ceiling}¢")

    def _stopped(self, why: str) -> None:
        with self._usage_lock:
            if self.stop is not None:
                return
            self.stop = why
        log.info("execution %s stopped: %s", self.execution_id, why)
        if self.cancel is not None:
            self.cancel()
        self.reported.set()

    def close(self, result: RunResult | None, error: str | None) -> dict[str, Any] | None:
        """Send the rest of the log, then close the execution with the run's end
        (``result`` None: the worker itself failed, ``error`` says how). The
        server's answer (the closed execution), or None if it could not be had."""
        self._finish_log()
        body: dict[str, Any] = {"ticket": self.ticket}
        if result is None:
            body.update(outcome="failed", error=error)
            if self._last_usage is not None:
                body.update(self._last_usage.as_body())
        else:
            final = result.usage
            if final == UsageSoFar() and self._last_usage is not None:
                final = self._last_usage  # a run cut short reports nothing at its end
            body.update(
                outcome=str(result.outcome),
                exit_code=result.exit_code,
                error=result.error or None,
                log=(result.log_tail or "")[-64_000:],
                native_session_id=result.native_session_id,
                **final.as_body(),
            )
        for attempt in range(3):
            # Closing twice changes nothing: a close whose answer was lost is resent.
            try:
                return self.api.call("POST", f"{self.base}/close", body)[1]
            except OSError as exc:
                if attempt == 2:
                    log.warning("execution %s not closed: %s", self.execution_id, exc)
                    return None
                time.sleep(1.0 + attempt)
            except (ApiError, Revoked) as exc:
                log.warning("execution %s not closed: %s", self.execution_id, exc)
                return None
        return None

    # --- the log's sender -------------------------------------------------------

    def _finish_log(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._sender.join(LOG_FLUSH_S)
        with self._cond:
            self._dead = True
            self._cond.notify_all()
        if self.dropped:
            log.warning("execution %s: %d log lines not sent", self.execution_id, self.dropped)

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
                while self._lines and len(chunk) < LOG_CHUNK_LINES:
                    size = len(self._lines[0][1]) + 1
                    if chunk and chars + size > LOG_CHUNK_CHARS:
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
        LOG_STALL_S); False when no more should be sent."""
        lines = [{"stream": stream, "line": line} for stream, line in chunk]
        deadline, pause = time.monotonic() + LOG_STALL_S, 0.2
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
                log.warning("run log: the server did not take it for %.0f s", LOG_STALL_S)
                return False
            time.sleep(pause)
            pause = min(pause * 2, 5.0)


def registered_repository(agent: dict[str, Any], task: dict[str, Any]) -> bool:
    """Whether the task's repository is one the server registered (it then takes
    the pushed branch in through ``submit``), not a bare ``repo_remote``."""
    conf = agent.get("settings") or {}
    return any(
        isinstance(repo_id, str) and repo_id
        for repo_id in (task.get("repository"), conf.get("repository"))
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="clawboo worker", description=__doc__.split("\n")[0])
    parser.add_argument("--server", required=True, help="the server's base URL")
    parser.add_argument("--token", default=os.environ.get("CLAWBOO_TOKEN"), help="machine key")
    parser.add_argument("--agent", action="append", default=[], help="an agent to run")
    parser.add_argument(
        "--cache-dir",
        default=os.environ.get("CLAWBOO_WORKER_DIR", str(Path.home() / ".cache/clawboo-worker")),
    )
    parser.add_argument("--heartbeat", type=float, default=10.0, help="seconds between beats")
    parser.add_argument("--poll", type=float, default=30.0, help="seconds between idle checks")
    parser.add_argument("--run-timeout", type=float, default=3600.0)
    parser.add_argument(
        "--lease-ms", type=int, help="lease asked for on claims and heartbeats (server default)"
    )
    parser.add_argument("--once", action="store_true", help="work what is ready, then exit")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    if not args.token:
        parser.error("--token (or CLAWBOO_TOKEN) is required")
    if urllib.parse.urlsplit(args.server).scheme not in ("http", "https"):
        parser.error("--server must be an http:// or https:// URL")
    api = Api(args.server, args.token)
    try:
        agents = args.agent or api.call("GET", "/api/whoami")[1].get("agents") or []
        if not agents:
            parser.error("no --agent given and the token names none")
        Worker(
            api,
            agents,
            Path(args.cache_dir),
            args.heartbeat,
            args.poll,
            args.run_timeout,
            args.lease_ms,
        ).serve(once=args.once)
    except Revoked as exc:
        sys.stderr.write(f"clawboo worker: the server refused the token ({exc}); stopping\n")
        return EXIT_REVOKED
    except ApiError as exc:  # e.g. 403: the token may not run an agent it was given
        sys.stderr.write(f"clawboo worker: {exc}\n")
        return EXIT_REFUSED
    except KeyboardInterrupt:
        return 130
    return 0
