"""Pull requests on the repository's forge: the ``pull_request`` landing mode.

A repository with ``landing_mode: pull_request`` and a forge (``core.models.Forge``)
lands approved work through the forge instead of moving its base branch itself:

1. **Review opens a pull request** (:func:`publish`). When a task reaches review
   its work (without the system-of-record files, as a landing would build it) is
   pushed as ``clawboo/task-<id>`` to the repository's ``remote`` and one pull
   request is opened, or on a later attempt updated: title, a body with the task,
   verdict, findings and cost; a draft while the verdict fails.
2. **The forge's checks are part of the verdict** (:func:`refresh`). Pending: the
   task waits in review ("checks running"; approval answers ``409
   checks_running``). A failed check (a required one: those the forge names in
   ``required_checks``, else those its base branch's protection on the forge
   requires) sends the task back to its builder as a fix round (GOVERNANCE §4)
   with the check's name, conclusion and output, at most
   ``CLAWBOO_MAX_FIX_CYCLES`` rounds; then it is blocked with the debt. A review
   that requests changes comes back as the board's request-changes, at its lines.
3. **Merging** (:func:`approve`): a person's approval merges through the forge's
   API (the forge's ``merge_method``); the task is ``done`` when the forge says
   merged, and its ``clawboo/task-<id>`` branch is deleted on the forge (a failed
   delete is a log line). A pull request merged on the forge by a person marks the
   task done too; one closed unmerged leaves it in review with a comment. Webhooks
   (:func:`webhook`: answered at once, the refresh queued for a django-q2 worker)
   and the poll (:func:`poll`, a periodic job) both end in :func:`refresh`, so they
   reach the same state.

The forge is asked outside any database transaction; what it said is recorded
through the board's data layer (``board.store.record_pull_request``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import logging
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone

from board import judgement, store
from board.models import Task, Verdict
from board.transitions import Status
from core import authors, repositories, storage
from core.errors import ClawbooError, Conflict
from core.models import Forge, Repository
from worktrees import checkouts, handoff, landing
from worktrees.forge_client import (
    ALREADY_OPEN,
    ChangeRequest,
    Check,
    ForgeClient,
    ForgeFailed,
    PullRequest,
    client_for,
)
from worktrees.git import GitError, git_out, run_git
from worktrees.intake import git_timeout_s
from worktrees.locks import path_lock
from worktrees.models import PendingRefresh

log = logging.getLogger(__name__)

FORGE_AUTHOR = authors.FORGE
BODY_FINDINGS = 20


class ChecksRunning(Conflict):
    """The forge's checks on the pull request's head have not all finished."""

    code = "checks_running"


class ChecksFailed(Conflict):
    """A required check on the pull request's head failed: nothing is merged."""

    code = "checks_failed"


class BadSignature(ClawbooError):
    """A webhook whose signature does not verify with the repository's secret."""

    code = "bad_signature"


# --- which tasks take this path --------------------------------------------------


def repository_of(task: Task) -> Repository | None:
    """The registered repository the task works in: the one it names, else the
    team's repository at its workspace's path."""
    if task.repository_id is not None:
        found = repositories.registered(task.repository_id, task.team_id)
        if found is not None:
            return found
    ws = store.last_workspace(task.id)
    if ws is None:
        return None
    return repositories.for_real_path(task.team_id, Path(ws.repo_path).resolve())


def forge_for(task: Task) -> Forge | None:
    """The forge the task's work lands through, or None: its repository lands
    directly (or by the queue), or names no forge."""
    repo = repository_of(task)
    if repo is None or repo.landing_mode != "pull_request":
        return None
    return repositories.forge_of(repo.pk)


def _client(forge: Forge) -> ForgeClient:
    return client_for(forge)


def branch_of(task_id: str) -> str:
    return checkouts.branch_for(task_id)


# --- 1. review opens a pull request ----------------------------------------------


def _title(task: Task) -> str:
    return f"{task.title} (clawboo task {task.id})"[:250]


