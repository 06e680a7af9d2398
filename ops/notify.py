"""Notifications: a person is told when they are needed.

The only writer of ``notification_channels`` and ``notification_deliveries``.

:func:`on_event` listens to the event log after commit (:mod:`core.events`), in
whichever process committed, so a board write is never held up or failed by it:
it runs after that write's commit, and every error in it is logged and dropped.
For each event that needs a person (:func:`reason_for`) it records one delivery
per matching channel of the team — unique on (channel, event), so an event
notifies a channel once — and hands each, after its own commit, to a few sender
threads of that process (never django-q2's workers, which fire routines).

A delivery is one row sent by attempts (:func:`deliver`). An attempt is claimed
with a conditional UPDATE that also leases the row for the attempt's timeout, so
two workers never send it at once; a failed attempt sets the next one's time by
exponential backoff, and :func:`send_due` — a minutely django-q2 schedule — hands
every due row back to a sender (also rows whose sender died mid-attempt), after
:func:`catch_up` has recorded what a listener missed because its process died
between a write's commit and the listener. A
webhook is a POST of the JSON body with ``X-Clawboo-Signature: sha256=<HMAC-SHA256
of the body under the channel's secret>``; email goes through Django's email
backend. A delivered row is never sent again; a receiver that must not act twice
keys on ``X-Clawboo-Delivery`` (a crash between the send and its record can
repeat an attempt).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import hmac
import json
import logging
import os
import re
import socket
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from http.client import HTTPConnection, HTTPSConnection
from typing import Any
from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db import IntegrityError, close_old_connections, transaction
from django.urls import reverse
from django.utils import timezone

from board.models import Task
from core import storage
from core.checks import check_choice
from core.errors import ValidationFailed
from core.models import Event
from ops.models import (
    ChannelKind,
    DeliveryStatus,
    NotificationChannel,
    NotificationDelivery,
    Reason,
)

log = logging.getLogger(__name__)

BACKOFF_FIRST_S = 30
BACKOFF_MAX_S = 6 * 3600
SIGNATURE_HEADER = "X-Clawboo-Signature"
DELIVERY_HEADER = "X-Clawboo-Delivery"
REASON_HEADER = "X-Clawboo-Reason"
# How often this process re-reads which teams have channels (asked after each
# committed write that needs a person, so a team without channels costs no query).
TEAMS_TTL_S = 5.0
# How far back the minutely schedule looks for events whose notifications were never
# recorded, and the kinds (besides changes of status) that can need a person.
CATCH_UP_WINDOW = dt.timedelta(minutes=15)
CANDIDATE_KINDS = (
    "routine_error",
    "verification_recorded",
    "budget_warning",
    "budget_exhausted",
    "budget_stopped",
    "added",
    "approval_required",
    "tool_approval_requested",
    "commented",
    "agent_paused",
    "run_stalled",
)
# Events that are a person's moment by their kind alone (each is written once).
_KIND_REASONS = {
    "routine_error": Reason.ROUTINE_ERROR,
    "agent_paused": Reason.AGENT_PAUSED,
    "budget_warning": Reason.BUDGET_WARNING,
    "budget_exhausted": Reason.BUDGET_EXHAUSTED,
    "budget_stopped": Reason.BUDGET_STOPPED,
    "run_stalled": Reason.RUN_STALLED,
}


# --- which events need a person ------------------------------------------------


def reason_for(event: Event) -> str | None:
    """Why ``event`` needs a person, or None. Entering review or blocked is a
    change of status (``prev_status`` set); a recorded verdict of ``fail`` is a
    failed verification; ``routine_error`` is a routine halted in error; a task
    filed or changed that waits for approval, or a tool call waiting for a person
    (``tool_approval_requested``), is a decision waiting."""
    if event.kind in _KIND_REASONS:
        return _KIND_REASONS[event.kind]
    payload = event.payload if isinstance(event.payload, dict) else {}
    task = payload.get("task")
    if not isinstance(task, dict):
        return None
    if event.kind == "commented":
        comment = payload.get("comment")
        mentioned = comment.get("mentions") if isinstance(comment, dict) else None
        return Reason.MENTIONED if mentioned else None
    if event.kind == "verification_recorded":
        verdict = (task.get("verification") or {}).get("verdict")
        return Reason.VERIFICATION_FAILED if verdict == "fail" else None
    if event.kind == "tool_approval_requested":
        return Reason.APPROVAL
    if event.kind in ("added", "approval_required"):
        # Work filed (or changed) that waits for a person before any agent takes it.
        approval = task.get("approval") or {}
        return Reason.APPROVAL if approval.get("state") == "required" else None
    status = task.get("status")
    if event.prev_status is None or event.prev_status == status:
        return None
    if status == "in_review":
        return Reason.REVIEW
    if status == "blocked":
        return Reason.BLOCKED
    return None


SUMMARY = {
    Reason.REVIEW: "Task {task_id!r} ({title}) is waiting for review",
    Reason.BLOCKED: "Task {task_id!r} ({title}) is blocked",
    Reason.VERIFICATION_FAILED: "Task {task_id!r} ({title}) failed verification",
    Reason.ROUTINE_ERROR: "Routine {routine_id!r} halted in error",
    Reason.MENTIONED: "{author} mentioned {mentions} on task {task_id!r} ({title})",
    Reason.BUDGET_WARNING: "The {scope} {scope_id!r} has spent {spent}¢ of its {limit}¢ budget",
    Reason.BUDGET_EXHAUSTED: "The {scope} {scope_id!r} has spent its {limit}¢ budget ({spent}¢)",
    Reason.BUDGET_STOPPED: "A run of task {task_id!r} ({title}) was stopped for spend",
    Reason.APPROVAL: "Task {task_id!r} ({title}) waits for your approval{what}",
    Reason.AGENT_PAUSED: "Agent {agent_id!r} is paused: {reason}",
    Reason.RUN_STALLED: "A run of task {task_id!r} by {agent_id!r} said nothing for {silent}s",
}
# A cap a person resumed with grace, paused again: what ran out is their grace.
GRACE_SPENT_SUMMARY = (
    "The {scope} {scope_id!r} has spent the grace it was resumed with "
    "({spent}¢ of its {limit}¢ budget): paused again"
)


def body_for(event: Event, reason: str) -> str:
    """The notification's JSON text (sorted keys, compact): the bytes signed and sent."""
    payload = event.payload if isinstance(event.payload, dict) else {}
    task = payload.get("task") if isinstance(payload.get("task"), dict) else None
    body: dict[str, Any] = {
        "reason": reason,
        "team": event.team_id,
        "event": {
            "seq": event.seq,
            "kind": event.kind,
            "at": event.created_at.isoformat() if event.created_at else None,
        },
    }
    found = payload.get("budget")
    budget: dict[str, Any] = found if isinstance(found, dict) else {}
    facts = {
        "task_id": event.task_id,
        "title": "",
        "routine_id": payload.get("routine_id"),
        "scope": budget.get("scope"),
        "scope_id": budget.get("scope_id"),
        "spent": budget.get("spent_cents"),
        "limit": budget.get("limit_cents"),
        "what": "",
        "agent_id": payload.get("agent_id"),
        "reason": payload.get("reason"),
        "silent": payload.get("silent_s"),
    }
    if budget:
        body["budget"] = budget
    if reason == Reason.MENTIONED:
        comment = payload.get("comment") or {}
        body["comment"] = {
            "id": comment.get("id"),
            "author": comment.get("author"),
            "body": comment.get("body"),
            "mentions": comment.get("mentions") or [],
        }
        facts["author"] = comment.get("author") or "someone"
        facts["mentions"] = ", ".join("@" + name for name in body["comment"]["mentions"])
    if task is not None:
        body["task"] = {
            "id": task.get("id"),
            "title": task.get("title"),
            "status": task.get("status"),
            "prev_status": event.prev_status,
            "assignee_agent_id": task.get("assignee_agent_id"),
            "error": task.get("error"),
            "verification": task.get("verification"),
            "approval": task.get("approval"),
        }
        facts["title"] = task.get("title") or ""
    tool = payload.get("tool_approval")
    if reason == Reason.APPROVAL and isinstance(tool, dict):
        # A tool call waiting: what it would run (its arguments already masked).
        body["tool_approval"] = tool
        facts["what"] = f" to run {tool.get('tool')}"
    if reason == Reason.ROUTINE_ERROR:
        body["routine"] = {
            "id": payload.get("routine_id"),
            "slot_at": payload.get("slot_at"),
            "error": payload.get("error"),
            "task_id": event.task_id,
        }
    if reason == Reason.RUN_STALLED:
        body["run"] = {
            "execution_id": payload.get("execution_id"),
            "agent_id": payload.get("agent_id"),
            "silent_s": payload.get("silent_s"),
            "stalled_at": payload.get("stalled_at"),
        }
    if reason == Reason.AGENT_PAUSED:
        body["agent"] = {
            "id": payload.get("agent_id"),
            "reason": payload.get("reason"),
            "by": payload.get("by"),
        }
    summary = SUMMARY[Reason(reason)]
    if reason == Reason.BUDGET_EXHAUSTED and budget.get("grace_spent"):
        summary = GRACE_SPENT_SUMMARY
    body["summary"] = summary.format(**facts)
    public = settings.CLAWBOO_PUBLIC_URL
    if public and event.task_id:
        body["url"] = public + Task(id=event.task_id, team_id=event.team_id).get_absolute_url()
    elif public and reason == Reason.ROUTINE_ERROR:
        body["url"] = f"{public}{reverse('routines')}?{urlencode({'team': event.team_id})}"
    return json.dumps(body, sort_keys=True, separators=(",", ":"))


