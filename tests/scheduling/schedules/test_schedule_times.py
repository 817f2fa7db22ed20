"""Fire times of a cron line in a time zone, as UTC instants, across daylight saving time."""

from __future__ import annotations

from datetime import UTC, datetime

from scheduling.schedule_times import fires_between, interval_after, next_fire, next_fires, runs_in_month


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def test_asia_shanghai_has_no_daylight_saving_time_two_am_is_always_six_pm_utc():
    fires = next_fires("0 2 * * *", "Asia/Shanghai", utc(2026, 3, 27), 4)
    assert fires == [utc(2026, 3, 27, 18), utc(2026, 3, 28, 18), utc(2026, 3, 29, 18), utc(2026, 3, 30, 18)]
    # the weekend Europe changes its clocks changes nothing in Shanghai
    fires = next_fires("0 2 * * *", "Asia/Shanghai", utc(2026, 10, 23), 3)
    assert fires == [utc(2026, 10, 23, 18), utc(2026, 10, 24, 18), utc(2026, 10, 25, 18)]


def test_berlin_spring_forward_a_skipped_wall_time_fires_once_just_after_the_gap():
    # 29 March 2026 02:00 CET -> 03:00 CEST: 02:30 does not exist that night
    fires = next_fires("30 2 * * *", "Europe/Berlin", utc(2026, 3, 27), 4)
    assert fires == [
        utc(2026, 3, 27, 1, 30),
        utc(2026, 3, 28, 1, 30),
        utc(2026, 3, 29, 1),
        utc(2026, 3, 30, 0, 30),
    ]


def test_berlin_fall_back_a_repeated_wall_time_fires_once_at_its_first_pass():
    # 25 October 2026 03:00 CEST -> 02:00 CET: 02:30 happens twice that night, the run once
    fires = next_fires("30 2 * * *", "Europe/Berlin", utc(2026, 10, 23), 4)
    assert fires == [
        utc(2026, 10, 23, 0, 30),
        utc(2026, 10, 24, 0, 30),
        utc(2026, 10, 25, 0, 30),
        utc(2026, 10, 26, 1, 30),
    ]
    hourly = next_fires("0 * * * *", "Europe/Berlin", utc(2026, 10, 24, 22, 30), 4)
    assert hourly == [utc(2026, 10, 24, 23), utc(2026, 10, 25, 0), utc(2026, 10, 25, 2), utc(2026, 10, 25, 3)]


def test_new_york_fire_times_follow_its_own_change_of_clocks():
    # 8 March 2026: EST (UTC-5) -> EDT (UTC-4)
    assert next_fires("0 9 * * *", "America/New_York", utc(2026, 3, 7), 2) == [
        utc(2026, 3, 7, 14),
        utc(2026, 3, 8, 13),
    ]


def test_fires_between_is_inclusive_latest_first_and_bounded():
    assert fires_between("0 * * * *", "UTC", utc(2026, 1, 1, 1), utc(2026, 1, 1, 3), 10) == [
        utc(2026, 1, 1, 3),
        utc(2026, 1, 1, 2),
        utc(2026, 1, 1, 1),
    ]
    assert len(fires_between("* * * * *", "UTC", utc(2026, 1, 1), utc(2026, 2, 1), 5)) == 5
    assert next_fire("0 * * * *", "UTC", utc(2026, 1, 1, 1)) == utc(2026, 1, 1, 2)  # strictly after


def test_interval_and_runs_in_a_month():
    assert interval_after("0 2 * * *", "Asia/Shanghai", utc(2026, 1, 1, 18)).total_seconds() == 86400
    assert runs_in_month("0 2 * * *", "Asia/Shanghai", utc(2026, 1, 1)) == 30
    assert runs_in_month("*/5 * * * *", "UTC", utc(2026, 1, 1)) == 30 * 24 * 12
    assert runs_in_month("0 9 * * 1-5", "Europe/Berlin", utc(2026, 6, 1)) == 22  # weekdays of 1-30 June 2026