def _body(task: Task) -> str:
    """The pull request's description: the task, its verdict, findings and cost."""
    verification = judgement.render(task, None) or {}
    lines = [f"Clawboo task `{task.id}`: **{task.title}**", ""]
    if task.description:
        lines += [task.description.strip()[:4000], ""]
    verdict = verification.get("verdict") or "not verified"
    lines.append(
        f"**Verdict:** {verdict}"
        + (f" — {str(verification.get('evidence'))[:500]}" if verification.get("evidence") else "")
    )
    findings = verification.get("findings") or []
    if findings:
        lines += ["", "**Findings:**"]
        for f in findings[:BODY_FINDINGS]:
            where = f" `{f['file']}:{f.get('line') or ''}`" if f.get("file") else ""
            lines.append(f"- [{f['severity']}]{where} {f['title']}")
    cost = f"${task.cost_cents / 100:.2f}, {task.cost_tokens} tokens"
    lines += ["", f"**Cost:** {cost}", "", "_Opened by Clawboo; merge by approving on the board._"]
    return "\n".join(lines)


def _failing(task: Task) -> bool:
    return task.verdict is not None and task.verdict != "pass"


def _base_branch(task: Task, repo: Repository, repo_path: Path) -> str:
    ws = store.last_workspace(task.id)
    if ws is not None and ws.base_branch:
        return ws.base_branch
    return repo.base_branch or landing.base_branch_of(repo_path)


def _work_commit(task: Task, checkout: Path, repo_path: Path, point: str) -> tuple[str, str]:
    """(commit, tree) of the task's work as one commit on its base point, the
    system-of-record files as they were there: what the pull request shows."""
    with path_lock(checkout):
        tree = landing.without_sor(repo_path, landing.snapshot_tree(checkout), point)
    message = f"{task.title}\n\nclawboo: task {task.id}"
    return landing.commit_tree(repo_path, tree, [point], message), tree


def publish(task_id: str, *, ready: bool = False) -> dict[str, Any] | None:
    """Push the task's work as ``clawboo/task-<id>`` and open its pull request, or
    update the one it has (title, body, draft, the new head; ``ready``: not a draft
    whatever the verdict, a person having decided over it). None when the task's
    repository does not land by pull request. Raises ForgeFailed / GitError; the
    caller decides whether that stops it (the poll publishes again)."""
    task = store.get_task(task_id)
    forge = forge_for(task)
    if forge is None:
        return None
    repo = repository_of(task)
    assert repo is not None
    ws = store.live_workspace(task.id)
    if ws is None or not Path(ws.worktree_path).is_dir():
        raise Conflict(f"task {task.id!r} has no checkout to open a pull request from")
    if not repo.remote:
        raise Conflict(
            f"repository {repo.pk!r} has no remote to push {branch_of(task.id)} to",
            field="remote",
        )
    repo_path = Path(ws.repo_path)
    record = dict(task.pull_request or {})
    commit, tree = _work_commit(task, Path(ws.worktree_path), repo_path, ws.base_sha)
    branch = branch_of(task.id)
    base = _base_branch(task, repo, repo_path)
    # Pushed again when someone else moved the branch: it holds what the server judged.
    pushed_new = (
        record.get("tree") != tree or record.get("state") in (None, "closed") or head_moved(record)
    )
    if pushed_new:
        run_git(
            ["push", "--quiet", "--force", "--", repo.remote, f"{commit}:refs/heads/{branch}"],
            cwd=repo_path,
            timeout=git_timeout_s(),
        )
    client = _client(forge)
    try:
        pr, done = _open_or_update(
            client, task, record, branch, base, draft=_failing(task) and not ready
        )
    finally:
        client.close()
    changes: dict[str, Any] = {
        "number": pr.number,
        "url": pr.url,
        "state": pr.state,
        "draft": pr.draft,
        "branch": branch,
        "base": base,
        "head_sha": pr.head_sha or (commit if pushed_new else record.get("head_sha", commit)),
        "published_sha": commit if pushed_new else record.get("published_sha"),
        "tree": tree,
        "fix_rounds": int(record.get("fix_rounds") or 0),
        "reviews_seen": list(record.get("reviews_seen") or []),
    }
    if pushed_new or "checks" not in record:
        changes["checks"] = {"state": "pending", "runs": []}
        changes["handled_sha"] = None
    if done == "adopted":
        note = (
            f"Pull request #{pr.number} found open on the forge for {branch} and taken as "
            f"this task's (its opening was never recorded): {pr.url}"
        )
    else:
        note = f"Pull request #{pr.number} {done}: {pr.url}"
    store.record_pull_request(task.id, changes, comment=note)
    return changes


