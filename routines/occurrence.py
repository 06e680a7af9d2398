"""All cron math lives here: the only module that imports croniter.

A ``cron_spec`` is a 5-field cron expression, a 6-field one whose *first* field is
seconds (the seed's croner shape), or a one-shot ``once@<ISO-8601>``. Every slot is
computed in the routine's own timezone on aware datetimes and handed out as a UTC
epoch-millisecond integer; the ledger stores nothing else.

DST rules (SPEC §5):

* fall-back: croniter yields a repeated wall-clock time twice (01:30 EDT and
  01:30 EST). For a spec with a fixed hour we drop the second one, so a daily time
  fires once. A spec whose hour field is ``*`` fires every real hour, repeated
  or not: those are genuinely different hours of elapsed time.
* spring-forward: a time inside the gap fires at the next valid time (croniter
  already rolls 02:30 forward to 03:00).
"""

from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from croniter import CroniterBadCronError, CroniterBadDateError, CroniterError, croniter

from core.errors import ValidationFailed

ONCE_PREFIX = "once@"
# A slot older than this at fire time counts as missed (downtime, laptop sleep);
# it covers the ticker's 60 s rescan plus dispatch lag, so ordinary latency never
# turns a due slot into a skipped one.
MISSED_GRACE_MS = 120_000
TIMEZONE_MAX = 64  # the column's width
# The bounded `all` catch-up policy fires at most this many missed slots.
CATCH_UP_ALL_LIMIT = 24
# croniter's own search bound for impossible dates such as 31 February.
_MAX_FORWARD_STEPS = 1_000


@dataclass(frozen=True)
class Spec:
    """A parsed, validated cron_spec."""

    text: str
    once_at_ms: int | None = None  # set for once@ specs
    cron_fields: tuple[str, ...] = ()

    @property
    def is_one_shot(self) -> bool:
        return self.once_at_ms is not None

    @property
    def has_fixed_hour(self) -> bool:
        """True unless the hour field is ``*`` (or a ``*/1``-style every hour)."""
        if not self.cron_fields:
            return True
        hour = self.cron_fields[2] if len(self.cron_fields) == 6 else self.cron_fields[1]
        return hour not in {"*", "*/1"}


@functools.cache
def _known_zones() -> frozenset[str]:
    return frozenset(available_timezones())


