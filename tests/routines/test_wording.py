"""Routines in words: cron specs as sentences, ledger stamps as local wall-clock times."""

from __future__ import annotations

import datetime as dt

import pytest

from routines.occurrence import to_ms
from routines.wording import local_stamp, schedule_in_words


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("0 * * * *", "Every hour"),
        ("*/15 * * * *", "Every 15 minutes"),
        ("0 9 * * 1-5", "At 09:00, Monday through Friday"),
        ("0 9 * * mon-fri", "At 09:00, Monday through Friday"),
        ("30 17 * * 5", "At 17:30, only on Friday"),
        ("0 9 1 * *", "At 09:00, on day 1 of the month"),
        ("0 9,17 * * *", "At 09:00 and 17:00"),
        # croniter's 6-field shape: seconds first (not a trailing year).
        ("30 0 9 * * 1-5", "At 09:00:30, Monday through Friday"),
    ],
)
def test_a_cron_spec_reads_as_a_sentence(spec, words):
    assert schedule_in_words(spec, "UTC") == words


def test_a_one_shot_reads_as_its_local_date():
    assert (
        schedule_in_words("once@2030-01-07T09:00", "America/New_York")
        == "Once, at Mon 7 Jan 2030, 09:00 EST"
    )


def test_a_spec_the_describer_cannot_read_is_shown_as_it_is():
    assert schedule_in_words("not a cron", "UTC") == "not a cron"


def test_a_stamp_is_shown_in_the_routines_timezone_with_its_abbreviation():
    winter = to_ms(dt.datetime(2030, 1, 7, 14, 0, tzinfo=dt.UTC))
    summer = to_ms(dt.datetime(2030, 7, 8, 13, 0, tzinfo=dt.UTC))
    assert local_stamp(winter, "America/New_York") == "Mon 7 Jan 2030, 09:00 EST"
    assert local_stamp(summer, "America/New_York") == "Mon 8 Jul 2030, 09:00 EDT"
    assert local_stamp(winter, "UTC") == "Mon 7 Jan 2030, 14:00 UTC"
    assert local_stamp(None, "UTC") == "—"