def head_moved(record: dict[str, Any]) -> bool:
    """Whether the pull request's head on the forge is not the commit the server
    pushed of the work it judged: someone pushed onto ``clawboo/task-<id>`` since (a
    remote worker may push there). A record from before ``published_sha`` was kept
    says nothing either way."""
    published = record.get("published_sha")
    return bool(published) and record.get("head_sha") != published


def _open_or_update(
    client: ForgeClient,
    task: Task,
    record: dict[str, Any],
    branch: str,
    base: str,
    *,
    draft: bool,
) -> tuple[PullRequest, str]:
    """The task's pull request, opened or brought up to date, and what was done:
    ``opened``, ``updated`` or ``adopted`` -- an open pull request of ``branch`` into
    ``base`` the board had no number for (a process died between the forge opening
    it and the board recording it): taken as the task's, never opened twice."""
    number = record.get("number")
    if number is None:
        current = client.find_open(head=branch, base=base)
        done = "adopted"
    else:
        current = client.get(int(number))
        done = "updated"
    if current is None:
        return _open(client, task, branch, base, draft=draft)
    if current.state == "merged":
        return current, done
    if current.draft and not draft and not client.can_toggle_draft:
        # GitHub's REST API cannot mark a draft ready (a GraphQL-only mutation): the
        # draft is closed and a ready pull request replaces it.
        client.edit(current.number, state="closed")
        return _open(client, task, branch, base, draft=False)
    edited = client.edit(
        current.number, title=_title(task), body=_body(task), state="open", draft=draft
    )
    return edited, done


def _open(
    client: ForgeClient, task: Task, branch: str, base: str, *, draft: bool
) -> tuple[PullRequest, str]:
    """Open the task's pull request; when the forge answers that one is open already
    (another publish got there between the look-up and this), adopt that one."""
    try:
        opened = client.open(
            head=branch, base=base, title=_title(task), body=_body(task), draft=draft
        )
    except ForgeFailed as exc:
        if exc.status not in ALREADY_OPEN:
            raise
        found = client.find_open(head=branch, base=base)
        if found is None:
            raise  # a refusal for another reason (no commits between, say)
        return found, "adopted"
    return opened, "opened"


def publish_quietly(task_id: str) -> None:
    """:func:`publish` after a task reached review: a forge or push failure is a
    comment on the task and a log line, never the run's failure (the poll
    publishes again)."""
    try:
        publish(task_id)
    except (ClawbooError, OSError) as exc:
        detail = exc.detail if isinstance(exc, ClawbooError) else str(exc)
        log.warning("could not publish the pull request of task %s: %s", task_id, detail)
        try:
            store.add_comment(task_id, f"could not open the pull request: {detail}", FORGE_AUTHOR)
        except ClawbooError:
            log.exception("could not note the failed publish of task %s", task_id)


# --- 2. the forge's checks are part of the verdict --------------------------------


def _decides(required: list[str], check: Check) -> bool:
    return not required or check.name in required


def checks_state(required: list[str], checks: list[Check]) -> str:
    """``failure`` when a deciding check failed, ``pending`` while one runs (or a
    required one has not reported), ``success`` when all passed, ``none``: no check.
    ``required`` empty: every reported check decides."""
    deciding = [c for c in checks if _decides(required, c)]
    if any(c.state == "failure" for c in deciding):
        return "failure"
    missing = set(required) - {c.name for c in deciding}
    if missing or any(c.state == "pending" for c in deciding):
        return "pending"
    return "success" if deciding else "none"


