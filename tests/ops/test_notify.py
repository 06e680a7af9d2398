"""Notifications: signed webhooks and email, after commit, once per event and
channel, retried with backoff, never failing the board write that caused them."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.core import mail
from django.db import transaction
from django.utils import timezone

from board import store
from core import registry
from core.models import Event
from ops import notify
from ops.models import DeliveryStatus, NotificationDelivery

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def agent(db):
    return registry.create_agent(id="ada", display_name="Ada", team="default", runtime="command")


def in_progress(title: str = "Fix login") -> tuple[str, str]:
    task = store.create_task(title=title, file_mutating=False).task
    claimed = store.claim(task.id, "ada", runtime="command")
    return task.id, claimed.ticket


def webhook(receiver, **fields):
    return notify.create_channel("default", "hook", "webhook", url=receiver.url, **fields)


def routine_halted() -> Event:
    """A routine's halt in error with no task to show, as the fire path records it."""
    return Event(
        team_id="default",
        seq=999,
        kind="routine_error",
        task_id=None,
        payload={"routine_id": "r1", "error": "boom", "slot_at": 1},
        created_at=timezone.now(),
    )


def signature_ok(channel, request) -> bool:
    expected = (
        "sha256=" + hmac.new(channel.secret.encode(), request["body"], hashlib.sha256).hexdigest()
    )
    return hmac.compare_digest(request["headers"]["X-Clawboo-Signature"], expected)


def test_a_task_entering_review_sends_one_signed_webhook(agent, receiver):
    channel = webhook(receiver)
    task_id, ticket = in_progress()
    store.await_review(task_id, ticket=ticket)

    assert len(receiver.received) == 1
    request = receiver.received[0]
    assert signature_ok(channel, request)
    body = json.loads(request["body"])
    assert body["reason"] == "review" and body["team"] == "default"
    assert body["task"]["id"] == task_id and body["task"]["status"] == "in_review"
    assert body["task"]["prev_status"] == "in_progress"
    assert "waiting for review" in body["summary"]
    row = NotificationDelivery.objects.get()
    assert request["headers"]["X-Clawboo-Delivery"] == str(row.id)
    assert row.status == DeliveryStatus.DELIVERED and row.attempts == 1
    assert row.last_status_code == 200


def test_a_500_is_retried_with_backoff_and_delivered_exactly_once(agent, receiver):
    channel = webhook(receiver)
    receiver.script = [500]
    task_id, ticket = in_progress()
    store.block(task_id, "needs a decision", ticket=ticket)

    row = NotificationDelivery.objects.get()
    assert row.status == DeliveryStatus.RETRYING and row.attempts == 1
    assert row.last_status_code == 500
    assert row.next_attempt_at - timezone.now() > dt.timedelta(seconds=25)
    assert notify.send_due() == 0  # not due yet: nothing is sent early
    assert len(receiver.received) == 1

    with time_machine.travel(row.next_attempt_at + dt.timedelta(seconds=1), tick=False):
        assert notify.send_due() == 1
        assert notify.send_due() == 0  # delivered: never queued again
        assert notify.deliver(row.id) == "not-due"  # a duplicate queue run sends nothing

    row.refresh_from_db()
    assert row.status == DeliveryStatus.DELIVERED and row.attempts == 2
    assert [r["status"] for r in receiver.received] == [500, 200]
    first, second = receiver.received
    assert first["body"] == second["body"] and signature_ok(channel, second)
    assert first["headers"]["X-Clawboo-Delivery"] == second["headers"]["X-Clawboo-Delivery"]
    assert json.loads(second["body"])["reason"] == "blocked"


def test_it_gives_up_after_the_last_attempt(agent, receiver, settings):
    settings.CLAWBOO_NOTIFY_MAX_ATTEMPTS = 2
    webhook(receiver)
    receiver.script = [500, 503]
    task_id, ticket = in_progress()
    store.block(task_id, "stuck", ticket=ticket)
    row = NotificationDelivery.objects.get()
    with time_machine.travel(row.next_attempt_at + dt.timedelta(seconds=1), tick=False):
        notify.send_due()
    row.refresh_from_db()
    assert row.status == DeliveryStatus.FAILED and row.attempts == 2
    assert row.last_error == "HTTP 503" and row.next_attempt_at is None


def test_an_event_notifies_a_channel_once_however_often_it_is_heard(agent, receiver):
    webhook(receiver)
    task_id, ticket = in_progress()
    store.await_review(task_id, ticket=ticket)
    event = Event.objects.get(task_id=task_id, kind="review_requested")
    notify.on_event(event)
    notify.on_event(event)
    assert NotificationDelivery.objects.count() == 1
    assert len(receiver.received) == 1


