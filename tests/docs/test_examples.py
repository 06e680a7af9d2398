"""The guides' examples cannot rot (issue 46): every command block a reader is told to
copy in the getting-started, operating and remote-workers guides is marked, and this test runs each
page's marked blocks in order, from a fresh directory and state dir, as a reader would.

Markers (an HTML comment on the line before a fenced block; the site does not show it):

- ``<!-- example -->``: run it (``bash -euo pipefail``); it must exit 0.
- ``<!-- example: install -->``: the install line. Its ``python3 -m venv .venv && .venv/
  bin/pip install …`` part is this test's own virtualenv (linked as ``.venv``: installing
  again would only download the same packages); what follows the install runs verbatim.
- ``<!-- example: output -->``: what the block before printed. Each of its lines must be
  printed, in that order (``…`` stands for any text; ``/home/you/clawboo`` for the
  directory; pids are any number). Figures — the migration count, the zeros of a fresh
  boot — are checked as written.

A block that starts ``clawboo up`` keeps it running (its output is checked while it runs)
until the page ends; then it gets Ctrl-C and must stop cleanly. The only change made to
the text is the port: ``8000`` becomes a free one, so this runs beside other servers.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = ("getting-started.md", "operating.md", "remote-workers.md")
MARKED = re.compile(r"<!-- example(?::\s*([\w-]+))? -->\n```(\w*)\n(.*?)```\n", re.S)
INSTALL = re.compile(
    r"^python3 -m venv \.venv && \.venv/bin/pip install -q -e (?:\.|'\.\[[\w,]+\]') && (.*)$"
)
SERVE_S = 180.0
# A block's own waits decide, not this guard: longer than `clawboo task wait`'s
# default 300 s, which the getting-started page relies on.
RUN_S = 600.0
# A page whole, on a loaded machine: about a minute each when the machine is quiet
# (two fresh migrations on the operating page), several times that beside another pass.
PAGE_S = 1200


@dataclass
class Block:
    kind: str  # run, install or output
    text: str
    line: int


def blocks(page: str) -> list[Block]:
    text = (DOCS / page).read_text()
    return [
        Block(m.group(1) or "run", m.group(3), text[: m.start()].count("\n") + 2)
        for m in MARKED.finditer(text)
    ]


def ephemeral_ports() -> range:
    """The ports the kernel hands out by itself (an outgoing connection's, a bind to 0)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return range(int(low), int(high) + 1)
    except (OSError, ValueError):
        return range(32768, 61000)  # Linux's default


def free_port() -> int:
    """A free port outside the kernel's ephemeral range. The page's server binds it
    only after its migrations (a minute on a loaded machine); a port the kernel picked
    could meanwhile be taken by any outgoing connection on the machine -- a
    PostgreSQL pass beside this one opens thousands -- and ``clawboo up`` would never
    become ready. Outside the range only a process naming the port could take it."""
    import secrets
    import socket

    ephemeral = ephemeral_ports()
    if ephemeral.start > 2_024:  # below it: 20000 up, or what there is
        ours = range(max(1_024, min(20_000, ephemeral.start - 1_000)), ephemeral.start)
    else:
        ours = range(ephemeral.stop, 65_536)
    for _ in range(200):
        port = ours.start + secrets.randbelow(len(ours))
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise AssertionError("no free port outside the ephemeral range")


def pattern(line: str, cwd: Path) -> re.Pattern[str]:
    line = line.rstrip().replace("/home/you/clawboo", str(cwd))
    out = []
    for piece in re.split(r"(…|\(pid \d+\))", line):
        if piece == "…":
            out.append(".*")
        elif re.fullmatch(r"\(pid \d+\)", piece):
            out.append(r"\(pid \d+\)")
        else:
            out.append(re.escape(piece))
    return re.compile("".join(out))


def unmatched(expected: str, printed: str, cwd: Path) -> list[str]:
    """The expected lines not printed in order (empty: all were)."""
    lines = printed.splitlines()
    at = 0
    for i, want in enumerate(expected.splitlines()):
        rx = pattern(want, cwd)
        while at < len(lines) and not rx.fullmatch(lines[at].rstrip()):
            at += 1
        if at == len(lines):
            return expected.splitlines()[i:]
        at += 1
    return []


class Reader:
    """A fresh directory, environment and state dir, the page's commands run in turn."""

    def __init__(self, tmp: Path) -> None:
        self.cwd = tmp / "clawboo"
        self.cwd.mkdir()
        (self.cwd / ".venv").symlink_to(Path(sys.prefix))
        self.port = free_port()
        # A reader's shell: none of the test run's settings, its own config dir.
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("CLAWBOO_", "DJANGO_")) and k not in ("DATABASE_URL",)
        }
        self.env.update({"XDG_CONFIG_HOME": str(tmp / "config"), "PYTHONUNBUFFERED": "1"})
        self.server: subprocess.Popen[bytes] | None = None
        self.server_log = tmp / "up.log"
        self.last = ""

    def localize(self, text: str, command: bool = True) -> str:
        text = text.replace("127.0.0.1:8000", f"127.0.0.1:{self.port}")
        if not command:
            return text
        return re.sub(r"(clawboo up)\b", rf"\1 --port {self.port}", text)

    def run(self, block: Block, command: str) -> None:
        command = self.localize(command)
        if "clawboo up" in command:
            assert self.server is None, "one server per page"
            self.server = subprocess.Popen(  # its own session: Ctrl-C goes to it alone
                ["bash", "-c", f"exec {command}"],
                cwd=self.cwd,
                env=self.env,
                stdout=self.server_log.open("wb"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            self.last = ""
            return
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", command],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=RUN_S,
        )
        assert done.returncode == 0, (
            f"line {block.line}: exit {done.returncode}\n{command}\n{done.stdout}\n{done.stderr}"
        )
        self.last = done.stdout

    def check(self, block: Block, served: bool) -> None:
        expected = self.localize(block.text, command=False)
        if not served:
            missing = unmatched(expected, self.last, self.cwd)
            assert not missing, f"line {block.line}: not printed: {missing}\n{self.last}"
            return
        assert self.server is not None
        deadline = time.monotonic() + SERVE_S
        while True:
            printed = self.server_log.read_text(errors="replace")
            missing = unmatched(expected, printed, self.cwd)
            if not missing:
                return
            if self.server.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"line {block.line}: not printed: {missing}\n{printed}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.server is None:
            return
        os.killpg(self.server.pid, signal.SIGINT)  # Ctrl-C in its terminal
        try:
            code = self.server.wait(timeout=60)
        finally:
            try:
                os.killpg(self.server.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        assert code == 0, self.server_log.read_text(errors="replace")[-3000:]
        assert "stopped" in self.server_log.read_text().splitlines()[-1]


def follow(page: str, tmp: Path) -> None:
    reader = Reader(tmp)
    served = False
    try:
        for block in blocks(page):
            if block.kind == "output":
                reader.check(block, served)
                continue
            served = False
            text = block.text.strip()
            if block.kind == "install":
                found = INSTALL.match(text)
                assert found, f"{page} line {block.line}: not the install line: {text}"
                text = found.group(1)
            assert block.kind in ("run", "install"), f"{page}: unknown marker {block.kind}"
            reader.run(block, text)
            served = reader.server is not None and reader.last == "" and "clawboo up" in text
    finally:
        reader.stop()


@pytest.mark.timeout(PAGE_S)
@pytest.mark.parametrize("page", PAGES)
def test_every_marked_example_of_the_guide_works_verbatim(page, tmp_path):
    assert blocks(page), f"{page} has no marked examples"
    follow(page, tmp_path)


def test_the_pages_server_gets_a_port_the_kernel_never_hands_out_by_itself():
    ports = {free_port() for _ in range(20)}
    assert not ports & set(ephemeral_ports())
    assert all(1024 < port < 65536 for port in ports)


def test_every_command_block_of_the_guides_is_marked_or_a_template():
    """A shell block without a marker must say it is a template to adapt (placeholders)."""
    for page in PAGES:
        text = (DOCS / page).read_text()
        for m in re.finditer(r"(?:<!-- ([^>]*) -->\n)?```(sh|bash|console)\n", text):
            marker = m.group(1) or ""
            line = text[: m.start()].count("\n") + 1
            assert marker.startswith(("example", "template")), (
                f"{page} line {line}: a command block with no example/template marker"
            )
