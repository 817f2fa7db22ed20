"""The official `openai` SDK against the real ASGI portal and the simulated cluster's server processes:
streamed answers pass through chunk by chunk (also from a cold start), with a service's own key; a key
opens its service only; a client that goes away cancels the request on the replica; a key revoked while
its stream is open ends it; limits answer 429 in the OpenAI shape."""

from __future__ import annotations

import time

import httpx
import openai
import pytest

from portal import serve_metrics, service_keys
from portal.models import TokenScope
from portal.services import create_api_token
from scheduling import services
from scheduling.api import get_backend, inference
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.models import ACTIVE_STATES, JobState, ServiceScale
from tests.portal.test_serve_live import SERVICE, cycling, state, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def sdk(live_daphne, key: str, workspace: str = "vision-lab", name: str = "llm") -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{live_daphne.url}/serve/{workspace}/{name}/v1", api_key=key, max_retries=0,
                         timeout=60)


def timed_stream(client: openai.OpenAI, tokens: int = 120) -> tuple[float, float, list]:
    started = time.monotonic()
    chunks, first = [], None
    for chunk in client.chat.completions.create(model="llm", messages=[{"role": "user", "content": "hello"}],
                                                max_tokens=tokens, stream=True,
                                                stream_options={"include_usage": True}):
        if first is None:
            first = time.monotonic() - started
        chunks.append(chunk)
    return first, time.monotonic() - started, chunks


def test_the_sdk_streams_through_the_portal_with_a_service_key_also_from_a_cold_start(live_daphne, cluster,
                                                                                       settings):
    settings.SERVICE_SCALE_INTERVAL_S = 0
    job = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=SERVICE)
    _, raw = service_keys.create_key(cluster.alice, job, "chat app", days=0)
    client = sdk(live_daphne, raw)
    backend = SimulatedBackend(speedup=1, failure_rate=0, server_startup_s=0.5)
    with cycling(backend):
        wait_until(lambda: state(job) == JobState.RUNNING, what="the first replica")
        wait_until(lambda: state(job) == JobState.STOPPED, what="scale to zero")
        # at zero: the stream waits for a replica, then comes chunk by chunk
        first, last, chunks = timed_stream(client)
        assert ServiceScale.objects.get(job=job).cold_starts == 1
        assert chunks[-1].usage.completion_tokens == 120 and chunks[-1].choices == []
        assert "".join(c.choices[0].delta.content or "" for c in chunks[:-1]).split()[:3] == ["the", "model",
                                                                                              "answers"]
        # warm: chunk by chunk as they are decoded (120 tokens at 6.25 ms each: 0.75 s), not held back to the end;
        # a busy machine only makes the first token later and the spread wider
        warm_first, last, chunks = timed_stream(client)
        assert last - warm_first > 0.5 * 120 * 0.00625, (warm_first, last)
        assert len(chunks) == 121
        # whole answers too, and the models list
        assert client.completions.create(model="llm", prompt="hi", max_tokens=5).usage.completion_tokens == 5
        assert [m.id for m in client.models.list()] == ["llm"]
        # a member's personal token with the submit scope still works
        token = create_api_token(cluster.carol, "serve", scope=TokenScope.SUBMIT)[1]
        assert timed_stream(sdk(live_daphne, token), 4)[2][-1].usage.completion_tokens == 4
    ttfts = serve_metrics.recent_ttfts(job.pk)
    assert len(ttfts) >= 4
    # the warm stream's, as the portal measured it (newest first), lies inside what the client waited
    assert ttfts[1] <= warm_first
    assert max(ttfts) > 0.5      # the cold start's first token waited for the replica
    key = job.service_keys.get()
    assert key.last_used is not None