# --- the listener ------------------------------------------------------------------


class _TeamsWithChannels:
    """The teams that have an enabled channel, re-read at most every TEAMS_TTL_S."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.teams: frozenset[str] = frozenset()
        self.read_at = float("-inf")

    def get(self) -> frozenset[str]:
        if time.monotonic() - self.read_at < TEAMS_TTL_S:
            return self.teams
        with self.lock:
            if time.monotonic() - self.read_at >= TEAMS_TTL_S:
                self.teams = frozenset(
                    NotificationChannel.objects.filter(enabled=True)
                    .values_list("team_id", flat=True)
                    .distinct()
                )
                self.read_at = time.monotonic()
        return self.teams

    def forget(self) -> None:
        self.read_at = float("-inf")


_teams = _TeamsWithChannels()


def team_has_channels(team_id: str) -> bool:
    """Whether the team has an enabled channel (as of a few seconds ago): never raises."""
    try:
        return team_id in _teams.get()
    except Exception:
        log.exception("could not read the teams with notification channels")
        return False


def on_event(event: Event) -> None:
    """After commit: record and queue the event's notifications, if it has any."""
    reason = reason_for(event)
    if reason is None or not team_has_channels(event.team_id):
        return
    channels = [
        channel
        for channel in NotificationChannel.objects.filter(team_id=event.team_id, enabled=True)
        if reason in (channel.reasons or [])
    ]
    if channels:
        record_deliveries(event, reason, channels)


