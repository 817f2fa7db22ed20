"""Bad input to an inference service through the real ASGI portal, with the official `openai` SDK (or a raw
HTTP client where the SDK cannot send it): each is a clear 4xx in OpenAI's error shape, and nothing is
metered, counted against the limits, woken or changed."""

from __future__ import annotations

import httpx
import openai
import pytest

from portal import serve_limits, service_keys
from scheduling import services
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.models import FINAL_STATES, Job, JobState, ServiceScale, ServiceTokenUsage
from tests.portal.test_serve_live import SERVICE, cycling, wait_until
from tests.portal.test_serve_stream_live import sdk

pytestmark = pytest.mark.django_db(transaction=True)


def openai_error(error: openai.APIStatusError, status: int, kind: str, code: str | None = None) -> dict:
    assert error.status_code == status, error
    body = error.body
    assert isinstance(body, dict) and body["message"] and body["type"] == kind, body
    if code is not None:
        assert body["code"] == code, body
    return body


def refused(call, kind=openai.APIStatusError) -> openai.APIStatusError:
    with pytest.raises(kind) as caught:
        call()
    return caught.value


LONG = [{"role": "user", "content": "word " * 8190}]


def chat(client: openai.OpenAI, **extra):
    body = {"model": "llm", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4, **extra}
    if body.get("stream"):
        return list(client.chat.completions.create(**body))
    return client.chat.completions.create(**body)


def test_each_bad_input_is_a_clear_4xx_in_the_openai_shape_and_changes_nothing(live_daphne, cluster, settings):
    settings.SERVICE_SCALE_INTERVAL_S = 0
    job = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=SERVICE.replace(
        "{min: 0, max: 3}", "{min: 1, max: 1}") + "limits: {requestsPerMinute: 1000}\n")
    revoked, revoked_raw = service_keys.create_key(cluster.alice, job, "old")
    _, raw = service_keys.create_key(cluster.alice, job, "app")
    expired, expired_raw = service_keys.create_key(cluster.alice, job, "short", days=1)
    type(expired).objects.filter(pk=expired.pk).update(expires=expired.created)
    with cycling(SimulatedBackend(speedup=1, failure_rate=0, server_startup_s=0.2)):
        wait_until(lambda: job.replicas.filter(state=JobState.RUNNING).exists(), what="a replica")
    client = sdk(live_daphne, raw)
    wait_until(lambda: client.models.list() is not None, what="the server")
    service_keys.revoke_key(cluster.alice, job, revoked.pk)
    url = f"{live_daphne.url}/serve/vision-lab/llm/v1/chat/completions"
    scale = ServiceScale.objects.get(job=job)

    for stream in (False, True):
        # an unknown model: 404, as OpenAI answers it
        openai_error(refused(lambda s=stream: chat(client, model="gpt-9", stream=s), openai.NotFoundError), 404,
                     "invalid_request_error", "model_not_found")
        # max_tokens below 1
        openai_error(refused(lambda s=stream: chat(client, max_tokens=0, stream=s), openai.BadRequestError), 400,
                     "invalid_request_error")
        # a prompt over the model's context (8,192 tokens with the completion)
        error = openai_error(refused(lambda s=stream: chat(client, messages=LONG, stream=s), openai.BadRequestError),
                             400, "invalid_request_error", "context_length_exceeded")
        assert "maximum context length is 8192 tokens" in error["message"]
    # a malformed JSON body (no SDK sends one)
    answer = httpx.post(url, content=b'{"model": "llm", "messages": [', headers={
        "Authorization": f"Bearer {raw}", "Content-Type": "application/json"}, timeout=30)
    assert answer.status_code == 400 and answer.json()["error"]["type"] == "invalid_request_error"
    # a body over the /serve/ limit, refused before it is read whole
    answer = httpx.post(url, content=b"x" * (settings.BODY_LIMIT_SERVE_BYTES + 1), headers={
        "Authorization": f"Bearer {raw}", "Content-Type": "application/json"}, timeout=30)
    assert answer.status_code == 413 and answer.json()["error"]["code"] == "request_too_large"
    # a wrong key, a revoked one and an expired one, streamed or not
    for key in ("gsk_not-a-key", revoked_raw, expired_raw):
        for stream in (False, True):
            openai_error(refused(lambda k=key, s=stream: chat(sdk(live_daphne, k), stream=s),
                                 openai.AuthenticationError), 401, "authentication_error", "invalid_api_key")

    # no token metered, no cold start, every place in the queue given back
    assert not ServiceTokenUsage.objects.filter(job=job).exists()
    assert ServiceScale.objects.get(job=job).cold_starts == scale.cold_starts
    assert serve_limits.in_flight(job.pk) == 0 and serve_limits.waiting(job.pk) == 0

    # a stream to a service its owner stopped: 404, and it is not woken
    services.cancel_job(user=cluster.alice, job=job)
    openai_error(refused(lambda: chat(client, stream=True), openai.NotFoundError), 404, "not_found_error")
    assert Job.objects.get(pk=job.pk).state in FINAL_STATES
    assert ServiceScale.objects.get(job=job).cold_starts == scale.cold_starts
