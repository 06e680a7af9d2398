"""Acceptance (issue 41): a run stopped at its per-run ceiling blocks its task, with
one ``budget_stopped`` notification, and is never retried by itself -- a real
``manage.py work`` process on SQLite and PostgreSQL. After a person raises the
ceiling and moves the task back to todo, it runs once more."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from board import store
from board.models import ExecutionProcess, TaskComment
from core import registry
from ops import notify
from ops.models import NotificationDelivery
from tests.executor.test_spend import STAND_IN

ROOT = Path(__file__).resolve().parents[2]


def work_once(database_url: str, state_dir: Path, agent: str) -> None:
    """One real worker, until nothing is ready for ``agent`` (a task that went back
    to todo would be taken again at once: the loop this test guards against)."""
    worker = subprocess.run(  # noqa: S603 - this interpreter, an argv list
        [sys.executable, "manage.py", "work", "--agent", agent, "--once"],
        cwd=ROOT,
        env={
            **os.environ,
            "DATABASE_URL": database_url,
            "DJANGO_SETTINGS_MODULE": "clawboo.settings",
            "DJANGO_SECRET_KEY": settings.SECRET_KEY,
            "CLAWBOO_STATE_DIR": str(state_dir),
            "CLAWBOO_HEARTBEAT_MS": "1000",
            "PYTHONPATH": str(ROOT),
        },
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert worker.returncode == 0, worker.stderr[-3000:]


@pytest.mark.django_db(transaction=True)
def test_a_5_cent_ceiling_stops_a_20_cent_run_once_and_blocks_until_a_person_raises_it(
    tmp_path, database_url, state_dir
):
    claude = tmp_path / "claude"
    claude.write_text(
        f"#!{sys.executable}\nimport runpy, sys\nsys.argv[0] = {str(STAND_IN)!r}\n"
        f"runpy.run_path({str(STAND_IN)!r}, run_name='__main__')\n"
    )
    claude.chmod(0o755)
    # 4 turns of 12,500 input tokens of claude-opus-5-5 (4 $/M): 5 ¢ a turn, 20 ¢ a run.
    registry.create_agent(
        id="spender",
        display_name="Spender",
        team="default",
        runtime="claude-code",
        settings={
            "binary": str(claude),
            "extra_args": ["--turns", "4", "--input-tokens", "12500", "--every", "0.2"],
        },
    )
    notify.create_channel("default", "ops", "webhook", url="http://127.0.0.1:9/hook")
    task = store.create_task(title="costly", file_mutating=False, max_run_cents=5).task

    work_once(database_url, state_dir, "spender")

    (run,) = ExecutionProcess.objects.filter(task_id=task.id)
    assert run.status == "cancelled" and run.error_class == "budget"
    assert 5 <= run.cost_cents < 20
    stopped = store.get_task(task.id)
    assert stopped.status == "blocked"
    assert "ceiling of 5¢" in stopped.error and f"{run.cost_cents}¢" in stopped.error
    (comment,) = TaskComment.objects.filter(task_id=task.id)
    assert "ceiling of 5¢" in comment.body
    deliveries = list(NotificationDelivery.objects.filter(task_id=task.id))
    assert [d.reason for d in deliveries] == ["budget_stopped"]

    # A person raises the ceiling and moves it back to todo: it runs once more.
    store.update_task(task.id, {"max_run_cents": 30})
    store.transition(task.id, "todo")
    work_once(database_url, state_dir, "spender")

    runs = list(ExecutionProcess.objects.filter(task_id=task.id).order_by("id"))
    assert len(runs) == 2 and runs[1].status == "succeeded"
    assert runs[1].cost_cents == 20
    assert store.get_task(task.id).status == "done"
    reasons = list(NotificationDelivery.objects.filter(task_id=task.id).values_list("reason"))
    assert reasons == [("budget_stopped",)]