def required_checks(client: ForgeClient, forge: Forge, base: str) -> list[str]:
    """The check names that decide: the repository's own ``forge.required_checks``
    when it names any, else what the forge's protection of the base branch requires
    (empty: every reported check decides). A token that may not read the protection
    (403, not a rate limit) is one log line and the same fallback; any other failure
    is the caller's (the refresh fails, the poll asks again)."""
    if forge.required_checks:
        return list(forge.required_checks)
    if not base:
        return []
    try:
        return client.required_checks(base)
    except ForgeFailed as exc:
        if exc.status != 403 or exc.rate_limited:
            raise
        log.warning(
            "the forge token of repository %s may not read the protection of %s (403); "
            "every reported check counts",
            forge.repository_id,
            base,
        )
        return []


def _fix_text(failed: list[Check]) -> str:
    parts = []
    for check in failed:
        head = f"forge check {check.name!r} concluded {check.conclusion or 'failure'}"
        if check.url:
            head += f" ({check.url})"
        parts.append(f"{head}\nIts output ends with:\n{check.output or '(no output)'}")
    return (
        "the pull request's checks failed:\n\n"
        + "\n\n".join(parts)
        + "\n\nHow to fix: make these checks pass in this checkout, verify, then stop."
    )


def max_fix_cycles() -> int:
    return int(settings.CLAWBOO_MAX_FIX_CYCLES)


def refresh(task_id: str) -> dict[str, Any] | None:
    """Ask the forge about the task's pull request and act on what it says: merged
    → done; closed → a comment, the task stays in review; the head's checks
    recorded, a failed one a fix round (or the debt); a review requesting changes
    → request-changes at its lines. Returns the pull request record (None: none)."""
    task = store.get_task(task_id)
    record = dict(task.pull_request or {})
    forge = forge_for(task)
    if forge is None or record.get("number") is None or record.get("state") == "merged":
        return record or None
    client = _client(forge)
    try:
        pr = client.get(int(record["number"]))
        if pr.state == "merged":
            return _merged(task, pr, forge, by=pr.merged_by or FORGE_AUTHOR)
        if pr.state == "closed":
            if record.get("state") != "closed":
                store.record_pull_request(
                    task.id,
                    {"state": "closed"},
                    comment=f"Pull request #{pr.number} was closed on the forge without "
                    "merging; the task stays in review (approve reopens and merges it, or "
                    "request changes).",
                )
            return store.get_task(task.id).pull_request
        checks = client.checks(pr.head_sha)
        required = required_checks(client, forge, str(record.get("base") or ""))
        asked = client.change_requests(pr.number) if task.status == Status.IN_REVIEW else []
    finally:
        client.close()
    state = checks_state(required, checks)
    store.record_pull_request(
        task.id,
        {
            "state": pr.state,
            "draft": pr.draft,
            "head_sha": pr.head_sha,
            "checks": {"state": state, "runs": [c.as_dict() for c in checks]},
        },
    )
    task = store.get_task(task.id)
    if task.status != Status.IN_REVIEW:
        return task.pull_request
    fresh = [a for a in asked if a.review_id not in (record.get("reviews_seen") or [])]
    if fresh:
        _request_changes(task, fresh)
    elif state == "failure" and record.get("handled_sha") != pr.head_sha:
        failed = [c for c in checks if c.state == "failure" and _decides(required, c)]
        _fix_round(task, pr.head_sha, failed)
    return store.get_task(task.id).pull_request


