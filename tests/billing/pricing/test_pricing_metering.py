"""Final cost of held intervals, worked out by hand."""

from datetime import UTC, datetime, time, timedelta
from decimal import Decimal

import pytest

from billing.pricing import (
    Allocation,
    HeldInterval,
    PriceTable,
    Rates,
    cost_for_intervals,
)
from tests.world import world_price_table, world_rates

D = Decimal
H = timedelta(hours=1)

# one A100, 2 cores, 8 GiB
A100 = Allocation(share=D(1), vendor="nvidia", gpu_model="A100-80GB", cpu_cores=2, memory_gib=8)


def at(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 3, day, hour, minute, tzinfo=UTC)


def tables() -> list[PriceTable]:
    first = PriceTable(effective_from=datetime(2026, 1, 1, tzinfo=UTC), rates=world_rates(), name="january")
    dearer = Rates(
        currency="USD",
        gpu={("nvidia", "A100-80GB"): D("2.00")},
        cpu_core_hour=D("0.02"),
        memory_gib_hour=D("0.005"),
    )
    return [first, PriceTable(effective_from=at(10, 9), rates=dearer, name="march-10")]


def test_across_an_offpeak_boundary_and_a_price_table_change():
    # priority 50. Old table: (1.80 + 0.04 + 0.04) x 1.5 = 2.82 peak, 1.692 off-peak.
    # New table from 09:00: (2.00 + 0.04 + 0.04) x 1.5 = 3.12 peak.
    # 07-08 off-peak old 1.692 + 08-09 peak old 2.82 + 09-11 peak new 6.24 = 10.752
    cost = cost_for_intervals([HeldInterval(at(10, 7), at(10, 11), A100)], tables(), priority=50, tz="UTC")
    assert cost.currency == "USD"
    assert cost.total == D("10.75")
    pieces = [(s.start.hour, s.end.hour, s.table.name, s.offpeak, s.price_per_hour) for s in cost.segments]
    assert pieces == [
        (7, 8, "january", True, D("1.6920")),
        (8, 9, "january", False, D("2.8200")),
        (9, 11, "march-10", False, D("3.1200")),
    ]
    assert sum(s.amount for s in cost.segments) == D("10.752")


def test_preempted_replica_restarted_on_spot_pays_for_both_stretches():
    # second stretch 23:30 -> 00:30 on spot, new table:
    # 0.5 h x 3.12 x 0.4 + 0.5 h x 3.12 x 0.6 x 0.4 = 0.624 + 0.3744; with the first: 11.7504
    intervals = [
        HeldInterval(at(10, 7), at(10, 11), A100),
        HeldInterval(at(10, 23, 30), at(11, 0, 30), A100, spot=True),
    ]
    cost = cost_for_intervals(intervals, tables(), priority=50, tz="UTC")
    assert cost.total == D("11.75")
    assert [(s.offpeak, s.spot, s.price_per_hour) for s in cost.segments[3:]] == [
        (False, True, D("1.2480")),
        (True, True, D("0.7488")),
    ]


def test_offpeak_split_in_the_platform_time_zone():
    # Shanghai (UTC+8): the 00:00-08:00 window is 16:00-24:00 UTC. 15:00-17:00 UTC on an RTX 4090
    # at priority 0 is 1 h x 0.40 + 1 h x 0.24 = 0.64
    rtx = Allocation(share=D(1), vendor="nvidia", gpu_model="RTX-4090-24GB")
    cost = cost_for_intervals(
        [HeldInterval(at(10, 15), at(10, 17), rtx)], [world_price_table()], priority=0, tz="Asia/Shanghai"
    )
    assert cost.total == D("0.64")


def test_new_table_uses_its_own_offpeak_windows():
    # from 09:00 the off-peak window is 09:30-12:00 at 50 % off (the old one was 00:00-08:00 at 40 %)
    changed = Rates(
        currency="USD",
        gpu={("nvidia", "A100-80GB"): D("1.80")},
        cpu_core_hour=D(0),
        memory_gib_hour=D(0),
        offpeak_windows=((time(9, 30), time(12)),),
        offpeak_discount=D("0.50"),
    )
    gpu = Allocation(share=D(1), vendor="nvidia", gpu_model="A100-80GB")
    price_tables = [world_price_table(), PriceTable(effective_from=at(10, 9), rates=changed, name="changed")]
    # 08-09 peak 1.80 + 09:00-09:30 peak 0.90 + 09:30-10:00 off 0.45 = 3.15
    cost = cost_for_intervals([HeldInterval(at(10, 8), at(10, 10), gpu)], price_tables, priority=0, tz="UTC")
    assert cost.total == D("3.15")


def test_many_short_stretches_are_rounded_once():
    # 30 one-minute stretches at 0.10 / h = 0.05 (each alone would round to 0.00)
    slice_ = Allocation(share=D("0.25"), vendor="nvidia", gpu_model="RTX-4090-24GB")
    intervals = [HeldInterval(at(10, 12, m), at(10, 12, m + 1), slice_) for m in range(0, 60, 2)]
    assert cost_for_intervals(intervals, [world_price_table()], priority=0, tz="UTC").total == D("0.05")


def test_a_new_table_never_changes_past_charges():
    past = [HeldInterval(at(9, 6), at(9, 20), A100)]
    before = cost_for_intervals(past, tables()[:1], priority=10, tz="UTC")
    after = cost_for_intervals(past, tables(), priority=10, tz="UTC")
    assert before.total == after.total
    assert before.total > 0


def test_empty_and_zero_length_intervals_cost_nothing():
    assert cost_for_intervals([], tables(), priority=0, tz="UTC").total == D("0.00")
    assert (
        cost_for_intervals([HeldInterval(at(10, 7), at(10, 7), A100)], tables(), priority=0, tz="UTC").total
        == 0
    )


def test_bad_metering_input_is_refused():
    with pytest.raises(ValueError, match="interval end .* is before its start"):
        HeldInterval(at(10, 8), at(10, 7), A100)
    with pytest.raises(ValueError, match="interval start must be a timezone-aware"):
        HeldInterval(datetime(2026, 3, 10, 7), at(10, 8), A100)
    with pytest.raises(ValueError, match="no price table is in force at 2025-12-31"):
        cost_for_intervals(
            [HeldInterval(datetime(2025, 12, 31, tzinfo=UTC), at(1, 1), A100)], tables(), priority=0, tz="UTC"
        )
    with pytest.raises(ValueError, match="no price tables given"):
        cost_for_intervals([], [], priority=0, tz="UTC")
    euro = Rates(currency="EUR", gpu={("nvidia", "A100-80GB"): D("1.70")}, cpu_core_hour=0, memory_gib_hour=0)
    mixed = [*tables(), PriceTable(effective_from=at(20, 0), rates=euro, name="euro")]
    with pytest.raises(ValueError, match="different currencies: EUR, USD"):
        cost_for_intervals([HeldInterval(at(19, 0), at(21, 0), A100)], mixed, priority=0, tz="UTC")