def check_timezone(name: object) -> ZoneInfo:
    """An IANA zone by name. Looked up in the known names first: ZoneInfo itself
    turns some strings into file system errors (too long, a directory, a NUL)."""
    if not isinstance(name, str) or not name.strip():
        raise ValidationFailed("timezone", "must be an IANA timezone name such as 'UTC'")
    if len(name) > TIMEZONE_MAX or (name not in _known_zones() and name != "UTC"):
        raise ValidationFailed("timezone", f"unknown timezone {name[:TIMEZONE_MAX]!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValidationFailed("timezone", f"unknown timezone {name!r}") from None


def parse_spec(text: object, tz: ZoneInfo) -> Spec:
    """Parse a cron_spec, naming what is wrong when it is not one."""
    if not isinstance(text, str) or not text.strip():
        raise ValidationFailed("cron_spec", "must be a cron expression or once@<ISO-8601>")
    text = text.strip()
    if text.startswith(ONCE_PREFIX):
        return Spec(text=text, once_at_ms=_parse_once(text[len(ONCE_PREFIX) :], tz))
    fields = tuple(text.split())
    if len(fields) not in (5, 6):
        raise ValidationFailed(
            "cron_spec",
            f"{text!r} has {len(fields)} fields; expected 5 (minute hour day month weekday) "
            "or 6 (second first)",
        )
    try:
        it = croniter(text, dt.datetime(2000, 1, 1, tzinfo=tz), second_at_beginning=True)
        it.get_next(dt.datetime)
    except CroniterBadDateError:
        raise ValidationFailed("cron_spec", f"{text!r} never matches a real date") from None
    except (CroniterBadCronError, CroniterError, ValueError) as exc:
        raise ValidationFailed(
            "cron_spec", f"{text!r} is not a valid cron expression: {exc}"
        ) from None
    return Spec(text=text, cron_fields=fields)


def _parse_once(raw: str, tz: ZoneInfo) -> int:
    try:
        when = dt.datetime.fromisoformat(raw.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValidationFailed(
            "cron_spec", f"once@{raw!r} is not an ISO-8601 date-time (e.g. once@2030-01-01T09:00Z)"
        ) from None
    if when.tzinfo is None:
        # A bare local time means the routine's timezone, like a cron field does.
        when = when.replace(tzinfo=tz)
    return to_ms(when)


def validate_new(text: object, tz_name: object, now_ms: int) -> tuple[Spec, ZoneInfo]:
    """Validate a spec for creation or update: a one-shot in the past is refused."""
    tz = check_timezone(tz_name)
    spec = parse_spec(text, tz)
    if spec.once_at_ms is not None and spec.once_at_ms <= now_ms:
        raise ValidationFailed("cron_spec", f"{spec.text!r} is in the past")
    return spec, tz


def to_ms(when: dt.datetime) -> int:
    return int(when.timestamp() * 1000)


def from_ms(epoch_ms: int, tz: ZoneInfo) -> dt.datetime:
    return dt.datetime.fromtimestamp(epoch_ms / 1000, tz=tz)


def _is_repeated_wall_time(when: dt.datetime, tz: ZoneInfo) -> bool:
    """True for the second (post fall-back) instance of an ambiguous wall time."""
    naive = when.replace(tzinfo=None)
    first = naive.replace(tzinfo=tz, fold=0).utcoffset()
    second = naive.replace(tzinfo=tz, fold=1).utcoffset()
    return first != second and when.utcoffset() == second


def next_after(spec: Spec, tz: ZoneInfo, after_ms: int) -> int | None:
    """The first slot strictly after ``after_ms`` (UTC epoch ms); None when spent."""
    if spec.once_at_ms is not None:
        return spec.once_at_ms if spec.once_at_ms > after_ms else None
    it = croniter(spec.text, from_ms(after_ms, tz), second_at_beginning=True)
    for _ in range(_MAX_FORWARD_STEPS):
        candidate: dt.datetime = it.get_next(dt.datetime)
        if spec.has_fixed_hour and _is_repeated_wall_time(candidate, tz):
            continue  # croniter fires twice on fall-back; a daily time fires once
        slot = to_ms(candidate)
        if slot > after_ms:
            return slot
    return None


def first_slot(spec: Spec, tz: ZoneInfo, now_ms: int) -> int | None:
    """Arm a new or resumed routine: never a slot at or before ``now_ms``, so a new
    or re-enabled routine never fires "immediately" by accident."""
    return next_after(spec, tz, now_ms)


@dataclass(frozen=True)
class FirePlan:
    slots: tuple[int, ...]  # the slots to fire now, oldest first
    skipped: int  # missed slots dropped by the catch-up policy
    next_run_at: int | None  # the slot to re-arm at after these fires
    newest: int  # the newest due slot (fired or skipped): the cadence continues from it


def plan_fire(spec: Spec, tz: ZoneInfo, due_slot: int, now_ms: int, policy: str) -> FirePlan:
    """Which slots to fire for a row that came due at ``due_slot``.

    Every slot from ``due_slot`` up to ``now_ms`` is a candidate (downtime leaves
    several). ``latest`` fires only the newest, ``skip`` fires only one that is not
    yet missed (within :data:`MISSED_GRACE_MS`), ``all`` fires up to
    :data:`CATCH_UP_ALL_LIMIT` of the newest. The next occurrence is computed from
    the newest candidate slot, never from "now", so the cadence never drifts.
    """
    due: list[int] = [due_slot]
    if spec.once_at_ms is None:
        cursor = due_slot
        while True:
            nxt = next_after(spec, tz, cursor)
            if nxt is None or nxt > now_ms:
                break
            due.append(nxt)
            cursor = nxt
            # Bounded: beyond the `all` limit only the newest few can matter.
            if len(due) > 4 * CATCH_UP_ALL_LIMIT:
                due = due[-CATCH_UP_ALL_LIMIT:]
    newest = due[-1]
    if policy == "skip":
        fire = [s for s in due if now_ms - s <= MISSED_GRACE_MS][-1:]
    elif policy == "all":
        fire = due[-CATCH_UP_ALL_LIMIT:]
    else:
        fire = [newest]
    nxt = None if spec.once_at_ms is not None else next_after(spec, tz, max(newest, 0))
    return FirePlan(slots=tuple(fire), skipped=len(due) - len(fire), next_run_at=nxt, newest=newest)
