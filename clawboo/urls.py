from __future__ import annotations

from django.contrib import admin
from django.contrib.auth.views import LogoutView
from django.templatetags.static import static
from django.urls import URLPattern, URLResolver, include, path, re_path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularSwaggerView

from board import api as board_api
from board.usage import usage_page
from board.views import BoardLoginView, board_page
from core.api import registry_views, repository_views, token_views
from core.api.errors import api_404
from core.api.schema import SchemaView
from executor import api as executor_api
from ops import budgets
from ops.health import healthz
from ops.metrics import metrics_view
from routines import api as routine_api
from routines import views as routine_views
from worktrees import api as worktree_api
from worktrees import forge_api

board_patterns: list[URLPattern | URLResolver] = [
    # First: every worker polls it, and Django tries patterns in order.
    path("claim-next", board_api.ClaimNextView.as_view()),
    path("tasks", board_api.TaskListView.as_view(), name="tasks"),
    path("counts", board_api.TaskCountsView.as_view()),
    # The board's columns with the merge queues beside them (worktrees stands above board).
    path("columns", worktree_api.BoardColumnsView.as_view()),
    path("scope-waits", board_api.ScopeWaitsView.as_view()),
    path("tasks/<str:task_id>", board_api.TaskDetailView.as_view(), name="task"),
    path("tasks/<str:task_id>/transition", board_api.TransitionView.as_view()),
    path("tasks/<str:task_id>/claim", board_api.ClaimView.as_view()),
    path("tasks/<str:task_id>/approval", board_api.TaskApprovalView.as_view()),
    path("tasks/<str:task_id>/heartbeat", board_api.HeartbeatView.as_view()),
    path("tasks/<str:task_id>/release", board_api.ReleaseView.as_view()),
    path("tasks/<str:task_id>/complete", board_api.CompleteView.as_view()),
    path("tasks/<str:task_id>/fail", board_api.FailView.as_view()),
    path("tasks/<str:task_id>/verdict", board_api.VerdictView.as_view()),
    path("tasks/<str:task_id>/deps", board_api.DepsView.as_view()),
    path("tasks/<str:task_id>/deps/<str:dep_id>", board_api.DepDetailView.as_view()),
    path("tasks/<str:task_id>/cancel-dependents", board_api.CancelDependentsView.as_view()),
    path("tasks/<str:task_id>/comments", board_api.CommentsView.as_view()),
    path("tasks/<str:task_id>/executions", board_api.ExecutionsView.as_view()),
    path("tasks/<str:task_id>/trace", board_api.TaskTraceView.as_view()),
    path(
        "tasks/<str:task_id>/executions/<str:execution_id>/log",
        board_api.ExecutionLogView.as_view(),
    ),
    path(
        "tasks/<str:task_id>/executions/<str:execution_id>/steps",
        board_api.ExecutionStepsView.as_view(),
    ),
    path(
        "tasks/<str:task_id>/executions/<str:execution_id>/stalled",
        board_api.ExecutionStalledView.as_view(),
    ),
    path(
        "tasks/<str:task_id>/executions/<str:execution_id>/usage",
        executor_api.ExecutionUsageView.as_view(),
    ),
    path(
        "tasks/<str:task_id>/executions/<str:execution_id>/close",
        executor_api.ExecutionCloseView.as_view(),
    ),
    path("tasks/<str:task_id>/prompt", executor_api.RunPromptView.as_view()),
    path("tasks/<str:task_id>/workspace", worktree_api.WorkspaceView.as_view()),
    path("tasks/<str:task_id>/workspace/pause", worktree_api.WorkspacePauseView.as_view()),
    path("tasks/<str:task_id>/workspace/resume", worktree_api.WorkspaceResumeView.as_view()),
    path("tasks/<str:task_id>/workspace/complete", worktree_api.WorkspaceCompleteView.as_view()),
    path("tasks/<str:task_id>/workspace/review", worktree_api.WorkspaceReviewView.as_view()),
    path("tasks/<str:task_id>/workspace/handoff", worktree_api.WorkspaceHandoffView.as_view()),
    path("tasks/<str:task_id>/review", worktree_api.ReviewView.as_view()),
    path("tasks/<str:task_id>/approve", worktree_api.ApproveView.as_view()),
    path("merge-queue", worktree_api.MergeQueuesView.as_view()),
    path("tasks/<str:task_id>/submit", worktree_api.SubmitView.as_view()),
    path("tasks/<str:task_id>/request-changes", worktree_api.RequestChangesView.as_view()),
    path("reconcile", board_api.ReconcileView.as_view()),
    path("runs/stalled", board_api.StalledRunsView.as_view()),
]