def record_deliveries(
    event: Event, reason: str, channels: Iterable[NotificationChannel]
) -> list[int]:
    """One delivery per channel that this event has not notified yet; each is
    handed to the queue after this write commits. Returns the new rows' ids."""
    body = body_for(event, reason)

    def run() -> list[int]:
        at = timezone.now()
        created = []
        for channel in channels:
            try:
                with transaction.atomic():
                    row = NotificationDelivery.objects.create(
                        channel=channel,
                        team_id=event.team_id,
                        event_seq=event.seq,
                        reason=reason,
                        task_id=event.task_id,
                        body=body,
                        next_attempt_at=at,
                        created_at=at,
                    )
            except IntegrityError:
                continue  # this event already notified this channel
            created.append(row.id)
        if created:
            transaction.on_commit(lambda: enqueue(created))
        return created

    return storage.write(run)


# Deliveries are sent by a few threads of the process that recorded them, never by
# django-q2's workers: those fire routines, and a slow receiver (however bounded
# each attempt is) must not stand between a routine and its fire. Nothing is lost
# with the process: a row is due until an attempt claims it, a claimed attempt's
# lease runs out, and the minutely :func:`send_due` hands both back to a sender.
_senders: ThreadPoolExecutor | None = None
_queued: set[int] = set()
_senders_guard = threading.Lock()


def _forget_senders() -> None:
    # A forked child has none of its parent's threads: it starts its own pool.
    global _senders, _senders_guard
    _senders = None
    _queued.clear()
    _senders_guard = threading.Lock()


