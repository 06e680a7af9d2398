"""One summary per API operation, for the OpenAPI document (a drf-spectacular
postprocessing hook). ``tests/api/test_schema.py`` checks every operation has one
and that this table names no operation that is gone."""

from __future__ import annotations

from typing import Any

from core import roles

SUMMARIES: dict[str, str] = {
    "whoami": "Who the credentials belong to, and the teams they see",
    "auth_token": "Your own API key, for your username and password",
    "workers_beat": "A remote worker (machine token) is alive, and what it runs",
    "teams_list": "List the teams you belong to (staff: all)",
    "teams_create": "Create a team (you become a member)",
    "teams_retrieve": "Read a team (its reviewer agent and approval rule too)",
    "teams_update": "Name the team's reviewer agent or set its approval rule (staff)",
    "teams_chat_list": "Read a team's chat (board narration and messages)",
    "teams_chat_create": "Post to a team's chat (never changes the board)",
    "teams_events_list": "Replay a team's event log after a sequence number",
    "agents_list": "List the agents of your teams",
    "agents_create": "Register an agent (what it runs on the server: staff or allowlist)",
    "agents_retrieve": "Read an agent",
    "agents_update": "Change an agent you own (its runtime and settings: staff or allowlist)",
    "repositories_list": "List the repositories registered to your teams (staff: all)",
    "repositories_create": "Register a team's git repository (staff only)",
    "repositories_retrieve": "Read a repository of one of your teams",
    "repositories_update": "Change a registered repository (staff only)",
    "repositories_destroy": "Forget a registered repository (staff only)",
    "agents_pause": "Pause an agent of your team: it claims nothing until resumed",
    "agents_resume": "Resume a paused agent you own, or any as staff (its breaker count "
    "starts over)",
    "board_tasks_list": "List tasks, filtered, newest priority first (cursor pages)",
    "board_columns": "The board's first view: each column's first page, totals and the seq",
    "board_scope_waits": "Why each of a team's ready tasks waits for its paths (scope_busy)",
    "board_tasks_counts": "Count tasks per status (the board's column totals), filtered",
    "board_tasks_create": "Create a task (idempotent by client id or Idempotency-Key)",
    "board_tasks_retrieve": "Read a task, with the repository its run works in",
    "board_tasks_update": "Edit a task's fields or assignee",
    "board_tasks_transition": "Move a task to another status (the transition table decides)",
    "board_tasks_claim": "Claim a task as an agent you may act as",
    "approvals_list": "Tool calls of running agents waiting for a person",
    "approvals_decide": "Allow a waiting tool call once, always (agent and tool), or deny it",
    "board_tasks_approval": "Approve or deny a task's work before any agent takes it (people only)",
    "board_claim_next": "Claim the next ready task as an agent you may act as",
    "board_tasks_heartbeat": "Renew a claim's lease (fenced by its ticket)",
    "board_tasks_release": "Release a claimed task back to todo",
    "board_tasks_complete": "Settle a task done (recorded, unchanged or declined)",
    "board_tasks_fail": "Settle a task failed: retried (todo) or blocked",
    "board_tasks_verdict": "Store a verification verdict with evidence",
    "board_tasks_deps_create": "Make a task wait on another task of its team",
    "board_tasks_deps_destroy": "Remove a dependency",
    "board_tasks_cancel_dependents": "Cancel a failed task's pending dependents (its team only)",
    "board_tasks_comments_list": "Read a task's comments",
    "board_tasks_comments_create": "Comment on a task (as you, or an agent you may act as)",
    "board_tasks_executions": "Read a task's execution ledger",
    "board_tasks_executions_log": "Download the full output of one execution",
    "board_tasks_executions_open": "Open the execution of a claim run elsewhere",
    "board_tasks_executions_log_append": "Append a remote run's lines to its log",
    "board_tasks_executions_usage": "Report a remote run's usage so far",
    "board_tasks_executions_close": "Close a remote run's execution",
    "board_tasks_executions_steps": "Read a run's steps (its trace)",
    "board_tasks_executions_steps_report": "Report a remote run's next steps",
    "board_tasks_executions_stalled": "Report a remote run that said nothing for a while",
    "board_tasks_trace": "Read a task's trace: its runs and its subtasks', with their steps",
    "board_runs_stalled": "List the running runs marked stalled",
    "board_reconcile": "Run the orphan or stale recovery pass (staff)",
    "board_tasks_workspace_retrieve": "Read a task's worktree and its resume state",
    "board_tasks_workspace_create": "Provision a task's git worktree",
    "board_tasks_workspace_pause": "Pause a worktree (commit, drop the checkout, keep the branch)",
    "board_tasks_workspace_resume": "Resume a paused worktree from its branch",
    "board_tasks_workspace_complete": "Complete a worktree: cleaned when empty, else retained",
    "board_tasks_workspace_review": "Open a read-only review checkout",
    "board_tasks_workspace_handoff": "Write the worktree's AGENT_HANDOFF.json",
    "worktrees_gc": "Collect old worktrees by age and count (staff)",
    "board_tasks_review": "See a task's work: diff against its base, runs, log tails, evidence",
    "board_tasks_approve": "Approve a task in review and land its change on the base branch",
    "board_merge_queues": "See the merge queues: who waits to land, the running gate, bisects",
    "repositories_queue": "See one repository's merge queue: its batches and who is in line",
    "board_tasks_submit": "Hand in a remote worker's pushed branch for the server's intake",
    "board_tasks_prompt": "The prompt of a task's next run (a fix round's feedback included)",
    "repositories_forge_webhook": "A forge's signed webhook delivery for a repository",
    "repositories_forge_webhook_2": "A forge's signed webhook delivery (API.md's path; 204)",
    "board_tasks_request_changes": "Send a task in review back to its agent with feedback",
    "routines_list": "List your teams' routines",
    "routines_create": "Create a routine firing as an agent you may act as",
    "routines_retrieve": "Read a routine",
    "routines_update": "Change a routine",
    "routines_destroy": "Delete a routine",
    "routines_pause": "Pause a routine",
    "routines_resume": "Resume a paused or errored routine (re-armed)",
    "routines_run_now": "Fire a routine now",
    "schedules_list": "Every schedule source and row (always 200)",
    "schedules_create": "Create a schedule in a manageable source",
    "schedules_update": "Change a schedule",
    "schedules_destroy": "Delete a schedule",
    "schedules_run": "Run a schedule now",
    "budgets_list": "List your teams' budgets with their spend and status",
    "budgets_create": "Create a budget over a team, agent, routine or task tree (staff)",
    "budgets_read": "Read a budget: spent_cents and status in its current window",
    "budgets_update": "Change a budget's limit, mode, window or scope (staff)",
    "budgets_delete": "Delete a budget (staff)",
    "budgets_resume": "Lift a paused cap, optionally with grace_cents more to spend (staff)",
}


