"""A worker process for the board's concurrency tests.

``python tests/workers.py <command> [args]`` sets Django up against the database in
``DATABASE_URL``, runs one command and prints its result as one JSON line. With
``--barrier FILE`` it first opens its connection, prints ``{"ready": true}`` and
waits for FILE to appear, so a test can line every process up before the race.

Commands: ``claim``, ``drain`` (claim_next until nothing is ready),
``route-drain`` (a registered agent claims and finishes what is routed to it),
``sample-held`` (the most each agent holds in_progress, while work remains), ``link``,
``create-child``, ``write-storm``, ``crash-worker`` (claims, opens an execution,
heartbeats until it is killed), ``claim-loop`` (claim_next, report, pause, until
killed), ``cap-claims`` (claim_next, holding each task, until refused),
``approve`` (lands a reviewed task), ``publish`` (opens its pull request),
``take-in`` (the server's intake of a submitted task, ``--state-dir`` another
host's), ``scope-drain`` (claims by id or next, holds each task a moment,
finishes it, until nothing is todo) and
``sample-scope`` (every pair of overlapping scopes seen in progress together).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# Run as a script, sys.path[0] is tests/, where tests/board would shadow the app.
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "tests"]


def emit(body: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(body) + "\n")
    sys.stdout.flush()


def wait_at_barrier(path: str | None) -> None:
    if not path:
        return
    from django.db import connection

    connection.ensure_connection()  # the race is about the write, not about connecting
    emit({"ready": True})
    deadline = time.monotonic() + 120
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise SystemExit("the barrier never opened")
        time.sleep(0.001)


def error_body(exc: BaseException) -> dict[str, Any]:
    return {"ok": False, "error": type(exc).__name__, "code": getattr(exc, "code", None)}


def cmd_claim(args: argparse.Namespace) -> dict[str, Any]:
    from board import store

    result = store.claim(args.task, args.agent, "command")
    return {"outcome": result.outcome, "ticket": result.ticket}


def cmd_drain(args: argparse.Namespace) -> dict[str, Any]:
    """claim_next until nothing is ready, as a real drain loop would.

    A write that stayed locked for the whole budget rolled back and claimed
    nothing; like a real worker we simply poll again, and report how often.
    """
    from board import store
    from core.storage import WriteBudgetExceeded

    claimed: list[str] = []
    over_budget = 0
    while True:
        try:
            result = store.claim_next(args.agent, dispatcher=args.dispatcher)
        except WriteBudgetExceeded:
            over_budget += 1
            continue
        if result is None:
            return {"claimed": claimed, "over_budget": over_budget}
        claimed.append(result.task.id)


def cmd_route_drain(args: argparse.Namespace) -> dict[str, Any]:
    """claim_next as a registered agent and finish each task at once, until no todo
    task routed to it is left (a None at its limit is not the end: poll again)."""
    from django.db import connection
    from django.db.models import BooleanField
    from django.db.models.expressions import RawSQL

    from board import store
    from board.models import Task
    from board.store.ready import route_params, route_sql
    from core.models import Agent
    from core.storage import WriteBudgetExceeded

    agent = Agent.objects.get(pk=args.agent)
    mine = Task.objects.filter(status="todo").filter(
        RawSQL(  # noqa: S611 - the route's binds are parameters
            route_sql(connection.vendor),
            route_params(agent.id, agent.runtime, list(agent.labels)),
            output_field=BooleanField(),
        )
    )
    claimed: list[str] = []
    over_budget = 0
    while True:
        try:
            result = store.claim_next(agent.id, runtime=agent.runtime)
        except WriteBudgetExceeded:
            over_budget += 1
            continue
        if result is None:
            if not mine.exists():
                return {"claimed": claimed, "over_budget": over_budget}
            continue
        assert result.task is not None
        claimed.append(result.task.id)
        store.complete(result.task.id, {"by": agent.id}, ticket=result.ticket)


def cmd_sample_held(args: argparse.Namespace) -> dict[str, Any]:
    """Sample what each agent holds in_progress until nothing is todo or in progress:
    the most each agent was ever seen holding, and how many samples were taken."""
    from django.db.models import Count

    from board.models import Task

    most: dict[str, int] = {}
    samples = 0
    while True:
        held = (
            Task.objects.filter(status="in_progress")
            .values("assignee_agent_id")
            .annotate(n=Count("id"))
        )
        for row in held:
            agent = row["assignee_agent_id"]
            most[agent] = max(most.get(agent, 0), row["n"])
        samples += 1
        if not Task.objects.filter(status__in=["todo", "in_progress"]).exists():
            return {"most": most, "samples": samples}


def cmd_scope_drain(args: argparse.Namespace) -> dict[str, Any]:
    """Claim -- by id (a random todo task) or claim-next, by turns of a seeded coin --
    hold the task ``--hold-ms``, finish it; until nothing is todo. A None or a
    refusal while work remains (held back by scope) is not the end: poll again."""
    import random

    from board import store
    from board.models import Task
    from core.storage import WriteBudgetExceeded

    rng = random.Random(args.seed)
    claimed: list[str] = []
    outcomes: dict[str, int] = {}
    over_budget = 0
    while True:
        try:
            if rng.random() < 0.5:
                todo = list(Task.objects.filter(status="todo").values_list("id", flat=True)[:50])
                if not todo:
                    if not Task.objects.filter(status="todo").exists():
                        return {
                            "claimed": claimed,
                            "outcomes": outcomes,
                            "over_budget": over_budget,
                        }
                    continue
                result = store.claim(rng.choice(todo), args.agent, "command")
            else:
                result = store.claim_next(args.agent, runtime="command")
        except WriteBudgetExceeded:
            over_budget += 1
            continue
        outcome = "none" if result is None else result.outcome
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if result is None or not result.ok:
            if not Task.objects.filter(status="todo").exists():
                return {"claimed": claimed, "outcomes": outcomes, "over_budget": over_budget}
            time.sleep(0.001)
            continue
        assert result.task is not None
        claimed.append(result.task.id)
        time.sleep(args.hold_ms / 1000)
        store.complete(result.task.id, {"by": args.agent}, ticket=result.ticket)


def cmd_sample_scope(args: argparse.Namespace) -> dict[str, Any]:
    """Sample the tasks in progress (one statement: one snapshot) until nothing is
    todo or in progress: every pair of the same repository whose scopes overlap seen
    together (there must be none), and how many samples and starts were seen."""
    from board.models import Task
    from board.scope import overlapping

    overlaps: list[list[str]] = []
    samples = 0
    most = 0
    while True:
        rows = list(
            Task.objects.filter(status="in_progress").values_list(
                "id", "repository_id", "team_id", "scope"
            )
        )
        samples += 1
        most = max(most, len(rows))
        for i, (a, repo_a, team_a, scope_a) in enumerate(rows):
            for b, repo_b, team_b, scope_b in rows[i + 1 :]:
                same = repo_a == repo_b and (repo_a is not None or team_a == team_b)
                if same and scope_a and scope_b and overlapping(scope_a, scope_b):
                    overlaps.append([a, b])
        if not rows and not Task.objects.filter(status__in=["todo", "in_progress"]).exists():
            return {"overlaps": overlaps, "samples": samples, "most": most}


def cmd_link(args: argparse.Namespace) -> dict[str, Any]:
    from board import store
    from core.errors import ClawbooError

    try:
        return {"ok": True, "created": store.link(args.task, args.depends_on)}
    except ClawbooError as exc:
        return error_body(exc)


def cmd_create_child(args: argparse.Namespace) -> dict[str, Any]:
    from board import store
    from core.errors import ClawbooError

    try:
        task = store.create_task(
            title=f"child by {args.agent}",
            parent_task_id=args.parent,
            created_by_agent_id=args.agent,
        ).task
        return {"ok": True, "id": task.id}
    except ClawbooError as exc:
        return error_body(exc)


def cmd_write_storm(args: argparse.Namespace) -> dict[str, Any]:
    """Several multi-step writes per round; counts every error that escapes."""
    from board import store

    errors: list[str] = []
    done = 0
    for i in range(args.count):
        try:
            task = store.create_task(title=f"{args.agent} #{i}").task
            store.add_comment(task.id, "working on it", args.agent)
            store.transition(task.id, "backlog")
            done += 1
        except Exception as exc:  # the test asserts none escape
            errors.append(f"{type(exc).__name__}: {exc}")
    return {"done": done, "errors": errors}


def cmd_crash_worker(args: argparse.Namespace) -> dict[str, Any]:
    """Claim, open an execution, then heartbeat forever (the test SIGKILLs us)."""
    from board import store

    result = store.claim(args.task, args.agent, "command")
    if not result.ok:
        return {"outcome": result.outcome}
    execution = store.open_execution(args.task, result.ticket, pid=os.getpid())
    emit({"outcome": "ok", "execution": execution.id, "ticket": result.ticket})
    beats = 0
    while True:
        verdict = store.heartbeat(args.task, result.ticket)
        beats += 1
        emit({"beat": beats, "verdict": verdict.outcome})
        time.sleep(args.beat_ms / 1000)


def cmd_claim_loop(args: argparse.Namespace) -> dict[str, Any]:
    """claim_next, report each claim as a line, pause ``--pause-ms``; until killed."""
    from board import store

    while True:
        started = time.monotonic()
        result = store.claim_next(args.agent)
        emit(
            {
                "claimed": None if result is None else result.task.id,
                "seconds": time.monotonic() - started,
            }
        )
        time.sleep(args.pause_ms / 1000)


def cmd_cap_claims(args: argparse.Namespace) -> dict[str, Any]:
    """claim_next as a registered agent, holding what it takes, until it has
    ``--count`` tasks or is answered anything but a claim (its last answer)."""
    from board import store
    from core.models import Agent

    agent = Agent.objects.get(pk=args.agent)
    claimed: list[str] = []
    while len(claimed) < args.count:
        result = store.claim_next(agent.id, runtime=agent.runtime)
        if result is None or not result.ok or result.task is None:
            return {"claimed": claimed, "stopped": None if result is None else result.outcome}
        claimed.append(result.task.id)
    return {"claimed": claimed, "stopped": None}


def cmd_approve(args: argparse.Namespace) -> dict[str, Any]:
    """Approve a task in review: land its change on its base branch (with
    ``--refusal``, a refusal is the answer rather than the racer's death)."""
    from core.errors import ClawbooError
    from worktrees import service

    try:
        result = service.approve(args.task, by=args.by)
    except ClawbooError as exc:
        if not args.refusal:
            raise
        return error_body(exc)
    return {"ok": True, "result": result["result"], "commit": result.get("commit")}


def cmd_request_changes(args: argparse.Namespace) -> dict[str, Any]:
    """Send a task in review back to its builder, as a reviewer's request-changes."""
    from board import store
    from core.errors import ClawbooError

    try:
        reworked = store.request_changes(args.task, "please redo", by=args.by)
    except ClawbooError as exc:
        return error_body(exc)
    return {"ok": True, "status": reworked.task.status}


def cmd_close_run(args: argparse.Namespace) -> dict[str, Any]:
    """Close a run with its final usage, as a remote worker's ``…/close`` does."""
    from board import store

    row = store.close_execution(
        args.execution, "succeeded", tokens_in=1000, cost_cents=args.cents, remote=True
    )
    return {"status": row.status, "cost_cents": row.cost_cents}


def cmd_resume_budget(args: argparse.Namespace) -> dict[str, Any]:
    """Resume a paused cap, as ``POST /api/budgets/{id}/resume`` does."""
    from board.store import spend

    budget = spend.resume_budget(args.budget, args.grace)
    return {"pause_at_cents": budget.pause_at_cents}


def cmd_publish(args: argparse.Namespace) -> dict[str, Any]:
    """Push a task in review and open (or update) its pull request on the forge, as
    review's publish or the poll does."""
    from worktrees import pull_requests

    record = pull_requests.publish(args.task) or {}
    return {"ok": True, "number": record.get("number")}


def cmd_take_in(args: argparse.Namespace) -> dict[str, Any]:
    """Run the server's intake of a submitted task (as a qcluster worker would)."""
    from executor.intake import take_in

    return take_in(args.task)


COMMANDS = {
    "claim": cmd_claim,
    "take-in": cmd_take_in,
    "publish": cmd_publish,
    "close-run": cmd_close_run,
    "resume-budget": cmd_resume_budget,
    "approve": cmd_approve,
    "request-changes": cmd_request_changes,
    "drain": cmd_drain,
    "route-drain": cmd_route_drain,
    "sample-held": cmd_sample_held,
    "link": cmd_link,
    "create-child": cmd_create_child,
    "write-storm": cmd_write_storm,
    "crash-worker": cmd_crash_worker,
    "claim-loop": cmd_claim_loop,
    "cap-claims": cmd_cap_claims,
    "scope-drain": cmd_scope_drain,
    "sample-scope": cmd_sample_scope,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="workers.py")
    parser.add_argument("--barrier", default=None)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("claim")
    p.add_argument("task")
    p.add_argument("--agent", required=True)
    p = sub.add_parser("drain")
    p.add_argument("--agent", required=True)
    p.add_argument("--dispatcher", default="topological")
    p = sub.add_parser("route-drain")
    p.add_argument("--agent", required=True)
    p = sub.add_parser("sample-held")
    p = sub.add_parser("link")
    p.add_argument("task")
    p.add_argument("depends_on")
    p = sub.add_parser("create-child")
    p.add_argument("parent")
    p.add_argument("--agent", required=True)
    p.add_argument("--max-live-children", type=int, default=None)
    p = sub.add_parser("write-storm")
    p.add_argument("--agent", required=True)
    p.add_argument("--count", type=int, default=20)
    p = sub.add_parser("crash-worker")
    p.add_argument("task")
    p.add_argument("--agent", required=True)
    p.add_argument("--beat-ms", type=int, default=100)
    p = sub.add_parser("claim-loop")
    p.add_argument("--agent", required=True)
    p.add_argument("--pause-ms", type=int, default=50)
    p = sub.add_parser("cap-claims")
    p.add_argument("--agent", required=True)
    p.add_argument("--count", type=int, default=1)
    p = sub.add_parser("scope-drain")
    p.add_argument("--agent", required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--hold-ms", type=int, default=5)
    p = sub.add_parser("sample-scope")
    p = sub.add_parser("approve")
    p.add_argument("task")
    p.add_argument("--by", default="reviewer")
    p.add_argument("--refusal", action="store_true")
    p = sub.add_parser("request-changes")
    p.add_argument("task")
    p.add_argument("--by", default="reviewer")
    p = sub.add_parser("close-run")
    p.add_argument("execution", type=int)
    p.add_argument("--cents", type=int, required=True)
    p = sub.add_parser("resume-budget")
    p.add_argument("budget", type=int)
    p.add_argument("--grace", type=int, default=None)
    p = sub.add_parser("publish")
    p.add_argument("task")
    p = sub.add_parser("take-in")
    p.add_argument("task")
    # Another host's: its own state dir (so its own per-path lock files).
    p.add_argument("--state-dir", default=None)
    return parser


def setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clawboo.settings")
    import django

    django.setup()


def apply_overrides(args: argparse.Namespace) -> None:
    if getattr(args, "state_dir", None):
        from django.conf import settings

        settings.CLAWBOO_STATE_DIR = Path(args.state_dir)
    if getattr(args, "max_live_children", None) is not None:
        # The cap is a module constant; the cap-race test lowers it for this process.
        from board import ceilings

        ceilings.MAX_LIVE_CHILDREN = args.max_live_children


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_django()
    apply_overrides(args)
    wait_at_barrier(args.barrier)
    emit(COMMANDS[args.command](args))
    return 0


def fork_race(spec_path: str) -> int:
    """``workers.py --fork-race SPEC``: one OS process per argv in SPEC (JSON:
    ``{"argvs": [...], "barrier": FILE, "out": DIR}``), forked from this one after
    Django is set up, so a storm of N processes pays Django's start once, not N
    times. Each child closes nothing it shares (the parent holds no connection when
    it forks), opens its own connection, writes ``DIR/<i>.ready``, waits at the
    barrier, runs its command and writes ``DIR/<i>.json`` (or ``DIR/<i>.err``)."""
    import traceback

    spec = json.loads(Path(spec_path).read_text())
    out = Path(spec["out"])
    parser = build_parser()
    parsed = [parser.parse_args(argv) for argv in spec["argvs"]]
    setup_django()
    from django.db import connections

    connections.close_all()  # no socket or SQLite handle may be shared across the fork
    pids: dict[int, int] = {}
    for i, args in enumerate(parsed):
        pid = os.fork()
        if pid == 0:  # the child: its own process from here on, never returning
            code = 1
            try:
                from django.db import connection

                apply_overrides(args)
                connection.ensure_connection()  # the race is about the write
                (out / f"{i}.ready").touch()
                deadline = time.monotonic() + 120
                while not os.path.exists(spec["barrier"]):
                    if time.monotonic() > deadline:
                        raise SystemExit("the barrier never opened")
                    time.sleep(0.001)
                result = COMMANDS[args.command](args)
                (out / f"{i}.json.tmp").write_text(json.dumps(result))
                (out / f"{i}.json.tmp").rename(out / f"{i}.json")
                code = 0
            except BaseException:
                (out / f"{i}.err").write_text(traceback.format_exc())
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        pids[pid] = i
    failed = 0
    while pids:
        pid, status = os.wait()
        pids.pop(pid, None)
        failed += os.waitstatus_to_exitcode(status) != 0
    return 1 if failed else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--fork-race"]:
        raise SystemExit(fork_race(sys.argv[2]))
    raise SystemExit(main())