os.register_at_fork(after_in_child=_forget_senders)


def sender_count() -> int:
    return int(settings.CLAWBOO_NOTIFY_SENDERS)


def enqueue(delivery_ids: Iterable[int]) -> None:
    """Hand deliveries to this process's senders (inline when django-q2 runs in sync
    mode, as in tests). A delivery already waiting for a sender is not queued twice;
    one that cannot be queued stays due, and :func:`send_due` queues it again."""
    from django_q.conf import Conf

    global _senders
    for delivery_id in delivery_ids:
        if Conf.SYNC:
            deliver(delivery_id)
            continue
        with _senders_guard:
            if delivery_id in _queued:
                continue
            if _senders is None:
                _senders = ThreadPoolExecutor(sender_count(), thread_name_prefix="clawboo-notify")
            _queued.add(delivery_id)
            try:
                _senders.submit(_send_queued, delivery_id)
            except RuntimeError:  # the interpreter is shutting down
                _queued.discard(delivery_id)


def _send_queued(delivery_id: int) -> None:
    close_old_connections()
    try:
        deliver(delivery_id)
    except Exception:
        log.exception("notification %s could not be attempted", delivery_id)
    finally:
        with _senders_guard:
            _queued.discard(delivery_id)
        close_old_connections()


# --- attempts ----------------------------------------------------------------------


def backoff(attempts: int) -> dt.timedelta:
    """30 s, 2 min, 8 min, 32 min … (capped at 6 h) after the 1st, 2nd, 3rd … failure."""
    return dt.timedelta(seconds=min(BACKOFF_FIRST_S * 4 ** max(attempts - 1, 0), BACKOFF_MAX_S))


def max_attempts() -> int:
    return int(settings.CLAWBOO_NOTIFY_MAX_ATTEMPTS)


def timeout_s() -> float:
    return float(settings.CLAWBOO_NOTIFY_TIMEOUT_S)


def _claim_attempt(delivery_id: int, at: dt.datetime) -> int | None:
    """Take the next attempt of a due delivery: its attempt number, or None when it
    is not due (delivered, given up, or another worker's attempt holds its lease).
    The lease (twice the send timeout) is how long before a dead worker's attempt
    may be taken over."""
    lease = at + dt.timedelta(seconds=2 * timeout_s() + 5)

    def run() -> int | None:
        row = (
            NotificationDelivery.objects.filter(
                pk=delivery_id,
                status__in=[DeliveryStatus.PENDING, DeliveryStatus.RETRYING],
                next_attempt_at__lte=at,
            )
            .values_list("attempts", flat=True)
            .first()
        )
        if row is None:
            return None
        won = NotificationDelivery.objects.filter(
            pk=delivery_id,
            status__in=[DeliveryStatus.PENDING, DeliveryStatus.RETRYING],
            attempts=row,
            next_attempt_at__lte=at,
        ).update(attempts=row + 1, next_attempt_at=lease)
        return row + 1 if won else None  # 0 rows: another worker took this attempt

    return storage.write(run)


def _settle(delivery_id: int, attempt: int, *, ok: bool, code: int | None, error: str) -> str:
    at = timezone.now()
    if ok:
        status, next_at = DeliveryStatus.DELIVERED, None
    elif attempt >= max_attempts():
        status, next_at = DeliveryStatus.FAILED, None
    else:
        status, next_at = DeliveryStatus.RETRYING, at + backoff(attempt)
    NotificationDelivery.objects.filter(pk=delivery_id, attempts=attempt).update(
        status=status,
        next_attempt_at=next_at,
        last_status_code=code,
        last_error=error or None,
        delivered_at=at if ok else None,
    )
    return str(status)


def deliver(delivery_id: int) -> str:
    """One attempt at one delivery (on a sender thread). Returns the row's status
    after it, or ``"not-due"`` when there was nothing to attempt."""
    attempt = _claim_attempt(delivery_id, timezone.now())
    if attempt is None:
        return "not-due"
    row = NotificationDelivery.objects.select_related("channel").get(pk=delivery_id)
    try:
        if row.channel.kind == ChannelKind.WEBHOOK:
            code = post_webhook(row)
            ok, error = 200 <= code < 300, "" if 200 <= code < 300 else f"HTTP {code}"
        else:
            send_email(row)
            code, ok, error = None, True, ""
    except Exception as exc:
        code, ok, error = getattr(exc, "code", None), False, f"{type(exc).__name__}: {exc}"
    status = storage.write(_settle, delivery_id, attempt, ok=ok, code=code, error=error[:2000])
    if not ok:
        log.warning("notification %s attempt %s failed: %s", delivery_id, attempt, error)
    return status


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class DeliveryDeadline(Exception):
    """The receiver did not answer within the attempt's total deadline."""


