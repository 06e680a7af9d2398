"""The ``command`` runtime: a configured argv run in the worktree, no agent CLI needed.

``settings["argv"]`` is a list of strings, run without a shell. The task's context
arrives in ``CLAWBOO_TASK_*`` environment variables, and the run's prompt (what an
agent CLI is given: the task, a fix round's feedback) in the file
``CLAWBOO_PROMPT_FILE``. Exit 0 means the run finished;
whether the work passes is the verification gate's call, not this adapter's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from core.checks import is_command_argv
from executor.runtimes.base import RunRequest
from executor.runtimes.oneshot import LineParser, OneShotCliAdapter, SettingsError

SUMMARY_CHARS = 500


class CommandOutputParser(LineParser):
    """Keeps the last non-empty stdout line as the run's summary."""

    def feed(self, line: str) -> None:
        if line.strip():
            self.parsed.summary = line.strip()[:SUMMARY_CHARS]


class CommandAdapter(OneShotCliAdapter):
    runtime = "command"
    binary = ""
    requires_verdict = False

    def executable_name(self, request: RunRequest) -> str:
        return configured_argv(request)[0]

    def locate(self, name: str, request: RunRequest, env: Mapping[str, str]) -> str | None:
        # A path (./run.sh, /usr/bin/true) is taken as given, relative to the
        # worktree like the child sees it; a bare name is looked up on PATH.
        if os.sep in name:
            path = Path(name) if os.path.isabs(name) else request.cwd / name
            return str(path) if path.is_file() else None
        return super().locate(name, request, env)

    def build_argv(self, request: RunRequest, executable: str, scratch: Path) -> list[str]:
        return [executable, *configured_argv(request)[1:]]

    def new_parser(self, request: RunRequest) -> LineParser:
        return CommandOutputParser()

    def prepare_run(self, request: RunRequest, scratch: Path, env: dict[str, str]) -> None:
        # A file, not a variable: a prompt may outgrow what one variable may hold.
        prompt = scratch / "prompt.txt"
        prompt.write_text(request.prompt, encoding="utf-8")
        env["CLAWBOO_PROMPT_FILE"] = str(prompt)


def configured_argv(request: RunRequest) -> list[str]:
    argv = request.settings.get("argv")
    if not is_command_argv(argv):
        raise SettingsError('settings["argv"] must be a non-empty list of strings')
    return list(argv)