def _fix_round(task: Task, head_sha: str, failed: list[Check]) -> None:
    """A failed check on the head: back to the builder with the check's output
    while rounds are left (GOVERNANCE §4); then blocked with the debt."""
    record = dict(task.pull_request or {})
    rounds = int(record.get("fix_rounds") or 0)
    text = _fix_text(failed)
    names = ", ".join(c.name for c in failed)
    last_round = rounds >= max_fix_cycles() or not task.assignee_agent_id
    # The forge's checks are part of the verdict: the round is an attempt on it.
    detail = dict(task.verification_detail or {})
    attempts = [
        *list(detail.get("attempts") or []),
        {
            "gate": None,
            "findings": [],
            "forge_checks": [c.as_dict() for c in failed],
            "at": store.now().isoformat(),
        },
    ]
    store.record_verification(
        task.id,
        Verdict.COMPLETED_WITH_DEBT if last_round else Verdict.FAIL,
        f"forge check(s) failed: {names}\n{text}",
        {**detail, "attempts": attempts},
    )
    if not last_round:
        store.record_pull_request(task.id, {"handled_sha": head_sha, "fix_rounds": rounds + 1})
        sent = store.request_changes(task.id, text, by=FORGE_AUTHOR)
        handoff.note_requested_changes(task.id, sent.task.feedback or text, by=FORGE_AUTHOR)
        return
    store.record_pull_request(task.id, {"handled_sha": head_sha})
    store.block(
        task.id,
        f"completed with debt: the pull request's checks still fail ({names}) after "
        f"{rounds} fix round(s).\n{text}",
    )


def _request_changes(task: Task, asked: list[ChangeRequest]) -> None:
    seen = list((task.pull_request or {}).get("reviews_seen") or [])
    comments = [
        c
        for a in asked
        for c in a.comments
        if isinstance(c.get("line"), int) and c["line"] >= 1 and c.get("body")
    ]
    said = "\n".join(f"{a.by} on the forge: {a.body}" for a in asked if a.body.strip())
    store.record_pull_request(task.id, {"reviews_seen": seen + [a.review_id for a in asked]})
    sent = store.request_changes(
        task.id, said or "changes requested on the forge", by=FORGE_AUTHOR, comments=comments
    )
    handoff.note_requested_changes(task.id, sent.task.feedback or said, by=FORGE_AUTHOR)


# --- 3. merging -------------------------------------------------------------------


def approve(task_id: str, *, by: str, human_override: Any = None) -> dict[str, Any]:
    """A person's approval of a task whose repository lands by pull request: the
    pull request (opened now if it has none) is merged through the forge's API once
    its checks passed, and the task is ``done`` when the forge says merged.
    Refusals change nothing: the verdict gate (VerificationRequired),
    ``checks_running`` while checks run, ``checks_failed``, ForgeFailed."""
    task = store.check_approvable(task_id, human_override)
    forge = forge_for(task)
    assert forge is not None
    known = task.pull_request or {}
    if known.get("number") is None or known.get("state") == "closed" or known.get("draft"):
        # Opened, reopened or made ready now: the person approving decides.
        publish(task.id, ready=True)
    record = refresh(task.id) or {}
    task = store.get_task(task.id)
    if task.status == Status.DONE:
        return {"result": "merging", "task": task, "pull_request": task.pull_request}
    store.check_approvable(task_id, human_override)
    if head_moved(record) and human_override is None:
        # A merge takes the forge's head: never a commit the judge did not see
        # (GOVERNANCE §4, §6), unless a person says so in so many words (an override:
        # their "Update branch" on the forge, say). Otherwise the builder's next round
        # publishes the judged work again.
        raise Conflict(
            f"the head of pull request #{record['number']} is not the work the server "
            f"judged (someone pushed {record.get('head_sha')} onto {record.get('branch')} "
            "since): nothing is merged; request changes to have it handed in again, or "
            "approve with a human_override to merge the head as it is",
            reason="head_moved",
            task_id=task.id,
        )
    state = (record.get("checks") or {}).get("state")
    if state == "pending":
        raise ChecksRunning(
            f"the checks of pull request #{record['number']} are still running; "
            "approve again when they finish",
            task_id=task.id,
        )
    if state == "failure":
        raise ChecksFailed(
            f"a required check of pull request #{record['number']} failed", task_id=task.id
        )
    client = _client(forge)
    try:
        client.merge(
            int(record["number"]),
            sha=str(record["head_sha"]),
            title=f"{task.title} (#{record['number']})",
            message=f"clawboo: land task {task.id}\n\nApproved by {by}",
        )
        pr = client.get(int(record["number"]))
    finally:
        client.close()
    if pr.state != "merged":
        raise ForgeFailed(f"the forge did not merge pull request #{pr.number}")
    done = _merged(task, pr, forge, by=by, human_override=human_override)
    return {"result": "merging", "task": store.get_task(task.id), "pull_request": done}