def test_a_failed_verification_and_a_routine_error_need_a_person(agent, receiver):
    webhook(receiver)
    task_id, _ = in_progress()
    store.set_verdict(task_id, "fail", "2 tests failed")
    store.set_verdict(task_id, "pass", "fixed")  # a pass tells nobody
    routine_event = routine_halted()
    assert notify.reason_for(routine_event) == "routine_error"
    notify.on_event(routine_event)
    reasons = [json.loads(r["body"])["reason"] for r in receiver.received]
    assert reasons == ["verification_failed", "routine_error"]
    assert json.loads(receiver.received[1]["body"])["routine"]["error"] == "boom"


def test_only_the_reasons_a_channel_asks_for_reach_it(agent, receiver):
    webhook(receiver, reasons=["blocked"])
    task_id, ticket = in_progress()
    store.await_review(task_id, ticket=ticket)
    assert receiver.received == []


def test_other_teams_and_disabled_channels_hear_nothing(agent, receiver):
    registry.create_team("other", "Other")
    notify.create_channel("other", "theirs", "webhook", url=receiver.url)
    webhook(receiver, enabled=False)
    task_id, ticket = in_progress()
    store.await_review(task_id, ticket=ticket)
    assert receiver.received == [] and NotificationDelivery.objects.count() == 0


