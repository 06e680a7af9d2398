"""Per-task git worktrees, the system-of-record scaffold and the cross-runtime handoff (seed 004).

Layers, bottom up: :mod:`~worktrees.git` (the only place git runs),
:mod:`~worktrees.locks` (per-path thread + file locks), :mod:`~worktrees.checks`
(ids, refs and repo paths validated before git), :mod:`~worktrees.scaffold` and
:mod:`~worktrees.handoff` (the SoR files, AGENT_HANDOFF.json, cold resume),
:mod:`~worktrees.checkouts` (git-level operations) and :mod:`~worktrees.service`
(task-level operations that record their outcome through ``board.store``).

``CLAWBOO_REPO_ROOTS`` lists the directories repositories may live under; when it
is empty (a single-user local install) any absolute path that is a git work tree
outside the Clawboo state directory is accepted.
"""
