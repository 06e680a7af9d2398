"""Routines in words, for people: a ``cron_spec`` as a sentence and a ledger stamp
(UTC epoch ms) as a wall-clock time in the routine's own timezone.

The sentence comes from ``cron-descriptor`` (a port of the widely used .NET
CronExpressionDescriptor: ranges, steps, lists, names, ``L``, ``#`` and 6-field
specs), so no describer of our own has to keep up with croniter's syntax. Cron
math stays in :mod:`routines.occurrence`; nothing here computes a slot.
"""

from __future__ import annotations

import datetime as dt
import functools
from zoneinfo import ZoneInfo

from cron_descriptor import ExpressionDescriptor, Options

from core.errors import ValidationFailed
from routines import occurrence


@functools.cache
def _options() -> Options:
    # Fixed locale and a 24-hour clock: the same words whatever the server's locale.
    return Options(locale_code="en_US", use_24hour_time_format=True, verbose=False)


def schedule_in_words(cron_spec: str, timezone: str) -> str:
    """``0 9 * * 1-5`` → "At 09:00, Monday through Friday"; ``once@…`` → "Once, at
    Mon 7 Jan 2030, 09:00 EST". A spec the describer cannot read is shown as it is."""
    try:
        tz = occurrence.check_timezone(timezone)
        spec = occurrence.parse_spec(cron_spec, tz)
    except ValidationFailed:
        return cron_spec
    if spec.once_at_ms is not None:
        return f"Once, at {local_stamp(spec.once_at_ms, timezone)}"
    fields = list(spec.cron_fields)
    if len(fields) == 6:
        # croniter's 6-field shape puts seconds first; cron-descriptor would read a
        # 4-digit last field as a year, so name the year explicitly (every year).
        fields.append("*")
    try:
        return str(ExpressionDescriptor(" ".join(fields), _options()).get_description())
    except Exception:  # the describer's own refusals have no common base class
        return cron_spec


def local_time(epoch_ms: int, timezone: str) -> dt.datetime:
    return occurrence.from_ms(epoch_ms, ZoneInfo(timezone))


def local_stamp(epoch_ms: int | None, timezone: str) -> str:
    """``Mon 7 Jan 2030, 09:00 EST``: the day, the wall-clock time and the zone's
    abbreviation at that instant (EST or EDT, as the date has it); "—" for none."""
    if epoch_ms is None:
        return "—"
    when = local_time(epoch_ms, timezone)
    return f"{when:%a} {when.day} {when:%b %Y, %H:%M} {when.tzname()}"
