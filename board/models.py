"""The board's tables: tasks, task_deps, task_comments, workspaces, execution_processes.

Only the board's data layer (:mod:`board.store` and the modules it names) writes
them. Every table carries the dormant ``tenant_id`` seam of seed 000.
"""

from __future__ import annotations

import datetime as dt
from typing import Any
from urllib.parse import urlencode

from django.db import models
from django.db.models import Q
from django.urls import reverse

from board import snapshot
from board.money import cents_of
from board.runs import ErrorClass, StepKind, StepStatus
from board.transitions import Status


class Verdict(models.TextChoices):
    PASS = "pass"  # noqa: S105 - a verdict, not a password
    FAIL = "fail"
    COMPLETED_WITH_DEBT = "completed_with_debt"


class ApprovalState(models.TextChoices):
    """A task's approval before work (GOVERNANCE §5). No state (null): none needed."""

    REQUIRED = "required"
    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"


# The states a person still has to answer: the board's "Needs approval" column.
AWAITING_APPROVAL = (ApprovalState.REQUIRED, ApprovalState.EXPIRED)


# Only a passing deterministic gate promotes to done; "completed_with_debt" is a
# red gate that finished anyway (seed 000: non-promotable).
PROMOTABLE_VERDICTS = frozenset({Verdict.PASS})


class FirstRouteLabel(models.Func):
    """The first label a task's route asks for (``route_labels[0]``): the key of the
    claim's index over label-routed tasks (:func:`board.store.ready.route_parts`).
    A route's labels are all the claimer's, so the first is one of them."""

    TEMPLATES = {
        "sqlite": "json_extract(%(expressions)s, '$[0]')",
        "postgresql": "(%(expressions)s ->> 0)",
    }
    output_field = models.CharField()

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(compiler, connection, template=self.TEMPLATES["sqlite"], **extra)

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(compiler, connection, template=self.TEMPLATES["postgresql"], **extra)


# The todo rows each part of the claim's route lookup holds (board.store.ready.
# route_parts): open to anyone, routed to an agent, else to a runtime, else to labels.
_TODO_OPEN = Q(status="todo", route_agent_id=None, route_runtime=None, route_labels__isnull=True)
_TODO_TO_AGENT = Q(status="todo", route_agent_id__isnull=False)
_TODO_TO_RUNTIME = Q(status="todo", route_agent_id=None, route_runtime__isnull=False)
_TODO_TO_LABELS = Q(
    status="todo", route_agent_id=None, route_runtime=None, route_labels__isnull=False
)


