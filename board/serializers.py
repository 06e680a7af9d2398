"""Shapes of the board's REST bodies for the OpenAPI document (drf-spectacular).

The views validate through the data layer; these serializers describe the bodies
(the task body itself is ``Task.as_dict``, the same shape the events carry).
"""

from __future__ import annotations

from drf_spectacular.utils import inline_serializer
from rest_framework import serializers

from board.transitions import Status

RouteSerializer = inline_serializer(
    "Route",
    {
        "agent": serializers.CharField(
            required=False, allow_null=True, help_text="an agent of the task's team"
        ),
        "runtime": serializers.CharField(required=False, allow_null=True),
        "labels": serializers.ListField(
            child=serializers.CharField(),
            required=False,
            allow_null=True,
            help_text="every one of these must be among the agent's labels",
        ),
    },
    allow_null=True,
    required=False,
    help_text="who may take the task; null: any agent of its team",
)


class TaskSerializer(serializers.Serializer):
    id = serializers.CharField()
    title = serializers.CharField()
    description = serializers.CharField()
    goal = serializers.CharField()
    # The metaclass moves declared fields off the class, so this does not shadow
    # Serializer.context at run time; only the type checker sees the name clash.
    context = serializers.CharField()  # type: ignore[assignment]
    team = serializers.CharField()
    status = serializers.ChoiceField(choices=Status.choices)
    priority = serializers.IntegerField()
    labels = serializers.ListField(child=serializers.CharField())
    metadata = serializers.DictField()
    input = serializers.JSONField(allow_null=True)
    output = serializers.JSONField(allow_null=True)
    error = serializers.CharField(allow_null=True)
    feedback = serializers.CharField(allow_null=True)
    assignee_agent_id = serializers.CharField(allow_null=True)
    assignee_runtime = serializers.CharField(allow_null=True)
    created_by_agent_id = serializers.CharField(allow_null=True)
    route = RouteSerializer
    parent_task_id = serializers.CharField(allow_null=True)
    attempts = serializers.IntegerField()
    max_attempts = serializers.IntegerField(allow_null=True)
    abandonments = serializers.IntegerField()
    lease_until = serializers.DateTimeField(allow_null=True)
    lease_duration_ms = serializers.IntegerField(allow_null=True)
    worktree_ref = serializers.CharField(allow_null=True)
    branch_ref = serializers.CharField(allow_null=True)
    scheduled_by = serializers.CharField()
    file_mutating = serializers.BooleanField()
    verification = serializers.DictField(allow_null=True)
    cost = serializers.DictField()
    dropped = serializers.BooleanField()
    revision = serializers.IntegerField()
    incarnation_id = serializers.CharField()
    depends_on = serializers.ListField(child=serializers.CharField())
    unmet_deps = serializers.IntegerField(
        help_text="dependencies not done when this body was rendered"
    )
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    completed_at = serializers.DateTimeField(allow_null=True)


class TaskCreateSerializer(serializers.Serializer):
    title = serializers.CharField(max_length=500)
    description = serializers.CharField(required=False, max_length=20_000)
    goal = serializers.CharField(required=False)
    context = serializers.CharField(required=False)  # type: ignore[assignment]
    team = serializers.CharField(required=False, default="default")
    status = serializers.ChoiceField(choices=["todo", "backlog"], required=False)
    priority = serializers.IntegerField(required=False, min_value=-1_000_000, max_value=1_000_000)
    labels = serializers.ListField(child=serializers.CharField(max_length=64), required=False)
    metadata = serializers.DictField(required=False)
    input = serializers.JSONField(required=False)
    parent_task_id = serializers.CharField(required=False, allow_null=True)
    file_mutating = serializers.BooleanField(required=False, default=True)
    max_attempts = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    id = serializers.CharField(required=False, max_length=128)
    depends_on = serializers.ListField(child=serializers.CharField(), required=False)
    created_by_agent_id = serializers.CharField(required=False, allow_null=True)
    route = RouteSerializer


class TaskPatchSerializer(serializers.Serializer):
    title = serializers.CharField(required=False, max_length=500)
    description = serializers.CharField(required=False)
    priority = serializers.IntegerField(required=False)
    labels = serializers.ListField(child=serializers.CharField(), required=False)
    metadata = serializers.DictField(required=False)
    assignee_agent_id = serializers.CharField(required=False, allow_null=True)
    route = RouteSerializer


OverrideSerializer = inline_serializer(
    "HumanOverride",
    {
        "by": serializers.CharField(
            required=False,
            help_text="recorded as the authenticated user; if given, it must be that username",
        ),
        "reason": serializers.CharField(),
    },
    required=False,
    help_text="an audited override of a failed verification verdict (optional)",
)
ClaimedSerializer = inline_serializer(
    "Claimed", {"task": TaskSerializer(), "ticket": serializers.CharField()}
)
OutcomeSerializer = inline_serializer(
    "WriteOutcome",
    {
        "outcome": serializers.ChoiceField(choices=["recorded", "unchanged", "declined"]),
        "reason": serializers.CharField(required=False),
        "status": serializers.CharField(required=False),
        "task": TaskSerializer(),
    },
)


class ExecutionSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    task_id = serializers.CharField()
    agent_id = serializers.CharField()
    runtime = serializers.CharField(allow_null=True)
    attempt = serializers.IntegerField()
    status = serializers.CharField()
    tokens_in = serializers.IntegerField()
    tokens_out = serializers.IntegerField()
    cost_cents = serializers.IntegerField()
    git_before = serializers.CharField(allow_null=True)
    git_after = serializers.CharField(allow_null=True)
    error = serializers.CharField(allow_null=True)
    error_class = serializers.CharField(
        allow_null=True,
        help_text="why a failed run failed: rate_limited, timeout, auth, provider_error, "
        "environment, context_overflow, invalid_args, budget, breaker, cancelled, unknown",
    )
    recovery_tombstone = serializers.CharField(allow_null=True)
    started_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


class CommentSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    author = serializers.CharField()
    body = serializers.CharField()
    created_at = serializers.DateTimeField()