def _merged(
    task: Task, pr: PullRequest, forge: Forge, *, by: str, human_override: Any = None
) -> dict[str, Any]:
    """The forge merged the pull request: the local base branch follows it when it
    can (a fast-forward), the checkout and branch go, the task is done; then the
    branch Clawboo pushed goes from the forge too."""
    repo = repository_of(task)
    ws = store.live_workspace(task.id)
    record = dict(task.pull_request or {})
    base = str(record.get("base") or "")
    followed = None
    if repo is not None and ws is not None and repo.remote and base:
        followed = _follow_base(Path(ws.repo_path), repo.remote, base)
    # What was merged is the pull request's head then; the judge saw ``published_sha``.
    unjudged = head_moved({**record, "head_sha": pr.head_sha})
    store.record_pull_request(
        task.id,
        {
            "state": "merged",
            "merge_commit_sha": pr.merge_commit_sha,
            "merged_by": by,
            "merged_head_sha": pr.head_sha,
        },
    )
    if ws is not None:
        checkouts.remove_worktree_and_branch(Path(ws.repo_path), task.id)
    override = human_override
    if override is None and task.verdict not in (None, "pass"):
        # A person merged it on the forge: that is their decision over the verdict.
        override = {"by": by, "reason": f"merged on the forge (pull request #{pr.number})"}
    landed = f"pull request #{pr.number} merged on the forge" + (
        f" as {pr.merge_commit_sha}" if pr.merge_commit_sha else ""
    )
    if unjudged:
        # Commits pushed past the judge landed with the work: said where people read.
        landed += (
            f", at head {pr.head_sha}, which the judge did not see "
            f"(it judged {record.get('published_sha')})"
        )
    store.finish_landing(
        task.id,
        {
            "pull_request": pr.number,
            "commit": pr.merge_commit_sha,
            "base_branch": base,
            "followed": followed,
            "by": by,
        },
        by=by,
        human_override=override,
        landed=landed,
    )
    _delete_forge_branch(forge, str(record.get("branch") or branch_of(task.id)))
    return store.get_task(task.id).pull_request or {}


def _delete_forge_branch(forge: Forge, branch: str) -> None:
    """Delete the merged pull request's branch on the forge (Clawboo pushed it, so
    Clawboo tidies it). Already gone — the forge deletes merged branches itself when
    told to — is fine; any other failure is a log line and never the landing's: the
    work is merged and the task done."""
    try:
        client = _client(forge)
        try:
            deleted = client.delete_branch(branch)
        finally:
            client.close()
    except ClawbooError as exc:
        log.warning(
            "could not delete branch %s on the forge after its merge: %s", branch, exc.detail
        )
        return
    if not deleted:
        log.info("branch %s was already gone from the forge after its merge", branch)


