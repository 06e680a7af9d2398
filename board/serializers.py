"""Shapes of the board's REST bodies for the OpenAPI document (drf-spectacular).

A request body's serializer names the keys its view accepts (``json_object``) and
the schema documents; the data layer checks the values. The task body itself is
``Task.as_dict``, the same shape the events carry.
"""

from __future__ import annotations

from typing import Any, get_args

from drf_spectacular.utils import inline_serializer
from rest_framework import serializers

from board.checks import CREATE_STATUSES
from board.judgement import SEVERITIES
from board.models import Verdict
from board.repository import Source
from board.runs import StepKind, StepStatus
from board.store.tickets import OUTCOMES
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


class ForgeCheckSerializer(serializers.Serializer):
    name = serializers.CharField()
    state = serializers.ChoiceField(choices=["pending", "success", "failure"])
    conclusion = serializers.CharField(allow_null=True, help_text="the forge's own word")
    url = serializers.CharField(allow_null=True)


class PullRequestSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    url = serializers.CharField()
    state = serializers.ChoiceField(
        choices=["open", "closed", "merged"], help_text="as the forge last said"
    )
    draft = serializers.BooleanField()
    branch = serializers.CharField(help_text="clawboo/task-<id>")
    base = serializers.CharField()
    head_sha = serializers.CharField()
    checks = inline_serializer(
        "PullRequestChecks",
        {
            "state": serializers.ChoiceField(
                choices=["none", "pending", "success", "failure"],
                help_text="pending: the task waits in review, 'checks running'",
            ),
            "runs": ForgeCheckSerializer(many=True),
        },
    )
    fix_rounds = serializers.IntegerField(help_text="rounds sent back for failed checks")


class ApprovalSerializer(serializers.Serializer):
    state = serializers.ChoiceField(choices=["required", "approved", "denied", "expired"])
    revision = serializers.IntegerField(
        allow_null=True, help_text="the task revision the person saw when they decided"
    )
    by = serializers.CharField(allow_null=True, help_text="the user who decided")
    at = serializers.DateTimeField(allow_null=True)
    reason = serializers.CharField(allow_null=True)


class GateSerializer(serializers.Serializer):
    command = serializers.CharField(allow_null=True)
    exit_code = serializers.IntegerField(allow_null=True)
    duration_ms = serializers.IntegerField()
    timed_out = serializers.BooleanField()
    output_tail = serializers.CharField()


class FindingSerializer(serializers.Serializer):
    severity = serializers.ChoiceField(
        choices=SEVERITIES,
        help_text="security, crash, data_loss, wrong_algorithm, missing_ac block; "
        "style, perf, other are debt",
    )
    title = serializers.CharField()
    body = serializers.CharField(required=False)
    file = serializers.CharField(required=False)
    line = serializers.IntegerField(required=False)
    confidence = serializers.FloatField(required=False)


class ReviewerSerializer(serializers.Serializer):
    agent = serializers.CharField()
    runtime = serializers.CharField()
    model = serializers.CharField(allow_null=True)


class AttemptSerializer(serializers.Serializer):
    gate = GateSerializer(allow_null=True)
    findings = FindingSerializer(many=True)
    at = serializers.DateTimeField()


