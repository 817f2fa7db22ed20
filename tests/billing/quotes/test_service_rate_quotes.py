"""A service quoted at a stated request rate: the replicas its autoscaler settles at on each option's slice
(by its target, never past saturation, within min..max) and their price per hour, through the quotes API."""

from __future__ import annotations

from decimal import Decimal

import pytest

from scheduling.serving.latency import ServerModel, replicas_at_rate, replicas_for_rate

SERVICE = """\
kind: inference
name: chat
queue: vision-lab
nodePool: h100
model: {path: /models/llama}
resources: {gpu: 0.5, gpuMemory: 20Gi}
replicas: {min: 0, max: 4}
target: {rps: 5}
"""


@pytest.mark.parametrize(("rate", "replicas"), [(0, 0), (0.5, 1), (5, 1), (10, 2), (14, 3), (100, 4)])
def test_replicas_at_a_rate_follow_the_target_within_the_range(rate, replicas):
    assert replicas_at_rate(rate, 0.5, metric="rps", target=5, low=0, high=4) == replicas


def test_a_concurrency_target_uses_littles_law_and_never_saturates():
    model = ServerModel()
    latency = model.service_s(1.0, 4)
    # 20 req/s at 0.x s each keep 20 * latency requests in flight: over a target of 4 per replica
    assert replicas_at_rate(20, 1.0, metric="concurrency", target=4, low=1, high=50) == max(
        -(-20 * latency // 4), replicas_for_rate(20, 1.0))
    # a target so loose that the rule alone would saturate one replica: capacity decides
    assert replicas_at_rate(60, 1.0, metric="concurrency", target=1000, low=1, high=50) == replicas_for_rate(60, 1.0)


@pytest.mark.django_db
def test_the_quotes_api_prices_a_service_at_a_rate(cluster, client):
    client.force_login(cluster.alice)
    body = client.post("/api/v1/quotes/", {"workspace": "vision-lab", "spec": SERVICE, "requests_per_second": 10},
                       content_type="application/json").json()
    assert body["kind"] == "inference"
    fraction = next(o for o in body["options"] if o["sharing"] == "fraction" and o["when"] == "now")
    [role] = fraction["roles"]
    assert fraction["at_rate"]["replicas"] == 2
    assert Decimal(fraction["at_rate"]["price_per_hour"]) == (2 * Decimal(role["price_per_hour"])).quantize(
        Decimal("0.0001"))
    assert Decimal(fraction["price_per_hour"]) == 0     # at its minimum of 0 it costs nothing
    assert Decimal(fraction["price_per_hour_max"]) == 4 * Decimal(role["price_per_hour"])

    training = client.post("/api/v1/quotes/", {"workspace": "vision-lab", "requests_per_second": 10,
                                               "spec": "name: t\nqueue: vision-lab\nroles:\n  - name: main\n"
                                                       "    image: busybox:1.36\n"},
                           content_type="application/json").json()
    assert all("at_rate" not in o for o in training["options"])
    refused = client.post("/api/v1/quotes/", {"workspace": "vision-lab", "spec": SERVICE, "requests_per_second": -1},
                          content_type="application/json")
    assert refused.status_code == 400 and refused["content-type"] == "application/problem+json"


@pytest.mark.django_db
def test_the_quote_gives_the_cost_per_million_tokens_of_each_sharing_option(cluster, client):
    client.force_login(cluster.alice)
    body = client.post("/api/v1/quotes/", {"workspace": "vision-lab", "spec": SERVICE, "requests_per_second": 10,
                                           "prompt_tokens_per_request": 200, "completion_tokens_per_request": 100},
                       content_type="application/json").json()
    priced = [o for o in body["options"] if o.get("at_rate")]
    assert priced
    model = ServerModel(tokens=100)
    for option in priced:
        at_rate = option["at_rate"]
        per_hour = Decimal(at_rate["price_per_hour"])
        requests = 10 * 3600
        assert Decimal(at_rate["cost_per_million_tokens"]) == (per_hour * 1_000_000 / (requests * 300)).quantize(
            Decimal("0.0001"))
        prefill, decode = model.phases_s(1.0)
        prompt_part = per_hour * Decimal(repr(prefill)) / (Decimal(repr(prefill)) + Decimal(repr(decode)))
        assert Decimal(at_rate["cost_per_million_prompt_tokens"]) == (
            prompt_part * 1_000_000 / (requests * 200)).quantize(Decimal("0.0001"))
        # the two parts together are the price of the replicas for the hour's tokens
        together = (Decimal(at_rate["cost_per_million_prompt_tokens"]) * requests * 200
                    + Decimal(at_rate["cost_per_million_completion_tokens"]) * requests * 100) / 1_000_000
        assert together == pytest.approx(per_hour, abs=Decimal("0.01"))
        assert "per 1M input tokens" in option["at_rate_text"]

    for bad in ({"completion_tokens_per_request": 0}, {"prompt_tokens_per_request": -1}):
        body = {"workspace": "vision-lab", "spec": SERVICE, "requests_per_second": 10, **bad}
        refused = client.post("/api/v1/quotes/", body, content_type="application/json")
        assert refused.status_code == 400 and refused["content-type"] == "application/problem+json", bad
    # the prompt alone: answers of the latency model's default length
    alone = client.post("/api/v1/quotes/", {"workspace": "vision-lab", "spec": SERVICE, "requests_per_second": 10,
                                            "prompt_tokens_per_request": 200}, content_type="application/json").json()
    assert next(o for o in alone["options"] if o.get("at_rate"))["at_rate"]["completion_tokens_per_request"] == 32