def _follow_base(repo: Path, remote: str, base: str) -> str | None:
    """Fetch the forge's base branch and fast-forward the local one to it (the
    user's checkout of it too); the local branch is left alone when it has commits
    the forge's lacks. Returns the new tip, or None."""
    try:
        run_git(
            ["fetch", "--quiet", "--", remote, f"+refs/heads/{base}:refs/clawboo/forge/{base}"],
            cwd=repo,
            timeout=git_timeout_s(),
        )
        theirs = git_out(["rev-parse", f"refs/clawboo/forge/{base}"], cwd=repo)
        ours = git_out(["rev-parse", f"refs/heads/{base}"], cwd=repo)
        if ours == theirs:
            return theirs
        ancestor = run_git(["merge-base", "--is-ancestor", ours, theirs], cwd=repo, check=False)
        if ancestor.returncode != 0:
            log.warning("local %s has commits the forge's lacks; not moved", base)
            return None
        with landing.land_lock(repo):
            landing.advance(
                repo, landing.Landing("landed", base, "merge", commit=theirs, previous_tip=ours)
            )
        return theirs
    except (GitError, ClawbooError) as exc:
        log.warning("could not follow the forge's %s in %s: %s", base, repo, exc)
        return None


# --- 4. webhooks and the poll ----------------------------------------------------

# How each vendor signs a delivery and names its event (one row per forge kind).
SIGNATURES: dict[str, tuple[str, str, str]] = {
    # kind: (signature header, its prefix, event header)
    "github": ("X-Hub-Signature-256", "sha256=", "X-GitHub-Event"),
    "gitea": ("X-Gitea-Signature", "", "X-Gitea-Event"),
}


