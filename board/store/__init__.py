"""The board's data-access layer: the only writer of the board's tables.

Views, consumers, admin actions, other apps and tests call these functions; none
of them saves a board row directly. Every write runs in one transaction through
:func:`core.storage.write` (``BEGIN IMMEDIATE`` on SQLite, row locks on
PostgreSQL) and records its task-change event in that same transaction.
"""

from board.ceilings import MAX_DEPTH, MAX_LIVE_CHILDREN, ROOT_RATE_LIMIT
from board.store._base import depends_on_ids, lock_task, now
from board.store.approvals import DECISIONS as APPROVAL_DECISIONS
from board.store.approvals import (
    NEEDS_APPROVAL,
    awaiting_filter,
    count_awaiting,
    expire_unanswered,
)
from board.store.approvals import decide as decide_approval
from board.store.claims import (
    DISPATCH_ORDER,
    MAX_ABANDONMENTS,
    ClaimResult,
    claim,
    claim_next,
    committed_lease_span,
    heartbeat,
    release_lapsed,
    renew_lease,
)
from board.store.deps import (
    ancestor_ids,
    cancel_dependents,
    check_dispatch_depth,
    depth_of,
    link,
    unlink,
)
from board.store.executions import (
    Started,
    close_execution,
    list_executions,
    open_execution,
    running_execution,
    start_assigned,
)
from board.store.fields import (
    add_comment,
    add_label,
    drop_task,
    list_comments,
    patch_metadata,
    remove_label,
    set_assignee,
    set_labels,
    set_priority,
    set_scheduled_by,
    set_verdict,
    set_worktree_refs,
    update_task,
)
from board.store.lifecycle import (
    await_review,
    block,
    cancel,
    complete,
    decline_reason,
    fail,
    release,
    resume_from_review,
    unblock,
)
from board.store.recovery import reconcile_orphans, release_stale, run_boot_passes
from board.store.review import Reworked, approve, check_approvable, request_changes
from board.store.tasks import (
    UNVERIFIED,
    VERDICT_FILTERS,
    Created,
    count_by_status,
    create_task,
    depends_on_map,
    find_task,
    get_task,
    list_tasks,
    ready_filter,
    ready_tasks,
    ticket_of,
    transition,
)
from board.store.tickets import (
    DECLINE_PRECEDENCE,
    Ticket,
    WriteOutcome,
    WriteToken,
    begin_write,
    did_write_land,
)
from board.store.tool_approvals import ask as ask_tool_call
from board.store.tool_approvals import decide as decide_tool_call
from board.store.tool_approvals import list_approvals
from board.store.tool_approvals import wait as wait_tool_call

__all__ = [
    "APPROVAL_DECISIONS",
    "NEEDS_APPROVAL",
    "awaiting_filter",
    "ask_tool_call",
    "decide_tool_call",
    "list_approvals",
    "wait_tool_call",
    "count_awaiting",
    "decide_approval",
    "expire_unanswered",
    "DECLINE_PRECEDENCE",
    "DISPATCH_ORDER",
    "MAX_ABANDONMENTS",
    "MAX_DEPTH",
    "MAX_LIVE_CHILDREN",
    "ROOT_RATE_LIMIT",
    "UNVERIFIED",
    "VERDICT_FILTERS",
    "ClaimResult",
    "Created",
    "Reworked",
    "Started",
    "Ticket",
    "WriteOutcome",
    "WriteToken",
    "add_comment",
    "approve",
    "check_approvable",
    "add_label",
    "ancestor_ids",
    "await_review",
    "begin_write",
    "block",
    "cancel",
    "cancel_dependents",
    "check_dispatch_depth",
    "claim",
    "claim_next",
    "close_execution",
    "committed_lease_span",
    "complete",
    "count_by_status",
    "create_task",
    "decline_reason",
    "depends_on_ids",
    "depends_on_map",
    "depth_of",
    "did_write_land",
    "drop_task",
    "fail",
    "find_task",
    "get_task",
    "heartbeat",
    "link",
    "list_comments",
    "list_executions",
    "list_tasks",
    "lock_task",
    "now",
    "open_execution",
    "patch_metadata",
    "ready_filter",
    "ready_tasks",
    "reconcile_orphans",
    "release",
    "release_lapsed",
    "run_boot_passes",
    "release_stale",
    "remove_label",
    "renew_lease",
    "request_changes",
    "resume_from_review",
    "running_execution",
    "start_assigned",
    "set_assignee",
    "set_labels",
    "set_priority",
    "set_scheduled_by",
    "set_verdict",
    "set_worktree_refs",
    "ticket_of",
    "transition",
    "unblock",
    "unlink",
    "update_task",
]

from board.store.workspaces import (  # noqa: E402
    get_workspace,
    last_workspace,
    live_workspace,
    record_landing,
    record_workspace,
    set_workspace_status,
    settle_from_worktree,
)

__all__ += [
    "get_workspace",
    "last_workspace",
    "live_workspace",
    "record_landing",
    "record_workspace",
    "set_workspace_status",
    "settle_from_worktree",
]
