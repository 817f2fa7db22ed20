"""POST /api/v1/quotes/ and submitting a quoted option, through the real database and API."""

from datetime import timedelta
from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from billing.models import GpuRate, PriceTable
from scheduling.models import Job
from scheduling.spec.examples import CLEAN_YAML, SEED_YAML

FRACTION_JOB = """\
name: notebook
roles:
  - name: main
    image: jupyter/base:latest
    sharing: fraction
    resources: {gpu: 0.5, gpuMemory: 10Gi, cpu: 4, memory: 16Gi}
    gpuModel: A100-80GB
"""


@pytest.fixture
def alice(cluster, clock):
    """alice's API client; the platform clock stands at noon (peak hours) whatever the hour."""
    api = APIClient()
    api.force_authenticate(cluster.alice)
    return api


def quote(api, spec, workspace="vision-lab"):
    return api.post("/api/v1/quotes/", {"workspace": workspace, "spec": spec}, format="json")


def test_quote_lists_options_with_one_cheapest(alice):
    response = quote(alice, CLEAN_YAML)
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["currency"] == "USD" and body["expected_duration_hours"] == "2.00"
    options = body["options"]
    assert {o["pool"] for o in options} == {"a100-spot"}  # the spec pins nodePool
    assert sum(o["cheapest"] for o in options) == 1
    for option in options:
        assert set(option) >= {"id", "sharing", "vendor", "gpu_model", "pool", "spot", "when", "price_per_hour",
                               "price_per_hour_offpeak", "estimate_low", "estimate_high", "cheapest", "tradeoffs"}
        assert len(option["price_per_hour"].split(".")[1]) == 4
        assert len(option["estimate_low"].split(".")[1]) == 2


def test_fraction_of_an_a100_costs_as_worked_out_by_hand(alice):
    """0.5 A100 (0.90) + 4 CPU (0.08) + 16 GiB (0.08) = 1.06/h at priority 0; spot takes 60 % off."""
    options = {o["id"]: o for o in quote(alice, FRACTION_JOB).json()["options"]}
    assert options["a100-spot.fraction.now"]["price_per_hour"] == "0.4240"
    assert options["a100-spot.fraction.now"]["price_per_hour_offpeak"] == "0.2544"


def test_seed_yaml_is_quoted_off_peak_or_spot_only(alice):
    body = quote(alice, SEED_YAML).json()
    assert body["options"], body
    assert all(o["when"] == "off-peak" or o["spot"] for o in body["options"])


def _prices(response):
    return [(o["id"], o["price_per_hour"], o["price_per_hour_offpeak"]) for o in response.json()["options"]]


def test_a_future_price_table_does_not_change_todays_quote(alice, clock):
    before = _prices(quote(alice, FRACTION_JOB))
    table = PriceTable.objects.create(name="next year", currency="USD",
                                      effective_from=clock.now + timedelta(days=1),
                                      cpu_core_hour=Decimal("0.05"), memory_gib_hour=Decimal("0.01"))
    GpuRate.objects.create(table=table, vendor="nvidia", gpu_model="A100-80GB", per_gpu_hour=Decimal("9"))
    assert _prices(quote(alice, FRACTION_JOB)) == before
    table.effective_from = clock.now - timedelta(minutes=1)
    table.save()
    assert _prices(quote(alice, FRACTION_JOB)) != before


def test_submit_with_an_option_freezes_that_quote_on_the_job(alice):
    options = quote(alice, FRACTION_JOB).json()["options"]
    chosen = next(o for o in options if not o["cheapest"])
    response = alice.post("/api/v1/jobs/", {"workspace": "vision-lab", "spec": FRACTION_JOB, "option": chosen["id"]},
                          format="json")
    assert response.status_code == 201, response.json()
    frozen = response.json()["quote"]
    assert frozen["id"] == chosen["id"] and frozen["price_per_hour"] == chosen["price_per_hour"]
    assert Job.objects.get().quote["id"] == chosen["id"]


def test_submit_without_option_takes_the_specs_own_choice_that_can_start_now(alice):
    response = alice.post("/api/v1/jobs/", {"workspace": "vision-lab", "spec": FRACTION_JOB}, format="json")
    assert response.json()["quote"]["sharing"] == "fraction"
    assert response.json()["quote"]["when"] == "now"


def test_unknown_option_is_refused_and_lists_the_valid_ones(alice):
    response = alice.post("/api/v1/jobs/", {"workspace": "vision-lab", "spec": FRACTION_JOB, "option": "nope"},
                          format="json")
    assert response.status_code == 400
    assert "a100-spot.fraction.now" in response.json()["errors"][0]["message"]
    assert not Job.objects.exists()


def test_another_tenants_workspace_is_refused(cluster):
    bob = APIClient()
    bob.force_authenticate(cluster.bob)
    assert quote(bob, CLEAN_YAML, workspace="vision-lab").status_code == 404


def test_spec_errors_come_back_with_line_and_column(alice):
    response = quote(alice, CLEAN_YAML.replace("priority: 20", "priority: 200"))
    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert error["field"] == "priority" and error["line"] == 4