def test_email_goes_through_djangos_backend(agent, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    notify.create_channel(
        "default", "people", "email", recipients="ops@example.com, lead@example.com"
    )
    task_id, ticket = in_progress("Ship it")
    store.await_review(task_id, ticket=ticket)
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == ["ops@example.com", "lead@example.com"]
    assert "Ship it" in message.subject and "waiting for review" in message.subject
    assert NotificationDelivery.objects.get().status == DeliveryStatus.DELIVERED


def test_a_notification_links_to_the_task_on_the_board_when_the_public_url_is_known(
    agent, receiver, settings
):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.CLAWBOO_PUBLIC_URL = "https://board.example.com"
    webhook(receiver)
    notify.create_channel("default", "people", "email", recipients="ops@example.com")
    task_id, ticket = in_progress("Ship it")
    store.await_review(task_id, ticket=ticket)

    url = f"https://board.example.com/board/?team=default&task={task_id}"
    assert json.loads(receiver.received[0]["body"])["url"] == url
    assert f"Open it on the board: {url}" in mail.outbox[0].body
    # A routine that halted with no task to show links to the routines page.
    halted = routine_halted()
    notify.on_event(halted)
    assert json.loads(receiver.received[1]["body"])["url"] == (
        "https://board.example.com/board/routines/?team=default"
    )


def test_without_a_public_url_a_notification_carries_no_link(agent, receiver, settings):
    settings.CLAWBOO_PUBLIC_URL = ""
    webhook(receiver)
    task_id, ticket = in_progress()
    store.await_review(task_id, ticket=ticket)
    assert "url" not in json.loads(receiver.received[0]["body"])


def test_a_rolled_back_write_notifies_nobody(agent, receiver):
    webhook(receiver)
    task_id, ticket = in_progress()
    with pytest.raises(RuntimeError), transaction.atomic():
        store.await_review(task_id, ticket=ticket)
        raise RuntimeError("roll it back")
    assert store.get_task(task_id).status == "in_progress"
    assert receiver.received == [] and NotificationDelivery.objects.count() == 0


def test_a_broken_notifier_never_fails_the_board_write(agent, receiver, monkeypatch):
    webhook(receiver)

    def broken(*args, **kwargs):
        raise RuntimeError("notifier down")

    monkeypatch.setattr(notify, "record_deliveries", broken)
    task_id, ticket = in_progress()
    outcome = store.await_review(task_id, ticket=ticket)
    assert outcome.recorded and store.get_task(task_id).status == "in_review"


def test_an_unreachable_receiver_leaves_the_write_done_and_the_delivery_due(agent, settings):
    notify.create_channel("default", "gone", "webhook", url="http://127.0.0.1:9/hook")
    task_id, ticket = in_progress()
    assert store.await_review(task_id, ticket=ticket).recorded
    row = NotificationDelivery.objects.get()
    assert row.status == DeliveryStatus.RETRYING and "Connection" in row.last_error


def test_channels_are_checked_before_they_are_saved(db):
    from core.errors import ValidationFailed

    with pytest.raises(ValidationFailed, match="url"):
        notify.create_channel("default", "bad", "webhook", url="ftp://x")
    with pytest.raises(ValidationFailed, match="recipients"):
        notify.create_channel("default", "bad", "email")
    with pytest.raises(ValidationFailed, match="reasons"):
        notify.create_channel("default", "bad", "email", recipients="a@b.c", reasons=["nope"])


def test_deliveries_are_visible_and_resendable_in_the_admin(agent, receiver, client):
    webhook(receiver)
    receiver.script = [500]
    task_id, ticket = in_progress()
    store.block(task_id, "stuck", ticket=ticket)
    row = NotificationDelivery.objects.get()
    admin = get_user_model().objects.create_superuser("op", "op@example.com", "pw")
    client.force_login(admin)
    page = client.get("/admin/ops/notificationdelivery/")
    assert page.status_code == 200 and b"retrying" in page.content
    # The task it told about links to its page; the list filters by date spans.
    assert f'href="/admin/board/task/{task_id}/change/"'.encode() in page.content
    assert b"Past 7 days" in page.content
    assert client.get(f"/admin/ops/notificationdelivery/{row.id}/change/").status_code == 200
    response = client.post(
        "/admin/ops/notificationdelivery/",
        {"action": "send_again", "_selected_action": [row.id]},
    )
    assert response.status_code == 302
    row.refresh_from_db()
    assert row.status == DeliveryStatus.DELIVERED and len(receiver.received) == 2


def test_a_channel_is_added_in_the_admin(client, receiver):
    admin = get_user_model().objects.create_superuser("op", "op@example.com", "pw")
    client.force_login(admin)
    response = client.post(
        "/admin/ops/notificationchannel/add/",
        {
            "team": "default",
            "name": "hook",
            "kind": "webhook",
            "url": receiver.url,
            "secret": "k" * 64,
            "recipients": "",
            "reasons": ["review", "blocked"],
            "enabled": "on",
        },
    )
    assert response.status_code == 302, response.content[:3000]
    from ops.models import NotificationChannel

    channel = NotificationChannel.objects.get()
    assert channel.reasons == ["review", "blocked"] and channel.created_at is not None


def test_a_notification_the_listener_missed_is_recorded_by_the_minutely_schedule(
    agent, receiver, monkeypatch
):
    # The process that committed the write died before its listener ran: no delivery.
    channel = webhook(receiver)
    from core import events

    monkeypatch.setattr(events, "_listeners", [lambda event: None])
    task_id, ticket = in_progress()
    store.await_review(task_id, ticket=ticket)
    assert not NotificationDelivery.objects.exists()

    assert notify.catch_up() == 1
    notify.send_due()
    row = NotificationDelivery.objects.get()
    assert (row.channel_id, row.task_id, row.reason) == (channel.id, task_id, "review")
    assert len(receiver.received) == 1 and row.status == DeliveryStatus.DELIVERED
    assert notify.catch_up() == 0  # once per (channel, event), however often it runs


def test_catch_up_leaves_events_older_than_its_window_and_older_than_the_channel(
    agent, receiver, monkeypatch
):
    from core import events

    monkeypatch.setattr(events, "_listeners", [lambda event: None])
    early_id, early_ticket = in_progress("Before the channel")
    store.await_review(early_id, ticket=early_ticket)
    webhook(receiver)  # created after that event: it hears only what follows
    task_id, ticket = in_progress()
    store.await_review(task_id, ticket=ticket)

    later = timezone.now() + notify.CATCH_UP_WINDOW + dt.timedelta(minutes=1)
    assert notify.catch_up(later) == 0  # outside the window
    assert notify.catch_up() == 1
    assert NotificationDelivery.objects.get().task_id == task_id


def test_a_budgets_80_and_100_percent_crossings_each_notify_once(agent, receiver):
    from board.store import spend

    webhook(receiver)
    spend.create_budget(
        "default",
        {
            "scope": "team",
            "scope_id": "default",
            "window": "day",
            "limit_cents": 100,
            "mode": "cap",
        },
    )
    for cents in (50, 35, 10, 20):  # 50, 85, 95, 115: one warning, one exhaustion
        task_id, ticket = in_progress(f"spend {cents}")
        run = store.open_execution(task_id, ticket)
        store.close_execution(run.id, "succeeded", cost_cents=cents)
        store.complete(task_id, ticket=ticket)  # ada holds one task at a time
    bodies = [json.loads(r["body"]) for r in receiver.received]
    assert [b["reason"] for b in bodies] == ["budget_warning", "budget_exhausted"]
    assert bodies[0]["budget"]["spent_cents"] == 85
    assert "spent its 100¢ budget (115¢)" in bodies[1]["summary"]


def test_a_cap_resumed_with_grace_notifies_again_when_the_grace_is_spent(agent, receiver):
    from board.store import spend

    webhook(receiver)
    cap = {"scope": "team", "scope_id": "default", "window": "day", "mode": "cap"}
    budget = spend.create_budget("default", {**cap, "limit_cents": 100})
    for cents in (100, None, 30):  # spent; a person resumes with 25¢ of grace; 130
        if cents is None:
            spend.resume_budget(budget.pk, grace_cents=25)
            continue
        task_id, ticket = in_progress(f"spend {cents}")
        run = store.open_execution(task_id, ticket)
        store.close_execution(run.id, "succeeded", cost_cents=cents)
        store.complete(task_id, ticket=ticket)
    bodies = [json.loads(r["body"]) for r in receiver.received]
    assert [b["reason"] for b in bodies] == [
        "budget_warning",
        "budget_exhausted",
        "budget_exhausted",
    ]
    assert "spent its 100¢ budget (100¢)" in bodies[1]["summary"]
    assert bodies[2]["summary"] == (
        "The team 'default' has spent the grace it was resumed with (130¢ of its 100¢ "
        "budget): paused again"
    )
    assert bodies[2]["budget"]["grace_spent"] is True


# --- bounded delivery ----------------------------------------------------------------


@pytest.fixture
def dripping():
    """A receiver that answers one byte every 2 s, for as long as anyone listens."""
    import socket
    import threading

    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def drip(conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n":
                if stop.wait(2):
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=drip, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/hook"
    stop.set()
    server.close()


def test_a_receiver_dripping_bytes_cannot_stretch_the_deadline(agent, dripping, settings):
    import time

    settings.CLAWBOO_NOTIFY_TIMEOUT_S = 2
    notify.create_channel("default", "slow", "webhook", url=dripping)
    task_id, ticket = in_progress()
    started = time.monotonic()
    store.await_review(task_id, ticket=ticket)  # sync django-q2 in tests: sent inline
    assert time.monotonic() - started < 5  # 2 s deadline, not 2 s per byte
    row = NotificationDelivery.objects.get()
    assert row.status == DeliveryStatus.RETRYING
    assert "DeliveryDeadline" in row.last_error and "2s" in row.last_error


def test_a_redirect_is_a_failed_delivery_never_followed(agent, receiver):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Redirect(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(307)
            self.send_header("Location", receiver.url)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        notify.create_channel("default", "moved", "webhook", url=url)
        task_id, ticket = in_progress()
        store.await_review(task_id, ticket=ticket)
    finally:
        server.shutdown()
        server.server_close()
    row = NotificationDelivery.objects.get()
    assert row.status == DeliveryStatus.RETRYING and row.last_status_code == 307
    assert receiver.received == []  # the signed body never went to the other address


@pytest.mark.timing
def test_slow_webhooks_are_sent_off_the_django_q_workers(agent, dripping, settings):
    """Outside sync mode nothing is queued for django-q2 (whose workers fire
    routines): this process's senders take the deliveries, each within its deadline."""
    import time

    from django_q.conf import Conf
    from django_q.models import OrmQ

    settings.CLAWBOO_NOTIFY_TIMEOUT_S = 1
    notify.create_channel("default", "slow", "webhook", url=dripping)
    for n in range(6):  # each first attempt sent inline (sync mode) and timed out
        task_id, ticket = in_progress(f"task {n}")
        store.await_review(task_id, ticket=ticket)
    due = timezone.now()
    NotificationDelivery.objects.update(status=DeliveryStatus.RETRYING, next_attempt_at=due)
    ids = list(NotificationDelivery.objects.values_list("id", flat=True))
    assert len(ids) == 6
    Conf.SYNC = False
    try:
        started = time.monotonic()
        notify.enqueue(ids)
        assert time.monotonic() - started < 0.5  # handed off, not sent, by the caller
        assert OrmQ.objects.count() == 0
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            # Settled: the next attempt backs off minutes (a claim's lease is seconds).
            settled = NotificationDelivery.objects.filter(
                attempts=2, next_attempt_at__gt=timezone.now() + dt.timedelta(seconds=60)
            ).count()
            if settled == len(ids):
                break
            time.sleep(0.1)
    finally:
        Conf.SYNC = True
    assert settled == len(ids)
    # Four senders, 1 s each: two rounds, not six deadlines in a row.
    assert time.monotonic() - started < 5


def test_a_title_with_a_line_break_is_mailed_with_a_folded_subject(agent, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    notify.create_channel("default", "people", "email", recipients="ops@example.com")
    task_id, ticket = in_progress("Ship it\r\nBcc: evil@example.com\nnow")
    store.await_review(task_id, ticket=ticket)
    assert NotificationDelivery.objects.get().status == DeliveryStatus.DELIVERED
    subject = mail.outbox[0].subject
    assert "\n" not in subject and "\r" not in subject
    assert "Ship it Bcc: evil@example.com now" in subject
    assert mail.outbox[0].bcc == []


def test_an_at_mention_in_a_comment_tells_the_person_named(agent, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    users = get_user_model().objects
    bea = users.create_user("bea", "bea@example.com", "pw")
    registry.add_member("default", bea)
    users.create_user("cy", "cy@example.com", "pw")  # not of the team: not told
    notify.create_channel("default", "people", "email", recipients="ops@example.com")
    task = store.create_task(title="Fix login").task

    store.add_comment(task.id, "plain words, mail me at x@example.com", "op")
    assert mail.outbox == []  # no one named: no one told

    store.add_comment(task.id, "@bea and @ada: see **this**; @cy and @nobody too", "op")
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == ["ops@example.com", "bea@example.com"]
    assert "op mentioned @bea, @ada" in message.subject
    delivery = NotificationDelivery.objects.get()
    assert delivery.reason == "mentioned"
    assert json.loads(delivery.body)["comment"]["mentions"] == ["bea", "ada"]


def test_a_read_that_times_out_is_told_as_the_missed_deadline(
    agent, dripping, settings, monkeypatch
):
    """The socket's own timeout is the deadline too, so on a busy machine it can fire
    before the watch does: the delivery says the same either way."""
    from http.client import HTTPConnection

    def timed_out(self: HTTPConnection) -> None:
        raise TimeoutError("timed out")

    monkeypatch.setattr(HTTPConnection, "getresponse", timed_out)
    settings.CLAWBOO_NOTIFY_TIMEOUT_S = 2
    notify.create_channel("default", "slow", "webhook", url=dripping)
    task_id, ticket = in_progress()
    store.await_review(task_id, ticket=ticket)
    row = NotificationDelivery.objects.get()
    assert row.status == DeliveryStatus.RETRYING
    assert "DeliveryDeadline" in row.last_error and "2s" in row.last_error


def test_notification_email_is_sent_from_the_notify_from_address(agent, settings):
    """docs/operating.md: ``CLAWBOO_NOTIFY_FROM`` is the sender of notification email
    (the settings read it as Django's ``DEFAULT_FROM_EMAIL``; tests/test_knobs.py shows
    the variable reaching it)."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.DEFAULT_FROM_EMAIL = "board@ops.example.com"
    notify.create_channel("default", "people", "email", recipients="ops@example.com")
    task_id, ticket = in_progress("Ship it")
    store.await_review(task_id, ticket=ticket)
    assert [m.from_email for m in mail.outbox] == ["board@ops.example.com"]


@pytest.fixture
def own_senders(monkeypatch):
    """This process's senders started afresh for the test, and stopped after it."""
    from django_q.conf import Conf

    monkeypatch.setattr(notify, "_senders", None)
    monkeypatch.setattr(Conf, "SYNC", False)
    yield
    if notify._senders is not None:
        notify._senders.shutdown(wait=True)


def test_no_more_notifications_are_sent_at_once_than_the_notify_senders_setting(
    settings, monkeypatch, own_senders
):
    """docs/operating.md: ``CLAWBOO_NOTIFY_SENDERS`` threads per process send
    notifications: with two, two slow deliveries are under way and the third waits."""
    import threading
    import time

    settings.CLAWBOO_NOTIFY_SENDERS = 2
    release = threading.Event()
    guard = threading.Lock()
    running: list[int] = []
    most = 0
    sent: list[int] = []

    def slow_delivery(delivery_id: int) -> None:
        nonlocal most
        with guard:
            running.append(delivery_id)
            most = max(most, len(running))
        release.wait(30)  # a receiver that answers only when the test lets it
        with guard:
            running.remove(delivery_id)
            sent.append(delivery_id)

    monkeypatch.setattr(notify, "deliver", slow_delivery)
    monkeypatch.setattr(notify, "close_old_connections", lambda: None)  # no database here
    notify.enqueue([1, 2, 3, 4])
    deadline = time.monotonic() + 30
    while len(running) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(running) == 2
    # A third sender, had there been one, would have started by now.
    deadline = time.monotonic() + 1
    while len(running) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    release.set()
    deadline = time.monotonic() + 30
    while len(sent) < 4 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert sorted(sent) == [1, 2, 3, 4]  # the others waited their turn, none was lost
    assert most == 2
