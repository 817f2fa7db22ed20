"""Properties of the off-peak split and of costs, over generated times, zones and windows."""

from datetime import UTC, datetime, time, timedelta
from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from billing.pricing import (
    Allocation,
    HeldInterval,
    PriceTable,
    Rates,
    cost_for_intervals,
    estimate,
)
from scheduling.offpeak import split_hours
from tests.world import world_price_table, world_rates

ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Asia/Shanghai", "Asia/Kolkata", "Australia/Lord_Howe"]

starts = st.datetimes(
    min_value=datetime(2024, 1, 1), max_value=datetime(2028, 12, 31), timezones=st.just(UTC)
)
durations = st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=20))
clock_times = st.builds(time, st.integers(0, 23), st.sampled_from([0, 15, 30, 45]))
windows = st.lists(
    st.tuples(clock_times, clock_times).filter(lambda window: window[0] != window[1]), max_size=3
).map(tuple)
allocations = st.builds(
    Allocation,
    share=st.sampled_from([Decimal(0), Decimal("0.25"), Decimal(1) / 3, Decimal(1), Decimal(8)]),
    vendor=st.just("nvidia"),
    gpu_model=st.sampled_from(["H100-80GB", "A100-80GB", "RTX-4090-24GB"]),
    cpu_cores=st.integers(0, 64),
    memory_gib=st.integers(0, 512),
)

PROPERTY_SETTINGS = settings(max_examples=150, deadline=None)


@PROPERTY_SETTINGS
@given(start=starts, duration=durations, windows=windows, zone=st.sampled_from(ZONES))
def test_split_parts_sum_to_the_duration(start, duration, windows, zone):
    split = split_hours(start, duration, windows, zone)
    assert split.peak >= timedelta(0)
    assert split.offpeak >= timedelta(0)
    assert split.peak + split.offpeak == duration


@PROPERTY_SETTINGS
@given(start=starts, duration=durations, zone=st.sampled_from(ZONES))
def test_default_window_holds_at_most_nine_hours_a_day(start, duration, zone):
    # 00:00-08:00 is 8 h a day (9 h on a fall-back day), so whole days hold at most 9 h each
    offpeak = split_hours(start, duration, ((time(0), time(8)),), zone).offpeak
    days = duration // timedelta(days=1) + 1
    assert offpeak <= days * timedelta(hours=9)


def _two_tables() -> list[PriceTable]:
    dearer = Rates(
        currency="USD",
        gpu={
            ("nvidia", "H100-80GB"): Decimal("3.50"),
            ("nvidia", "A100-80GB"): Decimal("2.00"),
            ("nvidia", "RTX-4090-24GB"): Decimal("0.45"),
        },
        cpu_core_hour=Decimal("0.025"),
        memory_gib_hour=Decimal("0.005"),
        offpeak_windows=((time(22), time(6)),),
    )
    return [world_price_table(), PriceTable(effective_from=datetime(2026, 6, 1, tzinfo=UTC), rates=dearer)]


@PROPERTY_SETTINGS
@given(
    start=starts,
    shorter=durations,
    extra=durations,
    allocation=allocations,
    priority=st.integers(0, 100),
    spot=st.booleans(),
    zone=st.sampled_from(ZONES),
)
def test_cost_never_falls_when_a_job_holds_longer(start, shorter, extra, allocation, priority, spot, zone):
    tables = _two_tables()

    def cost(duration: timedelta) -> Decimal:
        interval = HeldInterval(start, start + duration, allocation, spot=spot)
        return cost_for_intervals([interval], tables, priority=priority, tz=zone).total

    assert Decimal(0) <= cost(shorter) <= cost(shorter + extra)


@PROPERTY_SETTINGS
@given(
    start=starts,
    duration=durations,
    allocation=allocations,
    priority=st.integers(0, 100),
    zone=st.sampled_from(ZONES),
)
def test_estimate_agrees_with_metering_under_one_table(start, duration, allocation, priority, zone):
    rates = world_rates()
    quote = estimate(rates, allocation, start=start, duration=duration, tz=zone, priority=priority)
    metered = cost_for_intervals(
        [HeldInterval(start, start + duration, allocation)], [world_price_table()], priority=priority, tz=zone
    )
    offpeak = sum((s.duration for s in metered.segments if s.offpeak), timedelta(0))
    assert quote.offpeak == offpeak
    assert quote.peak == duration - offpeak
    # the same money, up to how the last digit of the unrounded sum falls
    assert abs(quote.total - metered.total) <= Decimal("0.01")
