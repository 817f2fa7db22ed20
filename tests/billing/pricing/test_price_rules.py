"""The price rules: each answers with a factor and a reason code, in the order of the list; the
weekend discount is one more rule, off unless settings.BILLING_WEEKEND_DISCOUNT enables it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from billing import pricing
from billing.pricing.rules import (
    DEFAULT_RULES,
    PricedOption,
    PricedWorkspace,
    PriceWindow,
    WeekendDiscount,
    price_rules,
)
from tests.world import world_rates

D = Decimal
HALF_A100 = pricing.Allocation(share=D("0.5"), vendor="nvidia", gpu_model="A100-80GB", cpu_cores=D(4), memory_gib=D(16))
# Friday 2026-03-06 20:00 UTC is Saturday 04:00 in Shanghai: a weekend there, a weekday in UTC
FRIDAY_EVENING_UTC = datetime(2026, 3, 6, 20, 0, tzinfo=UTC)
SHANGHAI = PricedWorkspace("Asia/Shanghai")
LONDON = PricedWorkspace("Europe/London")
WEEKEND_20 = world_rates(rules=price_rules(weekend_discount=D("20")))


def hour_at(rates, at: datetime, workspace: PricedWorkspace, *, spot=False, offpeak=False):
    window = PriceWindow(at, at + timedelta(hours=1), offpeak)
    return pricing.price_per_hour(rates, PricedOption(HALF_A100, priority=50, spot=spot), window, workspace)


def test_each_rule_gives_its_reason_code_in_the_order_of_the_list():
    # (0.5 x 1.80 + 4 x 0.02 + 16 x 0.005) x 1.5 x 0.6 x 0.4 = 0.3816
    price = hour_at(world_rates(), FRIDAY_EVENING_UTC, LONDON, spot=True, offpeak=True)
    assert price.amount == D("0.3816")
    assert price.reasons == ("gpu_share", "priority", "off_peak", "spot")
    assert [a.factor for a in price.adjustments] == [D("0.5"), D("1.5"), D("0.60"), D("0.40")]


def test_the_weekend_discount_is_off_by_default():
    assert world_rates().rules == DEFAULT_RULES == price_rules()
    saturday = datetime(2026, 3, 7, 12, tzinfo=UTC)
    assert "weekend" not in hour_at(world_rates(), saturday, LONDON).reasons


def test_the_weekend_discount_applies_on_the_workspaces_weekend_only():
    weekend = hour_at(WEEKEND_20, FRIDAY_EVENING_UTC, SHANGHAI)  # Saturday 04:00 in Shanghai
    weekday = hour_at(WEEKEND_20, FRIDAY_EVENING_UTC, PricedWorkspace("UTC"))  # Friday 20:00 in UTC
    assert weekday.amount == D("1.5900") and "weekend" not in weekday.reasons
    assert weekend.amount == D("1.2720")  # 1.59 x 0.8
    assert weekend.reasons[-1] == "weekend" and weekend.adjustments[-1].params == {"percent": D(20)}


def test_an_estimate_across_friday_midnight_pays_the_weekend_rate_after_it():
    # 22:00-02:00 in London (GMT in March): 2 h Friday at 1.59, 2 h Saturday at 1.272; no off-peak windows
    rates = world_rates(rules=price_rules(weekend_discount=D("20")), offpeak_windows=())
    start = datetime(2026, 3, 6, 22, tzinfo=UTC)
    allocation_cost = pricing.estimate(rates, HALF_A100, start=start, duration=timedelta(hours=4), tz="Europe/London",
                                       priority=50)
    assert allocation_cost.amount == 2 * D("1.59") + 2 * D("1.272")
    assert allocation_cost.price_per_hour == D("1.5900")  # the rate at the start, a Friday


def test_metering_cuts_at_the_weekend_and_says_which_part_was_discounted():
    rates = world_rates(rules=price_rules(weekend_discount=D("20")), offpeak_windows=())
    table = pricing.PriceTable(datetime(2020, 1, 1, tzinfo=UTC), rates, "weekend")
    held = pricing.HeldInterval(datetime(2026, 3, 8, 23, tzinfo=UTC), datetime(2026, 3, 9, 1, tzinfo=UTC), HALF_A100)
    cost = pricing.cost_for_intervals([held], [table], priority=50, tz="UTC")  # Sunday 23:00 to Monday 01:00
    assert [(s.start.hour, s.price_per_hour) for s in cost.segments] == [(23, D("1.2720")), (0, D("1.5900"))]
    assert cost.total == D("2.86")


def test_a_weekend_percentage_must_be_above_0_and_at_most_100():
    for wrong in (D(0), D(101), 20):
        with pytest.raises(ValueError, match="weekend discount"):
            WeekendDiscount(wrong)


@pytest.mark.django_db
def test_a_setting_enables_the_weekend_rule_on_the_price_versions(cluster, clock, settings):
    from billing import selectors

    clock.now = datetime(2026, 3, 7, 12, tzinfo=UTC)  # a Saturday
    rates = pricing.table_in_force(selectors.price_tables(), clock.now).rates
    assert rates.rules == DEFAULT_RULES
    settings.BILLING_WEEKEND_DISCOUNT = "15"
    rates = pricing.table_in_force(selectors.price_tables(), clock.now).rates
    workspace = PricedWorkspace(settings.TIME_ZONE)
    saturday, monday = hour_at(rates, clock.now, workspace), hour_at(rates, clock.now + timedelta(days=2), workspace)
    assert saturday.reasons[-1] == "weekend" and saturday.amount == D("1.3515")  # 1.59 x 0.85
    assert "weekend" not in monday.reasons and monday.amount == D("1.5900")