def post_webhook(row: NotificationDelivery) -> int:
    """POST the body to the channel's URL; the HTTP status (raises on no answer).

    One deadline (``CLAWBOO_NOTIFY_TIMEOUT_S``) bounds the whole exchange -- connect,
    send, the status line -- not each read: a receiver dripping a byte at a time
    cannot stretch it. A redirect is not followed (its status is a failed attempt),
    so the signed body only ever goes to the configured address."""
    data = row.body.encode()
    url = urlsplit(row.channel.url)
    deadline = timeout_s()
    connection_class = HTTPSConnection if url.scheme == "https" else HTTPConnection
    conn = connection_class(url.hostname or "", url.port, timeout=deadline)
    target = (url.path or "/") + (f"?{url.query}" if url.query else "")
    answer: dict[str, Any] = {}

    def exchange() -> None:
        try:
            conn.request(
                "POST",
                target,
                body=data,
                headers={
                    "Content-Type": "application/json",
                    "User-Agent": "clawboo-notify/1",
                    SIGNATURE_HEADER: sign(row.channel.secret, data),
                    DELIVERY_HEADER: str(row.id),
                    REASON_HEADER: row.reason,
                },
            )
            answer["status"] = conn.getresponse().status
        except BaseException as exc:  # handed to the caller below
            answer["error"] = exc

    sender = threading.Thread(target=exchange, name="clawboo-webhook", daemon=True)
    sender.start()
    sender.join(deadline)
    if sender.is_alive():
        # Unblock the exchange's read; the thread then ends on its own.
        if conn.sock is not None:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RDWR)
        sender.join(1)
        conn.close()
        raise DeliveryDeadline(f"no answer within {deadline:g}s")
    conn.close()
    if isinstance(answer.get("error"), TimeoutError):
        # One step of the exchange waited the whole deadline (the socket's timeout is
        # the deadline): the same miss as the watch above, told the same way.
        raise DeliveryDeadline(f"no answer within {deadline:g}s") from answer["error"]
    if "error" in answer:
        raise answer["error"]
    return int(answer["status"])


def email_subject(text: str) -> str:
    """One header line: a title's line breaks (which Django refuses in a header,
    ``BadHeaderError``) and other control characters fold to single spaces."""
    return " ".join(_CONTROL.sub(" ", text).split())


_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]")


def send_email(row: NotificationDelivery) -> None:
    body = json.loads(row.body)
    lines = [body["summary"], ""]
    if body.get("url"):
        lines += [f"Open it on the board: {body['url']}", ""]
    lines.append(f"team: {body['team']}")
    for key in ("task", "routine", "comment"):
        for field, value in (body.get(key) or {}).items():
            if value not in (None, "", {}, []):
                lines.append(f"{key} {field}: {value}")
    send_mail(
        email_subject(f"[clawboo] {body['team']}: {body['summary']}"),
        "\n".join(lines) + "\n",
        settings.DEFAULT_FROM_EMAIL,
        recipients_of(row, body),
        fail_silently=False,
    )


def recipients_of(row: NotificationDelivery, body: dict[str, Any]) -> list[str]:
    """The channel's addresses, and for a mention also the mentioned people's own
    (those of the team with an email address): the person named is the one told."""
    addresses = row.channel.recipient_list()
    mentioned = (body.get("comment") or {}).get("mentions") or []
    if row.reason == Reason.MENTIONED and mentioned:
        people = (
            get_user_model()
            .objects.filter(teams__id=row.team_id, username__in=mentioned)
            .exclude(email="")
            .order_by("username")
            .values_list("email", flat=True)
        )
        addresses += [a for a in people if a not in addresses]
    return addresses


