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
from scheduling.models import ServiceSample, ServiceScale, ServiceTokenUsage

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
TRAINING = (
    "name: train\nqueue: vision-lab\nroles:\n  - {name: main, image: busybox:1.36, resources: {gpu: 1}}\n"
)
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


def _run_until(backend, clock, run, condition, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        clock.advance(1)
        run(backend, clock)
        time.sleep(0.1)


@pytest.mark.django_db
def test_a_new_revision_takes_its_share_then_is_promoted_and_rolled_back(
    cluster, served, backend, clock, run, client, settings
):
    settings.SERVICE_SCALE_INTERVAL_S = 0
    client.force_login(cluster.alice)
    made = client.post(
        f"/api/v1/services/{served.pk}/revisions/",
        {
            "model": {"registry": "hf.co/org/chat-8b", "name": "chat"},
            "traffic": [{"revision": 1, "percent": 50}, {"revision": 2, "percent": 50}],
        },
        content_type="application/json",
    )
    assert made.status_code == 201, made.content
    assert [(r["number"], r["current"], r["percent"]) for r in made.json()] == [(2, True, 50), (1, False, 50)]
    served.refresh_from_db()
    assert served.spec["model"]["registry"] == "hf.co/org/chat-8b"

    def revisions_ready():
        return {e.revision for e in inference.ready_endpoints(served, backend)} == {1, 2}

    _run_until(backend, clock, run, revisions_ready, "a replica of each revision")
    token = create_api_token(cluster.alice, "split", scope=TokenScope.SUBMIT)[1]
    for _ in range(30):
        answer = client.post(
            "/serve/vision-lab/chat/v1/completions",
            {"model": "chat", "prompt": PROMPT, "max_tokens": 4},
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {token}",
        )
        assert answer.status_code == 200
    by_revision = {
        r.revision: r.completion_tokens
        for r in ServiceTokenUsage.objects.filter(job=served, completion_tokens__lt=CALLS * MAX_TOKENS)
    }
    assert by_revision.get(2, 0) > 0 and set(by_revision) <= {1, 2}  # each revision served its share

    # bad input changes nothing
    for body in ({"revision": 9}, {"revision": "x"}, {}):
        refused = client.post(f"/api/v1/services/{served.pk}/promote/", body, content_type="application/json")
        assert refused.status_code == 400 and refused["content-type"] == "application/problem+json", body
    assert (
        client.post(
            f"/api/v1/services/{served.pk}/traffic/",
            {"traffic": [{"revision": 1, "percent": 70}]},
            content_type="application/json",
        ).status_code
        == 400
    )
    assert (
        client.post(
            f"/api/v1/services/{served.pk}/revisions/", {"port": 1}, content_type="application/json"
        ).status_code
        == 400
    )
    assert ServiceScale.objects.get(job=served).traffic == [
        {"revision": 1, "percent": 50},
        {"revision": 2, "percent": 50},
    ]

    promoted = client.post(
        f"/api/v1/services/{served.pk}/promote/", {"revision": 2}, content_type="application/json"
    )
    assert promoted.status_code == 200 and promoted.json()[0]["percent"] == 100
    _run_until(
        backend,
        clock,
        run,
        lambda: served.replicas.filter(end_reason="replaced", revision=1).exists(),
        "the old revision's replica replaced",
    )
    assert {e.revision for e in inference.ready_endpoints(served, backend)} == {2}

    page = client.post(f"/services/{served.pk}/revisions/rollback/", follow=True)
    assert page.status_code == 200 and "rolled back to revision 1" in page.content.decode()
    served.refresh_from_db()
    assert served.spec["model"]["registry"] == "hf.co/org/chat-7b"
    assert ServiceScale.objects.get(job=served).revision == 1


@pytest.mark.django_db
def test_revisions_are_the_members_own(cluster, served, client):
    from portal.models import Membership, Role

    client.force_login(cluster.bob)
    for path, body in (
        ("revisions/", {"image": "x:1"}),
        ("promote/", {"revision": 1}),
        ("rollback/", {}),
        ("traffic/", {"traffic": [{"revision": 1, "percent": 100}]}),
    ):
        assert (
            client.post(
                f"/api/v1/services/{served.pk}/{path}", body, content_type="application/json"
            ).status_code
            == 404
        ), path
    assert client.post(f"/services/{served.pk}/revisions/rollback/").status_code == 404
    Membership.objects.filter(user=cluster.carol, workspace=cluster.vision).update(role=Role.VIEWER)
    client.force_login(cluster.carol)
    assert client.get(f"/api/v1/services/{served.pk}/revisions/").status_code == 200
    assert (
        client.post(
            f"/api/v1/services/{served.pk}/promote/", {"revision": 1}, content_type="application/json"
        ).status_code
        == 403
    )
    assert not served.service_revisions.filter(number=2).exists()


@pytest.mark.django_db
def test_the_focus_export_carries_the_tokens_of_each_service_hour(served, cluster):
    from billing.models import ChargeLine
    from billing.reports import exports

    job = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=TRAINING)
    rows = [
        dict(zip(exports.HEADER, row, strict=True))
        for row in exports.line_rows(ChargeLine.objects.filter(job__in=[served, job]), chunk_size=1)
    ]
    service_rows = [r for r in rows if r["x_JobId"] == str(served.pk) and r["ChargeCategory"] == "Usage"]
    assert service_rows
    assert sum(int(r["x_PromptTokens"]) for r in service_rows) == CALLS * 6
    assert sum(int(r["x_CompletionTokens"]) for r in service_rows) == CALLS * MAX_TOKENS
    assert all(r["x_PromptTokens"] == "" for r in rows if r["x_JobId"] != str(served.pk))


