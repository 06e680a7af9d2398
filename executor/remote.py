"""``clawboo worker --server URL --token-file PATH [--agent A ...]``: a remote worker.

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
task its judge sends back to fix -- or sends back to bring its branch up to date,
its work no longer merging onto a base that moved on -- is run again here, in the
same worktree under the same claim, with the feedback in the prompt the server
renders (``GET …/prompt``), as a local fix round; the remote's base is fetched
first, as ``origin/<base>``. A 401 (the token was revoked) stops it.

The repository is the one the claim's answer names (the server's one answer,
:func:`board.repository.run_repository`): this host clones its ``remote``; without
one the agent runs in a scratch directory.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import astuple
from pathlib import Path
from typing import Any

from board.errors import AgentPaused, BudgetPaused
from executor import preflight, rest
from executor.attempt import Stall, run_settings, run_timeout_of
from executor.preflight import Refused, remote_refusal
from executor.rest import Api, ApiError, LogLimits, RestRun, Revoked, ServerUnreachable, Waker
from executor.runtimes.base import RunRequest, RunResult
from executor.runtimes.registry import adapter_for

__all__ = ["Api", "ApiError", "Refused", "RunReport", "Revoked", "Worker"]

log = logging.getLogger("clawboo.worker")

# Claim-next's refusals a worker waits out, as the local executor does: a resume, or
# a new budget window, is a board change that wakes it.
WAITED_ON = (AgentPaused.code, BudgetPaused.code)
# The run's log limits (:class:`executor.rest.LogLimits`), a name each: a test sets one.
LOG_CHUNK_LINES, LOG_CHUNK_CHARS, LOG_BUFFER_CHARS, LOG_STALL_S, LOG_FLUSH_S = astuple(LogLimits())


def _field(exc: ApiError) -> Any:
    """The field a 400 names (``validation_error``'s ``field``), if any."""
    return exc.body.get("field") if isinstance(exc.body, dict) else None


def connected_line(server: str, agents: list[dict[str, Any]], hostname: str) -> str:
    """The worker's first line: the host its key names on the server (the name the
    board's Agents panel shows: "runs on gpu-1"), and this machine's own name when
    they differ. It said only the machine's name, which the board never shows."""
    named = sorted({a["runs_on"]["host"] for a in agents if a.get("runs_on")})
    who = (
        hostname if named in ([], [hostname]) else f"{', '.join(named)} (this machine: {hostname})"
    )
    return f"connected to {server} as {who}: {', '.join(a['id'] for a in agents)}"


class Worker:
    def __init__(
        self,
        api: Api,
        agents: Sequence[str],
        cache_dir: Path,
        heartbeat_s: float,
        poll_s: float,
        run_timeout_s: float | None = None,
        lease_ms: int | None = None,
    ) -> None:
        self.api = api
        self.agents = list(agents)
        self.cache_dir = cache_dir
        self.heartbeat_s = heartbeat_s
        self.poll_s = poll_s
        # ``--run-timeout``: overrides every agent's ``settings.timeout_s`` (None: each
        # run takes its agent's, as the server's own workers do).
        self.run_timeout_s = run_timeout_s
        self.lease_ms = lease_ms
        self.host = socket.gethostname()
        self.started = time.time()
        self.running: list[str] = []
        self.revoked = threading.Event()
        self.wake = threading.Event()
        self.paused: dict[str, Any] = {}  # agent → why its claims are refused now
        # Each agent's health on this host: the local executor's gate.
        self.health = preflight.AgentGates(self.agent)
        # Whether the server opens the run in the claim (false: an older server).
        self.open_in_claim = True

    # --- the loop -------------------------------------------------------------

    def serve(self, once: bool = False) -> None:
        found = [self.agent(a) for a in self.agents]
        refusals = [why for why in map(remote_refusal, found) if why is not None]
        if refusals:
            raise Refused("; ".join(refusals))
        if idle := preflight.nothing_to_run(found):
            raise Refused(idle)
        teams = sorted({agent["team"] for agent in found})
        wakers = [
            Waker(self.api.server, self.api.token, team, self.wake, self.api.reach)
            for team in teams
        ]
        self.beat()
        # Read again after the beat: of several keys bound to an agent, the board names
        # the one seen last, which is now this worker's.
        seen = [self.agent(a) for a in self.agents]
        log.info("%s", connected_line(self.api.server, seen, self.host))
        threading.Thread(target=self._beat_loop, name="worker-beat", daemon=True).start()
        try:
            while True:
                if self.revoked.is_set():
                    raise Revoked("the worker beat was refused")
                # Cleared before the look: a frame that arrives during it wakes the
                # next wait at once, so no board change is slept through.
                self.wake.clear()
                try:
                    worked = any([self.work_one(agent) for agent in self.agents])
                except ServerUnreachable:
                    # The server went away mid-look (logged once by the Api): wait,
                    # ask again; the claim resumes when it answers.
                    self.revoked.wait(self.api.reach.backoff())
                    continue
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
                self.wake.wait(wait)  # one event for every waker and the revoking beat
        finally:
            for waker in wakers:
                waker.stop.set()

    def _beat_loop(self) -> None:
        # Its own thread: a host stays seen while a long run holds the main loop.
        while not self.revoked.wait(self.heartbeat_s):
            try:
                self.beat()
            except Revoked:
                self.revoked.set()
                self.wake.set()
            except ServerUnreachable:  # said once by the Api; the next beat tries
                pass
            except OSError as exc:
                log.warning("worker beat: %s", exc)

    def beat(self) -> None:
        body = {"pid": os.getpid(), "agents": self.agents, "running": list(self.running)}
        try:
            self.api.call("POST", "/api/workers/beat", body)
        except ApiError as exc:
            if exc.status != 404:  # an older server without the endpoint
                log.warning("worker beat refused: %s", exc)

    def agent(self, agent_id: str) -> dict[str, Any]:
        path = f"/api/agents/{urllib.parse.quote(agent_id)}"
        found: dict[str, Any] = self.api.call_patiently("GET", path, stop=self.revoked)[1]
        self.health.seen[agent_id] = found
        return found

    def work_one(self, agent_id: str) -> bool:
        unhealthy = self.health.refusal(agent_id)
        if unhealthy is not None:
            # Nothing claimed: the task stays for a host (or the server) that can run it.
            if self.paused.get(agent_id) != unhealthy:
                log.info("agent %s takes no work on this host: %s", agent_id, unhealthy)
            self.paused[agent_id] = unhealthy
            return False
        claim: dict[str, Any] = {"agent_id": agent_id}
        if self.lease_ms:
            claim["lease_ms"] = self.lease_ms
        if self.open_in_claim:
            # The run opens in the claim's own write, as a local worker's does: no
            # second call, and no claim left without its run by a death in between.
            claim["open_run"] = True
        try:
            status, claimed = self.api.call_patiently(
                "POST", "/api/board/claim-next", claim, stop=self.revoked
            )
        except ApiError as exc:
            if exc.status == 400 and _field(exc) == "open_run":
                # An older server: the run is opened by a call of its own.
                self.open_in_claim = False
                return self.work_one(agent_id)
            refusal = exc.body.get("error") if isinstance(exc.body, dict) else None
            if exc.status != 409 or refusal not in WAITED_ON:
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
        opened = claimed.get("execution")
        # Where the worker is: a run takes minutes, and its log said nothing between
        # "connected" and the run's end.
        log.info("task %s: claimed for %s: %s", task["id"], agent_id, task.get("title") or "")
        self.running.append(task["id"])
        try:
            self.run_task(
                self.agent(agent_id), task, ticket, claimed.get("repository") or {},
                execution_id=int(opened["id"]) if isinstance(opened, dict) else None,
            )  # fmt: skip
        finally:
            self.running.remove(task["id"])
        return True

    # --- one task ---------------------------------------------------------------

    def run_task(
        self,
        agent: dict[str, Any],
        task: dict[str, Any],
        ticket: str,
        repo: dict[str, Any],
        *,
        execution_id: int | None = None,
    ) -> None:
        """Run the claimed task in the repository the claim's answer names (the
        server's one answer, :func:`board.repository.run_repository`); its first run
        is ``execution_id`` when the claim opened it, else opened here."""
        claim = rest.RestTask(
            self.api, task["id"], ticket, lease_ms=self.lease_ms, heartbeat_s=self.heartbeat_s,
            revoked=self.revoked, wake=self.wake,
        )  # fmt: skip
        try:
            refusal = preflight.run_refusal(agent)  # paused, or changed, since the claim
            if refusal is not None:
                self.not_started(claim, task, agent["runtime"], execution_id, refusal)
                return
            try:
                checkout = rest.workspace(self.cache_dir, task, repo)
            except (Revoked, ServerUnreachable):
                raise
            except Exception as exc:
                # No checkout on this host: the local executor's rule for a failure
                # around a run (executor.runner.settle_crash) -- the run closed failed,
                # which the server classifies and the agent's breaker counts, then the
                # task failed (retried). A host whose every checkout fails so pauses
                # its agent, not the whole queue.
                # A missing remote is a setting, not a bug of the worker: its own
                # sentence says it whole, in one line, not a traceback.
                said = isinstance(exc, rest.NoCheckout | rest.GitFailed)
                log.error(
                    "task %s: no checkout on this host: %s", task["id"], exc, exc_info=not said
                )
                error = f"remote worker: {exc if said else f'{type(exc).__name__}: {exc}'}"
                report = RunReport.of(self.api, task["id"], ticket, agent["runtime"], execution_id)
                if report is not None:
                    report.close(None, error)
                claim.settle("fail", {"error": error})
                return
            # A round the server sends back (a fix or a rebase round) runs here again, in
            # the same worktree under the same claim, as a local fix round does: the
            # server counts the rounds (CLAWBOO_MAX_FIX_CYCLES, CLAWBOO_MAX_REBASE_ROUNDS).
            # Each starts from the base as the remote has it now (origin/<base>).
            fix_round = 0
            while self.run_round(claim, agent, task, checkout, fix_round, execution_id) == "fix":
                fix_round, execution_id = fix_round + 1, None
                if checkout.clone is not None:
                    rest.fetch_remote(checkout.clone)
        except (Revoked, ServerUnreachable):
            raise  # revoked: stop; unreachable: the loop waits for the server
        except Exception as exc:
            log.exception("task %s failed on this host", task["id"])
            claim.settle("fail", {"error": f"remote worker: {exc}"})

    def not_started(
        self, claim: rest.RestTask, task: dict[str, Any], runtime: str, run: int | None, why: str
    ) -> None:
        """Not run (:func:`executor.preflight.run_refusal`: e.g. its agent paused since):
        closed ``started: false``, settled by the local executor's rule on the server
        (:func:`executor.settle.refuse_paused`); an older server's: the task failed."""
        log.info("task %s not run: %s", task["id"], why)
        report = RunReport.of(self.api, task["id"], claim.ticket, runtime, run)
        if report is not None and report.close(None, why, started=False) is None:
            claim.settle("fail", {"error": why})

    def run_round(
        self,
        claim: rest.RestTask,
        agent: dict[str, Any],
        task: dict[str, Any],
        checkout: rest.Checkout,
        fix_round: int,
        execution_id: int | None = None,
    ) -> str:
        """One run of the task through the one run loop and settlement
        (:class:`executor.attempt.Attempt`, with its execution on the server:
        :class:`RunReport`), its end settled through the API; ``fix`` when the
        server's judge sent it back and the claim is still this worker's."""
        ports: dict[str, Any] = {
            "claim": claim,
            "heartbeat_s": self.heartbeat_s,
            "land": lambda result: self.hand_in(claim, task, checkout, result),
        }
        if execution_id is not None:  # opened by the claim
            report = RunReport(self.api, task["id"], claim.ticket, execution_id, **ports)
        else:
            report = RunReport.open(
                self.api, task["id"], claim.ticket, agent["runtime"], fix_round, **ports
            )
        if report is None:  # the claim was lost before the run began
            return "lost"
        report.attempt.stall = Stall.of(agent.get("settings"))
        request = RunRequest(
            task_id=task["id"],
            title=task.get("title") or "",
            prompt=claim.prompt(task),
            cwd=checkout.cwd,
            timeout_s=run_timeout_of(agent.get("settings"), self.run_timeout_s),
            settings=run_settings(agent.get("settings"), task.get("metadata")),
            attempt_id=str(report.execution_id),
            project_base=checkout.project_base(),
        )
        fix = f", fix round {fix_round}" if fix_round else ""
        runs = f"{agent.get('id')} ({agent['runtime']}) in {checkout.cwd}{fix}"
        log.info("task %s: running %s", task["id"], runs)
        try:
            # The claim just set the lease: the first beat is one interval away.
            result = report.attempt.run(adapter_for(agent["runtime"]), request, self.heartbeat_s)
        except BaseException as exc:
            report.close(None, f"remote worker: {type(exc).__name__}: {exc}")
            raise
        return report.attempt.settle(result)

    def hand_in(
        self, claim: rest.RestTask, task: dict[str, Any], checkout: rest.Checkout, result: RunResult
    ) -> str:
        """A run that succeeded here: its branch pushed and submitted to the server's
        intake (judged there: ``review``, or ``fix`` here again -- a fix or rebase
        round), or the task completed; ``failed`` when the push failed, ``lost``
        when declined."""
        output: dict[str, Any] = {
            "summary": result.summary,
            "exit_code": result.exit_code,
            "tokens_in": result.tokens_in,
            "tokens_out": result.tokens_out,
            "cost_cents": result.cost_cents,
            "host": self.host,
        }
        if checkout.clone is not None:
            try:
                output.update(rest.push(checkout.cwd, task, self.host))
            except Exception as exc:
                claim.settle("fail", {"error": f"push failed: {exc}"})
                return "failed"
            if checkout.registered and task.get("file_mutating", True):
                # The server takes the pushed branch in: judged there, then review --
                # or back here to fix.
                body = {"branch": output["branch"], "commit": output["commit"], "output": output}
                log.info("task %s: pushed %s; the server judges it", task["id"], output["branch"])
                submitted = claim.settle("submit", body)
                if submitted is None:
                    return "lost"
                return "fix" if claim.sent_back_to_fix(submitted) else "review"
        if claim.settle("complete", {"output": output}) is not None:
            log.info("task %s: completed", task["id"])
            return "done"
        if claim.refused == "verification_required" and claim.to_review():
            # A person's verdict stands against the work (it outlives a return to
            # todo): the run's end hands it to them in review, as a local run's does.
            return "review"
        return "lost"


class RunReport(RestRun):
    """A remote run's board port (:class:`executor.rest.RestRun`), its log sent in
    this module's LOG_* limits (:class:`executor.rest.LogSender`)."""

    def __init__(self, api: Api, task_id: str, ticket: str, execution_id: int, **kw: Any) -> None:
        limits = LogLimits(
            LOG_CHUNK_LINES, LOG_CHUNK_CHARS, LOG_BUFFER_CHARS, LOG_STALL_S, LOG_FLUSH_S
        )
        super().__init__(api, task_id, ticket, execution_id, log_limits=limits, **kw)
