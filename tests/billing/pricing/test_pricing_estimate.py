"""Estimates (quotes) worked out by hand."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from billing.pricing import (
    Allocation,
    PriceTable,
    Rates,
    estimate,
    quantize_money,
    table_in_force,
)
from tests.world import world_rates

D = Decimal
H = timedelta(hours=1)


def half_a100() -> Allocation:
    return Allocation(share=D("0.5"), vendor="nvidia", gpu_model="A100-80GB", cpu_cores=4, memory_gib=16)


def test_ten_hours_from_six_in_the_morning():
    # 2 h off-peak x 0.954 + 8 h peak x 1.59 = 1.908 + 12.72 = 14.628 -> 14.63
    quote = estimate(
        world_rates(),
        half_a100(),
        start=datetime(2026, 3, 2, 6, tzinfo=UTC),
        duration=10 * H,
        tz="UTC",
        priority=50,
    )
    assert quote.currency == "USD"
    assert (quote.price_per_hour, quote.price_per_hour_offpeak) == (D("1.5900"), D("0.9540"))
    assert (quote.offpeak, quote.peak) == (2 * H, 8 * H)
    assert quote.total == D("14.63")


def test_replicas_multiply_the_total_not_the_hourly_rate():
    quote = estimate(
        world_rates(),
        half_a100(),
        start=datetime(2026, 3, 2, 6, tzinfo=UTC),
        duration=10 * H,
        tz="UTC",
        priority=50,
        replicas=10,
    )
    assert quote.price_per_hour == D("1.5900")
    assert quote.amount == D("146.28")
    assert quote.total == D("146.28")  # 10 x 14.628, rounded once


def test_roles_are_summed_unrounded_then_rounded_once():
    # two roles of 20 minutes at 0.10 / h (0.0333.. each): 0.07 rounded once, 0.06 if each were rounded
    slice_ = Allocation(share=D("0.25"), vendor="nvidia", gpu_model="RTX-4090-24GB")
    start = datetime(2026, 3, 2, 9, tzinfo=UTC)
    roles = [
        estimate(world_rates(), slice_, start=start, duration=timedelta(minutes=20), tz="UTC") for _ in "ab"
    ]
    assert [role.total for role in roles] == [D("0.03"), D("0.03")]
    assert quantize_money(sum(role.amount for role in roles), "USD") == D("0.07")


def test_spot_and_offpeak_together_in_an_estimate():
    # one H100 on spot, no CPU/memory, priority 0, 4 h from 06:00:
    # 2 h x 3.00 x 0.6 x 0.4 + 2 h x 3.00 x 0.4 = 1.44 + 2.40
    h100 = Allocation(share=D(1), vendor="nvidia", gpu_model="H100-80GB")
    quote = estimate(
        world_rates(), h100, start=datetime(2026, 3, 2, 6, tzinfo=UTC), duration=4 * H, tz="UTC", spot=True
    )
    assert (quote.price_per_hour, quote.price_per_hour_offpeak) == (D("1.2000"), D("0.7200"))
    assert quote.total == D("3.84")


def test_total_is_rounded_only_at_the_end():
    # a 4-way time slice of an RTX 4090 costs 0.10 per hour; 20 minutes is 0.0333.. per replica,
    # so 3 replicas cost 0.10 (rounding each replica to cents first would give 0.09)
    slice_ = Allocation(share=D("0.25"), vendor="nvidia", gpu_model="RTX-4090-24GB")
    quote = estimate(
        world_rates(),
        slice_,
        start=datetime(2026, 3, 2, 9, tzinfo=UTC),
        duration=timedelta(minutes=20),
        tz="UTC",
        replicas=3,
    )
    assert quote.price_per_hour == D("0.1000")
    assert quote.total == D("0.10")


def test_yen_totals_have_no_decimals():
    rates = Rates(
        currency="JPY", gpu={("nvidia", "A100-80GB"): D("250.5")}, cpu_core_hour=0, memory_gib_hour=0
    )
    gpu = Allocation(share=D(1), vendor="nvidia", gpu_model="A100-80GB")
    quote = estimate(rates, gpu, start=datetime(2026, 3, 2, 12, tzinfo=UTC), duration=H, tz="UTC")
    assert quote.total == D("251")


def test_a_table_taking_effect_tomorrow_does_not_change_todays_quote():
    today = datetime(2026, 3, 10, 12, tzinfo=UTC)
    current = PriceTable(effective_from=datetime(2026, 1, 1, tzinfo=UTC), rates=world_rates(), name="current")
    dearer = Rates(
        currency="USD",
        gpu={("nvidia", "A100-80GB"): D("2.50")},
        cpu_core_hour=D("0.03"),
        memory_gib_hour=D("0.01"),
    )
    tomorrow = PriceTable(effective_from=datetime(2026, 3, 11, tzinfo=UTC), rates=dearer, name="tomorrow")

    def quote_at(moment: datetime, tables: list[PriceTable]) -> Decimal:
        rates = table_in_force(tables, moment).rates
        return estimate(rates, half_a100(), start=moment, duration=10 * H, tz="UTC", priority=50).total

    # 12:00 + 10 h is all peak: 10 x 1.59
    assert quote_at(today, [current]) == D("15.90")
    assert quote_at(today, [current, tomorrow]) == D("15.90")
    # once it is in force it prices new quotes: (1.25 + 0.12 + 0.16) x 1.5 = 2.295 per hour
    assert quote_at(today + timedelta(days=1), [current, tomorrow]) == D("22.95")


def test_bad_estimate_input_is_refused():
    start = datetime(2026, 3, 2, 6, tzinfo=UTC)
    with pytest.raises(ValueError, match="duration must not be negative"):
        estimate(world_rates(), half_a100(), start=start, duration=-H, tz="UTC")
    with pytest.raises(ValueError, match="start must be a timezone-aware"):
        estimate(world_rates(), half_a100(), start=datetime(2026, 3, 2), duration=H, tz="UTC")
    with pytest.raises(ValueError, match="replicas must be at least 1"):
        estimate(world_rates(), half_a100(), start=start, duration=H, tz="UTC", replicas=0)
    unknown = Allocation(share=D(1), vendor="nvidia", gpu_model="B200-192GB")
    with pytest.raises(ValueError, match="no GPU rate for nvidia B200-192GB"):
        estimate(world_rates(), unknown, start=start, duration=H, tz="UTC")