class VerificationSerializer(serializers.Serializer):
    verdict = serializers.ChoiceField(choices=Verdict.choices, allow_null=True)
    evidence = serializers.CharField(allow_null=True)
    at = serializers.DateTimeField(allow_null=True)
    human_override = serializers.DictField(allow_null=True)
    gate = GateSerializer(allow_null=True)
    findings = FindingSerializer(many=True)
    reviewer = ReviewerSerializer(allow_null=True)
    attempts = AttemptSerializer(many=True)


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
    repository = serializers.CharField(
        allow_null=True, help_text="id of the team's registered repository it works in"
    )
    touches = serializers.ListField(
        child=serializers.CharField(),
        allow_null=True,
        help_text="the path globs the task says it changes, or null",
    )
    scope = serializers.ListField(
        child=serializers.CharField(),
        allow_null=True,
        help_text="what a claim compares: touches, else the paths its last attempt "
        "changed (recorded when the attempt settled); null: none, never held back",
    )
    verification = VerificationSerializer(allow_null=True)
    pull_request = PullRequestSerializer(
        allow_null=True,
        help_text="the task's pull request on its repository's forge (landing_mode "
        "pull_request); null: none",
    )
    max_run_cents = serializers.IntegerField(allow_null=True)
    cost = serializers.DictField(
        help_text="{cents, tokens, tree_cents, tree_tokens}: this task's runs (every "
        "attempt), and its tree's (itself and every descendant), live while runs go"
    )
    approval = ApprovalSerializer(
        allow_null=True,
        help_text="approval before work (null: none needed); no claim takes the task "
        "until its state is approved",
    )
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


# Create and edit take these two fields alike.
def _repository_field() -> serializers.CharField:
    return serializers.CharField(
        required=False,
        allow_null=True,
        help_text="id of a registered repository of the task's team (another team's: 400); "
        "metadata.repo_path from staff resolves to (or registers) one, from anyone else it "
        "must be exactly a registered repository's path (else 400)",
    )


def _touches_field() -> serializers.ListField:
    return serializers.ListField(
        child=serializers.CharField(max_length=256),
        required=False,
        allow_null=True,
        max_length=64,
        help_text="repository-relative path globs the task changes (its scope: '*', '?', "
        "'[...]' within a segment, '**' across segments; a glob naming a directory covers "
        "what is under it); no claim starts it while a task of its repository whose scope "
        "overlaps is in progress or waiting to land (409 scope_busy). null or []: none",
    )


class TaskCreateSerializer(serializers.Serializer):
    title = serializers.CharField(max_length=500)
    description = serializers.CharField(required=False, max_length=20_000)
    goal = serializers.CharField(required=False)
    context = serializers.CharField(required=False)  # type: ignore[assignment]
    team = serializers.CharField(required=False, default="default")
    status = serializers.ChoiceField(choices=list(CREATE_STATUSES), required=False)
    priority = serializers.IntegerField(required=False, min_value=-1_000_000, max_value=1_000_000)
    labels = serializers.ListField(child=serializers.CharField(max_length=64), required=False)
    metadata = serializers.DictField(required=False)
    input = serializers.JSONField(required=False)
    parent_task_id = serializers.CharField(required=False, allow_null=True)
    file_mutating = serializers.BooleanField(required=False, default=True)
    repository = _repository_field()
    max_attempts = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    max_run_cents = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    id = serializers.CharField(required=False, max_length=128)
    depends_on = serializers.ListField(child=serializers.CharField(), required=False)
    created_by_agent_id = serializers.CharField(required=False, allow_null=True)
    route = RouteSerializer
    touches = _touches_field()


class TaskPatchSerializer(serializers.Serializer):
    title = serializers.CharField(required=False, max_length=500)
    description = serializers.CharField(required=False)
    priority = serializers.IntegerField(required=False)
    labels = serializers.ListField(child=serializers.CharField(), required=False)
    metadata = serializers.DictField(required=False)
    assignee_agent_id = serializers.CharField(required=False, allow_null=True)
    repository = _repository_field()
    max_run_cents = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    if_revision = serializers.IntegerField(
        required=False,
        min_value=0,
        help_text="the revision the editor saw: if the task moved on since, nothing is "
        "written and the answer is 409 conflict (reason stale_revision) with the task "
        "as it is now",
    )
    route = RouteSerializer
    touches = _touches_field()


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


# One class (component RunRepository): the claim's answer and claim-next's with its
# run both name it, and two inline serializers of one name would be two components.
class RunRepositorySerializer(serializers.Serializer):
    """The repository a run uses: its registered id (null: none), the remote a
    worker clones, the base branch."""

    id = serializers.CharField(allow_null=True)
    remote = serializers.CharField(allow_null=True)
    base_branch = serializers.CharField(allow_blank=True)