api_patterns: list[URLPattern | URLResolver] = [
    path("board/", include(board_patterns)),  # first: the agents' hot paths
    path("whoami", registry_views.WhoAmIView.as_view()),
    path("auth/token", token_views.TokenView.as_view()),
    path("workers/beat", registry_views.WorkerBeatView.as_view()),
    path("approvals", board_api.ToolApprovalsView.as_view()),
    path("approvals/<str:approval_id>", board_api.ToolApprovalDetailView.as_view()),
    path("teams", registry_views.TeamsView.as_view()),
    path("teams/<str:team_id>", registry_views.TeamDetailView.as_view()),
    path("agents", registry_views.AgentsView.as_view()),
    path("agents/<str:agent_id>", registry_views.AgentDetailView.as_view()),
    path("repositories", repository_views.RepositoriesView.as_view()),
    path("repositories/<str:repo_id>", repository_views.RepositoryDetailView.as_view()),
    path("repositories/<str:repo_id>/queue", worktree_api.RepositoryQueueView.as_view()),
    path("repositories/<str:repo_id>/forge/webhook", forge_api.ForgeWebhookView.as_view()),
    # The contract's spelling (API.md) of the same endpoint.
    path("forge/<str:repo_id>/webhook", forge_api.ContractForgeWebhookView.as_view()),
    path("agents/<str:agent_id>/pause", board_api.AgentPauseView.as_view()),
    path("agents/<str:agent_id>/resume", board_api.AgentResumeView.as_view()),
    path("teams/<str:team_id>/chat", registry_views.TeamChatView.as_view()),
    path("teams/<str:team_id>/events", registry_views.TeamEventsView.as_view()),
    path("worktrees/gc", worktree_api.GcView.as_view()),
    path("budgets", budgets.BudgetListView.as_view()),
    path("budgets/<str:budget_id>", budgets.BudgetDetailView.as_view()),
    path("budgets/<str:budget_id>/resume", budgets.BudgetResumeView.as_view()),
    path("routines", routine_api.RoutineListView.as_view()),
    path("routines/<str:routine_id>", routine_api.RoutineDetailView.as_view()),
    path("routines/<str:routine_id>/pause", routine_api.RoutinePauseView.as_view()),
    path("routines/<str:routine_id>/resume", routine_api.RoutineResumeView.as_view()),
    path("routines/<str:routine_id>/run-now", routine_api.RoutineRunNowView.as_view()),
    path("schedules", routine_api.ScheduleListView.as_view()),
    path("schedules/<str:schedule_id>", routine_api.ScheduleDetailView.as_view()),
    path("schedules/<str:schedule_id>/run", routine_api.ScheduleRunView.as_view()),
    path("schema/", SchemaView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    re_path(r"^.*$", api_404),
]

# Django's error pages; under /api/ each is the JSON envelope (core.api.errors).
handler400 = "core.api.errors.bad_request"
handler403 = "core.api.errors.permission_denied"
handler404 = "core.api.errors.page_not_found"
handler500 = "core.api.errors.server_error"

urlpatterns = [
    path("", RedirectView.as_view(url="/board/", permanent=False)),
    # Browsers ask for /favicon.ico on pages that name no icon (the admin's).
    path("favicon.ico", RedirectView.as_view(url=static("board/favicon.svg"), permanent=False)),
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics_view, name="metrics"),
    path("board/", board_page, name="board"),
    path("board/routines/", routine_views.routines_page, name="routines"),
    path("board/usage/", usage_page, name="usage"),
    path("board/routines/new/", routine_views.new_routine, name="routine-new"),
    path("board/routines/<str:routine_id>/edit/", routine_views.edit_routine, name="routine-edit"),
    path(
        "board/routines/gateway/<str:job_id>/delete/",
        routine_views.delete_gateway_job,
        name="gateway-job-delete",
    ),
    path(
        "board/routines/gateway/<str:job_id>/<str:move>/",
        routine_views.move_gateway_job,
        name="gateway-job-move",
    ),
    path(
        "board/routines/<str:routine_id>/delete/",
        routine_views.delete_routine,
        name="routine-delete",
    ),
    path(
        "board/routines/<str:routine_id>/<str:move>/",
        routine_views.move_routine,
        name="routine-move",
    ),
    path("board/login/", BoardLoginView.as_view(), name="login"),
    path("board/logout/", LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/", include(api_patterns)),
]
