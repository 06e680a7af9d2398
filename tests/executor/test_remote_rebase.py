"""A remote worker's work that no longer merges onto its base (a landing moved the
base on since its branch was made) is a rebase round, as the merge queue's
conflicts are: back to its builder under the same claim with the conflicting paths
and ``git merge origin/<base>``, counted against ``CLAWBOO_MAX_REBASE_ROUNDS`` (then
``blocked`` with the reason), never against the agent's breaker.

The real ``clawboo worker`` code (:class:`executor.remote.Worker`) runs here in this
process, its API calls answered by the server's views through DRF's test client
(:class:`InProcessApi`), its agent a ``command`` run in its clone of a bare remote,
and the server's intake inline (Q_CLUSTER sync): real git, no network, no daphne.
``tests/ops/test_remote_netns.py`` runs the worker across hosts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from board import store
from core import machines, registry, repositories
from core.models import Event
from executor import intake as server_intake
from executor.remote import Worker
from executor.rest import ApiError, Reachability, Revoked
from tests.fixtures.gitrepos import git
from worktrees import intake, review, service

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


class InProcessApi:
    """:class:`executor.rest.Api` answered in this process by the server's views, with
    the machine's key: every call a request through the whole API (auth, roles,
    the views, the intake its submit enqueues), from whichever thread makes it."""

    server = "http://testserver"

    def __init__(self, key: str) -> None:
        self.token = key
        self.reach = Reachability()

    def call(
        self, method: str, path: str, body: Any = None, *, idempotency_key: str | None = None
    ) -> tuple[int, Any]:
        client = APIClient()
        headers = {"HTTP_AUTHORIZATION": f"Token {self.token}"}
        if idempotency_key is not None:
            headers["HTTP_IDEMPOTENCY_KEY"] = idempotency_key
        data = "" if body is None else json.dumps(body)
        answer = client.generic(method, path, data, content_type="application/json", **headers)
        parsed = json.loads(answer.content) if answer.content else None
        if answer.status_code < 300:
            return answer.status_code, parsed
        if answer.status_code == 401:
            raise Revoked(str(parsed))
        raise ApiError(answer.status_code, parsed)

    def call_patiently(
        self, method: str, path: str, body: Any = None, *, stop: Any = None
    ) -> tuple[int, Any]:
        return self.call(method, path, body)

    def call_thrice(self, path: str, body: Any, idempotency_key: str | None = None) -> Any:
        return self.call("POST", path, body, idempotency_key=idempotency_key)[1]

    def release(self) -> None:
        connection.close()  # the thread's own database connection


# The stand-in builder: it writes its version of feature.txt -- unless its feedback
# says to bring the branch up to date, which it does (git merge origin/main) and
# resolves by keeping both sides.
RESOLVES = r"""
set -e
who="-c user.name=builder -c user.email=builder@localhost"
if grep -q "git merge origin/main" "$CLAWBOO_PROMPT_FILE"; then
  git $who merge --no-edit -q origin/main || true
  printf 'theirs\nmine\n' > feature.txt
  git add -A
  git $who commit -q --no-edit || true
  echo resolved
else
  printf 'mine\n' > feature.txt
  echo wrote mine
