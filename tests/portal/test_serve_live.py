"""An inference service end to end on the real ASGI server and real server processes of the simulated
cluster, scheduling cycles running beside the test as the Celery beat runs them: the service scales to
zero when idle, a request wakes it (held while a replica starts, recorded as a cold start), load
scales it up, and it goes back to zero after its delay. Only a token of a member who may submit
gets through."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import httpx
import pytest
from django.db import connection

from portal.models import TokenScope
from portal.services import create_api_token
from scheduling import services
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.cycle.run import run_scheduling_cycle
from scheduling.models import ACTIVE_STATES, JobState, ServiceSample, ServiceScale

pytestmark = pytest.mark.django_db(transaction=True)

SERVICE = """\
kind: inference
name: llm
queue: vision-lab
model: {path: /models/llm, name: llm}
resources: {gpu: 1}
replicas: {min: 0, max: 3}
target: {concurrency: 2}
scaleDownDelay: 3s
"""


@contextmanager
def cycling(backend, every: float = 0.2):
    """Scheduling cycles on the wall clock in a thread of their own, until the block ends."""
    stop, failures = threading.Event(), []

    def loop():
        try:
            while not stop.is_set():
                run_scheduling_cycle(backend)
                stop.wait(every)
        except Exception as error:  # surfaced by the test below
            failures.append(error)
        finally:
            connection.close()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield failures
    finally:
        stop.set()
        thread.join(60)
        assert not failures, failures


def wait_until(condition, timeout: float = 30.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def state(job) -> str:
    job.refresh_from_db(fields=["state"])
    return job.state


def active(job) -> int:
    return job.replicas.filter(state__in=ACTIVE_STATES).count()


@pytest.fixture
def service(cluster, settings):
    settings.SERVICE_SCALE_INTERVAL_S = 0
    return services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=SERVICE)


def complete(client: httpx.Client, url: str, token: str, tokens: int = 16) -> httpx.Response:
    return client.post(url + "v1/completions", json={"model": "llm", "prompt": "hello", "max_tokens": tokens},
                       headers={"Authorization": f"Bearer {token}"})


def test_a_service_scales_from_zero_on_a_request_up_under_load_and_back_to_zero(live_daphne, cluster, service):
    backend = SimulatedBackend(speedup=1, failure_rate=0, server_startup_s=0.5)
    token = create_api_token(cluster.alice, "serve", scope=TokenScope.SUBMIT)[1]
    url = f"{live_daphne.url}/serve/vision-lab/llm/"
    with cycling(backend), httpx.Client(timeout=60) as client:
        # submitted: one replica starts; with no traffic for its delay it scales to zero and holds nothing
        wait_until(lambda: state(service) == JobState.RUNNING, what="the first replica")
        wait_until(lambda: state(service) == JobState.STOPPED, what="scale to zero")
        assert active(service) == 0

        # a request at zero waits while a replica starts, then gets its answer
        answer = complete(client, url, token)
        assert answer.status_code == 200, answer.text
        assert answer.json()["model"] == "llm" and answer.json()["choices"][0]["text"]
        assert float(answer.headers["x-cold-start-seconds"]) > 0
        assert service.events.filter(kind="cold-start").count() == 1
        assert ServiceScale.objects.get(job=service).cold_starts == 1

        # eight requests in flight for a target of two per replica: up to its max of 3
        peak = 0
        with ThreadPoolExecutor(8) as pool:
            busy = [pool.submit(lambda: [complete(client, url, token, tokens=200) for _ in range(4)])
                    for _ in range(8)]
            while not all(f.done() for f in busy):
                peak = max(peak, active(service))
                time.sleep(0.1)
            statuses = {r.status_code for f in busy for r in f.result()}
        assert statuses == {200}
        assert peak == 3
        assert ServiceSample.objects.filter(job=service, desired=3).exists()
        assert ServiceSample.objects.filter(job=service, requests__gt=0).exists()

        # no traffic: back to zero after the delay
        wait_until(lambda: state(service) == JobState.STOPPED, what="scale to zero after the load")
        assert active(service) == 0
        assert service.replicas.filter(end_reason__in=("scaled-down", "stopped")).count() >= 3


def test_a_replica_whose_process_ended_is_skipped_and_no_caller_gets_a_502(live_daphne, cluster, settings):
    import os
    import signal

    settings.SERVICE_SCALE_INTERVAL_S = 0
    job = services.submit_job(user=cluster.alice, workspace=cluster.vision,
                              spec=SERVICE.replace("{min: 0, max: 3}", "{min: 2, max: 2}"))
    backend = SimulatedBackend(speedup=1, failure_rate=0, server_startup_s=0.2)
    token = create_api_token(cluster.alice, "serve", scope=TokenScope.SUBMIT)[1]
    url = f"{live_daphne.url}/serve/vision-lab/llm/"
    with cycling(backend):
        wait_until(lambda: job.replicas.filter(state=JobState.RUNNING).count() == 2, what="two replicas")
    # no cycle from here on: the replica whose process ends stays Running in the database, as it is until the
    # next cycle sees it
    with httpx.Client(timeout=60) as client:
        replica = job.replicas.filter(state=JobState.RUNNING).order_by("index").first()
        key = (job.pk, replica.role, replica.index)
        with ThreadPoolExecutor(8) as pool:
            assert set(pool.map(lambda _: complete(client, url, token).status_code, range(8))) == {200}
            started = time.monotonic()
            assert complete(client, url, token, 200).status_code == 200
            long_answer_s = time.monotonic() - started
            # long answers in flight on both replicas when one's process ends (as a scale-down or a crash ends it)
            busy = [pool.submit(complete, client, url, token, 200) for _ in range(8)]
            time.sleep(long_answer_s / 3)
            os.kill(backend.runtime.find(key).pid, signal.SIGKILL)
            statuses = [f.result().status_code for f in busy]
    assert set(statuses) == {200}, statuses


def test_only_a_member_token_with_the_submit_scope_gets_through(live_daphne, cluster, service):
    from portal.models import Membership, Role

    url = f"{live_daphne.url}/serve/vision-lab/llm/v1/models"
    bob = create_api_token(cluster.bob, "other tenant", scope=TokenScope.SUBMIT)[1]
    reader = create_api_token(cluster.alice, "read only", scope=TokenScope.READ)[1]
    Membership.objects.filter(user=cluster.carol, workspace=cluster.vision).update(role=Role.VIEWER)
    viewer = create_api_token(cluster.carol, "viewer", scope=TokenScope.SUBMIT)[1]
    with httpx.Client(timeout=30) as client:
        for headers, status in (({}, 401), ({"Authorization": "Bearer gpt_not-a-token"}, 401),
                                ({"Authorization": f"Bearer {bob}"}, 404),
                                ({"Authorization": f"Bearer {reader}"}, 403),
                                ({"Authorization": f"Bearer {viewer}"}, 403)):
            refused = client.get(url, headers=headers)
            assert refused.status_code == status, (headers, refused.text)
            assert refused.headers["content-type"] == "application/json"  # the OpenAI error shape
            assert set(refused.json()["error"]) == {"message", "type", "code"}
        # bob's own workspace has no such service, and asking changed nothing here
        assert client.get(f"{live_daphne.url}/serve/nlp-group/llm/v1/models",
                          headers={"Authorization": f"Bearer {bob}"}).status_code == 404
    service.refresh_from_db()
    assert service.state == JobState.PENDING and ServiceScale.objects.get(job=service).woken_at is None
