"""A notebook is quoted per hour, to start now only: interactive work has no off-peak option."""

from decimal import Decimal

import pytest
from rest_framework.test import APIClient

NOTEBOOK = "kind: notebook\nname: lab\nqueue: vision-lab\nresources: {gpu: 0.5, gpuMemory: 10Gi}\n"
TRAINING = ("name: train\nqueue: vision-lab\nroles:\n  - name: main\n    image: busybox\n    sharing: fraction\n"
            "    resources: {gpu: 0.5, gpuMemory: 10Gi}\n")


@pytest.fixture
def alice(cluster, clock):
    """At noon: the off-peak window (00:00-08:00) is ahead, so batch work gets off-peak options."""
    api = APIClient()
    api.force_authenticate(cluster.alice)
    return api


def quote(api, spec, **extra) -> dict:
    response = api.post("/api/v1/quotes/", {"workspace": "vision-lab", "spec": spec, **extra}, format="json")
    assert response.status_code == 200, response.json()
    return response.json()


def test_a_notebook_is_quoted_per_hour_to_start_now(alice):
    body = quote(alice, NOTEBOOK)
    assert (body["duration_hours"], body["duration_source"]) == ("1", "default")
    assert body["options"] and {o["when"] for o in body["options"]} == {"now"}
    for option in body["options"]:
        assert Decimal(option["total"]) == Decimal(option["price_per_hour"]).quantize(Decimal("0.01"))
    fraction = next(o for o in body["options"] if o["sharing"] == "fraction")
    assert fraction["gpus"] == "0.5"

    batch = quote(alice, TRAINING)
    assert batch["duration_hours"] == "2" and "off-peak" in {o["when"] for o in batch["options"]}


def test_a_stated_duration_still_counts_for_a_notebook(alice):
    body = quote(alice, NOTEBOOK, duration_hours="8")
    assert (body["duration_hours"], body["duration_source"]) == ("8", "request")
    assert {o["when"] for o in body["options"]} == {"now"}
    cheapest = next(o for o in body["options"] if o["cheapest"])
    assert Decimal(cheapest["total"]) == (Decimal(cheapest["price_per_hour"]) * 8).quantize(Decimal("0.01"))