fi
"""
# A builder that never brings its branch up to date: its own version every round.
NEVER_RESOLVES = r"""
printf 'mine, again\n' > feature.txt
echo wrote mine
"""


@pytest.fixture
def remote(repo: Path, tmp_path: Path) -> Path:
    bare = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    return bare


def far_worker(repo: Path, remote: Path, tmp_path: Path, script: str) -> Worker:
    """The registered repository (its verify command refuses conflict markers), the
    agent ``far`` running ``script``, and a worker on a machine key bound to it."""
    repositories.register(
        team="default",
        path=str(repo),
        id="app",
        remote=str(remote),
        verify_cmd="! grep -q '<<<<<<<' feature.txt",
    )
    registry.create_agent(
        id="far",
        display_name="Far",
        team="default",
        runtime="command",
        settings={"argv": ["sh", "-c", script], "repository": "app"},
    )
    _, key = machines.mint("laptop", ["far"])
    return Worker(InProcessApi(key), ["far"], tmp_path / "worker", 0.5, 1.0, 60.0)


def an_earlier_attempt(remote: Path, tmp_path: Path, task_id: str) -> None:
    """The task's own branch on the remote, as an earlier attempt sent back left it:
    its work on the base as it was then. The next attempt starts from it."""
    clone = tmp_path / "earlier"
    git(tmp_path, "clone", "-q", str(remote), str(clone))
    git(clone, "checkout", "-q", "-b", f"clawboo/task-{task_id}")
    (clone / "feature.txt").write_text("mine, first try\n")
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", "an earlier attempt")
    git(clone, "push", "-q", "origin", f"clawboo/task-{task_id}")


def land_on_main(repo: Path, remote: Path, name: str, content: str) -> str:
    """Another task's change landed on the server's base and pushed to the remote,
    as a landing does."""
    (repo / name).write_text(content)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"another task: {name}")
    git(repo, "push", "-q", str(remote), "main")
    return git(repo, "rev-parse", "main")


def work_until_settled(worker: Worker, task_id: str, passes: int = 4) -> None:
    """What a worker's loop does: claim and work the task while it is to be done (a
    failed attempt goes back to todo and is claimed again) and the agent runs."""
    for _ in range(passes):
        if store.get_task(task_id).status != "todo":
            return
        if registry.get_agent("far").state != "active":
            return
        worker.work_one("far")


def test_work_that_no_longer_merges_is_sent_back_once_to_be_brought_up_to_date_then_lands(
    repo, remote, tmp_path, monkeypatch
):
    worker = far_worker(repo, remote, tmp_path, RESOLVES)
    task_id = store.create_task(title="Add feature", repository="app").task.id
    landed: list[str] = []
    intakes: list[dict[str, Any]] = []

    def take_in(tid: str) -> None:
        if not intakes:
            # Another task lands on the base, touching the same file, after this
            # task's work started (the worker cloned the base before it).
            landed.append(land_on_main(repo, remote, "feature.txt", "theirs\n"))
        intakes.append(server_intake.take_in(tid))
        if len(intakes) == 1:
            # While the builder works its rebase round, the base moves on again (a
            # file of its own): the next intake must take the work onto the base as
            # it is then, not onto the first one's checkout (whose diff would then
            # show that landing as this task's).
            landed.append(land_on_main(repo, remote, "other.txt", "another landing\n"))

    monkeypatch.setattr(intake, "enqueue", take_in)

    work_until_settled(worker, task_id)

    task = store.get_task(task_id)
    agent = registry.get_agent("far")
    assert agent.state == "active", agent.state_reason
    assert task.status == "in_review", (task.status, task.feedback, task.output)
    assert [i["result"] for i in intakes] == ["rebase", "review"], intakes
    assert intakes[0]["conflicts"] == ["feature.txt"]
    # One claim, two runs: the rebase round ran under the claim it was sent back to.
    assert task.attempts == 1
    assert len(store.list_executions(task_id)) == 2
    kinds = list(Event.objects.filter(task_id=task_id).values_list("kind", flat=True))
    assert kinds.count("fix_requested") == 1 and "retried" not in kinds, kinds
    sent_back = [c.body for c in store.list_comments(task_id) if c.author == "intake"]
    assert len(sent_back) == 1
    assert "conflicting files: feature.txt" in sent_back[0]
    assert "git merge origin/main" in sent_back[0] and landed[0][:12] in sent_back[0]
    assert task.output["intake"]["rebases"] == 1
    # Taken onto the base as it is now: the review shows this task's change alone.
    ws = store.get_workspace(task_id)
    assert ws.base_sha == landed[1] == git(repo, "rev-parse", "main")
    panel = review.review_of(task)
    assert [f["path"] for f in panel["diff"]["files"]] == ["feature.txt"]

    landed = service.approve(task_id, by="ada")
    assert landed["result"] == "landed", landed
    assert git(repo, "show", "main:feature.txt") == "theirs\nmine"
    assert git(repo, "show", "main:other.txt") == "another landing"


def test_a_builder_that_never_brings_its_branch_up_to_date_is_blocked_after_its_rounds(
    repo, remote, tmp_path, settings
):
    settings.CLAWBOO_MAX_REBASE_ROUNDS = 3  # more runs than the breaker's 3 failures
    worker = far_worker(repo, remote, tmp_path, NEVER_RESOLVES)
    task_id = store.create_task(title="Add feature", repository="app").task.id
    an_earlier_attempt(remote, tmp_path, task_id)
    land_on_main(repo, remote, "feature.txt", "theirs\n")

    work_until_settled(worker, task_id)

    task = store.get_task(task_id)
    agent = registry.get_agent("far")
    assert agent.state == "active", agent.state_reason
    assert task.status == "blocked", (task.status, task.feedback)
    assert "conflicting files: feature.txt" in task.feedback
    assert "3 rebase round(s) are spent: a person decides" in task.feedback
    assert task.output["intake"]["state"] == "blocked"
    # One claim: the first run and its three rebase rounds, then blocked.
    assert task.attempts == 1
    assert len(store.list_executions(task_id)) == 4
    assert worker.work_one("far") is False  # nothing left to loop on


def test_a_conflicting_submission_is_a_rebase_round_under_the_same_claim(repo, remote, tmp_path):
    """The intake alone (the worker played by git): the round is recorded under the
    claim with its lease back at the claim's own span, and the checkout is dropped
    so the next submission is taken onto the base as it is then."""
    far_worker(repo, remote, tmp_path, RESOLVES)
    task_id = store.create_task(title="Add feature", repository="app").task.id
    ticket = store.claim(task_id, "far", "command").ticket
    an_earlier_attempt(remote, tmp_path, task_id)
    land_on_main(repo, remote, "feature.txt", "theirs\n")
    commit = git(remote, "rev-parse", f"clawboo/task-{task_id}")

    intake.submit(task_id, ticket, f"clawboo/task-{task_id}", commit)

    task = store.get_task(task_id)
    assert task.status == "in_progress" and store.Ticket.for_task(task).encode() == ticket
    record = task.output["intake"]
    assert (record["state"], record["conflicts"], record["rebases"]) == (
        "rebase",
        ["feature.txt"],
        1,
    )
    assert task.lease_duration_ms == record["lease_ms"]
    assert task.run_opened_for is None  # the round's run may open
    assert "git merge origin/main" in task.feedback
    assert store.live_workspace(task_id) is None
    assert git(repo, "for-each-ref", "refs/clawboo/", f"refs/heads/clawboo/task-{task_id}") == ""
    # The next submission of the claim keeps its count.
    intake.submit(task_id, ticket, f"clawboo/task-{task_id}", commit)
    assert store.get_task(task_id).output["intake"]["rebases"] == 2


def test_a_repository_whose_on_conflict_is_block_parks_a_remote_conflict_for_a_person(
    repo, remote, tmp_path
):
    # As a direct landing does: clawboo.onConflict block sends no rebase round.
    git(repo, "config", "clawboo.onConflict", "block")
    worker = far_worker(repo, remote, tmp_path, NEVER_RESOLVES)
    task_id = store.create_task(title="Add feature", repository="app").task.id
    an_earlier_attempt(remote, tmp_path, task_id)
    land_on_main(repo, remote, "feature.txt", "theirs\n")

    work_until_settled(worker, task_id)

    task = store.get_task(task_id)
    assert task.status == "blocked", (task.status, task.feedback)
    assert "on-conflict policy is block: a person decides" in task.feedback
    assert task.output["intake"]["state"] == "blocked"
    assert task.output["intake"]["rebases"] == 0
    assert len(store.list_executions(task_id)) == 1  # the first run; no rebase round