class Task(models.Model):
    id = models.CharField(primary_key=True, max_length=128)
    team = models.ForeignKey("clawboo.Team", on_delete=models.PROTECT, related_name="tasks")
    title = models.CharField(max_length=500)
    description = models.TextField(blank=True, default="")
    goal = models.TextField(blank=True, default="")
    context = models.TextField(blank=True, default="")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.TODO)
    priority = models.IntegerField(default=0)
    labels = models.JSONField(default=list, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    input = models.JSONField(null=True, blank=True)
    output = models.JSONField(null=True, blank=True)
    error = models.TextField(null=True, blank=True)
    feedback = models.TextField(null=True, blank=True)

    # How many of this task's dependencies are not done yet: readiness is
    # ``status='todo' AND unmet_deps=0``, one index range instead of a per-row walk
    # of task_deps. Kept by the data layer (create, link, unlink, any move to done).
    unmet_deps = models.IntegerField(default=0, editable=False)

    attempts = models.IntegerField(default=0)
    max_attempts = models.IntegerField(null=True, blank=True)
    abandonments = models.IntegerField(default=0)

    # The board references agents by id only (the registry of record owns them).
    assignee_agent_id = models.CharField(max_length=128, null=True, blank=True)
    assignee_runtime = models.CharField(max_length=32, null=True, blank=True)
    created_by_agent_id = models.CharField(max_length=128, null=True, blank=True)
    # The route (GOVERNANCE §1): who may take the task. Columns, not metadata, so
    # the claim statement matches them on the row it picks: an agent id, a
    # runtime name, and labels every one of which the agent must carry (null: any).
    route_agent_id = models.CharField(max_length=128, null=True, blank=True)
    route_runtime = models.CharField(max_length=32, null=True, blank=True)
    route_labels = models.JSONField(null=True, blank=True)
    parent_task = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )

    lease_until = models.DateTimeField(null=True, blank=True)
    lease_duration_ms = models.BigIntegerField(null=True, blank=True)
    # The claim (its attempt) that opened the task's latest run: a claim opens one
    # run, and its work sent back to it (a fix round) clears this so it may open the
    # next (board.store.tickets.run_due).
    run_opened_for = models.IntegerField(null=True, blank=True, editable=False)

    worktree_ref = models.CharField(max_length=1024, null=True, blank=True)
    branch_ref = models.CharField(max_length=255, null=True, blank=True)
    scheduled_by = models.CharField(max_length=32, default="manual")
    file_mutating = models.BooleanField(default=True)
    # The registered repository of the task's team its worktree is made in (the
    # worktree wall, core.repositories); null: none named (the agent's default).
    repository = models.ForeignKey(
        "clawboo.Repository",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="tasks",
        db_index=False,
    )
    # Scope (board.scope): the repository paths, as globs, the task says it changes
    # (null: it says none) -- and its effective scope, what the claim compares:
    # ``touches`` when given, else the paths its last attempt changed (recorded when
    # the attempt settled). A claim starts no task whose scope overlaps one of the
    # same repository in progress or waiting to land (board.store.scoping).
    touches = models.JSONField(null=True, blank=True)
    scope = models.JSONField(null=True, blank=True, editable=False)

    verdict = models.CharField(max_length=24, choices=Verdict.choices, null=True, blank=True)
    verdict_evidence = models.TextField(null=True, blank=True)
    verdict_at = models.DateTimeField(null=True, blank=True)
    human_override = models.JSONField(null=True, blank=True)
    # The verdict's structure beside its word (GOVERNANCE §4): ``{gate, findings,
    # reviewer, attempts}``; :mod:`board.judgement` declares its shape.
    verification_detail = models.JSONField(null=True, blank=True)
    # The task's pull request on its repository's forge (landing_mode pull_request):
    # {number, url, state, draft, head_sha, checks, fix_rounds, ...}; written by
    # board.store.pull_requests only.
    pull_request = models.JSONField(null=True, blank=True)

    # Spend: this task's own runs (every attempt), and its tree's (itself and every
    # descendant), both kept by the data layer as runs report usage, so a card and
    # a budget read one figure while runs go (board.store.spend).
    # Millicents (1/1000 ¢) are the figure of record, so a run under half a cent
    # counts; the cents beside them are their rounding (:func:`board.money.cents_of`), written by
    # the same statement, for the API and every rule that compares cents.
    cost_tokens = models.BigIntegerField(default=0)
    cost_cents = models.BigIntegerField(default=0)
    cost_millicents = models.BigIntegerField(default=0, db_default=0)
    tree_cost_tokens = models.BigIntegerField(default=0)
    tree_cost_cents = models.BigIntegerField(default=0)
    tree_cost_millicents = models.BigIntegerField(default=0, db_default=0)
    # The per-run ceiling: a run whose cost reaches it is stopped. Null: none.
    max_run_cents = models.BigIntegerField(null=True, blank=True)

    dropped = models.BooleanField(default=False)
    tenant_id = models.CharField(max_length=64, null=True, blank=True, editable=False)

    # Approval before work (board.store.approvals writes these). Null state: the task
    # needs none. The claim statement admits only null or approved, as a column
    # condition, so no racer can take a task a person has not said yes to.
    approval_state = models.CharField(
        max_length=16, choices=ApprovalState.choices, null=True, blank=True, editable=False
    )
    # The revision the person saw when they decided (null while required).
    approval_revision = models.BigIntegerField(null=True, blank=True, editable=False)
    # Who decided (a user name), or null while nobody has.
    approval_by = models.CharField(max_length=150, null=True, blank=True, editable=False)
    # When the state was set: since when a required approval waits, or the decision.
    approval_at = models.DateTimeField(null=True, blank=True, editable=False)
    approval_reason = models.TextField(null=True, blank=True, editable=False)

    revision = models.BigIntegerField(default=0)
    write_log = models.JSONField(default=list, blank=True)
    write_log_truncated = models.BooleanField(default=False)
    incarnation_id = models.CharField(max_length=32)
    # Digest of the create request, so a retried create with a client id is
    # recognised as the same request (200) rather than a collision (409).
    create_fingerprint = models.CharField(max_length=64, blank=True, default="", editable=False)

    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "tasks"
        ordering = ["-priority", "-created_at"]
        indexes = [
            # claim-next (fifo/topological/priority) and the ready list: an index
            # range already in dispatch order. Partial, over todo rows only: a claim
            # then only deletes an entry from each (a page written instead of two),
            # and the indexes stay the size of the backlog, not of the history. The
            # ready predicate names 'todo' as a literal (board.store.tasks.
            # ready_filter) so the planners can match these WHERE clauses.
            models.Index(
                fields=["unmet_deps", "created_at", "id"],
                name="tasks_ready_fifo_idx",
                condition=Q(status="todo"),
            ),
            models.Index(
                fields=["unmet_deps", "-priority", "created_at", "id"],
                name="tasks_ready_prio_idx",
                condition=Q(status="todo"),
            ),
            models.Index(
                fields=["team", "unmet_deps", "created_at", "id"],
                name="tasks_ready_team_idx",
                condition=Q(status="todo"),
            ),
            # A claim's candidates, one ordered lookup per part of the routes it may
            # take (board.store.ready.route_parts): the open tasks in each dispatch
            # order (as above), and the tasks routed to its id, its runtime or one
            # of its labels, so tasks routed to others are never walked.
            models.Index(
                fields=["unmet_deps", "created_at", "id"],
                name="tasks_ready_open_fifo_idx",
                condition=_TODO_OPEN,
            ),
            models.Index(
                fields=["unmet_deps", "-priority", "created_at", "id"],
                name="tasks_ready_open_prio_idx",
                condition=_TODO_OPEN,
            ),
            models.Index(
                fields=["team", "unmet_deps", "created_at", "id"],
                name="tasks_ready_open_team_idx",
                condition=_TODO_OPEN,
            ),
            models.Index(
                fields=["route_agent_id", "unmet_deps", "created_at", "id"],
                name="tasks_ready_to_agent_idx",
                condition=_TODO_TO_AGENT,
            ),
            models.Index(
                fields=["route_runtime", "unmet_deps", "created_at", "id"],
                name="tasks_ready_to_runtime_idx",
                condition=_TODO_TO_RUNTIME,
            ),
            models.Index(
                FirstRouteLabel("route_labels"),
                "unmet_deps",
                "created_at",
                "id",
                name="tasks_ready_to_label_idx",
                condition=_TODO_TO_LABELS,
            ),
            # The ready list's own order: priority desc, then newest first.
            models.Index(
                fields=["unmet_deps", "-priority", "-created_at"],
                name="tasks_ready_list_idx",
                condition=Q(status="todo"),
            ),
            # Lease expiry and the stale sweep look only at in_progress rows (few: one
            # per live worker), so one index on status serves both. No index leads
            # with updated_at: every write and heartbeat moves it.
            models.Index(fields=["status", "lease_until"], name="tasks_status_lease_idx"),
            models.Index(fields=["team", "created_at"], name="tasks_team_created_idx"),
            # An agent's limit: the tasks it holds in_progress, counted in the claim's
            # transaction. Partial: a claim adds an entry, a settle removes it, and an
            # agent's history of done tasks is never walked.
            models.Index(
                fields=["assignee_agent_id"],
                name="tasks_held_idx",
                condition=Q(status="in_progress"),
            ),
            # The board's columns: one team's tasks of one status in the board's order
            # (priority desc, newest first), and the per-column counts as one GROUP BY
            # this index answers alone. A heartbeat never moves its entries; a status,
            # priority or drop change does.
            models.Index(
                fields=["team", "status", "dropped", "-priority", "-created_at", "id"],
                name="tasks_board_column_idx",
            ),
            # The terminal columns (done, cancelled), most recently changed first, so a
            # team's first page of history costs the same at any size. Partial: live
            # rows, whose updated_at every heartbeat moves, are not in it. The column
            # query names the status as a literal (board.store.ready.status_filter) so
            # both planners can match this WHERE clause.
            models.Index(
                fields=["team", "status", "-updated_at", "-id"],
                name="tasks_board_recent_idx",
                condition=Q(status="done") | Q(status="cancelled"),
            ),
            # Unassigned rows (the whole backlog) stay out: a claim adds one entry
            # instead of moving one, and "tasks of agent X" still uses it (x = ?
            # implies x IS NOT NULL to both planners).
            models.Index(
                fields=["assignee_agent_id"],
                name="tasks_assignee_idx",
                condition=Q(assignee_agent_id__isnull=False),
            ),
            # The "Needs approval" column and the expiry pass: the few tasks waiting
            # for a person, oldest first. Partial: the rest of the table is not in it.
            models.Index(
                fields=["team", "approval_at"],
                name="tasks_awaiting_approval_idx",
                condition=Q(approval_state__in=["required", "expired"]),
            ),
            # The claim's scope check: the few scoped tasks in progress or waiting to
            # land, per repository. Partial: a board without scopes has an empty
            # index, and a claim's probe of it costs one page.
            models.Index(
                fields=["repository", "team"],
                name="tasks_scope_busy_idx",
                condition=Q(status__in=["in_progress", "in_review"]) & Q(scope__isnull=False),
            ),
            # Claim-next's other half: the ready scoped tasks of the repositories with
            # work in flight, which it compares with that work. Partial: unscoped
            # tasks (most) are not in it.
            models.Index(
                fields=["repository", "team"],
                name="tasks_scope_todo_idx",
                condition=Q(status="todo") & Q(scope__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id}: {self.title}"

    def get_absolute_url(self) -> str:
        """The task open on its team's live board (the admin's "View on site")."""
        return f"{reverse('board')}?{urlencode({'team': self.team_id, 'task': self.id})}"

    @property
    def approval(self) -> dict[str, Any] | None:
        return snapshot.approval(self)

    @property
    def verification(self) -> dict[str, Any] | None:
        return snapshot.verification(self)

    def as_dict(self, depends_on: list[str] | None = None) -> dict[str, Any]:
        """The task body of the API and of task-change events (one shape for both,
        declared in :mod:`board.snapshot`)."""
        return snapshot.body(self, depends_on)


class TaskDep(models.Model):
    """``task`` is not ready until ``depends_on`` is done."""

    pk = models.CompositePrimaryKey("task_id", "depends_on_id")
    # No index of a foreign key's own: the primary key (task_id first) serves
    # lookups by task, and Meta's named index lookups by dependency.
    task = models.ForeignKey(
        Task, on_delete=models.CASCADE, related_name="dep_links", db_index=False
    )
    depends_on = models.ForeignKey(
        Task,
        on_delete=models.CASCADE,
        related_name="dependent_links",
        db_column="depends_on_task_id",
        db_index=False,
    )
    created_at = models.DateTimeField()
    tenant_id = models.CharField(max_length=64, null=True, blank=True, editable=False)

    class Meta:
        db_table = "task_deps"
        verbose_name = "task dependency"
        verbose_name_plural = "task dependencies"
        indexes = [models.Index(fields=["depends_on"], name="task_deps_depends_on_idx")]

    def __str__(self) -> str:
        return f"{self.task_id} → {self.depends_on_id}"


class TaskComment(models.Model):
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="comments")
    author = models.CharField(max_length=200)
    body = models.TextField()
    created_at = models.DateTimeField()
    tenant_id = models.CharField(max_length=64, null=True, blank=True, editable=False)

    class Meta:
        db_table = "task_comments"
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.author} on {self.task_id}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "task_id": self.task_id,
            "author": self.author,
            "body": self.body,
            "created_at": self.created_at.isoformat(),
        }


