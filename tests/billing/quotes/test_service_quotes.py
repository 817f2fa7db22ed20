"""An inference service is priced per hour at its fewest and at its most replicas (price_per_hour and
price_per_hour_max), worked out by hand with world_rates()."""

from __future__ import annotations

from decimal import Decimal

from test_quotes_helpers import PEAK, UTC_ZONE, WHOLE

from billing.quotes import PoolOffer, quote
from scheduling.spec import parse_job_spec
from tests.world import world_rates

D = Decimal
A100 = PoolOffer("a100", "nvidia", "A100-80GB", 80 * 1024, 8, WHOLE)

# 0.5 A100 (0.90) + 4 CPUs (0.08) + 16 GiB (0.08) = 1.06 / h a replica at priority 0, off-peak x 0.6
SERVICE = """\
kind: inference
name: chat
model: {{path: /models/llama}}
sharing: fraction
resources: {{gpu: 0.5, gpuMemory: 20Gi, cpu: 4, memory: 16Gi}}
replicas: {{min: {low}, max: {high}}}
expectedDuration: 2h
"""


def fraction_option(low: int, high: int):
    result = quote(parse_job_spec(SERVICE.format(low=low, high=high)), [A100], world_rates(), now=PEAK, tz=UTC_ZONE)
    return next(o for o in result.options if o.sharing == "fraction")


def test_a_service_costs_per_hour_at_its_min_and_at_its_max():
    option = fraction_option(1, 3)
    assert (option.price_per_hour, option.price_per_hour_max) == (D("1.06"), D("3.18"))
    assert (option.price_per_hour_offpeak, option.price_per_hour_max_offpeak) == (D("0.636"), D("1.908"))
    body = option.to_json()
    assert (body["price_per_hour"], body["price_per_hour_max"]) == ("1.0600", "3.1800")
    assert body["price_per_hour_max_offpeak"] == "1.9080"
    # for the 2 h: at min 2.12, at max 6.36
    assert (body["estimate_low"], body["estimate_high"]) == ("2.12", "6.36")


def test_a_service_that_scales_to_zero_costs_nothing_at_its_min():
    option = fraction_option(0, 4)
    assert (option.price_per_hour, option.price_per_hour_max) == (D(0), D("4.24"))
    assert option.to_json()["total"] == "0.00" and option.to_json()["estimate_high"] == "8.48"
    assert option.roles[0].price_per_hour == D("1.06")  # a replica's rate is still shown


def test_a_job_of_fixed_size_costs_the_same_at_min_and_max():
    option = fraction_option(2, 2)
    assert option.price_per_hour == option.price_per_hour_max == D("2.12")
