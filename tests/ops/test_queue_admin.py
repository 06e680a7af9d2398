"""django-q2's own tables in the console: grouped and named as the background queue's
jobs, so nobody mistakes them for board tasks."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django_q.models import Failure, OrmQ, Schedule, Success, Task

from ops.queue.models import FailedJob, QueuedJob, ScheduledJob, SuccessfulJob

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(client):
    user = get_user_model().objects.create_superuser("op", "op@example.com", "pw")
    client.force_login(user)
    return client


def test_django_q_models_are_registered_only_as_background_queue_jobs():
    for original in (Schedule, Success, Failure, OrmQ):
        assert not admin.site.is_registered(original)
    names = {}
    for proxy in (QueuedJob, SuccessfulJob, FailedJob, ScheduledJob):
        assert admin.site.is_registered(proxy)
        assert proxy._meta.app_config.verbose_name == "Background queue (django-q2)"
        names[proxy.__name__] = str(proxy._meta.verbose_name_plural)
    assert names == {
        "QueuedJob": "queued jobs",
        "SuccessfulJob": "successful jobs",
        "FailedJob": "failed jobs",
        "ScheduledJob": "scheduled jobs",
    }


def test_the_admin_index_groups_them_apart_from_the_board(operator):
    index = operator.get("/admin/").content.decode()
    group = index[index.index("Background queue (django-q2)") :].split("</table>")[0]
    for name in ("Queued jobs", "Successful jobs", "Failed jobs", "Scheduled jobs"):
        assert name in group
    assert "Django Q" not in index and "Successful tasks" not in index


def test_each_job_page_lists_the_queues_rows(operator):
    now = dt.datetime(2030, 1, 7, 8, 0, tzinfo=dt.UTC)
    done = Task.objects.create(
        id="ok1", name="nightly-ok", func="math.floor", started=now, stopped=now, success=True
    )
    Task.objects.create(
        id="bad1", name="nightly-bad", func="math.floor", started=now, stopped=now, success=False
    )
    Schedule.objects.create(name="nightly", func="math.floor", task=done.id)
    pages = {
        "successfuljob": "nightly-ok",
        "failedjob": "nightly-bad",
        "scheduledjob": "/admin/background_queue/successfuljob/ok1/change/",
        "queuedjob": "0 queued jobs",
    }
    for page, expected in pages.items():
        response = operator.get(f"/admin/background_queue/{page}/")
        assert response.status_code == 200, page
        assert expected in response.content.decode(), page
    assert operator.get("/admin/background_queue/successfuljob/ok1/change/").status_code == 200


def _staff_with(client, *codenames: str):
    from django.contrib.auth.models import Permission

    user = get_user_model().objects.create_user("lead", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client.force_login(user)
    return user


SCHEDULE_FORM = {
    "name": "mine",
    "func": "os.system",
    "hook": "",
    "args": "'touch /tmp/owned'",
    "kwargs": "",
    "schedule_type": "O",
    "minutes": "",
    "repeats": "-1",
    "next_run_0": "2030-01-07",
    "next_run_1": "08:00:00",
    "cron": "",
    "cluster": "",
    "intended_date_kwarg": "",
}


def test_the_admin_schedules_no_code_a_staff_person_names(client):
    """A scheduled job runs the Python callable its row names, with the row's
    arguments, on a q2 worker as the server's user: a staff person granted the *add*
    or *change* permission on scheduled jobs ran any code they named (os.system),
    every power of the server with it. The server writes its own schedules
    (ops.periodic); the admin shows them, reschedules and deletes them, and names
    no function, hook or argument."""
    _staff_with(client, "view_scheduledjob", "add_scheduledjob", "change_scheduledjob")
    added = client.post("/admin/background_queue/scheduledjob/add/", SCHEDULE_FORM)
    assert added.status_code == 403
    assert not Schedule.objects.filter(name="mine").exists()
    ours = Schedule.objects.create(name="clawboo.prune", func="ops.periodic.prune", minutes=60)
    changed = client.post(
        f"/admin/background_queue/scheduledjob/{ours.pk}/change/",
        {**SCHEDULE_FORM, "name": "clawboo.prune", "schedule_type": "I", "minutes": "30"},
    )
    assert changed.status_code == 302, changed.content[:2000]
    ours.refresh_from_db()
    assert (ours.func, ours.args, ours.hook) == ("ops.periodic.prune", None, None)
    assert ours.name == "clawboo.prune" and ours.minutes == 30  # its timing is the admin's
