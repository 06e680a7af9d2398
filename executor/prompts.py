"""The prompt a run of a task starts with: one rendering for every run, local
(:class:`executor.runner.Executor`) and remote (``GET /api/board/tasks/{id}/prompt``,
which ``clawboo worker`` asks for before each run), so a fix round's feedback
reaches a remote agent in the words a local one reads."""

from __future__ import annotations

from board.models import Task
from worktrees import handoff
from worktrees import service as worktree_service

# A local run's checkout has the scaffold (TASK.md, task-progress.md, init.sh); a
# remote worker's clone of the repository's remote does not.
SCAFFOLDED_STEPS = (
    "Read TASK.md and task-progress.md, run ./init.sh, do the work, and before you "
    "stop write AGENT_HANDOFF.json (done / broken / next)."
)
BARE_STEPS = "Do the work, and before you stop write AGENT_HANDOFF.json (done / broken / next)."


def run_prompt(
    task: Task,
    state: handoff.ResumeState | None,
    *,
    board_tools: bool = False,
    scaffolded: bool = True,
) -> str:
    """The task, the feedback of its previous attempt or fix round (what the judge or
    a reviewer sent back), what the checkout's handoff says is done, broken and
    next, and what to do."""
    parts = [f"Task {task.id}: {task.title}"]
    if task.description:
        parts.append(task.description)
    if task.feedback:
        parts.append(f"Feedback from the previous attempt: {task.feedback}")
    if state is not None and state.source != "none":
        if state.done:
            parts.append("Already done: " + "; ".join(state.done))
        if state.broken:
            parts.append("Broken or unverified: " + "; ".join(state.broken))
        if state.next:
            parts.append(f"Next best step: {state.next}")
    if not scaffolded:
        parts += _unscaffolded(task)
    parts.append(SCAFFOLDED_STEPS if scaffolded else BARE_STEPS)
    if board_tools:
        parts.append(
            "Your team's board is at hand as the MCP server `clawboo`: split work off "
            "with create_subtask, leave notes with comment, see the team's tasks with "
            "list_tasks. This task is settled for you when you stop."
        )
    return "\n\n".join(parts)


def _unscaffolded(task: Task) -> list[str]:
    """What a local checkout's TASK.md and init.sh tell a run, for a remote clone that
    has neither: the acceptance criteria, the gotchas, and the commands (the task's,
    else its repository's)."""
    brief = worktree_service.task_brief(task)
    parts = []
    if brief.acceptance.strip():
        parts.append(f"Acceptance criteria: {brief.acceptance.strip()}")
    if brief.gotchas.strip():
        parts.append(f"Known gotchas: {brief.gotchas.strip()}")
    commands = [
        f"{name} with `{command}`"
        for name, command in (
            ("install", brief.install_cmd),
            ("verify", brief.verify_cmd),
            ("start", brief.start_cmd),
        )
        if command
    ]
    if commands:
        parts.append("Commands for this task: " + "; ".join(commands) + ".")
    return parts
