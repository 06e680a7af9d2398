from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from board import api as board_api
from clawboo.api import registry_views

board_patterns = [
    path("tasks", board_api.TaskListView.as_view(), name="tasks"),
    path("tasks/<str:task_id>", board_api.TaskDetailView.as_view(), name="task"),
    path("tasks/<str:task_id>/transition", board_api.TransitionView.as_view()),
    path("tasks/<str:task_id>/claim", board_api.ClaimView.as_view()),
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
    path("claim-next", board_api.ClaimNextView.as_view()),
    path("reconcile", board_api.ReconcileView.as_view()),
]

api_patterns = [
    path("teams", registry_views.TeamsView.as_view()),
    path("agents", registry_views.AgentsView.as_view()),
    path("agents/<str:agent_id>", registry_views.AgentDetailView.as_view()),
    path("board/", include(board_patterns)),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
]

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include(api_patterns)),
]
