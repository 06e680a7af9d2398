"""The system-of-record scaffold: five files that make a checkout self-describing.

Each answers one question a cold runtime must be able to answer from the checkout
alone (seed 004): what is this (``TASK.md``), where are we (``task-progress.md``),
why was it built this way (``DECISIONS.json``), how do I run it (``init.sh``) and
what proves it is done (``VERIFICATION.md``). ``AGENT_HANDOFF.json`` is not part of
the scaffold: it is the clock-out artifact, written on the first handoff.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from worktrees import agent_files

TASK_FILE = "TASK.md"
PROGRESS_FILE = "task-progress.md"
DECISIONS_FILE = "DECISIONS.json"
INIT_FILE = "init.sh"
VERIFICATION_FILE = "VERIFICATION.md"
HANDOFF_FILE = "AGENT_HANDOFF.json"

SCAFFOLD_FILES = (TASK_FILE, PROGRESS_FILE, DECISIONS_FILE, INIT_FILE, VERIFICATION_FILE)
# Bookkeeping, not deliverable: a session that only touched these did no work.
SOR_FILES = (*SCAFFOLD_FILES, HANDOFF_FILE)

COMMAND_SLOTS = ("INSTALL_CMD", "VERIFY_CMD", "START_CMD")


def scaffold_message(task_id: str) -> str:
    return f"clawboo: scaffold task {task_id}"


@dataclass(frozen=True)
class TaskBrief:
    """What the scaffold says about the task (taken from the board at provision)."""

    task_id: str
    title: str = ""
    team: str = ""
    description: str = ""
    acceptance: str = ""
    gotchas: str = ""
    # init.sh's command slots (from the task's metadata: install_cmd / verify_cmd /
    # start_cmd); empty slots are skipped by the script.
    install_cmd: str = ""
    verify_cmd: str = ""
    start_cmd: str = ""


def _or_none(text: str) -> str:
    return text.strip() or "_(none given)_"


def task_md(brief: TaskBrief) -> str:
    return f"""# {brief.title.strip() or brief.task_id}

- Task id: `{brief.task_id}`
- Team: `{brief.team or "-"}`
- Branch: `clawboo/task-{brief.task_id}`

## Description
{_or_none(brief.description)}

## Acceptance criteria
{_or_none(brief.acceptance)}

## Known gotchas
{_or_none(brief.gotchas)}

## How to work this task
1. Clock in: read `AGENT_HANDOFF.json` if present, else `task-progress.md`.
2. Run `./init.sh` and confirm the baseline verifies before changing anything.
3. Work in small steps; record non-obvious choices in `DECISIONS.json`.
4. Put real test and lint output in `VERIFICATION.md`.
5. Clock out: update `task-progress.md` and write `AGENT_HANDOFF.json`.
"""


def progress_md(brief: TaskBrief) -> str:
    return f"""# Progress: {brief.task_id}

## Current verified state
Scaffold only; nothing verified yet.

## Done

## In progress

## Blocked

## Ritual
- Clock in: read the handoff (or this file), run `./init.sh`.
- Clock out: add bullets (`- ...`) under Done / In progress / Blocked, then write
  `AGENT_HANDOFF.json`.
"""


def decisions_json(brief: TaskBrief) -> str:
    doc = {
        "task": brief.task_id,
        "format": "append one object per non-obvious decision",
        "fields": ["decision", "why", "rejected", "constraint", "at"],
        "decisions": [],
    }
    return json.dumps(doc, indent=2) + "\n"


def init_sh(brief: TaskBrief) -> str:
    return f"""#!/usr/bin/env bash
# Runtime-agnostic startup for task {brief.task_id}: shell and git only, so every
# runtime (and a human) boots the checkout the same way. Fails loud on purpose.
set -euo pipefail
cd "$(dirname "$0")"

# Project-specific command slots: fill these in; an empty slot is skipped.
INSTALL_CMD={shlex.quote(brief.install_cmd)}
VERIFY_CMD={shlex.quote(brief.verify_cmd)}
START_CMD={shlex.quote(brief.start_cmd)}

step() {{
  local name=$1 cmd=$2
  if [ -z "$cmd" ]; then
    echo "init.sh: $name: no command set, skipped"
    return 0
  fi
  echo "init.sh: $name: $cmd"
  bash -c "$cmd"
}}

step install "$INSTALL_CMD"
step verify "$VERIFY_CMD"
if [ "${{1:-}}" = "--start" ]; then
  step start "$START_CMD"
fi
"""


def verification_md(brief: TaskBrief) -> str:
    return f"""# Verification: {brief.task_id}

The completion gate reads this file. Paste real output, not a summary.

## Tests
_(paste the test command and its output)_

## Lint
_(paste the lint command and its output)_
"""


def write_scaffold(root: Path, brief: TaskBrief) -> None:
    """Lay the five SoR files down at ``root`` (``init.sh`` executable)."""
    contents = {
        TASK_FILE: task_md(brief),
        PROGRESS_FILE: progress_md(brief),
        DECISIONS_FILE: decisions_json(brief),
        INIT_FILE: init_sh(brief),
        VERIFICATION_FILE: verification_md(brief),
    }
    for name, text in contents.items():
        # Replaced, never written through: the repository may hold any of these
        # names as a symlink.
        agent_files.write_text(root / name, text)
    init = root / INIT_FILE
    os.chmod(init, 0o755)  # noqa: S103 - a script the runtime must be able to run
