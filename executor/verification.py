"""The deterministic verification gate: run the task's ``init.sh`` (install +
VERIFY_CMD) in the checkout -- the server's own text of it, never the checkout's
copy, which the builder can edit -- keep the output as evidence, and turn the exit
code into a verdict.

The builder is not the judge: this runs after the runtime finished, in the same
checkout, with the same process-group hygiene as the runtimes (timeout kills the
whole group). Which command, and what a missing one means, is the judge's
(:mod:`executor.judge`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from board import judgement
from board.models import Task, Verdict
from core.worker_environment import agent_environment
from executor.runtimes.process import run_process
from worktrees import service as worktree_service

GATE_TIMEOUT_S = 600.0  # SPEC §10: deterministic gate timeout 10 min
EVIDENCE_TAIL = 4_000
VERIFICATION_FILE = "VERIFICATION.md"


@dataclass(frozen=True)
class GateVerdict:
    verdict: str
    evidence: str
    exit_code: int | None
    # The gate's record on the verdict (board.judgement.gate).
    gate: dict[str, Any]

    @property
    def passed(self) -> bool:
        return self.verdict == Verdict.PASS


def verify_command(task: Task) -> str:
    """The task's own verify command (its metadata; init.sh carries it)."""
    value = (task.metadata or {}).get("verify_cmd")
    return value if isinstance(value, str) else ""


def _environment() -> dict[str, str]:
    # The gate runs what the agent wrote (its Makefile, its tests): it sees the
    # machine's tools but none of the server's own configuration.
    return agent_environment()


def verify(
    worktree: Path, task: Task, command: str = "", *, timeout_s: float = GATE_TIMEOUT_S
) -> GateVerdict | None:
    """Run the gate in the checkout: ``./init.sh`` (install + VERIFY_CMD) when the
    task carries its own verify command, else ``command`` (a default of the agent or
    the repository) as it is. None when there is nothing to run (no command at all)."""
    gate = task_gate(task, command, script=(worktree / "init.sh").exists())
    if gate is None:
        return None
    verdict = _run(list(gate.argv), gate.shown, worktree, timeout_s)
    _write_evidence(worktree, task, verdict.verdict, verdict.exit_code, verdict.evidence)
    return verdict


@dataclass(frozen=True)
class Gate:
    """What a gate runs (``argv``) and the command it is shown and recorded as."""

    argv: tuple[str, ...]
    shown: str


def task_gate(task: Task, command: str, *, script: bool = True) -> Gate | None:
    """The gate of ``task`` given ``command`` (:func:`executor.judge.verify_command`'s
    answer): the server's ``init.sh`` for the task (install + VERIFY_CMD) when it
    carries its own verify command (and ``script``: the checkout is scaffolded),
    else ``command`` as it is; None when there is nothing to run."""
    own = verify_command(task)
    if own and script:
        # The script as the server writes it, not the checkout's file: the builder
        # can rewrite that one (``exit 0``), and would then be its own judge
        # (GOVERNANCE §4, §6). ``$0`` names it, so it starts in the checkout.
        return Gate(("bash", "-c", worktree_service.init_script(task), "init.sh"), own)
    if command:
        return Gate(("bash", "-c", command), command)
    return None


def run_gate(cwd: Path, gate: Gate, *, timeout_s: float = GATE_TIMEOUT_S) -> GateVerdict:
    """Run ``gate`` in ``cwd`` (the merge queue's stacked tip): the same process
    hygiene, environment and verdict as a run's gate, no evidence file."""
    return _run(list(gate.argv), gate.shown, cwd, timeout_s)


def _run(argv: list[str], shown: str, cwd: Path, timeout_s: float) -> GateVerdict:
    run = run_process(argv, cwd=cwd, env=_environment(), timeout_s=timeout_s)
    if run.launch_error:
        output, code = run.launch_error, None
    else:
        output, code = run.log_tail, run.exit_code
    passed = code == 0 and not run.timed_out
    if run.timed_out:
        output += f"\n[verification timed out after {timeout_s:.0f}s]"
    evidence = output[-EVIDENCE_TAIL:]
    verdict = Verdict.PASS if passed else Verdict.FAIL
    record = judgement.gate(shown, code, int(run.duration_s * 1000), run.timed_out, evidence)
    return GateVerdict(verdict=str(verdict), evidence=evidence, exit_code=code, gate=record)


def _write_evidence(
    worktree: Path, task: Task, verdict: str, code: int | None, evidence: str
) -> None:
    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    (worktree / VERIFICATION_FILE).write_text(
        f"# Verification: {task.id}\n\n"
        f"Verdict: **{verdict}** (exit code {code}) at {stamp}\n\n"
        f"## ./init.sh output (last {EVIDENCE_TAIL} characters)\n\n```\n{evidence}\n```\n",
        encoding="utf-8",
    )
