"""``clawboo up`` / ``python manage.py up``: the whole product in one command.

Migrate, run the boot passes, create a first admin on an empty database, print where
to open the board, then supervise daphne, the django-q2 cluster, the ticker and the
executor workers until Ctrl-C or SIGTERM. Each part can also run alone for a scaled
deployment (``daphne clawboo.asgi:application``, ``manage.py qcluster``,
``manage.py ticker``, ``manage.py work --all``). The periodic work (stale sweep,
prune, notification retries) is django-q2 schedules the qcluster runs
(``ops.periodic``): ``up`` keeps no timer of its own.
"""

from __future__ import annotations

import errno
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import get_commands
from django.core.management.base import BaseCommand, CommandError, CommandParser

from clawboo import boot
from clawboo.supervisor import ChildSpec, Supervisor, python_argv

# How long `up` waits for daphne to accept connections before it stops looking.
READY_WAIT_S = 120.0


def child_specs(host: str, port: int, *, workers: bool, ticker: bool) -> list[ChildSpec]:
    # Management commands go through our own entry point, so a child needs only the
    # package importable (no manage.py in the working directory).
    specs = [
        ChildSpec(
            "daphne",
            python_argv("-m", "daphne", "-b", host, "-p", str(port), "clawboo.asgi:application"),
        ),
        ChildSpec("qcluster", python_argv("-m", "clawboo.cli", "qcluster")),
    ]
    if ticker:
        specs.append(ChildSpec("ticker", python_argv("-m", "clawboo.cli", "ticker")))
    if workers:
        specs.append(ChildSpec("workers", python_argv("-m", "clawboo.cli", "work", "--all")))
    return specs


def connect_host(host: str) -> str:
    """Where to knock to see whether the server listens on ``host``."""
    return {"0.0.0.0": "127.0.0.1", "::": "::1", "*": "127.0.0.1"}.get(host, host)  # noqa: S104


def url_host(host: str) -> str:
    if host in ("0.0.0.0", "", "::"):  # noqa: S104 - naming the wildcard, not binding it
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


def check_port_free(host: str, port: int) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
    except OSError as exc:
        # A new user's likeliest case: something (another `up`) has the port already.
        hint = (
            " (another server has it: stop that one, or choose a port with --port)"
            if exc.errno == errno.EADDRINUSE
            else ""
        )
        raise CommandError(f"cannot listen on {host}:{port}: {exc.strerror or exc}{hint}") from exc