class WorkspaceStatus(models.TextChoices):
    ACTIVE = "active"
    ARCHIVED = "archived"
    STALE = "stale"


class Workspace(models.Model):
    """The lifecycle of one task's git worktree (the worktrees app owns the checkout)."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="workspaces")
    repo_path = models.CharField(max_length=1024)
    worktree_path = models.CharField(max_length=1024)
    branch = models.CharField(max_length=255)
    base_sha = models.CharField(max_length=64)
    base_commit = models.CharField(max_length=64, blank=True, default="")
    # The branch of the repository the task's change lands on when approved.
    base_branch = models.CharField(max_length=255, blank=True, default="")
    # The work diff's stat when the checkout completed (SoR files left out).
    diffstat = models.JSONField(null=True, blank=True)
    # The last approval's outcome: landed (commit, strategy) or conflict (paths).
    landing = models.JSONField(null=True, blank=True)
    status = models.CharField(
        max_length=16, choices=WorkspaceStatus.choices, default=WorkspaceStatus.ACTIVE
    )
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    tenant_id = models.CharField(max_length=64, null=True, blank=True, editable=False)

    class Meta:
        db_table = "workspaces"
        ordering = ["-updated_at"]
        constraints = [
            # At most one live (non-archived) workspace per task.
            models.UniqueConstraint(
                fields=["task"],
                condition=~Q(status="archived"),
                name="workspaces_one_live_per_task",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.task_id} @ {self.worktree_path} ({self.status})"


class ExecutionStatus(models.TextChoices):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"


class CostStatus(models.TextChoices):
    REPORTED = "reported"  # the runtime priced the run itself
    ESTIMATED = "estimated"  # tokens priced by CLAWBOO_MODEL_PRICES
    UNKNOWN = "unknown"  # no usage, or a model the table does not price


class ExecutionProcess(models.Model):
    """One run of a task by an executor, opened only after a successful claim."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="executions")
    agent_id = models.CharField(max_length=128)
    runtime = models.CharField(max_length=32, null=True, blank=True)
    attempt = models.IntegerField()
    status = models.CharField(
        max_length=16, choices=ExecutionStatus.choices, default=ExecutionStatus.RUNNING
    )
    pid = models.IntegerField(null=True, blank=True)
    native_session_id = models.CharField(max_length=255, null=True, blank=True)
    tokens_in = models.BigIntegerField(default=0)
    tokens_out = models.BigIntegerField(default=0)
    cache_read = models.BigIntegerField(default=0)
    cache_write = models.BigIntegerField(default=0)
    cost_cents = models.BigIntegerField(default=0)
    # Of record; cost_cents is its rounding.
    cost_millicents = models.BigIntegerField(default=0, db_default=0)
    cost_status = models.CharField(
        max_length=16, choices=CostStatus.choices, default=CostStatus.UNKNOWN
    )
    # Why a run failed or was stopped (GOVERNANCE.md §2), blank while it goes well.
    error_class = models.CharField(
        max_length=32, choices=ErrorClass.choices, blank=True, default=""
    )
    git_before = models.CharField(max_length=64, null=True, blank=True)
    git_after = models.CharField(max_length=64, null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    error = models.TextField(null=True, blank=True)
    log = models.TextField(blank=True, default="")
    recovery_tombstone = models.CharField(max_length=200, null=True, blank=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    # When the run was seen silent (no step, output or usage for CLAWBOO_STALL_MS):
    # set once, by board.store.steps.mark_stalled; the card shows it "stalled".
    stalled_at = models.DateTimeField(null=True, blank=True)
    # Whether the agent's breaker counted this run: a run counts once, so the crash
    # path after a run already counted asks again for nothing (executor.breakers).
    breaker_counted = models.BooleanField(default=False, db_default=False, editable=False)
    tenant_id = models.CharField(max_length=64, null=True, blank=True, editable=False)

    class Meta:
        db_table = "execution_processes"
        verbose_name_plural = "execution processes"
        ordering = ["-started_at", "-id"]
        indexes = [models.Index(fields=["status", "task"], name="executions_status_idx")]

    def __str__(self) -> str:
        return f"{self.task_id} attempt {self.attempt} ({self.status})"

    def as_dict(self) -> dict[str, Any]:
        def iso(value: Any) -> str | None:
            return value.isoformat() if value is not None else None

        return {
            "id": self.id,
            "task_id": self.task_id,
            "agent_id": self.agent_id,
            "runtime": self.runtime,
            "attempt": self.attempt,
            "status": self.status,
            "pid": self.pid,
            "native_session_id": self.native_session_id,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "cache_read": self.cache_read,
            "cache_write": self.cache_write,
            "cost_cents": self.cost_cents,
            "cost_millicents": self.cost_millicents,
            "cost_status": self.cost_status,
            "error_class": self.error_class,
            "git_before": self.git_before,
            "git_after": self.git_after,
            "exit_code": self.exit_code,
            "error": self.error,
            "recovery_tombstone": self.recovery_tombstone,
            "started_at": iso(self.started_at),
            "finished_at": iso(self.finished_at),
            "stalled_at": iso(self.stalled_at),
        }


class RunStep(models.Model):
    """One step of a run as its runtime's stream told it (a model turn, a tool call,
    a command, a file change, an MCP or sub-agent call, an error): the task's trace.
    Written only by :mod:`board.store.steps` (arguments masked, text bounded, at most
    ``MAX_STEPS`` a run); pruned with the history."""

    execution = models.ForeignKey(ExecutionProcess, on_delete=models.CASCADE, related_name="steps")
    # 1, 2, ... within the run, in the order the stream told them.
    seq = models.IntegerField()
    kind = models.CharField(max_length=16, choices=StepKind.choices)
    name = models.CharField(max_length=255)
    status = models.CharField(max_length=8, choices=StepStatus.choices, default=StepStatus.OK)
    arguments = models.JSONField(default=dict, blank=True)
    detail = models.TextField(blank=True, default="")
    started_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.BigIntegerField(null=True, blank=True)
    tokens_in = models.BigIntegerField(null=True, blank=True)
    tokens_out = models.BigIntegerField(null=True, blank=True)
    cost_millicents = models.BigIntegerField(null=True, blank=True)
    model = models.CharField(max_length=200, null=True, blank=True)
    created_at = models.DateTimeField()
    tenant_id = models.CharField(max_length=64, null=True, blank=True, editable=False)

    class Meta:
        db_table = "run_steps"
        ordering = ["execution", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["execution", "seq"], name="run_steps_execution_seq")
        ]

    def __str__(self) -> str:
        return f"{self.execution_id}#{self.seq} {self.kind} {self.name} ({self.status})"

    def as_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "execution_id": self.execution_id,
            "kind": self.kind,
            "name": self.name,
            "status": self.status,
            "arguments": self.arguments,
            "detail": self.detail,
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "duration_ms": self.duration_ms,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            # API.md's totals beside the parts: tokens in and out, cost in cents.
            "tokens": (
                None
                if self.tokens_in is None and self.tokens_out is None
                else (self.tokens_in or 0) + (self.tokens_out or 0)
            ),
            "cost_millicents": self.cost_millicents,
            "cost_cents": None if self.cost_millicents is None else cents_of(self.cost_millicents),
            "model": self.model,
        }


