"""``clawboo up``: the supervisor's steps driven directly, and the real command as a
subprocess on a free port with its own state dir."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from clawboo import boot
from clawboo.supervisor import ChildSpec, Supervisor, backoff_delay, group_alive

ROOT = Path(__file__).resolve().parents[2]

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


def wait_for(predicate: Callable[[], object], deadline_s: float = 10, what: str = "it") -> object:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"{what} did not happen within {deadline_s}s")


def group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def supervisors() -> Iterator[list[Supervisor]]:
    """Whatever a test started is stopped, even when it fails half-way."""
    made: list[Supervisor] = []
    yield made
    for sup in made:
        sup.stop_all()


def make(supervisors: list[Supervisor], specs: list[ChildSpec], **kwargs: object) -> Supervisor:
    lines: list[str] = []
    sup = Supervisor(specs, say=lines.append, **kwargs)  # type: ignore[arg-type]
    sup.lines = lines  # type: ignore[attr-defined]
    supervisors.append(sup)
    return sup


# --- the supervisor's steps -------------------------------------------------------


def test_backoff_doubles_from_one_second_to_a_thirty_second_cap():
    assert [backoff_delay(n) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]


def test_a_killed_child_is_reported_and_restarted(supervisors, tmp_path):
    sup = make(supervisors, [ChildSpec("sleeper", SLEEPER)], log_dir=tmp_path, backoff_min_s=0.05)
    sup.start_all()
    child = sup.children[0]
    first_pid = child.proc.pid
    os.kill(first_pid, signal.SIGKILL)

    died = wait_for(sup.reap, what="the death report")
    assert died == [child]
    assert sup.lines[-1] == (
        f"sleeper was killed by SIGKILL; restarting in 0.05s (log: {tmp_path / 'sleeper.log'})"
    )

    wait_for(sup.restart_due, what="the restart")
    assert child.running and child.proc.pid != first_pid
    assert sup.lines[-1] == f"sleeper restarted (pid {child.proc.pid})"

    sup.stop_all()
    assert not group_alive(first_pid) and not group_alive(child.proc.pid)
    assert sup.lines[-1] == "stopped"


def test_backoff_grows_with_each_death_and_resets_after_a_stable_run(supervisors):
    clock = FakeClock()
    sup = make(supervisors, [ChildSpec("crasher", ["sh", "-c", "exit 3"])], clock=clock)
    sup.start_all()
    child = sup.children[0]
    delays = []
    for _ in range(4):
        child.proc.wait(timeout=5)
        assert sup.reap() == [child]
        delays.append(child.restart_at - clock.now)
        assert sup.restart_due() == []  # not before the backoff has elapsed
        clock.now = child.restart_at
        assert sup.restart_due() == [child]
    assert delays == [1, 2, 4, 8]
    assert "crasher exited with code 3; restarting in 8s" in sup.lines

    # Up for longer than STABLE_AFTER_S before dying: back to the shortest delay.
    clock.now += 61
    child.proc.wait(timeout=5)
    sup.reap()
    assert child.restart_at - clock.now == 1


def test_stop_kills_a_process_group_that_ignores_sigterm(supervisors):
    stubborn = (
        "import signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "subprocess.Popen([sys.executable, '-c', 'import signal, time; "
        "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)'])\n"
        "time.sleep(60)\n"
    )
    sup = make(supervisors, [ChildSpec("stubborn", [sys.executable, "-c", stubborn])], grace_s=0.3)
    sup.start_all()
    pgid = sup.children[0].proc.pid
    wait_for(lambda: len(group_members(pgid)) == 2, what="the grandchild start")

    sup.stop_all()

    assert group_members(pgid) == []
    assert "killed 1 process group(s) that ignored SIGTERM" in sup.lines


@pytest.mark.django_db
def test_the_first_admin_is_created_only_on_an_empty_user_table():
    username, password = boot.ensure_first_admin()
    assert username == "admin" and len(password) >= 16
    from django.contrib.auth import authenticate

    user = authenticate(username="admin", password=password)
    assert user is not None and user.is_superuser and user.is_staff
    assert boot.ensure_first_admin() is None


# --- the real command ---------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def up_env(state: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "CLAWBOO_STATE_DIR": str(state),
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
        "CLAWBOO_Q_WORKERS": "1",
    }
    env.pop("DATABASE_URL", None)  # SQLite in the state dir
    env.pop("DJANGO_SETTINGS_MODULE", None)  # the console script picks clawboo.settings
    return env


def processes_of(state: Path) -> list[int]:
    """Live processes whose environment names this state dir (the supervisor's tree)."""
    marker = f"CLAWBOO_STATE_DIR={state}\0".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def status_of(url: str) -> int | None:
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(url, timeout=2) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


class Up:
    """``clawboo up`` as a real process (through the console script's ``main``)."""

    def __init__(self, state: Path, port: int, *args: str) -> None:
        self.port = port
        self.out_path = state.parent / f"up-{port}-{time.monotonic_ns()}.out"
        self.out = open(self.out_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from clawboo.cli import main; main()", "up"]
            + ["--port", str(port), *args],
            env=up_env(state),
            cwd=ROOT,
            stdout=self.out,
            stderr=subprocess.STDOUT,
        )

    def output(self) -> str:
        return self.out_path.read_text()

    def wait_serving(self, deadline_s: float = 60) -> None:
        base = f"http://127.0.0.1:{self.port}"

        def ready() -> bool:
            assert self.proc.poll() is None, f"clawboo up exited early:\n{self.output()}"
            return (
                "started daphne" in self.output()
                and status_of(base + "/board/") == 302
                and status_of(base + "/healthz") is not None
            )

        wait_for(ready, deadline_s, what="serving")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=20)
        finally:
            self.out.close()


