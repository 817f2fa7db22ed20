"""Tokens metered and priced, over a real service: deployed through the cycle onto a real server process of
the simulated cluster and called through the portal's /serve/ endpoint. The endpoint meters each answer's
usage per minute, key and replica; the page and the API show tokens in and out, the ledger's cost split
between them by the prefill and decode seconds the server reported, time to first token and tokens per
second; another tenant sees none of it."""

from __future__ import annotations

import time
from decimal import Decimal

import pytest

from billing.ledger.posting import post_ledger
from billing.ledger.selectors import job_totals
from portal.models import TokenScope
from portal.services import create_api_token
from scheduling import inference, services
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.models import ServiceSample, ServiceTokenUsage

SERVICE = """\
kind: inference
name: chat
queue: vision-lab
nodePool: h100
model: {registry: hf.co/org/chat-7b, name: chat}
resources: {gpu: 1}
replicas: {min: 1, max: 2}
target: {rps: 5}
"""
CALLS = 12
MAX_TOKENS = 16
PROMPT = "say hello to the shared gpu"  # 6 words: 6 prompt tokens on the simulated server


@pytest.fixture
def backend(clock):
    return SimulatedBackend(speedup=1, failure_rate=0, clock=clock, server_startup_s=0)


@pytest.fixture
def served(cluster, backend, clock, run, client):
    """The service, running for an hour, having answered CALLS requests through the portal, sampled and billed."""
    job = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=SERVICE)
    run(backend, clock)
    deadline = time.monotonic() + 20
    while not inference.ready_endpoints(job, backend):
        assert time.monotonic() < deadline, "the server never listened"
        time.sleep(0.1)
        run(backend, clock)
    token = create_api_token(cluster.alice, "app", scope=TokenScope.SUBMIT)[1]
    for _ in range(CALLS):
        answer = client.post(
            "/serve/vision-lab/chat/v1/completions",
            {"model": "chat", "prompt": PROMPT, "max_tokens": MAX_TOKENS},
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {token}",
        )
        assert answer.status_code == 200, answer.content
        assert float(answer["X-Decode-Seconds"]) > float(answer["X-Prefill-Seconds"]) > 0
    refused = client.post(
        "/serve/vision-lab/chat/v1/completions",
        {"model": "other", "prompt": PROMPT},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert refused.status_code == 404  # a refusal has no usage: not metered
    clock.advance(3600)
    run(backend, clock)
    post_ledger(now=clock.now)
    job.refresh_from_db()
    return job


@pytest.mark.django_db
def test_the_endpoint_meters_each_answer_per_minute_and_replica(served):
    rows = list(ServiceTokenUsage.objects.filter(job=served))
    assert sum(r.requests for r in rows) == CALLS
    assert sum(r.prompt_tokens for r in rows) == CALLS * 6
    assert sum(r.completion_tokens for r in rows) == CALLS * MAX_TOKENS
    assert {r.replica for r in rows} == {"server-0-0"} and {r.key_id for r in rows} == {None}
    assert {r.revision for r in rows} == {1}
    assert len(rows) <= 2  # one row per minute, not one per answer
    assert all(r.prefill_seconds > 0 and r.decode_seconds > r.prefill_seconds for r in rows)


@pytest.mark.django_db
def test_tokens_and_their_cost_on_the_api_and_the_page(cluster, served, client):
    client.force_login(cluster.alice)
    answer = client.get(f"/api/v1/services/{served.pk}/")
    assert answer.status_code == 200
    body = answer.json()
    assert (body["prompt_tokens"], body["completion_tokens"]) == (CALLS * 6, CALLS * MAX_TOKENS)

    rows = ServiceTokenUsage.objects.filter(job=served)
    prefill = sum(r.prefill_seconds for r in rows)
    decode = sum(r.decode_seconds for r in rows)
    cost = job_totals([served.pk])[served.pk][0]
    assert cost > 0
    share = Decimal(repr(prefill)) / (Decimal(repr(prefill)) + Decimal(repr(decode)))
    expected_prompt = (cost * share * 1_000_000 / (CALLS * 6)).quantize(Decimal("0.0001"))
    expected_completion = (cost * (1 - share) * 1_000_000 / (CALLS * MAX_TOKENS)).quantize(Decimal("0.0001"))
    assert Decimal(body["cost_per_million_prompt_tokens"]) == expected_prompt
    assert Decimal(body["cost_per_million_completion_tokens"]) == expected_completion
    # the prompt and completion parts add up to the ledger's cost of the held slices
    assert (
        expected_prompt * CALLS * 6 + expected_completion * CALLS * MAX_TOKENS
    ) / 1_000_000 == pytest.approx(cost, abs=Decimal("0.01"))
    assert body["tokens_per_second"] == pytest.approx(CALLS * MAX_TOKENS / decode, rel=0.01)
    sample = ServiceSample.objects.filter(job=served).exclude(ttft_p95_ms=None).latest("at")
    assert 0 < body["ttft_p50_s"] <= body["ttft_p95_s"] == pytest.approx(sample.ttft_p95_ms / 1000, abs=1e-4)
    assert sample.prefill_seconds == pytest.approx(prefill, rel=1e-3)  # the server's metrics say the same

    [revision] = body["revisions"]
    assert (revision["number"], revision["current"], revision["percent"]) == (1, True, 100)
    assert revision["completion_tokens"] == CALLS * MAX_TOKENS

    page = client.get(f"/services/{served.pk}/").content.decode()
    assert "per 1M input tokens" in page and f"{CALLS * MAX_TOKENS}" in page
    listed = client.get("/api/v1/services/").json()["results"]
    assert [s["prompt_tokens"] for s in listed] == [CALLS * 6]


@pytest.mark.django_db
def test_another_tenant_sees_no_tokens(cluster, served, client):
    client.force_login(cluster.bob)
    assert client.get(f"/api/v1/services/{served.pk}/").status_code == 404
    assert client.get(f"/api/v1/services/{served.pk}/revisions/").status_code == 404
    assert client.get("/api/v1/services/").json()["results"] == []
    assert client.get(f"/services/{served.pk}/").status_code == 404
