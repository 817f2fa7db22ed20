"""Off-peak windows: splitting time into peak and off-peak, across midnight and DST."""

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from scheduling.offpeak import (
    DEFAULT_OFFPEAK_WINDOWS,
    format_windows,
    is_offpeak,
    next_offpeak_start,
    offpeak_intervals,
    parse_windows,
    split_hours,
)

H = timedelta(hours=1)
NIGHT = ((time(22), time(6)),)  # wraps midnight
BERLIN = ZoneInfo("Europe/Berlin")


def utc(day: int, hour: int, minute: int = 0, month: int = 3) -> datetime:
    return datetime(2026, month, day, hour, minute, tzinfo=UTC)


def test_ten_hours_from_six_is_two_offpeak_and_eight_peak():
    split = split_hours(utc(2, 6), 10 * H, DEFAULT_OFFPEAK_WINDOWS, "UTC")
    assert (split.offpeak, split.peak) == (2 * H, 8 * H)


def test_ten_hours_from_eight_is_all_peak():
    split = split_hours(utc(2, 8), 10 * H, DEFAULT_OFFPEAK_WINDOWS, "UTC")
    assert (split.offpeak, split.peak) == (timedelta(0), 10 * H)


def test_crossing_midnight_into_the_window():
    # 20:00 -> 06:00 next day: 4 h peak, then 6 h of the 00:00-08:00 window
    split = split_hours(utc(2, 20), 10 * H, DEFAULT_OFFPEAK_WINDOWS, "UTC")
    assert (split.peak, split.offpeak) == (4 * H, 6 * H)


def test_wrapping_window_from_before_it_opens():
    split = split_hours(utc(2, 20), 10 * H, NIGHT, "UTC")
    assert (split.peak, split.offpeak) == (2 * H, 8 * H)


def test_wrapping_window_already_open_since_the_day_before():
    # 03:00 is inside the window that opened at 22:00 the previous day
    split = split_hours(utc(3, 3), 5 * H, NIGHT, "UTC")
    assert (split.offpeak, split.peak) == (3 * H, 2 * H)


def test_several_windows_and_minutes():
    windows = parse_windows("22:00-06:00, 12:00-13:30")
    split = split_hours(utc(2, 0), 24 * H, windows, "UTC")
    assert split.offpeak == 6 * H + 90 * timedelta(minutes=1) + 2 * H
    assert split.total == 24 * H


def test_overlapping_windows_are_not_counted_twice():
    windows = ((time(0), time(8)), (time(6), time(10)))
    assert split_hours(utc(2, 0), 24 * H, windows, "UTC").offpeak == 10 * H


def test_a_week_has_seven_nights():
    assert split_hours(utc(2, 0), 7 * 24 * H, DEFAULT_OFFPEAK_WINDOWS, "UTC").offpeak == 56 * H


def test_no_windows_means_all_peak():
    assert split_hours(utc(2, 0), 5 * H, (), "UTC").peak == 5 * H


def test_zero_duration():
    split = split_hours(utc(2, 3), timedelta(0), DEFAULT_OFFPEAK_WINDOWS, "UTC")
    assert (split.peak, split.offpeak) == (timedelta(0), timedelta(0))


def test_windows_are_read_in_the_platform_time_zone():
    # 20:00 UTC is 04:00 in Shanghai: 4 h left of the night window, then 6 h peak
    split = split_hours(utc(5, 20, month=1), 10 * H, DEFAULT_OFFPEAK_WINDOWS, "Asia/Shanghai")
    assert (split.offpeak, split.peak) == (4 * H, 6 * H)


def test_spring_forward_night_is_seven_hours_long():
    # Europe/Berlin 2026-03-29: clocks go 02:00 -> 03:00, so 00:00-08:00 local is 7 real hours
    # and the whole local day is 23 real hours
    midnight = datetime(2026, 3, 29, 0, 0, tzinfo=BERLIN)
    split = split_hours(midnight, 23 * H, DEFAULT_OFFPEAK_WINDOWS, BERLIN)
    assert (split.offpeak, split.peak) == (7 * H, 16 * H)
    # one more real hour reaches 00:00 CEST of the next night
    assert split_hours(midnight, 24 * H, DEFAULT_OFFPEAK_WINDOWS, BERLIN).offpeak == 8 * H


