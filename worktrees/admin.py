"""The review half of the task admin: what the agent did, and approving it.

The board's :class:`~board.admin.TaskAdmin` knows no git; this app stands above it,
so it registers the task admin the console uses — the board's, plus the review
panel on the change form (diff per file, runs with their log tails, cost,
verification evidence, branch and base) and the "Approve and land" action, each
row through :func:`worktrees.service.approve` with its outcome reported.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from board import store
from board.admin import TaskAdmin
from board.models import Task
from board.transitions import Status
from core.errors import ClawbooError
from worktrees import review, service
from worktrees.models import MergeBatch, QueuedLanding

admin.site.unregister(Task)


def _approval_text(result: dict[str, Any]) -> tuple[str, bool]:
    if result["result"] == "landed":
        return f"landed {result['commit'][:12]} on {result['base_branch']}", True
    if result["result"] == "merged":
        pr = result.get("pull_request") or {}
        return f"merged pull request #{pr.get('number')} on the forge", True
    if result["result"] == "conflict":
        sent = "sent back to its agent" if result.get("sent") == "rework" else "blocked"
        return f"conflict in {', '.join(result['conflicts'])}: {sent}", False
    if result["result"] == "queued":
        return f"queued to land (position {result['position']} in the merge queue)", True
    return "approved (nothing to land)", True


@admin.register(Task)
class ReviewTaskAdmin(TaskAdmin):
    actions = [*TaskAdmin.actions, "approve_tasks"]

    def get_readonly_fields(self, request: HttpRequest, obj: Task | None = None) -> Any:
        fields = super().get_readonly_fields(request, obj)
        return fields if obj is None else (*fields, "review")

    @admin.action(description="Approve and land (in review → done)")
    def approve_tasks(self, request: HttpRequest, qs: QuerySet[Task]) -> None:
        who = request.user.get_username()
        self._each(
            request, qs, "Approved", lambda tid: _approval_text(service.approve(tid, by=who))
        )

    def finish(self, request: HttpRequest, task_id: str, override: dict[str, str]) -> Any:
        """A task in review is approved (its change lands); others just move to done."""
        if store.get_task(task_id).status != Status.IN_REVIEW:
            return super().finish(request, task_id, override)
        who = request.user.get_username()
        return _approval_text(service.approve(task_id, by=who, human_override=override))

    @admin.display(description="review")
    def review(self, obj: Task) -> SafeString:
        try:
            context: dict[str, Any] = {"body": review.review_of(obj, max_bytes=400_000)}
        except ClawbooError as exc:
            context = {"error": exc.detail}
        return render_to_string("admin/board/task/review.html", context)


class _ReadOnly(admin.ModelAdmin):
    """The merge queue's rows, for operators to read: the queue's job is their only
    writer (:mod:`worktrees.queue`), so the admin changes none of them."""

    actions = None

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(QueuedLanding)
class QueuedLandingAdmin(_ReadOnly):
    list_display = ("task", "repo_path", "base_branch", "state", "rounds", "rebases", "queued_at")
    list_filter = ("state",)
    search_fields = ("task__id", "repo_path")


@admin.register(MergeBatch)
class MergeBatchAdmin(_ReadOnly):
    list_display = ("id", "repo_path", "base_branch", "state", "gate_runs", "started_at")
    list_filter = ("state",)