def _task_run_repository() -> Any:
    # Inline: a serializer class cannot declare a field named "source" (a Field's own
    # attribute).
    return inline_serializer(
        "TaskRunRepository",
        {
            "id": serializers.CharField(allow_null=True),
            "remote": serializers.CharField(allow_null=True),
            "base_branch": serializers.CharField(allow_blank=True),
            "source": serializers.ChoiceField(
                choices=list(get_args(Source)),
                help_text="why the run works there, in run_repository's order: the task's "
                "own repository, its metadata's repo_path or repo_remote, its assignee's "
                "default repository (settings.repository), the assignee's repo_path or "
                "repo_remote; none: a scratch directory",
            ),
        },
        help_text="the repository the task's run will work in, as its claim would answer "
        "(board.repository.run_repository, its assignee's default when it names none)",
    )


class TaskReadSerializer(TaskSerializer):
    run_repository = _task_run_repository()


def _run_repository() -> Any:
    return RunRepositorySerializer(
        help_text="the repository the run uses (board.repository.run_repository): "
        "its registered id (null: none), the remote a worker clones, the base branch",
    )


ClaimedSerializer = inline_serializer(
    "Claimed",
    {
        "task": TaskSerializer(),
        "ticket": serializers.CharField(),
        "repository": _run_repository(),
    },
)
OutcomeSerializer = inline_serializer(
    "WriteOutcome",
    {
        "outcome": serializers.ChoiceField(choices=list(OUTCOMES)),
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
    run = serializers.IntegerField(
        help_text="the run's number on its task (1: its first run; fix rounds count)"
    )
    status = serializers.CharField()
    tokens_in = serializers.IntegerField()
    tokens_out = serializers.IntegerField()
    cache_read = serializers.IntegerField()
    cache_write = serializers.IntegerField()
    cost_cents = serializers.IntegerField(help_text="cost_millicents rounded half up")
    cost_millicents = serializers.IntegerField(
        help_text="the run's cost in thousandths of a cent (a run under half a cent counts)"
    )
    cost_status = serializers.ChoiceField(choices=["reported", "estimated", "unknown"])
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
    stalled_at = serializers.DateTimeField(
        allow_null=True,
        help_text="when the run was seen silent for CLAWBOO_STALL_MS (null: never)",
    )


ClaimedNextSerializer = inline_serializer(
    "ClaimedNext",
    {
        "task": TaskSerializer(),
        "ticket": serializers.CharField(),
        "repository": _run_repository(),
        "execution": ExecutionSerializer(
            required=False,
            help_text="with open_run: the run the claim opened in its own write (as POST "
            "…/executions answers it)",
        ),
    },
)


class StepSerializer(serializers.Serializer):
    seq = serializers.IntegerField(help_text="1, 2, ... within the run, in stream order")
    execution_id = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=StepKind.values)
    name = serializers.CharField(help_text="the tool, command or path; 'model' for a turn")
    status = serializers.ChoiceField(choices=StepStatus.values)
    arguments = serializers.DictField(help_text="secret-looking values masked (***)")
    detail = serializers.CharField(help_text="the result's or error's text (bounded)")
    started_at = serializers.DateTimeField(allow_null=True)
    duration_ms = serializers.IntegerField(allow_null=True)
    tokens_in = serializers.IntegerField(allow_null=True)
    tokens_out = serializers.IntegerField(allow_null=True)
    cost_millicents = serializers.IntegerField(allow_null=True)
    model = serializers.CharField(allow_null=True)


class CommentSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    author = serializers.CharField()
    author_name = serializers.CharField(
        help_text="the author as people read it: a remote host's machine token "
        "(author machine-<hash>) as '<host> (host)'; anyone else as author"
    )
    body = serializers.CharField()
    created_at = serializers.DateTimeField()