def test_a_key_opens_its_own_service_only(live_daphne, cluster):
    mine = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=SERVICE)
    other = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=SERVICE.replace("name: llm",
                                                                                                  "name: other"))
    theirs = services.submit_job(user=cluster.bob, workspace=cluster.nlp,
                                 spec=SERVICE.replace("queue: vision-lab", "queue: nlp-group"))
    _, key = service_keys.create_key(cluster.alice, mine, "app")
    _, bobs = service_keys.create_key(cluster.bob, theirs, "bob's app")
    revoked, revoked_raw = service_keys.create_key(cluster.alice, mine, "old")
    service_keys.revoke_key(cluster.alice, mine, revoked.pk)
    expired, expired_raw = service_keys.create_key(cluster.alice, mine, "expired", days=1)
    type(expired).objects.filter(pk=expired.pk).update(expires=expired.created)
    url = live_daphne.url
    with httpx.Client(timeout=30) as client:
        def status(path: str, headers: dict) -> httpx.Response:
            return client.get(url + path, headers=headers)

        for path, headers, expected in (
                ("/serve/vision-lab/other/v1/models", {"Authorization": f"Bearer {key}"}, 404),  # a sibling
                ("/serve/nlp-group/llm/v1/models", {"Authorization": f"Bearer {key}"}, 404),     # another tenant's
                ("/serve/vision-lab/llm/v1/models", {"Authorization": f"Bearer {bobs}"}, 404),   # theirs, here
                ("/serve/vision-lab/llm/v1/models", {"api-key": bobs}, 404),
                ("/serve/vision-lab/llm/v1/models", {"Authorization": f"Bearer {revoked_raw}"}, 401),
                ("/serve/vision-lab/llm/v1/models", {"api-key": expired_raw}, 401),
                ("/serve/vision-lab/llm/v1/models", {"Authorization": "Bearer gsk_not-a-key"}, 401),
                ("/api/v1/jobs/", {"Authorization": f"Bearer {key}"}, 401),                       # not the REST API
                ("/api/v1/services/", {"api-key": key}, 401)):
            refused = status(path, headers)
            assert refused.status_code == expected, (path, headers, refused.text)
        assert "revoked" in status("/serve/vision-lab/llm/v1/models",
                                   {"Authorization": f"Bearer {revoked_raw}"}).json()["error"]["message"]
    # nothing was woken by a refused key
    for job in (mine, other, theirs):
        job.refresh_from_db()
        assert ServiceScale.objects.get(job=job).woken_at is None


def test_a_client_that_goes_away_cancels_the_request_and_a_revoked_key_ends_its_stream(live_daphne, cluster,
                                                                                       settings):
    settings.SERVICE_SCALE_INTERVAL_S = 0
    job = services.submit_job(user=cluster.alice, workspace=cluster.vision,
                              spec=SERVICE.replace("{min: 0, max: 3}", "{min: 1, max: 1}"))
    key, raw = service_keys.create_key(cluster.alice, job, "app")
    url = f"{live_daphne.url}/serve/vision-lab/llm/v1/completions"
    body = {"model": "llm", "prompt": "hi", "max_tokens": 4000, "stream": True}   # 25 s of tokens
    with cycling(SimulatedBackend(speedup=1, failure_rate=0, server_startup_s=0.2)):
        wait_until(lambda: job.replicas.filter(state=JobState.RUNNING).exists(), what="a replica")
    [endpoint] = inference.ready_endpoints(job, get_backend())

    def figures() -> dict:
        return httpx.get(endpoint.url + "metrics", params={"format": "json"},
                         headers={"Authorization": f"Bearer {endpoint.token}"}).json()

    wait_until(lambda: httpx.get(endpoint.url + "health").status_code == 200, what="the server")
    with httpx.Client(timeout=30) as client, client.stream("POST", url, json=body,
                                                           headers={"Authorization": f"Bearer {raw}"}) as answer:
        assert answer.status_code == 200
        parts = answer.iter_raw()   # kept: a dropped iterator closes the answer
        next(parts)
        assert figures()["in_service"] == 1
    # the client went: the replica stops computing at once (its slot free, the request counted as 499)
    wait_until(lambda: figures()["in_service"] == 0, timeout=5, what="the request cancelled upstream")
    assert {"path": "/v1/completions", "code": 499, "count": 1} in figures()["requests"]

    with httpx.Client(timeout=30) as client, client.stream("POST", url, json=body,
                                                           headers={"api-key": raw}) as answer:
        parts = answer.iter_raw()
        next(parts)
        service_keys.revoke_key(cluster.alice, job, key.pk)
        started = time.monotonic()
        rest = b"".join(parts)
        assert time.monotonic() - started < 3
    assert b'"code": "invalid_api_key"' in rest and b"[DONE]" not in rest
    assert httpx.get(url.replace("completions", "models"), headers={"api-key": raw}).status_code == 401


