"""The forge's word reaches the board by webhook (signature verified) or by the poll:
a pull request merged on the forge by a person marks its task done; one closed
unmerged leaves it in review with a comment; a forged signature is 401 with nothing
written. Payloads are the vendors' documented examples."""

from __future__ import annotations

import copy
import json

import pytest
from rest_framework.test import APIClient

from board import store
from board.models import Task, TaskComment
from core import registry
from core.models import Event, Forge, Repository
from executor.runner import Executor
from tests.fixtures.gitrepos import git
from tests.forges.conftest import HOOK_SECRET, TOKEN, Setup
from tests.forges.contract import HERE, Contract
from worktrees import pull_requests

pytestmark = pytest.mark.django_db

EVENT_HEADER = {"github": "HTTP_X_GITHUB_EVENT", "gitea": "HTTP_X_GITEA_EVENT"}


def _example(kind: str, number: int, merged: bool) -> bytes:
    examples = json.loads((HERE / f"{kind}.webhooks.json").read_text())["examples"]
    payload = copy.deepcopy(examples["pull_request.closed"])
    payload["number"] = number
    payload["pull_request"]["number"] = number
    payload["pull_request"]["merged"] = merged
    if kind == "gitea":
        # The documented shape's pull request is the API's PullRequest.
        contract = Contract("gitea.swagger.json")
        assert (
            contract.check_schema(
                {"$ref": "#/definitions/PullRequest"}, payload["pull_request"], "payload"
            )
            == []
        )
    return json.dumps(payload).encode()


def _in_review_with_a_green_pr(setup: Setup) -> str:
    task = store.create_task(title="Add the feature", repository="app").task
    Executor("builder").work_once()
    forge = setup.forge
    forge.set_check(forge.head_of(1), "ci", "success", "green")
    pull_requests.refresh(task.id)
    assert store.get_task(task.id).pull_request["checks"]["state"] == "success"
    return task.id


def _deliver(setup: Setup, body: bytes, secret: str = HOOK_SECRET):
    headers = setup.forge.sign(secret, body)
    headers[EVENT_HEADER[setup.kind]] = "pull_request"
    return APIClient().post(
        "/api/repositories/app/forge/webhook",
        data=body,
        content_type="application/json",
        **headers,
    )


def test_a_signed_webhook_for_a_pull_request_merged_on_the_forge_marks_the_task_done(
    forge_repo: Setup,
):
    task_id = _in_review_with_a_green_pr(forge_repo)
    merge = forge_repo.forge.merge_by_hand(1, by="maria")
    answer = _deliver(forge_repo, _example(forge_repo.kind, 1, merged=True))
    assert answer.status_code == 200, answer.content
    assert answer.json()["tasks"] == [task_id]
    task = store.get_task(task_id)
    assert task.status == "done" and task.pull_request["state"] == "merged"
    assert task.pull_request["merge_commit_sha"] == merge
    assert git(forge_repo.repo, "rev-parse", "main") == merge  # the local base followed
    assert not forge_repo.forge.has_branch(f"clawboo/task-{task_id}")  # deleted there too


def test_a_forged_signature_is_401_and_writes_nothing(forge_repo: Setup):
    task_id = _in_review_with_a_green_pr(forge_repo)
    forge_repo.forge.merge_by_hand(1)
    before = Task.objects.get(pk=task_id)
    comments = TaskComment.objects.count()
    asked = len(forge_repo.forge.requests)
    body = _example(forge_repo.kind, 1, merged=True)
    for answer in (
        _deliver(forge_repo, body, secret="not-the-secret"),  # noqa: S106
        APIClient().post(
            "/api/repositories/app/forge/webhook", data=body, content_type="application/json"
        ),
        # The same endpoint at the path API.md names.
        APIClient().post("/api/forge/app/webhook", data=body, content_type="application/json"),
    ):
        assert answer.status_code == 401 and answer.json()["error"] == "bad_signature"
    after = Task.objects.get(pk=task_id)
    assert (after.status, after.revision, after.pull_request) == (
        before.status,
        before.revision,
        before.pull_request,
    )
    assert TaskComment.objects.count() == comments
    assert len(forge_repo.forge.requests) == asked  # the forge was not even asked


