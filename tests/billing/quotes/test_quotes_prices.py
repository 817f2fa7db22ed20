"""Quote prices worked out by hand with world_rates()."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

from test_quotes_helpers import PEAK, SEED_YAML, UTC_ZONE, WHOLE, demo_pool_offers

from billing.pricing import PriceTable
from billing.quotes import PoolOffer, quote, quote_at
from scheduling.spec import parse_job_spec
from tests.world import world_rates

D = Decimal

# 0.5 of an A100 with 4 CPUs and 16 GiB at priority 50:
# (0.5 x 1.80 + 4 x 0.02 + 16 x 0.005) x 1.5 = (0.90 + 0.08 + 0.08) x 1.5 = 1.59 / h, off-peak x 0.6 = 0.954
HALF_A100_YAML = """\
name: half-a100
priority: 50
expectedDuration: 10h
roles:
  - name: main
    image: busybox:1.36
    resources: {gpu: 0.5, cpu: 4, memory: 16Gi}
    gpuModel: A100-80GB
"""

A100 = PoolOffer("a100", "nvidia", "A100-80GB", 80 * 1024, 8, WHOLE)
A100_SPOT = replace(A100, name="a100-spot", spot=True)


def half_a100_quote(now: datetime, pools=(A100,), **kwargs):
    return quote(parse_job_spec(HALF_A100_YAML), list(pools), world_rates(), now=now, tz=UTC_ZONE, **kwargs)


def test_half_an_a100_costs_1_59_at_peak_and_0_954_off_peak():
    option = half_a100_quote(PEAK).option("a100.fraction.now")
    assert (option.price_per_hour, option.price_per_hour_offpeak) == (D("1.5900"), D("0.9540"))
    assert option.to_json()["price_per_hour"] == "1.5900"
    assert option.to_json()["price_per_hour_offpeak"] == "0.9540"


def test_ten_hours_from_six_in_the_morning_is_two_off_peak_and_eight_peak():
    # now is off-peak (06:00), so there is one start: now. 2 x 0.954 + 8 x 1.59 = 14.628 -> 14.63
    result = half_a100_quote(datetime(2026, 3, 2, 6, tzinfo=UTC))
    assert {o.when for o in result.options} == {"now"}
    option = result.option("a100.fraction.now")
    assert option.starts_at == datetime(2026, 3, 2, 6, tzinfo=UTC)
    assert (option.estimate_low, option.estimate_high) == (D("14.63"), D("14.63"))
    assert option.to_json()["estimate_low"] == "14.63"
    assert result.expected_duration_hours == 10


def test_the_off_peak_option_starts_at_midnight_and_splits_its_hours():
    # from 00:00: 8 h off-peak x 0.954 + 2 h peak x 1.59 = 7.632 + 3.18 = 10.812 -> 10.81
    result = half_a100_quote(PEAK)
    later = result.option("a100.fraction.off-peak")
    assert later.starts_at == datetime(2026, 3, 3, 0, tzinfo=UTC)
    assert later.estimate_low == D("10.81")
    assert later.price_per_hour == D("1.5900")  # the option's peak rate, whatever its start
    now = result.option("a100.fraction.now")  # 10:00 + 10 h is all peak: 15.90
    assert now.estimate_low == D("15.90")


def test_spot_and_off_peak_stack():
    # spot: 1.59 x 0.4 = 0.636; off-peak and spot: 1.59 x 0.6 x 0.4 = 0.3816
    result = half_a100_quote(PEAK, pools=(A100_SPOT,))
    option = result.option("a100-spot.fraction.off-peak")
    assert (option.price_per_hour, option.price_per_hour_offpeak) == (D("0.6360"), D("0.3816"))
    # 8 h x 0.3816 + 2 h x 0.636 = 3.0528 + 1.272 = 4.3248 -> 4.32
    assert option.estimate_low == D("4.32")
    assert option.spot and result.cheapest.id == "a100-spot.fraction.off-peak"


def test_off_peak_window_read_in_the_platform_time_zone():
    berlin = ZoneInfo("Europe/Berlin")
    result = quote(parse_job_spec(HALF_A100_YAML), [A100], world_rates(), now=PEAK, tz=berlin)
    later = result.option("a100.fraction.off-peak")
    assert later.starts_at == datetime(2026, 3, 2, 23, tzinfo=UTC)  # midnight in Berlin (UTC+1)
    assert "00:00 (CET)" in " ".join(later.tradeoffs)


def test_a_price_table_effective_tomorrow_does_not_change_todays_quote():
    dearer = replace(world_rates(), gpu={**world_rates().gpu, ("nvidia", "A100-80GB"): D("3.60")})
    tables = [
        PriceTable(datetime(2020, 1, 1, tzinfo=UTC), world_rates(), "demo"),
        PriceTable(PEAK + timedelta(days=1), dearer, "tomorrow"),
    ]
    spec = parse_job_spec(HALF_A100_YAML)
    today = quote_at(spec, [A100], tables, now=PEAK, tz=UTC_ZONE)
    assert today == quote(spec, [A100], world_rates(), now=PEAK, tz=UTC_ZONE)
    assert today.option("a100.fraction.off-peak").price_per_hour == D("1.5900")
    # the day after, the new table prices it: (1.80 + 0.16) x 1.5 = 2.94
    later = quote_at(spec, [A100], tables, now=PEAK + timedelta(days=2), tz=UTC_ZONE)
    assert later.option("a100.fraction.now").price_per_hour == D("2.9400")


def test_seed_yaml_prices_by_hand():
    # master 1 + workers 9 at the minimum, 1 + 40 at the maximum; 1 GPU, 1 CPU, 4 GiB each; priority 50.
    # A100 spot: (1.80 + 0.02 + 0.02) x 1.5 x 0.4 = 1.104 per replica -> 11.04 / h for 10
    result = quote(parse_job_spec(SEED_YAML), demo_pool_offers(), world_rates(), now=PEAK, tz=UTC_ZONE)
    now = result.option("a100-spot.exclusive.now")
    assert (now.price_per_hour, now.price_per_hour_offpeak) == (D("11.0400"), D("6.6240"))
    assert (now.estimate_low, now.estimate_high) == (D("11.04"), D("45.26"))  # 41 x 1.104 = 45.264
    later = result.option("h100.exclusive.off-peak")
    # H100: (3.00 + 0.04) x 1.5 = 4.56 / replica; 1 h off-peak: 10 x 2.736 = 27.36, 41 x 2.736 = 112.176
    assert (later.price_per_hour, later.estimate_low, later.estimate_high) == (
        D("45.6000"),
        D("27.36"),
        D("112.18"),
    )
    assert [(r.name, r.price_per_hour, r.min_replicas, r.max_replicas) for r in later.roles] == [
        ("master", D("4.5600"), 1, 1),
        ("worker", D("4.5600"), 9, 40),
    ]


def test_cpu_only_role_is_priced_for_cpu_and_memory_only():
    yaml_text = """\