def verify_signature(forge: Forge, headers: Any, body: bytes) -> str:
    """The delivery's event name once its HMAC-SHA256 signature verifies with the
    forge's webhook secret; BadSignature otherwise (no secret: every delivery is
    refused)."""
    header, prefix, event_header = SIGNATURES[forge.kind]
    given = str(headers.get(header) or "")
    if not forge.webhook_secret or not given.startswith(prefix):
        raise BadSignature("the webhook's signature does not verify")
    expected = hmac.new(forge.webhook_secret.encode(), body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(given[len(prefix) :], expected):
        raise BadSignature("the webhook's signature does not verify")
    return str(headers.get(event_header) or "")


def _numbers_of(payload: dict[str, Any]) -> list[int]:
    """The pull request numbers a delivery is about (a status or check names a
    commit: the caller matches it by head)."""
    found = []
    if isinstance(payload.get("pull_request"), dict):
        found.append(payload["pull_request"].get("number"))
    if payload.get("number") is not None:
        found.append(payload.get("number"))
    # A signed delivery is still the vendor's shape, not ours: anything else in it
    # is passed over, never a 500.
    listed = _object(payload.get("check_run")).get("pull_requests")
    for pr in listed if isinstance(listed, list) else []:
        found.append(_object(pr).get("number"))
    return sorted({int(n) for n in found if isinstance(n, int) and not isinstance(n, bool)})


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def verify_delivery(repo_id: str, headers: Any, body: bytes) -> str:
    """A forge's delivery for repository ``repo_id``, verified before anything is read
    or written: its event name, or BadSignature (no forge, no secret, a bad or missing
    signature)."""
    forge = repositories.forge_of(repo_id)
    if forge is None:
        raise BadSignature("the webhook's signature does not verify")
    return verify_signature(forge, headers, body)


def webhook(repo_id: str, headers: Any, body: bytes) -> dict[str, Any]:
    """:func:`verify_delivery`, then :func:`take_delivery` of its JSON."""
    event = verify_delivery(repo_id, headers, body)
    try:
        payload = json.loads(body or b"{}")
    except ValueError:
        payload = {}
    return take_delivery(repo_id, event, payload if isinstance(payload, dict) else {})


# A webhook's refresh, as the django-q2 task a delivery enqueues.
REFRESH_TASK = "worktrees.pull_requests.refresh_delivered"


def take_delivery(repo_id: str, event: str, payload: dict[str, Any]) -> dict[str, Any]:
    """A verified delivery: every task whose pull request it concerns is refreshed
    from the forge (the delivery says which; the forge says what) -- after the
    answer, by a django-q2 worker (:func:`refresh_delivered`): a forge gives its
    delivery about 10 s and sends it again when the answer is late, and asking the
    forge takes a round trip or three. Only the database is read here.

    Nothing is lost to a crash: each refresh is queued (a row of the ORM broker,
    committed) before the delivery is answered -- or found queued and not started
    yet, which asks the forge after this delivery anyway (:func:`enqueue_refresh`),
    and a worker killed while running one has it delivered again (Q_CLUSTER
    ``retry``); a task in review is also
    refreshed by the poll (:func:`poll`) whatever became of its webhook."""
    tasks = [
        t.id
        for n in _numbers_of(payload)
        if (t := store.task_of_pull_request(repo_id, n)) is not None
    ]
    sha = payload.get("sha") or _object(payload.get("check_run")).get("head_sha")
    if sha and isinstance(sha, str) and not tasks:
        # This repository's only: a delivery signed with one repository's secret
        # names no other repository's (or team's) tasks, whatever commit it quotes.
        tasks = [
            tid
            for tid in store.tasks_with_open_pull_requests(repo_id)
            if (store.get_task(tid).pull_request or {}).get("head_sha") == sha
        ]
    for task_id in tasks:
        # Queued now, not on commit: the delivery writes nothing else to wait for.
        # A refresh that cannot be queued fails the delivery (a 5xx), which the
        # forge sends again; it is never answered as taken.
        enqueue_refresh(task_id)
    return {"event": event, "tasks": tasks}


def enqueue_refresh(task_id: str) -> bool:
    """Hand a webhook's refresh of ``task_id`` to a django-q2 worker (inline when
    Q_CLUSTER sync is on), unless one is queued already and has not started: whether
    it queued one.

    A forge sends several deliveries per push (the push, each check run, each
    status), all about one pull request. A refresh that has not started will ask the
    forge after every one of them, so they share it (its :class:`~worktrees.models.
    PendingRefresh` row says it waits); once it has started (it deletes the row
    first) the next delivery may be news to it and queues another. The row and the
    queued job are written in one transaction: neither is ever left without the
    other. A row older than the broker's retry time is not counted on (its job was
    lost, or the queue is that far behind: one refresh more is harmless)."""
    from django_q.conf import Conf
    from django_q.tasks import async_task

    def run() -> bool:
        at = timezone.now()
        lost = at - dt.timedelta(seconds=int(Conf.RETRY))
        PendingRefresh.objects.filter(task_id=task_id, queued_at__lt=lost).delete()
        # Two deliveries at once: the second's insert waits for the first's commit
        # and finds its row (PostgreSQL's unique index; SQLite's one writer).
        _, queued = PendingRefresh.objects.get_or_create(
            task_id=task_id, defaults={"queued_at": at}
        )
        if queued:
            async_task(REFRESH_TASK, task_id, task_name=f"forge refresh {task_id}"[:100])
        return queued

    return storage.write(run)


def refresh_delivered(task_id: str) -> bool:
    """A webhook's :func:`refresh`, run by a django-q2 worker: whether it was done.
    Its pending row goes first, committed before the forge is asked, so a delivery
    from here on queues the next refresh (:func:`enqueue_refresh`). One that fails is
    a log line: the delivery was genuine, and the poll catches up with whatever this
    refresh could not do (a racing refresh got there first, the forge did not answer)."""
    storage.write(lambda: PendingRefresh.objects.filter(task_id=task_id).delete())
    try:
        refresh(task_id)
    except (ClawbooError, OSError):
        log.exception("could not refresh task %s after a webhook", task_id)
        return False
    return True


def poll() -> int:
    """The fallback where no webhook reaches the server (a periodic job): every task
    in review whose repository lands by pull request is published if it has no
    pull request yet, then refreshed. Returns how many it asked the forge about."""
    asked = 0
    in_review = Task.objects.filter(status=Status.IN_REVIEW).values_list("id", flat=True)
    for task_id in list(in_review):
        task = store.get_task(task_id)
        if forge_for(task) is None:
            continue
        try:
            if (task.pull_request or {}).get("number") is None:
                publish(task_id)
            refresh(task_id)
            asked += 1
        except (ClawbooError, OSError):
            log.exception("could not poll the pull request of task %s", task_id)
    return asked