def test_fall_back_night_is_nine_hours_long():
    # Europe/Berlin 2026-10-25: clocks go 03:00 -> 02:00, so 00:00-08:00 local is 9 real hours
    # and the whole local day is 25 real hours
    midnight = datetime(2026, 10, 25, 0, 0, tzinfo=BERLIN)
    split = split_hours(midnight, 25 * H, DEFAULT_OFFPEAK_WINDOWS, "Europe/Berlin")
    assert (split.offpeak, split.peak) == (9 * H, 16 * H)


def test_duration_is_elapsed_time_even_when_start_carries_the_local_zone():
    # 22:00 CEST on the fall-back eve plus 12 real hours ends at 09:00 CET; window 00:00-08:00 is 9 h
    start = datetime(2026, 10, 24, 22, 0, tzinfo=BERLIN)
    split = split_hours(start, 12 * H, DEFAULT_OFFPEAK_WINDOWS, BERLIN)
    assert (split.peak, split.offpeak) == (3 * H, 9 * H)


def test_offpeak_intervals_are_merged_utc_instants():
    pieces = offpeak_intervals(utc(2, 20), utc(4, 4), NIGHT, "UTC")
    assert pieces == [(utc(2, 22), utc(3, 6)), (utc(3, 22), utc(4, 4))]


def test_is_offpeak_includes_the_start_and_excludes_the_end():
    assert is_offpeak(utc(2, 0), DEFAULT_OFFPEAK_WINDOWS, "UTC")
    assert is_offpeak(utc(2, 7, 59), DEFAULT_OFFPEAK_WINDOWS, "UTC")
    assert not is_offpeak(utc(2, 8), DEFAULT_OFFPEAK_WINDOWS, "UTC")
    assert is_offpeak(utc(2, 23), NIGHT, "UTC")


def test_next_offpeak_start():
    assert next_offpeak_start(utc(2, 12), DEFAULT_OFFPEAK_WINDOWS, "UTC") == utc(3, 0)
    assert next_offpeak_start(utc(2, 3), DEFAULT_OFFPEAK_WINDOWS, "UTC") == utc(2, 3)  # already off-peak
    assert next_offpeak_start(utc(2, 12), NIGHT, "UTC") == utc(2, 22)
    # midnight in Berlin (CET, UTC+1) is 23:00 UTC
    assert next_offpeak_start(utc(2, 12), DEFAULT_OFFPEAK_WINDOWS, BERLIN) == utc(2, 23)
    with pytest.raises(ValueError, match="no off-peak windows"):
        next_offpeak_start(utc(2, 12), (), "UTC")


def test_parse_and_format_windows_round_trip():
    windows = parse_windows("22:00-06:00,12:00-13:30")
    assert windows == ((time(22), time(6)), (time(12), time(13, 30)))
    assert format_windows(windows) == "22:00-06:00, 12:00-13:30"
    assert parse_windows("") == ()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("22:00", "must look like HH:MM-HH:MM"),
        ("25:00-06:00", "'25:00' is not a time"),
        ("10:00-10:00", "empty"),
    ],
)
def test_bad_windows_are_refused(text, message):
    with pytest.raises(ValueError, match=message):
        parse_windows(text)


def test_bad_split_input_is_refused():
    with pytest.raises(ValueError, match="duration must not be negative"):
        split_hours(utc(2, 0), -H, DEFAULT_OFFPEAK_WINDOWS, "UTC")
    with pytest.raises(ValueError, match="start must be a timezone-aware"):
        split_hours(datetime(2026, 3, 2), H, DEFAULT_OFFPEAK_WINDOWS, "UTC")
    with pytest.raises(ValueError, match="unknown time zone 'Mars/Olympus'"):
        split_hours(utc(2, 0), H, DEFAULT_OFFPEAK_WINDOWS, "Mars/Olympus")
    with pytest.raises(ValueError, match="duration must be a timedelta"):
        split_hours(utc(2, 0), 3600, DEFAULT_OFFPEAK_WINDOWS, "UTC")
    with pytest.raises(ValueError, match="end .* is before start"):
        offpeak_intervals(utc(2, 5), utc(2, 4), DEFAULT_OFFPEAK_WINDOWS, "UTC")
