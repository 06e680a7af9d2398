"""Acceptance: two worker processes draining a team under a cap budget. The spend is
one figure in the database, so the team never spends more than its cap plus one
run's ceiling, and the 80 % and 100 % crossings are notified exactly once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db.models import Sum

from board import store
from board.models import ExecutionProcess, Task
from board.store import spend
from core import registry
from core.models import Event
from tests.executor.test_spend import STAND_IN

ROOT = Path(__file__).resolve().parents[2]
CAP = 100
# Each run: 4 turns of 12500 input tokens of claude-opus-5-5 (4 $/M) = 5¢ a turn.
CEILING = 20


@pytest.mark.django_db(transaction=True)
def test_two_workers_draining_a_capped_team_stay_within_cap_plus_one_ceiling(
    tmp_path, database_url, state_dir
):
    claude = tmp_path / "claude"
    claude.write_text(
        f"#!{sys.executable}\nimport runpy, sys\nsys.argv[0] = {str(STAND_IN)!r}\n"
        f"runpy.run_path({str(STAND_IN)!r}, run_name='__main__')\n"
    )
    claude.chmod(0o755)
    for agent in ("w1", "w2"):
        registry.create_agent(
            id=agent,
            display_name=agent,
            team="default",
            runtime="claude-code",
            settings={
                "binary": str(claude),
                "extra_args": ["--turns", "4", "--input-tokens", "12500", "--every", "0.3"],
            },
        )
    budget = spend.create_budget(
        "default",
        {
            "scope": "team",
            "scope_id": "default",
            "window": "day",
            "limit_cents": CAP,
            "mode": "cap",
        },
    )
    for n in range(20):
        store.create_task(title=f"job {n}", file_mutating=False, max_run_cents=CEILING)
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "clawboo.settings",
        "CLAWBOO_STATE_DIR": str(state_dir),
        "CLAWBOO_HEARTBEAT_MS": "1000",
        "PYTHONPATH": str(ROOT),
    }
    workers = [
        subprocess.Popen(
            [sys.executable, "manage.py", "work", "--agent", agent, "--once"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for agent in ("w1", "w2")
    ]
    for worker in workers:
        _, err = worker.communicate(timeout=240)
        assert worker.returncode == 0, err[-2000:]

    spent = ExecutionProcess.objects.aggregate(total=Sum("cost_cents"))["total"]
    assert CAP <= spent <= CAP + CEILING
    body = spend.get_budget(budget.pk).as_dict(store.now())
    assert (body["spent_cents"], body["status"]) == (spent, "paused")
    assert Event.objects.filter(kind="budget_warning").count() == 1
    assert Event.objects.filter(kind="budget_exhausted").count() == 1
    # Both workers ran; the rest of the backlog waits for a person.
    assert set(ExecutionProcess.objects.values_list("agent_id", flat=True)) == {"w1", "w2"}
    assert Task.objects.filter(status="todo").count() > 10
    print(f"spent {spent}¢ of a {CAP}¢ cap (ceiling {CEILING}¢)")