def catch_up(now: dt.datetime | None = None) -> int:
    """Record the deliveries the listener missed for the last CATCH_UP_WINDOW of
    events (its process died between a write's commit and the listener); return how
    many. A channel hears only events newer than itself, and once, as from the
    listener."""
    at = now or timezone.now()
    since = at - CATCH_UP_WINDOW
    channels = list(NotificationChannel.objects.filter(enabled=True))
    if not channels:
        return 0
    heard = set(
        NotificationDelivery.objects.filter(created_at__gte=since).values_list(
            "channel_id", "team_id", "event_seq"
        )
    )
    recorded = 0
    for team_id in sorted({c.team_id for c in channels}):
        team_channels = [c for c in channels if c.team_id == team_id]
        for event in _events_since(team_id, since, at):
            reason = reason_for(event)
            if reason is None:
                continue
            missed = [
                c
                for c in team_channels
                if reason in (c.reasons or [])
                and c.created_at <= event.created_at
                and (c.id, team_id, event.seq) not in heard
            ]
            if missed:
                recorded += len(record_deliveries(event, reason, missed))
    return recorded


def _events_since(team_id: str, since: dt.datetime, until: dt.datetime) -> list[Event]:
    """The team's events of the window that can need a person, newest first: read
    backwards along the (team, seq) index a page at a time, so the cost is the
    window's, not the log's."""
    found: list[Event] = []
    newest = Event.objects.filter(team_id=team_id).order_by("-seq")
    below: int | None = None
    while True:
        page = list((newest if below is None else newest.filter(seq__lt=below))[:200])
        for event in page:
            if event.created_at < since:
                return found
            if event.created_at <= until and (
                event.kind in CANDIDATE_KINDS or event.prev_status is not None
            ):
                found.append(event)
        if len(page) < 200:
            return found
        below = page[-1].seq


def send_due(now: dt.datetime | None = None) -> int:
    """Queue every delivery whose next attempt is due (the minutely schedule), after
    recording what the listener missed (:func:`catch_up`)."""
    at = now or timezone.now()
    try:
        if caught := catch_up(at):
            log.warning("recorded %d notification(s) the event listener missed", caught)
    except Exception:  # the due deliveries still go out
        log.exception("notification catch-up failed")
    due = list(
        NotificationDelivery.objects.filter(
            status__in=[DeliveryStatus.PENDING, DeliveryStatus.RETRYING], next_attempt_at__lte=at
        )
        .order_by("next_attempt_at", "id")
        .values_list("id", flat=True)[:500]
    )
    enqueue(due)
    return len(due)


def retry_now(delivery_ids: Iterable[int]) -> int:
    """An operator's "send again": given-up or waiting deliveries become due now."""
    ids = list(delivery_ids)

    def run() -> int:
        return (
            NotificationDelivery.objects.filter(pk__in=ids)
            .exclude(status=DeliveryStatus.DELIVERED)
            .update(status=DeliveryStatus.RETRYING, next_attempt_at=timezone.now())
        )

    changed = storage.write(run)
    enqueue(ids)
    return changed


# --- channels ------------------------------------------------------------------------


def check_channel(channel: NotificationChannel) -> None:
    check_choice(channel.kind, "kind", ChannelKind.values)
    if channel.kind == ChannelKind.WEBHOOK and not channel.url.startswith(("http://", "https://")):
        raise ValidationFailed("url", "a webhook needs an http(s) URL")
    if channel.kind == ChannelKind.EMAIL and not channel.recipient_list():
        raise ValidationFailed("recipients", "an email channel needs at least one address")
    reasons = channel.reasons
    if not isinstance(reasons, list) or not reasons or set(reasons) - set(Reason.values):
        raise ValidationFailed("reasons", f"a non-empty list of {', '.join(Reason.values)}")


def save_channel(channel: NotificationChannel) -> NotificationChannel:
    """Create or update a channel (the admin's and tests' way in)."""
    check_channel(channel)

    def run() -> NotificationChannel:
        at = timezone.now()
        if channel.created_at is None:
            channel.created_at = at
        channel.updated_at = at
        channel.save()
        return channel

    saved = storage.write(run)
    _teams.forget()
    return saved


def create_channel(team_id: str, name: str, kind: str, **fields: Any) -> NotificationChannel:
    return save_channel(NotificationChannel(team_id=team_id, name=name, kind=kind, **fields))
