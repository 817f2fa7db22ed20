"""Rates, hourly prices and price tables, worked out by hand."""

from datetime import UTC, datetime, time
from decimal import Decimal

import pytest

from billing.pricing import (
    Allocation,
    PriceTable,
    Rates,
    hourly_price,
    quantize_money,
    table_in_force,
)
from tests.world import world_rates

D = Decimal


def half_a100() -> Allocation:
    return Allocation(share=D("0.5"), vendor="nvidia", gpu_model="A100-80GB", cpu_cores=4, memory_gib=16)


def one_h100() -> Allocation:
    return Allocation(share=D(1), vendor="nvidia", gpu_model="H100-80GB", cpu_cores=8, memory_gib=64)


def test_a_price_list_has_the_platform_window_and_discounts_by_default():
    rates = world_rates()
    assert rates.currency == "USD"
    assert rates.gpu_rate("nvidia", "H100-80GB") == D("3.00")
    assert rates.gpu_rate("nvidia", "A100-80GB") == D("1.80")
    assert rates.gpu_rate("nvidia", "L40S-48GB") == D("1.00")
    assert rates.gpu_rate("nvidia", "RTX-4090-24GB") == D("0.40")
    assert rates.gpu_rate("amd", "MI300X-192GB") == D("2.10")
    assert rates.cpu_core_hour == D("0.02")
    assert rates.memory_gib_hour == D("0.005")
    assert rates.offpeak_windows == ((time(0), time(8)),)
    assert rates.offpeak_discount == D("0.40")
    assert rates.spot_discount == D("0.60")


def test_gpu_rate_lookup_ignores_case_and_names_unknown_models():
    rates = world_rates()
    assert rates.gpu_rate("NVIDIA", "a100-80gb") == D("1.80")
    with pytest.raises(ValueError, match="no GPU rate for nvidia B200-192GB"):
        rates.gpu_rate("nvidia", "B200-192GB")


def test_half_a100_at_priority_50_costs_1_59_peak_and_0_954_offpeak():
    # (0.5 x 1.80 + 4 x 0.02 + 16 x 0.005) x (1 + 50/100) = (0.90 + 0.08 + 0.08) x 1.5
    rates = world_rates()
    assert hourly_price(rates, half_a100(), priority=50) == D("1.5900")
    assert hourly_price(rates, half_a100(), priority=50, offpeak=True) == D("0.9540")


def test_spot_and_offpeak_factors_multiply():
    # one H100, 8 cores, 64 GiB: 3.00 + 0.16 + 0.32 = 3.48 per hour before factors
    rates = world_rates()
    assert hourly_price(rates, one_h100()) == D("3.4800")
    assert hourly_price(rates, one_h100(), spot=True) == D("1.3920")  # x 0.4
    assert hourly_price(rates, one_h100(), offpeak=True, spot=True) == D("0.8352")  # x 0.6 x 0.4
    # priority 20: 3.48 x 1.2 x 0.6 x 0.4 = 1.00224 -> kept to 4 places
    assert hourly_price(rates, one_h100(), priority=20, offpeak=True, spot=True) == D("1.0022")


def test_amd_is_priced_from_its_own_rate():
    mi300 = Allocation(share=D(1), vendor="amd", gpu_model="MI300X-192GB")
    assert hourly_price(world_rates(), mi300) == D("2.1000")


def test_cpu_only_allocation_needs_no_gpu_model():
    cpu_only = Allocation(share=D(0), cpu_cores=D("2.5"), memory_gib=D(10))
    assert hourly_price(world_rates(), cpu_only) == D("0.1000")  # 0.05 + 0.05


def test_allocation_from_scheduler_units():
    # 4000 milli-CPU and 16384 MiB are 4 cores and 16 GiB: the worked example again
    allocation = Allocation.from_units(D("0.5"), "nvidia", "A100-80GB", cpu_milli=4000, mem_mib=16384)
    assert allocation == half_a100()
    assert Allocation.from_units(D(0), None, None, cpu_milli=500, mem_mib=512).memory_gib == D("0.5")
    with pytest.raises(ValueError, match="cpu_milli must be at least 0"):
        Allocation.from_units(D(0), None, None, cpu_milli=-1, mem_mib=0)


def test_priority_multiplier_is_configurable():
    rates = Rates(
        currency="USD",
        gpu={("nvidia", "A100-80GB"): D("1.80")},
        cpu_core_hour=D("0.02"),
        memory_gib_hour=D("0.005"),
        priority_base=D("1.10"),
        priority_step=D("0.02"),
    )
    assert rates.priority_multiplier(0) == D("1.10")
    assert rates.priority_multiplier(50) == D("2.10")
    # (0.90 + 0.08 + 0.08) x 2.10 = 2.226
    assert hourly_price(rates, half_a100(), priority=50) == D("2.2260")


def test_discounts_are_configurable():
    rates = Rates(
        currency="EUR",
        gpu={("nvidia", "H100-80GB"): D("2.50")},
        cpu_core_hour=D(0),
        memory_gib_hour=D(0),
        offpeak_discount=D("0.25"),
        spot_discount=D("0.50"),
    )
    gpu = Allocation(share=D(1), vendor="nvidia", gpu_model="H100-80GB")
    assert hourly_price(rates, gpu, offpeak=True) == D("1.8750")
    assert hourly_price(rates, gpu, offpeak=True, spot=True) == D("0.9375")


