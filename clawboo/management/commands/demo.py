"""``clawboo demo`` / ``python manage.py demo``: a sample team doing real work.

Creates, beside the state dir, a small git repository and a ``command`` agent whose
script really edits it; a team ``demo`` with a two-task chain (the second waits on
the first) whose changes are verified by ``init.sh``'s VERIFY_CMD; and a recurring
routine, created paused, whose template names its verify command too. It migrates
the database first, so it works before ``up``.
With ``clawboo up`` running, the workers claim the tasks, work them in worktrees,
verify them and land them in review, live on the board (printed as a link to where
``up`` serves); approvals land through the repository's merge queue
(``landing_mode: queue``).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser, OutputWrapper
from django.db import DatabaseError

from board import store
from core import registry, repositories
from core.models import Agent, Team

CALC = '''"""A tiny module the demo agent extends."""


def add(a, b):
    return a + b
'''

# The demo agent: reads its task's title and makes the change it asks for.
AGENT_SCRIPT = '''"""Demo agent: implements the function its task names, in calc.py."""
import os
import pathlib

title = os.environ.get("CLAWBOO_TASK_TITLE", "").lower()
calc = pathlib.Path("calc.py")
source = calc.read_text()
additions = {
    "multiply": "\\n\\ndef multiply(a, b):\\n    return a * b\\n",
    "divide": "\\n\\ndef divide(a, b):\\n    return a / b\\n",
}
for name, code in additions.items():
    if name in title and f"def {name}(" not in source:
        calc.write_text(source + code)
        print(f"added {name}() to calc.py")
        break
else:
    notes = pathlib.Path("NOTES.md")
    notes.write_text((notes.read_text() if notes.exists() else "# Notes\\n") + "- tidied\\n")
    print("tidied NOTES.md")
'''

TASKS = [
    (
        "demo-multiply",
        "Add multiply() to calc.py",
        'python3 -c "import calc; assert calc.multiply(3, 4) == 12"',
        [],
    ),
    (
        "demo-divide",
        "Add divide() to calc.py",
        'python3 -c "import calc; assert calc.divide(8, 2) == 4"',
        ["demo-multiply"],
    ),
]


# `clawboo up`'s own default address (its --host and --port).
DEFAULT_ADDRESS = "http://127.0.0.1:8000"
ROUTINE_VERIFY = "grep -q -- '- tidied' NOTES.md"
# The repository's own gate, which its merge queue runs on each stacked change.
DEMO_GATE = 'python3 -c "import calc"'


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=clawboo demo", "-c", "user.email=demo@localhost", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        timeout=60,
    )


def board_address(state: Path) -> str:
    """The server a person opens the demo on, as a link they can click: the public URL
    if one is set, else where the ``up`` of this state dir serves, else ``up``'s default
    (a bare path could not be opened, and the port is ``up``'s choice)."""
    from clawboo import boot

    return settings.CLAWBOO_PUBLIC_URL or boot.served_address(state) or DEFAULT_ADDRESS


# How long `demo` waits for the `up` of its state dir to finish migrating.
UP_MIGRATING_WAIT_S = 600.0


def wait_for_up_migrating(state: Path, out: OutputWrapper) -> None:
    """Wait while the `up` of this state dir is still migrating (its first run, a
    minute on a slow machine): a second migration beside it failed with "table …
    already exists" and told a person whose `up` was running to "run `clawboo up`
    first". An `up` that stops meanwhile leaves the migration to `demo`."""
    from clawboo import boot

    served = boot.served_address(state)
    if served is None or not boot.pending_migrations():
        return
    out.write(f"demo: waiting for the `clawboo up` serving {served} to finish migrating…")
    out.flush()
    deadline = time.monotonic() + UP_MIGRATING_WAIT_S
    while time.monotonic() < deadline and boot.served_address(state) is not None:
        time.sleep(0.5)
        try:
            if not boot.pending_migrations():
                return
        except DatabaseError:
            continue  # read in the middle of a migration: ask again


class Command(BaseCommand):
    help = "Create a sample repository, team, agent, task chain and routine to watch."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--dir", help="where to put the sample repository (default: beside the state dir)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        from clawboo import boot

        wait_for_up_migrating(Path(settings.CLAWBOO_STATE_DIR), self.stdout)
        try:  # before `up` ever ran there are no tables yet
            applied = boot.migrate()
        except Exception as exc:
            raise CommandError(
                f"could not migrate the database ({boot.one_line(exc)}); run `clawboo up` first"
            ) from exc
        if applied:
            self.stdout.write(f"demo: {applied} migration(s) applied")
        state = Path(settings.CLAWBOO_STATE_DIR)
        base = Path(options["dir"]) if options["dir"] else state.parent / f"{state.name}-demo"
        base = base.resolve()
        repo = base / "shop"
        if not (repo / ".git").exists():
            repo.mkdir(parents=True, exist_ok=True)
            (repo / "calc.py").write_text(CALC)
            (repo / "README.md").write_text("# shop\nA sample repository for the Clawboo demo.\n")
            _git(repo, "init", "-q", "-b", "main")
            _git(repo, "add", "-A")
            _git(repo, "commit", "-q", "-m", "initial")
            self.stdout.write(f"demo: created a sample repository at {repo}")
        script = base / "demo_agent.py"
        script.write_text(AGENT_SCRIPT)

        if not Team.objects.filter(pk="demo").exists():
            registry.create_team("demo", "Demo team")
        for user in get_user_model().objects.filter(is_superuser=True):
            registry.add_member("demo", user)
        # The team's repository: tasks, the agent and the routine name it by id.
        shop = repositories.ensure("demo", str(repo), "path")
        if shop.landing_mode != "queue":
            # Many agents, one repository: approvals land through its merge queue,
            # gated once on the stacked change (docs/merge-queue.md).
            changes = {"landing_mode": "queue", "verify_cmd": shop.verify_cmd or DEMO_GATE}
            shop = repositories.update(shop.id, changes)
        self.stdout.write(f"demo: repository {shop.id!r} of team demo at {shop.path}")
        if not Agent.objects.filter(pk="demo-coder").exists():
            registry.create_agent(
                id="demo-coder",
                display_name="Demo coder",
                team="demo",
                runtime="command",
                settings={
                    "argv": [sys.executable, str(script)],
                    "repository": shop.id,
                    "timeout_s": 120,
                },
            )
            self.stdout.write("demo: registered agent demo-coder (runtime: command)")
        for task_id, title, verify, deps in TASKS:
            created = store.create_task(
                id=task_id,
                title=title,
                team="demo",
                depends_on=deps,
                description="Implement it in calc.py; the verification command checks it.",
                metadata={"verify_cmd": verify},
                repository=shop.id,
            )
            if created.created:
                self.stdout.write(f"demo: task {task_id}: {title}")
            else:
                # Run again after the tour: "watch the tasks get claimed" of two tasks
                # long done had a person wait for work that would never come.
                self.stdout.write(
                    f"demo: task {task_id}: {title} (there already: {created.task.status})"
                )
        address = board_address(state)
        self._routine(shop.id, address)
        statuses = {store.get_task(task_id).status for task_id, *_ in TASKS}
        if statuses <= {"done", "cancelled"}:
            self.stdout.write(
                f"demo: ready; its tasks are over. Open {address}/board/?team=demo and file"
                " one (`clawboo task create TITLE --team demo`): demo-coder works it."
            )
            return
        self.stdout.write(
            f"demo: ready. With `clawboo up` running, open {address}/board/?team=demo and watch "
            "the tasks get claimed, worked in worktrees, verified and land in review."
        )

    def _routine(self, repository: str, address: str) -> None:
        from routines import store as routines

        if any(r.agent_id == "demo-coder" for r in routines.list_routines(team="demo")):
            return
        routine = routines.create_routine(
            agent_id="demo-coder",
            team="demo",
            cron_spec="*/5 * * * *",
            task_template={
                "title": "Tidy the notes",
                "repository": repository,
                # Nothing lands unverified: the gate checks the notes were tidied.
                "verify_cmd": ROUTINE_VERIFY,
            },
        )
        # Paused: a demo left running should not commit to its repository every 5 minutes.
        routines.pause_routine(routine.id)
        self.stdout.write(
            "demo: routine every 5 minutes: 'Tidy the notes' (paused; resume it on the "
            f"routines page, {address}/board/routines/?team=demo, in the admin, or with "
            f"POST /api/routines/{routine.id}/resume)"
        )