def test_with_no_webhook_the_poll_reaches_the_same_state(forge_repo: Setup):
    task_id = _in_review_with_a_green_pr(forge_repo)
    merge = forge_repo.forge.merge_by_hand(1)
    assert pull_requests.poll() == 1
    task = store.get_task(task_id)
    assert task.status == "done" and task.pull_request["merge_commit_sha"] == merge
    assert not forge_repo.forge.has_branch(f"clawboo/task-{task_id}")
    assert pull_requests.poll() == 0  # nothing left to ask about


def test_a_pull_request_closed_unmerged_leaves_the_task_in_review_with_a_comment(
    forge_repo: Setup,
):
    task_id = _in_review_with_a_green_pr(forge_repo)
    forge_repo.forge.close_by_hand(1)
    answer = _deliver(forge_repo, _example(forge_repo.kind, 1, merged=False))
    assert answer.status_code == 200
    task = store.get_task(task_id)
    assert task.status == "in_review" and task.pull_request["state"] == "closed"
    assert any(
        "closed on the forge without merging" in c.body for c in store.list_comments(task_id)
    )


def test_the_poll_is_a_periodic_job_at_its_interval(settings):
    from django_q.models import Schedule

    from ops import periodic

    settings.CLAWBOO_FORGE_POLL_S = 180
    periodic.register()
    row = Schedule.objects.get(name="clawboo.forge-poll")
    assert (row.func, row.minutes) == ("worktrees.pull_requests.poll", 3)


def test_the_same_delivery_twice_acts_once(forge_repo: Setup):
    # A forge redelivers (a timeout, a person's "Redeliver"): the second changes nothing.
    task_id = _in_review_with_a_green_pr(forge_repo)
    forge_repo.forge.close_by_hand(1)
    body = _example(forge_repo.kind, 1, merged=False)
    assert _deliver(forge_repo, body).status_code == 200
    after_first = Task.objects.get(pk=task_id)
    comments, events = TaskComment.objects.count(), Event.objects.count()
    assert _deliver(forge_repo, body).status_code == 200
    again = Task.objects.get(pk=task_id)
    assert (again.status, again.revision, again.pull_request) == (
        after_first.status,
        after_first.revision,
        after_first.pull_request,
    )
    assert (TaskComment.objects.count(), Event.objects.count()) == (comments, events)

    forge_repo.forge.merge_by_hand(1)
    merged = _example(forge_repo.kind, 1, merged=True)
    assert _deliver(forge_repo, merged).json()["tasks"] == [task_id]
    done = Task.objects.get(pk=task_id)
    comments, events = TaskComment.objects.count(), Event.objects.count()
    assert _deliver(forge_repo, merged).status_code == 200
    assert Task.objects.get(pk=task_id).revision == done.revision
    assert (TaskComment.objects.count(), Event.objects.count()) == (comments, events)


@pytest.mark.parametrize(
    "payload",
    [
        {"check_run": {"pull_requests": 5}},
        {"check_run": {"pull_requests": ["x", None, {"number": "7"}]}},
        {"check_run": "x", "sha": None},
        {"pull_request": {"number": True}},
        {"check_run": {"head_sha": {"a": 1}}},
    ],
)
def test_a_signed_delivery_of_an_unexpected_shape_is_passed_over_not_a_500(
    forge_repo: Setup, payload
):
    answer = _deliver(forge_repo, json.dumps(payload).encode())
    assert answer.status_code == 200, answer.content
    assert answer.json()["tasks"] == []


def test_a_delivery_quoting_a_commit_names_only_its_own_repositorys_tasks(
    forge_repo: Setup, tmp_path
):
    # Another team's task in review whose pull request's head is the commit quoted.
    registry.create_team("red", "Red")
    Repository.objects.create(
        id="red-app", team_id="red", path=str(tmp_path / "red"), landing_mode="pull_request"
    )
    # Its forge answers (the same stand-in): were it asked, its task would change.
    Forge.objects.create(
        repository_id="red-app",
        kind=forge_repo.kind,
        api_url=forge_repo.forge.api_url,
        repo="octo/app",
        token=TOKEN,
    )
    _in_review_with_a_green_pr(forge_repo)  # pull request 1 exists on the forge
    theirs = store.create_task(title="theirs", team="red", repository="red-app").task
    Task.objects.filter(pk=theirs.id).update(status="in_review")
    store.record_pull_request(theirs.id, {"number": 1, "state": "open", "head_sha": "f" * 40})
    before = Task.objects.get(pk=theirs.id)

    answer = _deliver(forge_repo, json.dumps({"sha": "f" * 40, "state": "success"}).encode())

    assert answer.status_code == 200 and answer.json()["tasks"] == []
    assert Task.objects.get(pk=theirs.id).revision == before.revision