name: mixed
type: pytorch
roles:
  - name: master
    image: busybox:1.36
    resources: {gpu: 0, cpu: 8, memory: 32Gi}
  - name: worker
    image: busybox:1.36
    replicas: 2
    resources: {gpu: 1}
"""
    result = quote(parse_job_spec(yaml_text), [A100], world_rates(), now=PEAK, tz=UTC_ZONE)
    option = result.option("a100.exclusive.now")
    master, worker = option.roles
    assert (master.sharing, master.gpu_share, master.price_per_hour) == ("none", 0, D("0.3200"))  # 0.16+0.16
    assert worker.price_per_hour == D("1.8400")  # 1.80 + 0.02 + 0.02
    assert option.price_per_hour == D("0.3200") + 2 * D("1.8400")


def test_json_money_is_strings_with_fixed_places():
    result = half_a100_quote(PEAK)
    body = result.to_json()
    json.dumps(body)  # nothing that JSON cannot carry
    assert body["currency"] == "USD" and body["expected_duration_hours"] == "10.00"
    first = body["options"][0]
    assert set(first) >= {
        "id", "sharing", "vendor", "gpu_model", "pool", "spot", "when", "price_per_hour",
        "price_per_hour_offpeak", "estimate_low", "estimate_high", "cheapest", "tradeoffs",
    }  # fmt: skip
    for option in body["options"]:
        assert len(option["price_per_hour"].split(".")[1]) == 4
        assert len(option["estimate_low"].split(".")[1]) == 2
        assert len(option["estimate_high"].split(".")[1]) == 2
    assert [o["cheapest"] for o in body["options"]].count(True) == 1