def test_a_service_hour_of_several_lines_carries_its_tokens_once(monkeypatch):
    from datetime import UTC, datetime

    from billing.reports import exports

    hour = datetime(2026, 3, 2, 10, tzinfo=UTC)

    def line(job_id, kind, minute):
        values = dict.fromkeys(exports.LINE_FIELDS)
        values.update(
            job_id=job_id, job__kind=kind, charge_start=hour.replace(minute=minute), category="Usage"
        )
        return tuple(values[name] for name in exports.LINE_FIELDS)

    monkeypatch.setattr(exports.service_usage, "tokens_by_hour", lambda pairs: {(7, hour): (100, 40)})
    carried: set = set()
    first = exports.line_tokens([line(7, "inference", 0), line(8, "training", 0)], carried)
    again = exports.line_tokens(
        [line(7, "inference", 30)], carried
    )  # the next chunk, same hour, another node
    assert first == [(100, 40), None] and again == [(0, 0)]


@pytest.mark.django_db
def test_a_new_image_is_what_new_replicas_launch_and_a_rollback_restores_it(cluster, served, client):
    client.force_login(cluster.alice)
    before = served.roles[0]["image"]
    made = client.post(
        f"/api/v1/services/{served.pk}/revisions/",
        {"image": "vllm/vllm-openai:v0.6.0"},
        content_type="application/json",
    )
    assert made.status_code == 201 and made.json()[0]["image"] == "vllm/vllm-openai:v0.6.0"
    served.refresh_from_db()
    assert served.roles[0]["image"] == "vllm/vllm-openai:v0.6.0" != before
    same = client.post(
        f"/api/v1/services/{served.pk}/revisions/",
        {"image": "vllm/vllm-openai:v0.6.0"},
        content_type="application/json",
    )
    assert same.status_code == 400 and served.service_revisions.count() == 2  # no change, no revision
    assert client.post(f"/api/v1/services/{served.pk}/rollback/").status_code == 200
    served.refresh_from_db()
    assert served.roles[0]["image"] == before
    assert client.post(f"/api/v1/services/{served.pk}/rollback/").status_code == 409  # nothing before 1