def test_up_serves_the_board_and_sigterm_leaves_no_process_behind(tmp_path):
    state = tmp_path / "state"
    port = free_port()
    # The default set: the workers are skipped with a line when `work` is not installed.
    first = Up(state, port)
    try:
        first.wait_serving()
        assert status_of(f"http://127.0.0.1:{port}/board/") == 302
        children = [pid for pid in processes_of(state) if pid != first.proc.pid]
        # daphne, the cluster (and its worker processes) and the ticker
        assert len(children) >= 3
        # On a loopback address its own address is where notifications link.
        environ = Path(f"/proc/{children[0]}/environ").read_bytes().split(b"\0")
        assert f"CLAWBOO_PUBLIC_URL=http://127.0.0.1:{port}".encode() in environ
        # Where it serves, for `clawboo demo` beside it to print a link with the port.
        assert boot.served_address(state) == f"http://127.0.0.1:{port}"
        # A second `up` of this state dir (a forgotten first terminal) is refused in one
        # line: it ran beside the first, its recovery pass releasing what the first
        # one's workers held.
        again = subprocess.run(
            [sys.executable, "-m", "clawboo.cli", "up", "--port", str(free_port())],
            env=up_env(state),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert again.returncode == 1, again.stdout
        assert again.stdout == ""
        assert again.stderr == (
            f"CommandError: another `clawboo up` runs on this state dir ({state}), serving "
            f"http://127.0.0.1:{port}: stop it first (Ctrl-C in its terminal), or run this "
            "one from another directory\n"
        )
        assert status_of(f"http://127.0.0.1:{port}/board/") == 302
    finally:
        code = first.stop()
    out = first.output()
    assert code == 0, out
    assert boot.served_address(state) is None, "a stopped `up` still claims an address"
    assert processes_of(state) == [], out
    assert "Traceback" not in out
    assert len(re.findall(r"first admin +user 'admin', one-time password \S+", out)) == 1
    assert f"http://127.0.0.1:{port}/board/" in out
    assert f"http://127.0.0.1:{port}/api/docs/" in out
    assert "stopped" in out.splitlines()[-1]

    second = Up(state, port, "--no-workers", "--no-ticker")
    try:
        second.wait_serving()
    finally:
        code = second.stop()
    out = second.output()
    assert code == 0, out
    assert processes_of(state) == [], out
    assert "first admin" not in out
    assert "up to date" in out


def test_up_killed_outright_takes_its_children_with_it(tmp_path):
    state = tmp_path / "state"
    port = free_port()
    up = Up(state, port, "--no-workers")
    try:
        up.wait_serving()
        children = [pid for pid in processes_of(state) if pid != up.proc.pid]
        assert len(children) >= 3  # daphne, the cluster (and its workers), the ticker
        up.proc.kill()  # SIGKILL: the supervisor gets no chance to stop anything
        up.proc.wait(timeout=10)
        # Its children run in sessions of their own, out of reach of a signal to its
        # group; none may go on serving or writing without it.
        wait_for(lambda: processes_of(state) == [], 20, what="the children to die")
    finally:
        for pid in processes_of(state):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        up.out.close()


def test_the_console_script_alone_prints_its_commands_and_passes_the_rest_to_django(
    monkeypatch, capsys
):
    from clawboo import cli

    seen = []
    monkeypatch.setattr(
        "django.core.management.execute_from_command_line", lambda argv: seen.append(argv)
    )
    cli.main([])  # no second server started by accident: just the commands
    out = capsys.readouterr().out
    assert out.startswith("usage: clawboo <command>") and "  up " in out and "demo" in out
    cli.main(["--port", "9000"])
    cli.main(["migrate", "--check"])
    assert seen == [
        ["clawboo", "up", "--port", "9000"],
        ["clawboo", "migrate", "--check"],
    ]


def test_the_console_script_names_its_own_version_and_helps_with_every_command_it_lists(
    capsys,
):
    from importlib.metadata import version

    from clawboo import cli

    cli.main(["--version"])
    assert capsys.readouterr().out == f"clawboo {version('clawboo')}\n"
    # `help [command]`, as the usage says, for the people's commands and the worker too.
    for command in ("task", "watch", "worker"):
        with pytest.raises(SystemExit) as done:
            cli.main(["help", command])
        assert done.value.code == 0
        out = capsys.readouterr().out
        assert out.startswith(f"usage: clawboo {command}"), out


def test_a_mistyped_command_names_the_closest_one_and_where_the_list_is(monkeypatch, capsys):
    from clawboo import cli

    seen = []
    monkeypatch.setattr(
        "django.core.management.execute_from_command_line", lambda argv: seen.append(argv)
    )
    # Django's "Unknown command: 'tsk'. Type 'clawboo help' for usage." guessed nothing,
    # and `clawboo help` does not list the people's commands.
    for typed, meant in (("tsk", "task"), ("revew", "review"), ("migrat", "migrate")):
        with pytest.raises(SystemExit) as done:
            cli.main([typed, "list"])
        assert done.value.code == 2  # a usage error, as for the people's commands
        assert capsys.readouterr().err == (
            f"clawboo: unknown command {typed!r} (did you mean {meant!r}?); "
            "`clawboo` alone lists the commands\n"
        )
    with pytest.raises(SystemExit):
        cli.main(["frobnicate"])
    assert capsys.readouterr().err == (
        "clawboo: unknown command 'frobnicate'; `clawboo` alone lists the commands\n"
    )
    assert seen == []
    # `version` is Clawboo's version too, not Django's ("5.2.20").
    from importlib.metadata import version

    cli.main(["version"])
    assert capsys.readouterr().out == f"clawboo {version('clawboo')}\n"


def test_manage_py_up_refuses_a_bad_port_in_one_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "manage.py", "up", "--port", "0"],
        env=up_env(tmp_path / "state"),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.strip() == "CommandError: --port must be between 1 and 65535, not 0"


def test_a_busy_port_is_one_clear_line_not_a_traceback(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "clawboo.cli", "up", "--port", str(port)],
            env=up_env(tmp_path / "state"),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
    # and it says what to do about it
    assert "choose a port with --port" in result.stderr
