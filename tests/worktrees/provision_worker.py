"""A separate OS process that provisions one task's workspace (for the race test).

Usage: provision_worker.py <task_id> <repo_path> <go_file>. Prints ``ready``, waits
(polling with a deadline) for ``go_file`` so two workers start git at the same
moment, then prints one JSON line with the outcome.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import django


def main() -> int:
    task_id, repo_path, go_file = sys.argv[1:4]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clawboo.settings")
    django.setup()
    from core.errors import ClawbooError
    from worktrees import service

    print("ready", flush=True)
    deadline = time.monotonic() + 30
    while not Path(go_file).exists():
        if time.monotonic() > deadline:
            print(json.dumps({"outcome": "no-go"}), flush=True)
            return 2
        time.sleep(0.002)
    try:
        ws = service.provision_task_workspace(task_id, repo_path)
    except ClawbooError as exc:
        print(json.dumps({"outcome": "refused", "code": exc.code, "detail": exc.detail}))
        return 0
    print(json.dumps({"outcome": "ok", "id": ws.pk, "path": ws.worktree_path}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