class BudgetScope(models.TextChoices):
    TEAM = "team"
    AGENT = "agent"
    ROUTINE = "routine"
    TASK_TREE = "task_tree"


class BudgetWindow(models.TextChoices):
    DAY = "day"
    MONTH = "month"
    TOTAL = "total"


class BudgetMode(models.TextChoices):
    WARN = "warn"
    CAP = "cap"


# What a budget's ``status`` reads (:meth:`Budget.status_at`).
BUDGET_STATUSES = ("active", "soft_capped", "paused")


class Budget(models.Model):
    """A spend limit on a scope (team, agent, routine, task tree) per window.

    ``spent_cents`` is the scope's spend in the window that began at
    ``window_start``, added to in the same transaction as each run's usage
    (board.store.spend), so every worker on every host reads one figure. A cap
    that is reached sets ``paused_until`` (the window's end): the claim tests
    that one column, and a new window lifts the pause with no sweeper.
    """

    # The warning crossing, in percent of the limit.
    WARN_PERCENT = 80

    team = models.ForeignKey("clawboo.Team", on_delete=models.CASCADE, related_name="budgets")
    scope = models.CharField(max_length=16, choices=BudgetScope.choices)
    scope_id = models.CharField(max_length=128)
    window = models.CharField(max_length=8, choices=BudgetWindow.choices)
    limit_cents = models.BigIntegerField()
    mode = models.CharField(max_length=8, choices=BudgetMode.choices, default=BudgetMode.WARN)
    window_start = models.DateTimeField()
    spent_cents = models.BigIntegerField(default=0)  # the rounding of spent_millicents
    spent_millicents = models.BigIntegerField(default=0, db_default=0)
    # What this window may spend before the cap pauses it again: the limit, or more
    # after a resume with grace. Null: the limit.
    pause_at_cents = models.BigIntegerField(null=True, blank=True)
    # The grace a person resumed this window's cap with (null: none, or not resumed):
    # what a pause at ``pause_at_cents`` is the end of (:meth:`grace_ran_out`).
    grace_cents = models.BigIntegerField(null=True, blank=True)
    # The crossings already notified in this window (80 %, 100 %).
    warned = models.BooleanField(default=False)
    exhausted = models.BooleanField(default=False)
    paused_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    tenant_id = models.CharField(max_length=64, null=True, blank=True, editable=False)

    class Meta:
        db_table = "budgets"
        ordering = ["team", "scope", "scope_id", "id"]
        indexes = [
            models.Index(fields=["scope", "scope_id"], name="budgets_scope_idx"),
            # The claim's probe: is anything paused right now? Nearly always empty.
            models.Index(
                fields=["paused_until"],
                name="budgets_paused_idx",
                condition=Q(paused_until__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.scope} {self.scope_id}: {self.limit_cents}¢/{self.window} ({self.mode})"

    def window_bounds(self, at: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
        return window_bounds(self.window, at)

    def spent_at(self, at: dt.datetime) -> int:
        """The scope's spend in the window ``at`` falls in (0 in a window not begun)."""
        return self.spent_cents if self.window_start >= window_bounds(self.window, at)[0] else 0

    def status_at(self, at: dt.datetime) -> str:
        if self.mode == BudgetMode.CAP and self.paused_until is not None and self.paused_until > at:
            return "paused"
        return "soft_capped" if self.warns_at(self.spent_at(at)) else "active"

    def grace_ran_out(self) -> bool:
        """Whether this window's pause is the end of a grace a person gave when they
        resumed the cap (its allowance past the limit), not the limit itself. A cap
        resumed without grace while over its limit pauses at its next spend: that is
        its limit again, though its allowance is past it (the spend it was resumed at)."""
        return bool(self.grace_cents) and self.pause_at_cents is not None

    def pause_cause(self) -> str:
        """Why this cap pauses its scope, in words for a task's comment, a run's stop,
        a claim's refusal and a notification: its limit, or the grace it was
        resumed with -- so a person who gave grace reads that it is that grace spent."""
        budget = f"{self.limit_cents}¢ {self.window} budget (cap)"
        if self.grace_ran_out():
            return f"spent the grace it was resumed with ({self.pause_at_cents}¢ of its {budget})"
        return f"reached its {budget}"

    def warns_at(self, spent: int) -> bool:
        """Whether a spend of ``spent`` is past the warning crossing (80 % of the
        limit): the one budget-state predicate, read by the status and the store."""
        return spent * 100 >= self.limit_cents * self.WARN_PERCENT

    def as_dict(self, at: dt.datetime) -> dict[str, Any]:
        return {
            "id": self.id,
            "team": self.team_id,
            "scope": self.scope,
            "scope_id": self.scope_id,
            "window": self.window,
            "limit_cents": self.limit_cents,
            "mode": self.mode,
            "spent_cents": self.spent_at(at),
            "spent_millicents": (
                self.spent_millicents
                if self.window_start >= window_bounds(self.window, at)[0]
                else 0
            ),
            "status": self.status_at(at),
            "window_start": window_bounds(self.window, at)[0].isoformat(),
            "pause_at_cents": self.pause_at_cents
            if self.window_start >= window_bounds(self.window, at)[0]
            else None,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }


# A "total" window began before any run and never ends.
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
NEVER = dt.datetime(9999, 12, 31, tzinfo=dt.UTC)


def window_bounds(window: str, at: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    """The UTC window (start, end) ``at`` falls in: its day, its month, or all time."""
    at = at.astimezone(dt.UTC)
    if window == BudgetWindow.DAY:
        start = at.replace(hour=0, minute=0, second=0, microsecond=0)
        return start, start + dt.timedelta(days=1)
    if window == BudgetWindow.MONTH:
        start = at.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        end = (start + dt.timedelta(days=32)).replace(day=1)
        return start, end
    return EPOCH, NEVER


class ToolApprovalState(models.TextChoices):
    PENDING = "pending"
    ALLOWED = "allowed"
    DENIED = "denied"
    # Nobody answered by the timeout: a deny (fail closed).
    TIMED_OUT = "timed_out"


class ToolDecision(models.TextChoices):
    ALLOW_ONCE = "allow_once"
    ALLOW_ALWAYS = "allow_always"
    DENY = "deny"


class ToolApproval(models.Model):
    """A tool call a running agent's permission mode did not allow, waiting for a
    person (GOVERNANCE §5): the run waits on it. Written by board.store.tool_approvals."""

    id = models.CharField(primary_key=True, max_length=32)
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="tool_approvals")
    team = models.ForeignKey("clawboo.Team", on_delete=models.CASCADE, related_name="+")
    agent_id = models.CharField(max_length=128)
    tool = models.CharField(max_length=255)
    # The call's arguments with secret-looking values masked: never the secret itself.
    arguments = models.JSONField(default=dict, blank=True)
    tool_use_id = models.CharField(max_length=128, blank=True, default="")
    state = models.CharField(
        max_length=16, choices=ToolApprovalState.choices, default=ToolApprovalState.PENDING
    )
    decision = models.CharField(max_length=16, choices=ToolDecision.choices, null=True, blank=True)
    decided_by = models.CharField(max_length=150, null=True, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    tenant_id = models.CharField(max_length=64, null=True, blank=True, editable=False)

    class Meta:
        db_table = "tool_approvals"
        ordering = ["-created_at", "id"]
        indexes = [
            # GET /api/approvals: a team's pending calls (few), oldest first.
            models.Index(
                fields=["team", "created_at"],
                name="tool_approvals_pending_idx",
                condition=Q(state="pending"),
            ),
            models.Index(fields=["task", "created_at"], name="tool_approvals_task_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.tool} for {self.agent_id} on {self.task_id} ({self.state})"

    def as_dict(self) -> dict[str, Any]:
        def iso(value: Any) -> str | None:
            return value.isoformat() if value is not None else None

        return {
            "id": self.id,
            "task_id": self.task_id,
            "team": self.team_id,
            "agent_id": self.agent_id,
            "tool": self.tool,
            "arguments": self.arguments,
            "state": self.state,
            "decision": self.decision,
            "decided_by": self.decided_by,
            "decided_at": iso(self.decided_at),
            "created_at": iso(self.created_at),
            "expires_at": iso(self.expires_at),
        }


class ToolGrant(models.Model):
    """``allow_always``: this agent may run this tool without asking again."""

    agent_id = models.CharField(max_length=128)
    tool = models.CharField(max_length=255)
    granted_by = models.CharField(max_length=150)
    approval = models.ForeignKey(
        ToolApproval, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField()
    tenant_id = models.CharField(max_length=64, null=True, blank=True, editable=False)

    class Meta:
        db_table = "tool_grants"
        constraints = [
            models.UniqueConstraint(fields=["agent_id", "tool"], name="tool_grants_agent_tool")
        ]

    def __str__(self) -> str:
        return f"{self.agent_id} may always run {self.tool}"