def test_money_rounds_to_the_currency_minor_unit():
    assert quantize_money(D("14.625"), "USD") == D("14.63")
    assert quantize_money(D("14.625"), "EUR") == D("14.63")
    assert quantize_money(D("14.624"), "CNY") == D("14.62")
    assert quantize_money(D("250.5"), "JPY") == D("251")
    assert quantize_money(D("250.5"), "JPY").as_tuple().exponent == 0
    with pytest.raises(ValueError, match="unknown currency 'XYZ'"):
        quantize_money(D(1), "XYZ")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"currency": "ABC"}, "unknown currency 'ABC'"),
        ({"cpu_core_hour": 0.02}, "CPU rate per core-hour must be a Decimal"),
        ({"cpu_core_hour": D("-0.02")}, "CPU rate per core-hour must not be negative"),
        ({"memory_gib_hour": D("0.00001")}, "more than 4 decimal places"),
        ({"gpu": {("nvidia", "A100-80GB"): D("1.234567")}}, "GPU rate for nvidia A100-80GB .* more than 4"),
        ({"gpu": {("nvidia",): D(1)}}, "must be a \\(vendor, gpu_model\\) pair"),
        ({"gpu": {("nvidia", "A100"): D(1), ("NVIDIA", "a100"): D(2)}}, "given twice"),
        ({"offpeak_discount": D("1.5")}, "off-peak discount must be between 0 and 1"),
        ({"spot_discount": D("-0.1")}, "spot discount must be between 0 and 1"),
        ({"offpeak_windows": ((time(8), time(8)),)}, "empty"),
        ({"priority_step": "abc"}, "priority multiplier step is not a number"),
    ],
)
def test_bad_rates_are_refused_with_the_problem_named(changes, message):
    fields = {
        "currency": "USD",
        "gpu": {("nvidia", "A100-80GB"): D("1.80")},
        "cpu_core_hour": D("0.02"),
        "memory_gib_hour": D("0.005"),
    }
    fields.update(changes)
    with pytest.raises(ValueError, match=message):
        Rates(**fields)


def test_rates_accept_decimal_strings_and_keep_four_places():
    rates = Rates(currency="USD", gpu={("nvidia", "X"): "1.8"}, cpu_core_hour="0.02", memory_gib_hour=0)
    assert rates.gpu_rate("nvidia", "X") == D("1.8000")
    assert rates.cpu_core_hour.as_tuple().exponent == -4


@pytest.mark.parametrize(
    ("priority", "message"), [(-1, "must not be negative"), (True, "integer"), (1.5, "integer")]
)
def test_bad_priority_is_refused(priority, message):
    with pytest.raises(ValueError, match=f"priority {message}|priority must be an {message}"):
        hourly_price(world_rates(), half_a100(), priority=priority)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"share": D("-0.5"), "vendor": "nvidia", "gpu_model": "A100-80GB"},
            "GPU share must not be negative",
        ),
        ({"share": D("0.5")}, "needs vendor and gpu_model"),
        ({"share": 0.5, "vendor": "nvidia", "gpu_model": "A100-80GB"}, "GPU share must be a Decimal"),
        ({"share": D(0), "cpu_cores": -1}, "CPU cores must not be negative"),
        ({"share": D(0), "memory_gib": D("NaN")}, "memory GiB must be a finite number"),
    ],
)
def test_bad_allocations_are_refused(fields, message):
    with pytest.raises(ValueError, match=message):
        Allocation(**fields)


def table(day: int, a100: str, name: str) -> PriceTable:
    rates = Rates(
        currency="USD", gpu={("nvidia", "A100-80GB"): D(a100)}, cpu_core_hour=D(0), memory_gib_hour=D(0)
    )
    return PriceTable(effective_from=datetime(2026, 3, day, tzinfo=UTC), rates=rates, name=name)


def test_table_in_force_is_the_latest_that_has_started():
    tables = [table(10, "2.00", "march-10"), table(1, "1.80", "march-1"), table(20, "2.20", "march-20")]
    assert table_in_force(tables, datetime(2026, 3, 5, tzinfo=UTC)).name == "march-1"
    assert (
        table_in_force(tables, datetime(2026, 3, 10, tzinfo=UTC)).name == "march-10"
    )  # from its first instant
    assert table_in_force(tables, datetime(2026, 3, 19, 23, 59, tzinfo=UTC)).name == "march-10"
    assert table_in_force(tables, datetime(2026, 4, 1, tzinfo=UTC)).name == "march-20"
    with pytest.raises(ValueError, match="no price table is in force at 2026-02-01"):
        table_in_force(tables, datetime(2026, 2, 1, tzinfo=UTC))
    with pytest.raises(ValueError, match="timezone-aware"):
        table_in_force(tables, datetime(2026, 3, 5))


def test_price_table_needs_an_aware_effective_from():
    with pytest.raises(ValueError, match="effective_from must be a timezone-aware"):
        PriceTable(effective_from=datetime(2026, 3, 1), rates=world_rates(), name="naive")
