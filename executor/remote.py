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
import logging
import os
import socket
import sys
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from board.runs import ErrorClass
from executor import rest
from executor.rest import Api, ApiError, RestRun, Revoked, Waker, registered_repository
from executor.runtimes.base import RunRequest, RunResult
from executor.runtimes.registry import adapter_for, capabilities

__all__ = ["Api", "ApiError", "RunReport", "Revoked", "Worker", "main"]

log = logging.getLogger("clawboo.worker")

EXIT_REVOKED = 3
EXIT_REFUSED = 2
# The run's log goes to the server in chunks of at most this many lines and
# characters, one chunk in flight at a time; at most LOG_BUFFER_CHARS wait behind it.
LOG_CHUNK_LINES = 1000
LOG_CHUNK_CHARS = 64 * 1024
LOG_BUFFER_CHARS = 1024 * 1024
# How long the server may be unreachable before the run's output is no longer sent
# (the run goes on), and how long the end of a run waits for its log to be taken.
LOG_STALL_S = 60.0
LOG_FLUSH_S = 30.0


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
            remote, base = rest.repository(self.api, agent, task)
            landed = registered_repository(agent, task)
            cwd, clone = rest.workspace(self.cache_dir, task, remote, base, landed)
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
                output.update(rest.push(cwd, task, self.host))
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

    def run_agent(
        self,
        agent: dict[str, Any],
        task: dict[str, Any],
        ticket: str,
        cwd: Path,
        *,
        fix_round: int = 0,
    ) -> RunResult | None:
        """Run the agent through the one run loop (:class:`executor.attempt.Attempt`)
        with its execution on the server (:class:`RunReport`): the lines it prints
        streamed to the run's log, its usage reported as it streams (an answer
        ``stop`` cancels it), the lease renewed every ``heartbeat_s``, and the
        execution closed with the run's end. None when the task is no longer this
        worker's to settle: the claim was lost, or the run was stopped for spend
        (the server sent the task back to ``todo``)."""
        base = f"/api/board/tasks/{urllib.parse.quote(task['id'])}"
        prompt = self.prompt(task)
        report = RunReport.open(
            self.api, task["id"], ticket, agent["runtime"], fix_round,
            beat=lambda: self._heartbeat(base, ticket), heartbeat_s=self.heartbeat_s,
        )  # fmt: skip
        if report is None:  # the claim was lost before the run began
            return None
        request = RunRequest(
            task_id=task["id"],
            title=task.get("title") or "",
            prompt=prompt,
            cwd=cwd,
            timeout_s=self.run_timeout_s,
            settings=dict(agent.get("settings") or {}),
            attempt_id=str(report.execution_id),
        )
        try:
            # The claim just set the lease: the first beat is one interval away.
            result = report.attempt.run(adapter_for(agent["runtime"]), request, self.heartbeat_s)
        except BaseException as exc:
            report.close(None, f"remote worker: {type(exc).__name__}: {exc}")
            raise
        closed = report.close(result, None)
        if report.lost or (closed or {}).get("error_class") == ErrorClass.BUDGET:
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


class RunReport(RestRun):
    """A remote run's board port (:class:`executor.rest.RestRun`) with its log.

    The runtime's reader threads hand it each line (:meth:`output`). Lines go to
    ``…/executions/{id}/log`` from a thread of their own, a bounded chunk at a time
    (the next waits for the answer to the last, so a slow server gets fewer, larger
    chunks); when LOG_BUFFER_CHARS are waiting the reader blocks, the process's pipe
    fills and it waits too -- the run is slowed, its output never dropped, while the
    server takes it. :meth:`close` sends what is left of the log, then the run's end."""

    def __init__(self, api: Api, task_id: str, ticket: str, execution_id: int, **kw: Any) -> None:
        super().__init__(api, task_id, ticket, execution_id, **kw)
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

    def close(self, result: RunResult | None, error: str | None) -> dict[str, Any] | None:
        self._finish_log()
        return super().close(result, error)

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
