"""Import a Taskmaster ``tasks.json`` (claude-task-master) as board tasks.

Both of its layouts are read: the classic ``{"tasks": [...]}`` and the tagged
``{"<tag>": {"tasks": [...], "metadata": {...}}}``. Every task and subtask becomes a
board task through the board's data layer, with a stable id (``tm-<id>``,
``tm-<id>.<sub>``; ``tm-<tag>-…`` for tags other than ``master``), so importing
the same file again files nothing twice. Subtasks are children of their task;
``dependencies`` become board dependencies (a subtask's bare numbers name its
siblings, as in Taskmaster); priorities high/medium/low become 2/1/0.

Statuses map onto the board's table of moves: ``pending`` and ``in-progress`` →
``todo`` (nobody here holds the work), ``deferred`` → ``backlog``, ``review`` →
``in_review``, ``done`` → ``done``, ``blocked`` → ``blocked``, ``cancelled`` →
``cancelled``; the original status is kept in ``metadata.taskmaster``. Reaching
review or done passes through a claim, held by the team's ``taskmaster-<team>``
person-kind agent (made on first use); a task whose dependencies are not done
stays ``todo`` (noted).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from board import store
from board.transitions import Status
from core import registry, storage
from core.errors import ClawbooError, ValidationFailed
from core.models import Agent

STATUS = {
    "pending": Status.TODO,
    "in-progress": Status.TODO,
    "deferred": Status.BACKLOG,
    "review": Status.IN_REVIEW,
    "done": Status.DONE,
    "blocked": Status.BLOCKED,
    "cancelled": Status.CANCELLED,
}
# The moves from where a task is created (todo or backlog) to its status.
PATH = {
    Status.TODO: (),
    Status.BACKLOG: (),
    Status.IN_REVIEW: (Status.IN_PROGRESS, Status.IN_REVIEW),
    Status.DONE: (Status.IN_PROGRESS, Status.DONE),
    Status.BLOCKED: (Status.BLOCKED,),
    Status.CANCELLED: (Status.CANCELLED,),
}
PRIORITY = {"high": 2, "medium": 1, "low": 0}
IMPORTER_NAME = "taskmaster import"


def importer(team: str) -> str:
    """The participant that held the work Taskmaster says was done or is in review
    (a move into in_progress takes a claim, and a claim names who works the task):
    a person-kind agent of the team, made on first use."""
    agent_id = f"taskmaster-{team}"[:128]
    if not Agent.objects.filter(pk=agent_id).exists():
        registry.create_agent(
            id=agent_id,
            display_name="Taskmaster import",
            team=team,
            runtime="human",
            participant_kind="human",
        )
    return agent_id


@dataclass
class Entry:
    board_id: str
    title: str
    description: str
    status: str
    priority: int
    metadata: dict[str, Any]
    labels: list[str]
    parent: str | None
    depends_on: list[str] = field(default_factory=list)


@dataclass
class TaskmasterReport:
    created: int = 0
    existing: int = 0
    links: int = 0
    moved: int = 0
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        text = (
            f"taskmaster: {self.created} task(s) filed, {self.existing} already there, "
            f"{self.links} dependency link(s), {self.moved} moved to their status"
        )
        return "\n".join([text, *(f"  note: {note}" for note in self.notes)])


def _slug(tag: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", tag).strip("-")[:40] or "tag"


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def tagged_lists(data: Any) -> list[tuple[str, list[Any]]]:
    if isinstance(data, dict) and isinstance(data.get("tasks"), list):
        return [("master", data["tasks"])]
    if isinstance(data, dict):
        found = [
            (str(tag), body["tasks"])
            for tag, body in data.items()
            if isinstance(body, dict) and isinstance(body.get("tasks"), list)
        ]
        if found:
            return found
    raise ValidationFailed("file", "not a Taskmaster tasks.json: no 'tasks' list")


def entries(data: Any, report: TaskmasterReport) -> list[Entry]:
    """Every task and subtask of the file, parents before their children."""
    found: list[Entry] = []
    for tag, tasks in tagged_lists(data):
        prefix = "tm" if tag == "master" else f"tm-{_slug(tag)}"
        for raw in tasks:
            if not isinstance(raw, dict) or "id" not in raw:
                raise ValidationFailed("file", f"tag {tag!r}: a task without an id")
            top = str(raw["id"])
            parent = _entry(raw, f"{prefix}-{top}", tag, top, None, report)
            parent.depends_on = [_ref(prefix, dep, None) for dep in raw.get("dependencies") or []]
            found.append(parent)
            subtasks = [s for s in raw.get("subtasks") or [] if isinstance(s, dict) and "id" in s]
            if len(subtasks) > store.MAX_LIVE_CHILDREN:
                report.notes.append(
                    f"{parent.board_id}: {len(subtasks)} subtasks, more than a task's "
                    f"{store.MAX_LIVE_CHILDREN} children: filed without the parent link"
                )
            for sub in subtasks:
                child_id = f"{top}.{sub['id']}"
                child = _entry(
                    sub,
                    f"{prefix}-{child_id}",
                    tag,
                    child_id,
                    parent.board_id if len(subtasks) <= store.MAX_LIVE_CHILDREN else None,
                    report,
                )
                child.depends_on = [_ref(prefix, dep, top) for dep in sub.get("dependencies") or []]
                found.append(child)
    return found


def _ref(prefix: str, dep: Any, sibling_of: str | None) -> str:
    text = str(dep)
    if sibling_of is not None and "." not in text:
        return f"{prefix}-{sibling_of}.{text}"
    return f"{prefix}-{text}"


def _entry(
    raw: dict[str, Any],
    board_id: str,
    tag: str,
    source_id: str,
    parent: str | None,
    report: TaskmasterReport,
) -> Entry:
    original = _text(raw.get("status")) or "pending"
    status = STATUS.get(original)
    if status is None:
        report.notes.append(f"{board_id}: unknown status {original!r}, filed as todo")
        status = Status.TODO
    description = "\n\n".join(
        p for p in (_text(raw.get("description")), _text(raw.get("details"))) if p
    )
    source = {"id": source_id, "tag": tag, "status": original}
    if _text(raw.get("testStrategy")):
        source["test_strategy"] = _text(raw.get("testStrategy"))
    return Entry(
        board_id=board_id,
        title=(_text(raw.get("title")) or f"Taskmaster task {source_id}")[:500],
        description=description,
        status=status,
        priority=PRIORITY.get(_text(raw.get("priority")).lower(), 0),
        metadata={"taskmaster": source},
        labels=["taskmaster"] if tag == "master" else ["taskmaster", _slug(tag)],
        parent=parent,
    )


def import_file(text: str, *, team: str = "default") -> TaskmasterReport:
    """File every task of a Taskmaster file into ``team``, all or nothing."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationFailed("file", f"not JSON ({exc.msg}, line {exc.lineno})") from None
    report = TaskmasterReport()
    found = entries(data, report)
    ids = {entry.board_id for entry in found}

    def run() -> TaskmasterReport:
        for entry in found:
            created = store.create_task(
                id=entry.board_id,
                team=team,
                title=entry.title,
                description=entry.description,
                status=Status.BACKLOG if entry.status == Status.BACKLOG else Status.TODO,
                priority=entry.priority,
                labels=entry.labels,
                metadata=entry.metadata,
                parent_task_id=entry.parent,
            )
            if created.created:
                report.created += 1
            else:
                report.existing += 1
        for entry in found:
            for dep in entry.depends_on:
                if dep not in ids:
                    report.notes.append(f"{entry.board_id}: no task {dep} to depend on, skipped")
                    continue
                report.links += int(store.link(entry.board_id, dep))
        for entry in _dependencies_first(found):
            task = store.get_task(entry.board_id)
            if task.status == entry.status:
                continue
            steps = PATH[Status(entry.status)]
            try:
                for step in steps:
                    store.transition(
                        entry.board_id,
                        step,
                        agent_id=importer(team) if step == Status.IN_PROGRESS else None,
                        actor=IMPORTER_NAME,
                    )
            except ClawbooError as exc:  # e.g. done in Taskmaster, its dependency not
                report.notes.append(f"{entry.board_id}: left {task.status}: {exc.detail}")
                continue
            report.moved += 1
        return report

    return storage.write(run)


def _dependencies_first(found: list[Entry]) -> list[Entry]:
    """Entries ordered so each comes after the ones it depends on (a done task's
    completion then readies its dependents in order)."""
    by_id = {entry.board_id: entry for entry in found}
    ordered: list[Entry] = []
    seen: set[str] = set()

    def visit(entry: Entry) -> None:
        if entry.board_id in seen:
            return
        seen.add(entry.board_id)
        for dep in entry.depends_on:
            if dep in by_id:
                visit(by_id[dep])
        ordered.append(entry)

    for entry in found:
        visit(entry)
    return ordered