def test_the_webhook_at_the_contracts_path_answers_204(forge_repo: Setup):
    task_id = _in_review_with_a_green_pr(forge_repo)
    forge_repo.forge.merge_by_hand(1)
    body = _example(forge_repo.kind, 1, merged=True)
    headers = forge_repo.forge.sign(HOOK_SECRET, body)
    headers[EVENT_HEADER[forge_repo.kind]] = "pull_request"
    answer = APIClient().post(
        "/api/forge/app/webhook", data=body, content_type="application/json", **headers
    )
    assert (answer.status_code, answer.content) == (204, b"")
    assert store.get_task(task_id).status == "done"


@pytest.mark.parametrize("path", ["/api/forge/app/webhook", "/api/repositories/app/forge/webhook"])
@pytest.mark.parametrize("method", ["get", "head", "put", "patch", "delete"])
def test_a_method_the_webhook_does_not_take_is_405_with_the_methods_it_does(
    db, path: str, method: str
):
    # A person pasting the webhook's URL into a browser, or a forge set to the wrong
    # method, is told what the URL takes, not that they are forbidden.
    answer = getattr(APIClient(), method)(path)

    assert answer.status_code == 405, (method, answer.status_code)
    assert answer["Allow"] == "POST, OPTIONS"
    if method != "head":
        assert answer.json()["error"] == "method_not_allowed"
        assert method.upper() in answer.json()["detail"]


@pytest.mark.parametrize("path", ["/api/forge/app/webhook", "/api/repositories/app/forge/webhook"])
def test_a_webhook_is_answered_before_the_forge_is_asked_its_refresh_queued_durably(
    forge_repo: Setup, monkeypatch, path: str
):
    # A forge waits ~10 s for its answer and sends the delivery again when it is late:
    # the answer says "taken" once the refresh is queued (a row in the database), and a
    # worker -- any process, the answering one may be gone -- asks the forge.
    from django.utils.module_loading import import_string
    from django_q.conf import Conf
    from django_q.models import OrmQ
    from django_q.signing import SignedPackage

    task_id = _in_review_with_a_green_pr(forge_repo)
    forge_repo.forge.merge_by_hand(1)
    asked = len(forge_repo.forge.requests)
    body = _example(forge_repo.kind, 1, merged=True)
    headers = forge_repo.forge.sign(HOOK_SECRET, body)
    headers[EVENT_HEADER[forge_repo.kind]] = "pull_request"
    monkeypatch.setattr(Conf, "SYNC", False)

    answer = APIClient().post(path, data=body, content_type="application/json", **headers)

    assert answer.status_code in (200, 204), answer.content
    assert len(forge_repo.forge.requests) == asked  # not asked inside the request
    assert store.get_task(task_id).status == "in_review"
    queued = [SignedPackage.loads(row.payload) for row in OrmQ.objects.all()]
    assert [(job["func"], job["args"]) for job in queued] == [
        (pull_requests.REFRESH_TASK, (task_id,))
    ]

    job = queued[0]  # what a django-q2 worker runs
    assert import_string(job["func"])(*job["args"]) is True
    task = store.get_task(task_id)
    assert task.status == "done" and task.pull_request["state"] == "merged"


def _queued_refreshes(task_id: str) -> list[int]:
    """The OrmQ rows that would run a webhook's refresh of ``task_id``."""
    from django_q.models import OrmQ
    from django_q.signing import SignedPackage

    return [
        row.pk
        for row in OrmQ.objects.order_by("pk")
        if (job := SignedPackage.loads(row.payload))["func"] == pull_requests.REFRESH_TASK
        and job["args"] == (task_id,)
    ]


def _run_as_a_worker(row_id: int) -> bool:
    """What the cluster does with a queued row: the pusher takes it (its lock moves
    into the future, as the broker's dequeue does), a worker runs it, then it is
    acknowledged (deleted)."""
    import datetime as dt

    from django.utils import timezone
    from django.utils.module_loading import import_string
    from django_q.models import OrmQ
    from django_q.signing import SignedPackage

    OrmQ.objects.filter(pk=row_id).update(lock=timezone.now() + dt.timedelta(seconds=960))
    job = SignedPackage.loads(OrmQ.objects.get(pk=row_id).payload)
    done = import_string(job["func"])(*job["args"])
    OrmQ.objects.filter(pk=row_id).delete()
    return bool(done)


