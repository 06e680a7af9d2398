"""REST views of a task's workspace and of worktree GC (``shared/API.md`` Workspaces)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from board import api as board_api
from board import store
from board.access import (
    agent_side_holds,
    audited_override,
    refuse_settling_its_own_run,
    refuse_unjudged_done,
    visible_task,
)
from board.api import task_body
from board.models import Task, WorkspaceStatus
from board.repository import run_repository
from board.serializers import OverrideSerializer, TaskSerializer
from core import repositories, server_commands
from core.api.access import act_as, act_as_assignee, scoped, visible
from core.api.auth import run_task
from core.api.bodies import BodySpec, json_object
from core.api.idempotency import idempotent
from core.api.permissions import RoleTable, StaffOnly, principal
from core.api.schema import with_errors
from core.errors import ValidationFailed
from core.models import Repository
from core.roles import PersonRequired
from worktrees import handoff, intake, review, service
from worktrees import queue as merge_queue

WorkspaceSerializer = inline_serializer(
    "Workspace",
    {
        "task_id": serializers.CharField(),
        "repo_path": serializers.CharField(),
        "worktree_path": serializers.CharField(),
        "branch": serializers.CharField(),
        "base_sha": serializers.CharField(),
        "base_commit": serializers.CharField(),
        "status": serializers.ChoiceField(choices=WorkspaceStatus.choices),
        "resume_state": serializers.DictField(required=False),
    },
)
_ANY = inline_serializer("WorkspaceResult", {"result": serializers.CharField(required=False)})


ProvisionBody = inline_serializer(
    "Provision",
    {
        "repository": serializers.CharField(
            required=False,
            help_text="id of a registered repository of the task's team "
            "(default: the repository its run uses, as its claim answers it); the "
            "agent side: that one only (else 403 person_required)",
        ),
        "repo_path": serializers.CharField(
            required=False,
            help_text="staff: any path inside CLAWBOO_REPO_ROOTS (resolved, and "
            "registered for the task's team if need be); anyone else: exactly the "
            "path of a registered repository of the task's team, else 400",
        ),
        "base_ref": serializers.CharField(
            required=False,
            help_text="where the checkout starts (default: the tip of the task's base "
            "branch); people only: the agent side is 403 person_required",
        ),
        "base_sha": serializers.CharField(
            required=False, help_text="the same, as a commit; people only"
        ),
    },
)


class WorkspaceView(APIView):
    @extend_schema(
        operation_id="board_tasks_workspace_create",
        request=ProvisionBody,
        responses=with_errors(
            {201: WorkspaceSerializer},
            "not_found",
            "validation_error",
            "not_file_mutating",
            "conflict",
        ),
    )
    @idempotent
    def post(self, request: Request, task_id: str) -> Response:
        task = visible_task(request.user, task_id)
        agent_side_holds(request, task)
        body = json_object(request, ProvisionBody)
        repo = _named_repository(request, task, body)
        ws = service.provision_task_workspace(
            task_id, repo.path, base_ref=body.get("base_ref"), base_sha=body.get("base_sha")
        )
        return Response(service.workspace_as_dict(ws), status=201)

    @extend_schema(
        operation_id="board_tasks_workspace_retrieve",
        responses=with_errors({200: WorkspaceSerializer}, "not_found"),
    )
    def get(self, request: Request, task_id: str) -> Response:
        visible_task(request.user, task_id)
        return Response(_jsonable(service.workspace_state(task_id)))


def _named_repository(request: Request, task: Task, body: dict[str, Any]) -> Repository:
    """The registered repository of the task's team a provision names: by id, by a
    staff caller's path (resolved or registered), by a registered repository's exact
    path, or else the one its run uses (:func:`board.repository.run_repository`: the
    task's, else what its metadata or its agent names). Nothing here looks at a
    non-staff caller's path.

    Where a task's work runs, and so where it lands, is the server's answer, which a
    person approved (GOVERNANCE §5: the repository) and the claim's answer carries:
    the agent side makes its checkout in that repository only, whether or not the
    task names one (403 ``person_required``, nothing written); another is a person's
    choice."""
    named: Repository | None = None
    if body.get("repository") is not None:
        named = repositories.of_team(body["repository"], task.team_id, "repository")
    elif "repo_path" in body:
        named = server_commands.repository_at(
            request.user, task.team_id, body["repo_path"], "repo_path"
        )
    elif task.repository_id is not None:
        return repositories.of_team(task.repository_id, task.team_id, "repository")
    answer = run_repository(task, register=False).registered
    caller = principal(request)
    if named is not None and caller.agent_side and (answer is None or answer.id != named.id):
        raise PersonRequired(
            f"{caller.describe()} may not make task {task.id!r}'s checkout in repository "
            f"{named.id!r}: its run's repository is "
            f"{answer.id if answer is not None else 'none'!r} (the server's answer, as "
            "its claim says), and where its work runs is a person's choice (GOVERNANCE §6)",
            principal=caller.kind,
            verb="POST /api/board/tasks/{task_id}/workspace with another repository",
        )
    if named is not None:
        return named
    if answer is None:
        raise ValidationFailed("repository", "is required: the task's run has no repository")
    return answer


def _jsonable(value: Any) -> Any:
    if hasattr(value, "as_dict"):
        return value.as_dict()
    if hasattr(value, "__dataclass_fields__"):
        from dataclasses import asdict

        return asdict(value)
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "pk") and hasattr(value, "_meta"):
        return service.workspace_as_dict(value)
    return value


def _operation(
    name: str, fn: Any, *, body: BodySpec = None, settles: bool = False
) -> type[APIView]:
    """``settles``: the operation moves the task on (done or in review), which a
    run's credential never does to its own task (the executor does, after its judge)."""

    class OperationView(APIView):
        @extend_schema(
            operation_id=f"board_tasks_workspace_{name}",
            request=body,
            responses=with_errors({200: _ANY}, "not_found", "conflict", "validation_error"),
        )
        @idempotent
        def post(self, request: Request, task_id: str) -> Response:
            task = visible_task(request.user, task_id)
            agent_side_holds(request, task)
            if settles:
                refuse_settling_its_own_run(run_task(request.auth), task_id)
                refuse_unjudged_done(principal(request), task, "complete the worktree of")
            # The workspace the path names, before the body: a task without one is a
            # 404 whatever was sent, never a 400 for a body that could not be used.
            store.get_workspace(task_id)
            data = json_object(request, body)
            result = fn(task_id) if body is None else fn(task_id, data)
            return Response(_jsonable(result))

    OperationView.__name__ = f"Workspace{name.title()}View"
    return OperationView


WorkspacePauseView = _operation("pause", service.pause)
WorkspaceResumeView = _operation("resume", service.resume)
WorkspaceCompleteView = _operation("complete", service.complete, settles=True)
WorkspaceReviewView = _operation("review", service.review)
# The handoff's keys are handoff.FIELDS; their values are checked by validate_handoff.
HandoffBody = inline_serializer(
    "Handoff",
    {name: serializers.JSONField(required=name == "handoffFrom") for name in handoff.FIELDS},
)
WorkspaceHandoffView = _operation("handoff", service.write_handoff, body=HandoffBody)


GcBody = inline_serializer(
    "Gc",
    {
        "max_age_hours": serializers.FloatField(required=False, min_value=0),
        "keep": serializers.IntegerField(required=False, min_value=0),
    },
)


class GcView(APIView):
    permission_classes = [RoleTable, StaffOnly]

    @extend_schema(
        operation_id="worktrees_gc",
        request=GcBody,
        responses=with_errors(
            {
                200: inline_serializer(
                    "GcResult",
                    {
                        "reaped": serializers.ListField(),
                        "skipped": serializers.ListField(),
                        "failures": serializers.ListField(),
                    },
                )
            },
            "forbidden",
            "validation_error",
        ),
    )
    def post(self, request: Request) -> Response:
        body = json_object(request, GcBody)
        return Response(_jsonable(service.gc(**body)))


# --- review: see the work, send it back, approve it -------------------------------

_FILES = inline_serializer(
    "ReviewFile",
    many=True,
    fields={
        "path": serializers.CharField(),
        "insertions": serializers.IntegerField(allow_null=True),
        "deletions": serializers.IntegerField(allow_null=True),
        "binary": serializers.BooleanField(),
        "patch": serializers.CharField(allow_null=True, help_text="unified diff, capped"),
        "truncated": serializers.BooleanField(),
    },
)
ReviewSerializer = inline_serializer(
    "Review",
    {
        "task_id": serializers.CharField(),
        "status": serializers.CharField(),
        "title": serializers.CharField(),
        "feedback": serializers.CharField(allow_null=True),
        "workspace": serializers.DictField(allow_null=True),
        "diff": inline_serializer(
            "ReviewDiff",
            {
                "source": serializers.ChoiceField(
                    choices=["checkout", "branch", "landed", "unavailable"], allow_null=True
                ),
                "stat": serializers.DictField(),
                "files": _FILES,
                "offset": serializers.IntegerField(),
                "next_offset": serializers.IntegerField(allow_null=True),
                "max_bytes": serializers.IntegerField(),
            },
        ),
        "verification": serializers.DictField(allow_null=True),
        "executions": serializers.ListField(child=serializers.DictField()),
        "cost": serializers.DictField(),
    },
)


class ReviewView(APIView):
    @extend_schema(
        operation_id="board_tasks_review",
        description=(
            "What a reviewer needs: the diff per file against the task's base (the "
            "system-of-record files left out; a retained checkout's uncommitted and "
            "untracked work included; a landed task's landing commit), the log tail, "
            "tokens and cost of each execution and in total, the verification verdict "
            "with its evidence, the branch and its base. The diff is paged by file "
            "(`offset`, `limit` ≤ 500, `next_offset` in the answer) and its patch text "
            "capped at `max_bytes` per page (≤ 2,000,000; a file past the cap comes "
            "with `truncated: true`); `path` asks for one file's whole patch."
        ),
        parameters=[
            OpenApiParameter("offset", int),
            OpenApiParameter("limit", int),
            OpenApiParameter("max_bytes", int),
            OpenApiParameter("path", str),
            OpenApiParameter("log_chars", int),
        ],
        responses=with_errors({200: ReviewSerializer}, "not_found", "validation_error"),
    )
    def get(self, request: Request, task_id: str) -> Response:
        task = visible_task(request.user, task_id)
        params = request.query_params
        return Response(
            review.review_of(
                task,
                path=params.get("path"),
                offset=params.get("offset"),
                limit=params.get("limit"),
                max_bytes=params.get("max_bytes"),
                log_chars=params.get("log_chars"),
            )
        )


ApproveBody = inline_serializer("Approve", {"human_override": OverrideSerializer})


class ApproveView(APIView):
    @extend_schema(
        operation_id="board_tasks_approve",
        description=(
            "Approve a task in review: its change lands on its base branch (one commit, "
            "or a merge by the repository's `clawboo.landing`), without the "
            "system-of-record files, then the task is done and its workspace cleaned. "
            "A change that no longer applies lands nothing: `result: conflict` with the "
            "paths, and the task goes back to its agent (or to blocked, by the "
            "repository's `clawboo.onConflict`). A repository whose `landing_mode` is "
            "`queue` puts the approval in its merge queue instead: `result: queued` with "
            "its `position`; the task stays in review until the queue lands it."
        ),
        request=ApproveBody,
        responses=with_errors(
            {
                200: inline_serializer(
                    "Approved",
                    {
                        "result": serializers.ChoiceField(
                            choices=[
                                "landed",
                                "nothing",
                                "approved",
                                "conflict",
                                "queued",
                                "merging",
                            ],
                            help_text="queued: in the repository's merge queue (landing_mode "
                            "queue); merging: handed to the repository's forge to merge "
                            "(landing_mode pull_request; the task is done once the forge "
                            "says merged)",
                        ),
                        "position": serializers.IntegerField(
                            required=False,
                            help_text="queued: its place in the repository's merge queue (1: next)",
                        ),
                        "pull_request": serializers.DictField(
                            required=False, help_text="the merged pull request (merged)"
                        ),
                        "commit": serializers.CharField(required=False, allow_null=True),
                        "base_branch": serializers.CharField(required=False),
                        "strategy": serializers.CharField(required=False),
                        "conflicts": serializers.ListField(required=False),
                        "sent": serializers.ChoiceField(
                            choices=["rework", "blocked"], required=False
                        ),
                        "push": inline_serializer(
                            "LandedPush",
                            {
                                "remote": serializers.CharField(),
                                "branch": serializers.CharField(),
                                "pushed": serializers.BooleanField(),
                                "error": serializers.CharField(required=False),
                            },
                            required=False,
                        ),
                        "task": TaskSerializer(),
                    },
                )
            },
            "not_found",
            "validation_error",
            "illegal_transition",
            "verification_required",
            "landing_failed",
            "checks_running",
            "checks_failed",
            "forge_failed",
        ),
    )
    @idempotent
    def post(self, request: Request, task_id: str) -> Response:
        visible_task(request.user, task_id)
        body = json_object(request, ApproveBody)
        result = service.approve(
            task_id,
            by=request.user.get_username(),
            human_override=audited_override(request, body.get("human_override")),
        )
        return Response({**result, "task": task_body(result["task"])})


RequestChangesBody = inline_serializer(
    "RequestChanges",
    {
        "feedback": serializers.CharField(
            max_length=20_000, required=False, help_text="required without comments"
        ),
        "agent_id": serializers.CharField(required=False),
        "comments": serializers.ListField(
            required=False,
            help_text="line comments [{file, line, body}], sent to the agent as file:line: text",
            child=inline_serializer(
                "LineComment",
                {
                    "file": serializers.CharField(),
                    "line": serializers.IntegerField(min_value=1),
                    "body": serializers.CharField(),
                },
            ),
        ),
    },
)


class RequestChangesView(APIView):
    @extend_schema(
        operation_id="board_tasks_request_changes",
        description=(
            "Send a task in review back with feedback and line comments ({file, line, "
            "body}): claimed again for its agent (or `agent_id`), kept as the task's "
            "`feedback` and a comment; the worktree and branch stay, and the agent's next "
            "run resumes them with the feedback (each comment as file:line) in TASK.md "
            "and AGENT_HANDOFF.json."
        ),
        request=RequestChangesBody,
        responses=with_errors(
            {200: TaskSerializer},
            "not_found",
            "validation_error",
            "illegal_transition",
            "claim_required",
            "landing_underway",
        ),
    )
    @idempotent
    def post(self, request: Request, task_id: str) -> Response:
        visible_task(request.user, task_id)
        body = json_object(request, RequestChangesBody)
        agent = body.get("agent_id")
        by = request.user.get_username()
        sent = store.request_changes(
            task_id,
            body.get("feedback"),
            by=by,
            agent_id=None if agent is None else act_as(request, agent),
            comments=body.get("comments"),
        )
        handoff.note_requested_changes(task_id, sent.task.feedback or "", by=by)
        return Response(task_body(sent.task))


SubmitBody = inline_serializer(
    "SubmitRemoteWork",
    {
        "ticket": serializers.CharField(help_text="the claim's ticket"),
        "branch": serializers.CharField(
            required=False,
            help_text="must be clawboo/task-<this task's id>; left out (with commit): the "
            "work in the task's checkout on the server is handed in as it is",
        ),
        "commit": serializers.CharField(required=False, help_text="the pushed tip, a full SHA"),
        "output": serializers.DictField(
            required=False,
            help_text="the run's summary, usage, host (kept on the task); its source, "
            "branch, commit and intake are the server's: repeated or left out (400 otherwise)",
        ),
    },
)


class SubmitView(APIView):
    @extend_schema(
        operation_id="board_tasks_submit",
        description=(
            "The agent side hands in a file-mutating task for the server's judge: a "
            "remote worker its branch `clawboo/task-<id>` pushed to the repository's "
            "remote (branch and commit), an agent working in the task's checkout on "
            "the server that checkout as it is (the ticket alone). The submission is "
            "kept on the task (`output.intake.state: pending`), the claim stays (its "
            "lease covers the intake), and the server takes it in, judges it and sends "
            "the task to review, or back to its builder to fix, off the request path "
            "(202)."
        ),
        request=SubmitBody,
        responses=with_errors(
            {202: TaskSerializer},
            "not_found",
            "validation_error",
            "conflict",
            "forbidden",
        ),
    )
    @idempotent
    def post(self, request: Request, task_id: str) -> Response:
        act_as_assignee(request, visible_task(request.user, task_id))
        body = json_object(request, SubmitBody)
        task = intake.submit(
            task_id, body["ticket"], body.get("branch"), body.get("commit"), body.get("output")
        )
        return Response(task_body(task), status=202)


# One class per component (drf-spectacular names a component once): fresh instances
# of it wherever a field needs one.
MergeQueueEntry = type(
    inline_serializer(
        "MergeQueueEntry",
        {
            "task_id": serializers.CharField(),
            "title": serializers.CharField(),
            "state": serializers.ChoiceField(choices=["queued", "returned"]),
            "position": serializers.IntegerField(help_text="1: next; 0: sent back, not in line"),
            "base_branch": serializers.CharField(),
            "rounds": serializers.IntegerField(),
            "approved_at": serializers.DateTimeField(),
            "queued_at": serializers.DateTimeField(),
            "reason": serializers.CharField(),
        },
    )
)


QUEUE_BATCH_FIELDS: dict[str, Any] = {
    "id": serializers.IntegerField(),
    "state": serializers.CharField(),
    "base_branch": serializers.CharField(),
    "base_before": serializers.CharField(),
    "target": serializers.CharField(),
    "tasks": serializers.ListField(child=serializers.CharField()),
    "running_gate": serializers.CharField(allow_null=True),
    "gate_runs": serializers.IntegerField(),
    "gates": serializers.ListField(child=serializers.DictField()),
    "culprits": serializers.ListField(child=serializers.CharField()),
    "started_at": serializers.DateTimeField(),
    "finished_at": serializers.DateTimeField(allow_null=True),
}
MergeQueueBatch = type(inline_serializer("MergeQueueBatch", QUEUE_BATCH_FIELDS))
MERGE_QUEUE_FIELDS: dict[str, Any] = {
    "repository": serializers.CharField(),
    "team": serializers.CharField(),
    "repo_path": serializers.CharField(),
    "length": serializers.IntegerField(),
    "entries": serializers.ListField(child=MergeQueueEntry()),
    "running": MergeQueueBatch(allow_null=True),
    "last_bisect": MergeQueueBatch(allow_null=True),
    "batches": serializers.ListField(
        child=MergeQueueBatch(),
        help_text=f"the last {merge_queue.RECENT_BATCHES} batches, newest first",
    ),
}
MergeQueueSerializer = type(inline_serializer("MergeQueue", MERGE_QUEUE_FIELDS))


class MergeQueuesView(APIView):
    @extend_schema(
        operation_id="board_merge_queues",
        description=(
            "The merge queues of the caller's repositories that land by `queue`: who "
            "waits and where (`position`), who was sent back to its builder, the batch "
            "running (its gate's commit), and the last batch that bisected."
        ),
        parameters=[OpenApiParameter("team", str)],
        responses=with_errors({200: serializers.ListSerializer(child=MergeQueueSerializer())}),
    )
    def get(self, request: Request) -> Response:
        team = request.query_params.get("team")
        return Response(merge_queues(request.user, [team] if team else None))


def merge_queues(user: Any, teams: list[str] | None) -> list[dict[str, Any]]:
    """The merge queues of the repositories of ``teams`` (None: all of them) that
    ``user`` can see, in three queries however many there are."""
    repos = scoped(user, Repository.objects.filter(landing_mode="queue"))
    if teams is not None:
        repos = repos.filter(team_id__in=teams)
    rows = list(repos.order_by("team_id", "id"))
    queues = merge_queue.queues_of([(r.path, r.team_id) for r in rows])
    return [{"repository": r.id, "team": r.team_id, **queues[r.path, r.team_id]} for r in rows]


class BoardColumnsView(board_api.BoardColumnsView):
    """``GET /api/board/columns`` with the team's merge queues beside its columns
    (the board's panel): the board's answer does not know the queue, which stands
    on the floor above it."""

    def side_reads(self, request: Request, teams: list[str] | None) -> dict[str, Any]:
        queues = merge_queues(request.user, teams)
        return {**super().side_reads(request, teams), "merge_queues": queues}

    @board_api.columns_schema(
        merge_queues=MergeQueueSerializer(
            many=True, help_text="GET /api/board/merge-queue, of the team"
        )
    )
    def get(self, request: Request) -> Response:
        return super().get(request)


RepositoryQueueSerializer = inline_serializer(
    "RepositoryQueue",
    {
        "batches": serializers.ListField(
            child=MergeQueueBatch(),
            help_text=f"the last {merge_queue.RECENT_BATCHES} batches, newest first",
        ),
        "queued": serializers.ListField(
            child=inline_serializer(
                "QueuedTask",
                {"task": serializers.CharField(), "position": serializers.IntegerField()},
            ),
            help_text="the tasks in line, next first (position 1: next)",
        ),
        "repository": serializers.CharField(),
        "team": serializers.CharField(),
        "repo_path": serializers.CharField(),
        "length": serializers.IntegerField(help_text="the whole line's"),
        "entries": serializers.ListField(child=MergeQueueEntry()),
        "running": MergeQueueBatch(allow_null=True),
        "last_bisect": MergeQueueBatch(allow_null=True),
    },
)


class RepositoryQueueView(APIView):
    @extend_schema(
        operation_id="repositories_queue",
        description=(
            "One repository's merge queue (API.md): its recent `batches` and the tasks "
            "`queued` in line with their `position`, beside the board's fields (who was "
            "sent back, the batch running, the last bisect). Another team's repository "
            "is 404; a repository that does not land by `queue` has an empty line."
        ),
        responses=with_errors({200: RepositoryQueueSerializer}, "not_found"),
    )
    def get(self, request: Request, repo_id: str) -> Response:
        repo = visible(request.user, Repository.objects.all(), repo_id, "repository")
        line = merge_queue.queue_of(repo.path, repo.team_id)
        queued = [
            {"task": e["task_id"], "position": e["position"]}
            for e in line["entries"]
            if e["state"] == "queued"
        ]
        return Response({"repository": repo.id, "team": repo.team_id, **line, "queued": queued})