def add_summaries(result: dict[str, Any], generator: Any, request: Any, public: Any) -> Any:
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            summary = SUMMARIES.get(operation.get("operationId", ""))
            if summary and not operation.get("summary"):
                operation["summary"] = summary
    return result


WRITE_METHODS = ("post", "put", "patch", "delete")
BUSY = "busy"


def document_error(
    operation: dict[str, Any],
    status: str,
    codes: list[str],
    headers: dict[str, Any] | None = None,
) -> None:
    """Say that ``operation`` may answer ``status`` with each of ``codes`` (the API's
    error envelope; a code may carry its why: ``"busy (retryable)"``): added to what
    its view already documents, each code once."""
    responses = operation.setdefault("responses", {})
    known = responses.get(status)
    if known is None:
        known = responses[status] = {
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
            "description": "error: " + " | ".join(codes),
        }
    else:
        said = known.get("description", "")
        missing = [code for code in codes if code.split(" ", 1)[0] not in said]
        if missing:
            known["description"] = " | ".join([known.get("description", "error:"), *missing])
    if headers:
        known.setdefault("headers", {}).update(headers)


def add_busy(result: dict[str, Any], generator: Any, request: Any, public: Any) -> Any:
    """Every write may answer ``503 busy`` (core.api.errors): its lock budget ran out.
    Retryable, with ``Retry-After``; reads never do."""
    for operations in result.get("paths", {}).values():
        for method, operation in operations.items():
            if method in WRITE_METHODS:
                document_error(
                    operation,
                    "503",
                    [f"{BUSY} (retryable: see Retry-After)"],
                    {"Retry-After": {"schema": {"type": "integer"}}},
                )
    return result


