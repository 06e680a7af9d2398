"""What a process that is not the web server loads to start: a worker, a management
command, each of a storm's claimers. The web server's libraries (daphne's Twisted, the
REST framework's views and schema generator, the MCP SDK) cost such a process most of
its start; only the processes that serve load them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from django.core.management import get_commands, load_command_class

ROOT = Path(__file__).resolve().parents[2]
WEB_ONLY = (
    "daphne.server",
    "twisted.internet.reactor",
    "rest_framework.views",
    "rest_framework.serializers",
    "drf_spectacular.plumbing",
    "mcp",
)
WORKER = (
    "import django, json, sys; django.setup();"
    "import executor.management.commands.work, executor.local, executor.workers;"
    "import routines.store, ops.periodic, boardmcp.credentials;"
    f"print(json.dumps([m for m in {WEB_ONLY!r} if m in sys.modules]))"
)


def test_a_worker_process_starts_without_the_web_servers_libraries(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "clawboo.settings",
        "CLAWBOO_STATE_DIR": str(tmp_path / "state"),
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        [sys.executable, "-c", WORKER], env=env, cwd=ROOT, capture_output=True, text=True,
        timeout=120, check=True,
    )  # fmt: skip
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_runserver_is_daphnes_serving_the_asgi_application() -> None:
    from daphne.management.commands.runserver import Command as DaphneRunserver

    app = get_commands()["runserver"]
    assert app == "clawboo"
    assert isinstance(load_command_class(app, "runserver"), DaphneRunserver)
