from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from core.errors import ValidationFailed
from routines import occurrence

UTC = ZoneInfo("UTC")
NY = ZoneInfo("America/New_York")
BERLIN = ZoneInfo("Europe/Berlin")


def ms(*args: int, tz: ZoneInfo = UTC) -> int:
    return occurrence.to_ms(dt.datetime(*args, tzinfo=tz))


def local(slot: int, tz: ZoneInfo) -> str:
    return occurrence.from_ms(slot, tz).isoformat()


def test_it_parses_five_and_six_field_specs_and_one_shots():
    assert occurrence.parse_spec("*/5 * * * *", UTC).cron_fields == ("*/5", "*", "*", "*", "*")
    six = occurrence.parse_spec("30 0 9 * * *", UTC)
    # Six fields are seconds-first: 09:00:30 daily.
    start = ms(2030, 1, 1)
    assert local(occurrence.next_after(six, UTC, start), UTC) == "2030-01-01T09:00:30+00:00"
    once = occurrence.parse_spec("once@2030-02-01T09:00:00Z", UTC)
    assert once.once_at_ms == ms(2030, 2, 1, 9)
    naive_once = occurrence.parse_spec("once@2030-02-01T09:00", BERLIN)
    assert naive_once.once_at_ms == ms(2030, 2, 1, 8)


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("* * * *", "has 4 fields"),
        ("0 0 * * * * 2030", "has 7 fields"),
        ("61 * * * *", "not a valid cron expression"),
        ("0 0 31 2 *", "never matches"),
        ("once@tomorrow", "not an ISO-8601"),
        ("", "must be a cron expression"),
    ],
)
def test_it_names_what_is_wrong_with_a_bad_spec(spec: str, words: str):
    with pytest.raises(ValidationFailed) as info:
        occurrence.parse_spec(spec, UTC)
    assert info.value.field == "cron_spec"
    assert words in info.value.detail


def test_it_refuses_unknown_timezones_and_past_one_shots():
    with pytest.raises(ValidationFailed, match="unknown timezone"):
        occurrence.validate_new("0 9 * * *", "Mars/Olympus", ms(2030, 1, 1))
    with pytest.raises(ValidationFailed, match="in the past"):
        occurrence.validate_new("once@2029-12-31T00:00Z", "UTC", ms(2030, 1, 1))


def test_fall_back_fires_a_daily_time_once_in_new_york():
    spec = occurrence.parse_spec("30 1 * * *", NY)
    first = occurrence.next_after(spec, NY, ms(2024, 11, 2, 12, tz=NY))
    assert local(first, NY) == "2024-11-03T01:30:00-04:00"
    # croniter alone would next give 01:30-05:00 the same night: deduped.
    second = occurrence.next_after(spec, NY, first)
    assert local(second, NY) == "2024-11-04T01:30:00-05:00"


def test_fall_back_still_fires_every_real_hour_for_an_hourly_spec():
    spec = occurrence.parse_spec("0 * * * *", NY)
    slot = ms(2024, 11, 3, 0, tz=NY)
    seen = []
    for _ in range(3):
        slot = occurrence.next_after(spec, NY, slot)
        seen.append(local(slot, NY))
    assert seen == [
        "2024-11-03T01:00:00-04:00",
        "2024-11-03T01:00:00-05:00",
        "2024-11-03T02:00:00-05:00",
    ]


def test_fall_back_fires_once_in_berlin():
    spec = occurrence.parse_spec("30 2 * * *", BERLIN)
    first = occurrence.next_after(spec, BERLIN, ms(2024, 10, 26, 12, tz=BERLIN))
    second = occurrence.next_after(spec, BERLIN, first)
    assert local(first, BERLIN) == "2024-10-27T02:30:00+02:00"
    assert local(second, BERLIN) == "2024-10-28T02:30:00+01:00"


@pytest.mark.parametrize(
    ("tz", "spec", "start", "expected"),
    [
        (BERLIN, "30 2 * * *", (2024, 3, 30, 12), "2024-03-31T03:00:00+02:00"),
        (NY, "30 2 * * *", (2024, 3, 9, 12), "2024-03-10T03:00:00-04:00"),
    ],
)
def test_spring_forward_gap_fires_at_the_next_valid_time(tz, spec, start, expected):
    parsed = occurrence.parse_spec(spec, tz)
    slot = occurrence.next_after(parsed, tz, ms(*start, tz=tz))
    assert local(slot, tz) == expected
    # ...and the day after is back on 02:30.
    following = occurrence.from_ms(occurrence.next_after(parsed, tz, slot), tz)
    assert (following.hour, following.minute) == (2, 30)
    assert following - occurrence.from_ms(slot, tz) < dt.timedelta(days=1)


def test_a_new_routine_never_gets_a_slot_at_or_before_now():
    spec = occurrence.parse_spec("0 9 * * *", UTC)
    now = ms(2030, 1, 1, 9)  # exactly on a slot
    assert occurrence.first_slot(spec, UTC, now) == ms(2030, 1, 2, 9)


def test_catch_up_policies_after_three_hours_of_downtime():
    spec = occurrence.parse_spec("0 * * * *", UTC)
    due = ms(2030, 1, 1, 1)
    now = ms(2030, 1, 1, 3, 10)
    latest = occurrence.plan_fire(spec, UTC, due, now, "latest")
    assert latest.slots == (ms(2030, 1, 1, 3),)
    assert latest.next_run_at == ms(2030, 1, 1, 4)
    skip = occurrence.plan_fire(spec, UTC, due, now, "skip")
    assert skip.slots == ()
    assert skip.next_run_at == ms(2030, 1, 1, 4)
    every = occurrence.plan_fire(spec, UTC, due, now, "all")
    assert every.slots == (ms(2030, 1, 1, 1), ms(2030, 1, 1, 2), ms(2030, 1, 1, 3))


def test_bounded_all_never_storms():
    spec = occurrence.parse_spec("* * * * *", UTC)
    plan = occurrence.plan_fire(spec, UTC, ms(2030, 1, 1), ms(2030, 1, 2), "all")
    assert len(plan.slots) == occurrence.CATCH_UP_ALL_LIMIT
    assert plan.slots[-1] == ms(2030, 1, 2)


def test_a_one_shot_fires_once_and_is_spent():
    spec = occurrence.parse_spec("once@2030-01-01T09:00Z", UTC)
    plan = occurrence.plan_fire(spec, UTC, ms(2030, 1, 1, 9), ms(2030, 1, 1, 9), "latest")
    assert plan.slots == (ms(2030, 1, 1, 9),)
    assert plan.next_run_at is None