FORBIDDEN = "forbidden"
PERSON_REQUIRED = "person_required"


def refusals_403(method: str, path: str) -> list[str]:
    """The 403 codes an operation may answer, read from the roles table (GOVERNANCE §6).

    Every read may be refused to the reviewer (it reads its task only); every write
    to whoever its row does not admit (a reviewer writes nothing, a cookie session
    without its CSRF token is refused too), and ``person_required`` where the row
    keeps the verb, a field of it, or a task in review, for people."""
    if method not in WRITE_METHODS:
        return [FORBIDDEN]
    row = roles.TABLE.get(f"{method.upper()} {path}")
    if row is not None and row.admits <= {"anonymous"}:
        return []  # a webhook: no credential is read, a bad signature is 401
    codes = [FORBIDDEN]
    people = row is None or not (row.admits & roles.AGENT_SIDE) or row.people_fields
    if people or path.startswith("/api/board/tasks/{task_id}"):
        codes.append(PERSON_REQUIRED)
    return codes


# What any operation may answer ``400 validation_error`` for before its view runs.
VALIDATION_400 = (
    "validation_error (a NUL or a lone surrogate in the path or query string;"
    " a query parameter the operation does not declare)"
)


def add_validation_refusals(
    result: dict[str, Any], generator: Any, request: Any, public: Any
) -> Any:
    """Every operation may answer ``400 validation_error`` before its view: a path or
    query string it cannot store (``core.api.middleware``), a query parameter it does
    not declare (``core.api.query``). Even the contract's always-200 read
    (``GET /api/schedules``: 200 whatever its sources say) refuses a request it
    cannot read."""
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            document_error(operation, "400", [VALIDATION_400])
    return result


def add_forbidden(result: dict[str, Any], generator: Any, request: Any, public: Any) -> Any:
    """Document the 403 of every operation that may answer it (the roles table's
    refusals), so a client's generated code knows the answer it will meet."""
    for path, operations in result.get("paths", {}).items():
        for method, operation in operations.items():
            codes = refusals_403(method, path)
            if codes:
                document_error(operation, "403", codes)
    return result


def _open_bodies() -> set[str]:
    """The component names of the bodies that pass unknown keys through
    (``core.api.bodies.OpenBody`` and its subclasses, as drf-spectacular names them)."""
    from core.api.bodies import OpenBody

    names: set[str] = set()
    todo: list[type] = [OpenBody]
    while todo:
        klass = todo.pop()
        todo.extend(klass.__subclasses__())
        name = klass.__name__.removesuffix("Serializer")
        names.update({name, f"Patched{name}"})
    return names


def close_request_bodies(result: dict[str, Any], generator: Any, request: Any, public: Any) -> Any:
    """A request body's declared keys are the only ones its view accepts (an unknown
    key is ``400 validation_error``, ``core.api.bodies.json_object``): say so, with
    ``additionalProperties: false`` on every body component, but the open ones."""
    schemas = result.get("components", {}).get("schemas", {})
    open_bodies = _open_bodies()
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            content = (operation.get("requestBody") or {}).get("content", {})
            for media in content.values():
                ref = media.get("schema", {}).get("$ref", "")
                name = ref.rsplit("/", 1)[-1]
                component = schemas.get(name)
                if component is None or name in open_bodies:
                    continue
                if component.get("type") == "object":
                    component["additionalProperties"] = False
    return result