def test_a_burst_of_deliveries_queues_one_refresh_and_one_during_it_queues_one_more(
    forge_repo: Setup, monkeypatch
):
    # A push brings several deliveries about one pull request (the push, each check
    # run, each status): a refresh queued and not yet started will ask the forge
    # after all of them, so they share it. One that arrives once the refresh has
    # started may be news to it: that one queues another.
    from django_q.conf import Conf

    task_id = _in_review_with_a_green_pr(forge_repo)
    monkeypatch.setattr(Conf, "SYNC", False)
    body = _example(forge_repo.kind, 1, merged=False)
    for _ in range(5):
        answer = _deliver(forge_repo, body)
        assert answer.status_code == 200 and answer.json()["tasks"] == [task_id]
    (first,) = _queued_refreshes(task_id)

    refresh, during = pull_requests.refresh, []

    def delivered_meanwhile(tid: str):
        # The forge's next delivery comes while this refresh is asking it.
        during.append(_deliver(forge_repo, body).status_code)
        return refresh(tid)

    monkeypatch.setattr(pull_requests, "refresh", delivered_meanwhile)
    assert _run_as_a_worker(first) is True
    assert during == [200]
    (second,) = _queued_refreshes(task_id)
    assert second != first

    # The one queued meanwhile has not started: later deliveries share it again.
    assert _deliver(forge_repo, body).status_code == 200
    assert _queued_refreshes(task_id) == [second]
    monkeypatch.setattr(pull_requests, "refresh", refresh)
    forge_repo.forge.merge_by_hand(1)
    assert _run_as_a_worker(second) is True
    assert store.get_task(task_id).status == "done"


def test_a_refresh_queued_long_ago_and_never_started_does_not_hold_back_new_ones(
    forge_repo: Setup, monkeypatch
):
    # Its queued row was lost (purged, a broker's failure): past the broker's own
    # retry time the delivery queues a refresh again instead of counting on it.
    import datetime as dt

    import time_machine
    from django.conf import settings
    from django.utils import timezone
    from django_q.conf import Conf
    from django_q.models import OrmQ

    task_id = _in_review_with_a_green_pr(forge_repo)
    monkeypatch.setattr(Conf, "SYNC", False)
    body = _example(forge_repo.kind, 1, merged=False)
    assert _deliver(forge_repo, body).status_code == 200
    OrmQ.objects.all().delete()
    assert _deliver(forge_repo, body).status_code == 200
    assert _queued_refreshes(task_id) == []  # still counted on, within its time

    later = timezone.now() + dt.timedelta(seconds=settings.Q_CLUSTER["retry"] + 1)
    with time_machine.travel(later, tick=False):
        assert _deliver(forge_repo, body).status_code == 200
    assert len(_queued_refreshes(task_id)) == 1


@pytest.mark.postgresql_only
@pytest.mark.django_db(transaction=True)
def test_two_deliveries_at_once_queue_one_refresh(default_team, monkeypatch):
    # The first delivery's pending row is written, not committed yet; the second
    # waits for it on the unique key and, once it commits, counts on its refresh.
    import threading

    from django.db import connections, transaction
    from django.utils import timezone
    from django_q.conf import Conf

    from worktrees.models import PendingRefresh

    monkeypatch.setattr(Conf, "SYNC", False)
    task_id = store.create_task(title="in review").task.id
    written, commit = threading.Event(), threading.Event()

    def first() -> None:
        try:
            with transaction.atomic():
                PendingRefresh.objects.create(task_id=task_id, queued_at=timezone.now())
                written.set()
                commit.wait(30)
        finally:
            connections.close_all()

    queued: list[bool] = []

    def second() -> None:
        try:
            queued.append(pull_requests.enqueue_refresh(task_id))
        finally:
            connections.close_all()

    holder = threading.Thread(target=first)
    holder.start()
    assert written.wait(10)
    racer = threading.Thread(target=second)
    racer.start()
    racer.join(1)
    assert racer.is_alive()  # waiting on the first's row, not queueing beside it
    commit.set()
    holder.join(30)
    racer.join(30)
    assert queued == [False]
    assert _queued_refreshes(task_id) == []