class Command(BaseCommand):
    help = "Migrate, run the boot passes, then serve and supervise every Clawboo process."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="address to serve on")
        parser.add_argument("--port", type=int, default=8000, help="port to serve on")
        parser.add_argument(
            "--no-workers", action="store_true", help="do not run the executor workers"
        )
        parser.add_argument("--no-ticker", action="store_true", help="do not run the ticker")

    def say(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()

    def step(self, label: str, text: str) -> None:
        self.say(f"  {label:<12}{text}")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            self.up(options)
        except CommandError:
            raise
        except Exception as exc:  # one clear line, not a traceback
            raise CommandError(boot.one_line(exc)) from exc

    def up(self, options: dict[str, Any]) -> None:
        host, port = options["host"], options["port"]
        if not 0 < port < 65536:
            raise CommandError(f"--port must be between 1 and 65535, not {port}")
        state_dir = settings.CLAWBOO_STATE_DIR
        base = f"http://{url_host(host)}:{port}"
        try:
            lock = boot.hold_up_lock(state_dir, base)
        except boot.AlreadyUp as running:
            raise CommandError(
                f"another `clawboo up` runs on this state dir ({state_dir}), serving "
                f"{running}: stop it first (Ctrl-C in its terminal), or run this one from "
                "another directory"
            ) from None
        try:
            self.serve(options, state_dir, base)
        finally:
            os.close(lock)

    def serve(self, options: dict[str, Any], state_dir: Path, base: str) -> None:
        host, port = options["host"], options["port"]
        check_port_free(host, port)
        self.say(f"clawboo up: state in {state_dir}")
        tightened = boot.private_state(state_dir)
        if tightened:
            self.step("files", tightened)

        try:
            pending = boot.pending_migrations()
            if pending:
                self.step("database", f"{boot.database_label()}: applying {pending} migration(s)…")
            applied = boot.migrate()
        except Exception as exc:  # no database, no product: this one is fatal
            raise CommandError(f"migrate failed: {boot.one_line(exc)}") from exc
        self.step(
            "database",
            f"{boot.database_label()}: "
            + (f"{applied} migration(s) applied" if applied else "up to date"),
        )

        self.step("recovery", boot.best_effort(boot.board_passes))
        self.step("routines", boot.best_effort(boot.routine_boot_resume))
        self.step("landings", boot.best_effort(boot.landing_recovery))
        self.step("intakes", boot.best_effort(boot.intake_recovery))
        self.step("worktrees", "gc " + boot.worktree_gc(lambda line: self.say(f"  {line}")))

        try:
            admin = boot.ensure_first_admin()
        except Exception as exc:
            raise CommandError(f"could not create the first admin: {boot.one_line(exc)}") from exc
        if admin:
            username, password = admin
            self.step(
                "first admin",
                f"user {username!r}, one-time password {password} "
                f"(change it at {base}/admin/password_change/)",
            )

        loopback = host in ("127.0.0.1", "localhost", "::1")
        if not loopback and not {host, "*"} & set(settings.ALLOWED_HOSTS):
            self.step("note", "set ALLOWED_HOSTS to the names clients will use to reach this")
        self.step("board", f"{base}/board/")
        self.step("admin", f"{base}/admin/")
        self.step("API docs", f"{base}/api/docs/")

        workers = not options["no_workers"]
        if workers and "work" not in get_commands():
            self.step("workers", "skipped: this install has no `work` command")
            workers = False
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "clawboo.settings"),
            # Pin the state dir, so a child started elsewhere still finds the same one.
            "CLAWBOO_STATE_DIR": str(state_dir),
            "PYTHONUNBUFFERED": "1",
            # The workers hand each agent run this endpoint (with a credential of its own).
            "CLAWBOO_MCP_URL": os.environ.get("CLAWBOO_MCP_URL") or f"{base}/mcp/",
        }
        # Notifications link to the task on this server's board: its own address
        # serves only when those who get them are on this machine too.
        public = os.environ.get("CLAWBOO_PUBLIC_URL") or (base if loopback else "")
        if public:
            env["CLAWBOO_PUBLIC_URL"] = public
        else:
            self.step("note", "set CLAWBOO_PUBLIC_URL for notifications to link to the board")
        # /healthz (served by the daphne child) expects a beat only from the parts run.
        ticker = not options["no_ticker"]
        env.setdefault(
            "CLAWBOO_HEALTH_PARTS",
            ",".join(
                p for p, on in (("ticker", ticker), ("workers", workers), ("qcluster", True)) if on
            ),
        )
        supervisor = Supervisor(
            child_specs(host, port, workers=workers, ticker=ticker),
            env=env,
            log_dir=state_dir / "logs",
            say=self.say,
        )
        self.say(f"logs in {state_dir / 'logs'}; Ctrl-C to stop")
        threading.Thread(
            target=self.say_when_serving, args=(host, port, base), name="ready", daemon=True
        ).start()
        supervisor.run()

    def say_when_serving(self, host: str, port: int, base: str) -> None:
        """One line once daphne accepts connections: the moment a browser, curl or
        ``clawboo login`` can reach it (``started`` is only when it was spawned)."""
        deadline = time.monotonic() + READY_WAIT_S
        while time.monotonic() < deadline:
            try:
                with socket.create_connection((connect_host(host), port), timeout=1):
                    self.say(f"ready: {base}/board/")
                    return
            except OSError:
                time.sleep(0.2)
