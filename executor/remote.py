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
it (:mod:`executor.intake`). A 401 (the token was revoked) stops it.

The repository: the task's registered repository (or the agent's default one) read
from ``/api/repositories``, whose ``remote`` this host clones; else ``repo_remote``
in the task's metadata or the agent's settings. Without one the agent runs in a
scratch directory.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from executor.runtimes.base import RunRequest, RunResult, start_run
from executor.runtimes.registry import adapter_for, capabilities

log = logging.getLogger("clawboo.worker")

GIT_TIMEOUT_S = 120.0
HTTP_TIMEOUT_S = 30.0
EXIT_REVOKED = 3
EXIT_REFUSED = 2
BRANCH_PREFIX = "clawboo/task-"


class Revoked(Exception):
    """The server no longer accepts the token (401)."""


class ApiError(Exception):
    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
        self.body = body


@dataclass
class Api:
    server: str
    token: str

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        # The scheme was checked in main (http or https only).
        request = urllib.request.Request(  # noqa: S310
            self.server.rstrip("/") + path,
            data=data,
            method=method,
            headers={
                "Authorization": f"Token {self.token}",
                "Content-Type": "application/json",
                "Accept": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as answer:  # noqa: S310
                raw = answer.read()
                return answer.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                parsed = json.loads(raw) if raw else None
            except ValueError:
                parsed = raw.decode(errors="replace")
            if exc.code == 401:
                raise Revoked(str(parsed)) from None
            raise ApiError(exc.code, parsed) from None


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
    """Sets ``wake`` on every board frame of the team (after ``hello``), reconnecting
    while the worker runs. ``connected`` tells the loop whether to poll slowly."""

    def __init__(self, server: str, token: str, team: str) -> None:
        parts = urllib.parse.urlsplit(server)
        scheme = "wss" if parts.scheme == "https" else "ws"
        query = urllib.parse.urlencode({"team": team, "token": token})
        self.url = f"{scheme}://{parts.netloc}/ws/board/?{query}"
        self.wake = threading.Event()
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

    # --- the loop -------------------------------------------------------------

    def serve(self, once: bool = False) -> None:
        teams = sorted({self.agent(a)["team"] for a in self.agents})
        wakers = [Waker(self.api.server, self.api.token, team) for team in teams]
        self.beat()
        threading.Thread(target=self._beat_loop, name="worker-beat", daemon=True).start()
        try:
            while True:
                if self.revoked.is_set():
                    raise Revoked("the worker beat was refused")
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
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not self.revoked.is_set():
            for waker in wakers:
                if waker.wake.is_set():
                    waker.wake.clear()
                    return
            time.sleep(0.02)

    def _beat_loop(self) -> None:
        # Its own thread: a host stays seen while a long run holds the main loop.
        while not self.revoked.wait(self.heartbeat_s):
            try:
                self.beat()
            except Revoked:
                self.revoked.set()
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
        status, claimed = self.api.call("POST", "/api/board/claim-next", claim)
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
            result = self.run_agent(agent, task, ticket, cwd)
        except Revoked:
            raise
        except Exception as exc:
            log.exception("task %s failed on this host", task_id)
            self.settle(f"{base}/fail", {"error": f"remote worker: {exc}", "ticket": ticket})
            return
        if result is None:  # the lease was lost: the task is someone else's now
            return
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
            return
        if clone is not None:
            try:
                output.update(self.push(clone, cwd, task))
            except Exception as exc:
                self.settle(f"{base}/fail", {"error": f"push failed: {exc}", "ticket": ticket})
                return
            if registered_repository(agent, task) and task.get("file_mutating", True):
                # The server takes the pushed branch in: judged there, then review.
                body = {"ticket": ticket, "branch": output["branch"], "commit": output["commit"]}
                self.settle(f"{base}/submit", {**body, "output": output})
                return
        self.settle(f"{base}/complete", {"ticket": ticket, "output": output})

    def settle(self, path: str, body: dict[str, Any]) -> None:
        try:
            self.api.call("POST", path, body)
        except ApiError as exc:  # lost meanwhile (409): nothing of ours to record
            log.warning("%s: %s", path, exc)

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
        self, agent: dict[str, Any], task: dict[str, Any], ticket: str, cwd: Path
    ) -> RunResult | None:
        base = f"/api/board/tasks/{urllib.parse.quote(task['id'])}"
        prompt = "\n\n".join(filter(None, [task.get("title"), task.get("description")]))
        request = RunRequest(
            task_id=task["id"],
            title=task.get("title") or "",
            prompt=prompt,
            cwd=cwd,
            timeout_s=self.run_timeout_s,
            settings=dict(agent.get("settings") or {}),
        )
        handle = start_run(adapter_for(agent["runtime"]), request)
        while not handle.wait(self.heartbeat_s):
            try:
                beat: dict[str, Any] = {"ticket": ticket}
                if self.lease_ms:
                    beat["lease_ms"] = self.lease_ms
                self.api.call("POST", f"{base}/heartbeat", beat)
            except Revoked:
                handle.cancel()
                handle.wait(30)
                raise
            except ApiError as exc:
                if exc.status in (403, 404, 409):  # the claim is gone
                    handle.cancel()
                    handle.wait(30)
                    return None
                log.warning("heartbeat: %s", exc)
        return handle.result()

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