def test_over_a_limit_of_the_key_or_the_service_is_a_429_clients_understand(live_daphne, cluster, settings):
    settings.SERVICE_SCALE_INTERVAL_S = 0
    job = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=SERVICE.replace(
        "{min: 0, max: 3}", "{min: 1, max: 1}") + "limits: {requestsPerMinute: 3}\n")
    assert ServiceScale.objects.get(job=job).requests_per_minute == 3
    _, tight = service_keys.create_key(cluster.alice, job, "tight", requests_per_minute=1)
    _, loose = service_keys.create_key(cluster.alice, job, "loose")
    with cycling(SimulatedBackend(speedup=1, failure_rate=0, server_startup_s=0.2)):
        wait_until(lambda: job.replicas.filter(state=JobState.RUNNING).exists(), what="a replica")
    wait_until(lambda: sdk(live_daphne, loose).models.list() is not None, what="the server")  # 1 of the service's 3

    def refused(key: str) -> openai.RateLimitError:
        with pytest.raises(openai.RateLimitError) as caught:
            sdk(live_daphne, key).completions.create(model="llm", prompt="hi", max_tokens=2)
        return caught.value

    assert sdk(live_daphne, tight).completions.create(model="llm", prompt="hi", max_tokens=2).usage
    error = refused(tight)   # the key's one a minute is used; the service has one left
    assert 1 <= int(error.response.headers["retry-after"]) <= 60
    assert set(error.body) >= {"message", "type", "code"} and error.body["type"] == "rate_limit_error"
    assert "this key may make 1 requests a minute" in error.body["message"]
    assert sdk(live_daphne, loose).completions.create(model="llm", prompt="hi", max_tokens=2).usage
    assert "service 'llm' may make 3 requests a minute" in refused(loose).body["message"]


def test_a_replica_scaled_down_during_an_open_stream_takes_no_new_request_and_finishes_it(live_daphne, cluster,
                                                                                          settings):
    import os

    settings.SERVICE_SCALE_INTERVAL_S = 0
    job = services.submit_job(user=cluster.alice, workspace=cluster.vision,
                              spec=SERVICE.replace("{min: 0, max: 3}", "{min: 1, max: 1}"))
    _, raw = service_keys.create_key(cluster.alice, job, "app", days=0)
    backend = SimulatedBackend(speedup=1, failure_rate=0, server_startup_s=0.2)
    with cycling(backend):
        wait_until(lambda: job.replicas.filter(state=JobState.RUNNING).exists(), what="a replica")
    replica = job.replicas.get(state=JobState.RUNNING)
    key = (job.pk, replica.role, replica.index)
    [endpoint] = inference.ready_endpoints(job, get_backend())
    pid = backend.runtime.find(key).pid
    wait_until(lambda: httpx.get(endpoint.url + "health").status_code == 200, what="the server")
    stream = sdk(live_daphne, raw).chat.completions.create(
        model="llm", messages=[{"role": "user", "content": "hello"}], max_tokens=200, stream=True,
        stream_options={"include_usage": True})   # about 1.3 s of tokens, well within the stop's 5 s grace
    chunks = [next(stream)]
    # the scale-down's release, as the cycle does it: SIGTERM, the kill only after the grace (in a thread of
    # its own: the cycle goes on, and the replica's index may have a new process at once)
    backend.release_many([(key, "scaled-down")])
    os.kill(pid, 0)  # the release did not wait for the drain: the replica still streams our answer
    assert backend.runtime.find(key) is None

    def refused() -> bool:
        try:
            httpx.get(endpoint.url + "health", timeout=1)
        except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError):  # refused, closed or reset
            return True
        return False

    wait_until(refused, timeout=10, what="the draining replica to take no new connection")
    chunks += list(stream)
    assert chunks[-1].usage.completion_tokens == 200 and len(chunks) == 201

    def ended() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    wait_until(ended, timeout=10, what="the drained replica to end")


def test_requests_held_through_a_cold_start_longer_than_the_scale_down_delay_all_get_their_answer(
        live_daphne, cluster, settings):
    # The replica's model loads for 3 s, longer than the 1 s scale-down delay: the requests the portal holds
    # cannot reach it before it is ready, so they must count as waiting until then, or the replica is scaled
    # away under them (their connections refused, or held until the cold-start timeout).
    from concurrent.futures import ThreadPoolExecutor

    settings.SERVICE_SCALE_INTERVAL_S = 0
    job = services.submit_job(user=cluster.alice, workspace=cluster.vision,
                              spec=SERVICE.replace("scaleDownDelay: 3s", "scaleDownDelay: 1s"))
    _, raw = service_keys.create_key(cluster.alice, job, "app", days=0)
    client = openai.OpenAI(base_url=f"{live_daphne.url}/serve/vision-lab/llm/v1", api_key=raw, max_retries=0,
                           timeout=40)
    with cycling(SimulatedBackend(speedup=1, failure_rate=0, server_startup_s=3)):
        wait_until(lambda: state(job) == JobState.STOPPED and not job.replicas.filter(state__in=ACTIVE_STATES),
                   timeout=60, what="scale to zero")
        with ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(lambda _: timed_stream(client, 8)[2][-1].usage.completion_tokens, range(16)))
    assert answers == [8] * 16
    assert ServiceScale.objects.get(job=job).cold_starts == 1   # one wake, never scaled away before it answered
