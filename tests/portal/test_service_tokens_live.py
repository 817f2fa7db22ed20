"""Token metering on the real ASGI server, where the endpoint passes an answer on as it streams from the replica:
the answer reaches the client whole and its usage is metered once it has passed; autoscaling on the queue depth
the replicas report."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from portal.models import TokenScope
from portal.services import create_api_token
from scheduling import services
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.models import JobState, ServiceSample, ServiceTokenUsage
from tests.portal.test_serve_live import active, complete, cycling, state, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

SERVICE = """\
kind: inference
name: llm
queue: vision-lab
model: {path: /models/llm, name: llm}
resources: {gpu: 1}
replicas: {min: 1, max: 3}
target: {queueDepth: 1}
scaleDownDelay: 3s
"""


def test_streamed_answers_are_metered_and_a_queue_scales_the_service_up(live_daphne, cluster, settings):
    settings.SERVICE_SCALE_INTERVAL_S = 0
    service = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=SERVICE)
    backend = SimulatedBackend(speedup=1, failure_rate=0, server_startup_s=0)
    token = create_api_token(cluster.alice, "serve", scope=TokenScope.SUBMIT)[1]
    url = f"{live_daphne.url}/serve/vision-lab/llm/"
    with cycling(backend), httpx.Client(timeout=60) as client:
        wait_until(lambda: state(service) == JobState.RUNNING, what="the first replica")
        answer = complete(client, url, token, tokens=8)
        assert answer.status_code == 200 and answer.json()["usage"]["completion_tokens"] == 8
        wait_until(lambda: ServiceTokenUsage.objects.filter(job=service).exists(), what="the answer metered")
        [row] = ServiceTokenUsage.objects.filter(job=service)
        assert (row.requests, row.prompt_tokens, row.completion_tokens) == (1, 1, 8)
        assert row.decode_seconds > 0 and row.ttft_count == 1

        # forty requests at once on eight slots: a queue, over a target of one waiting per replica
        with ThreadPoolExecutor(40) as pool:
            busy = [pool.submit(complete, client, url, token, 200) for _ in range(40)]
            peak = 0
            while not all(f.done() for f in busy):
                peak = max(peak, active(service))
                time.sleep(0.05)
            assert {f.result().status_code for f in busy} == {200}
        assert peak > 1
        assert ServiceSample.objects.filter(job=service, waiting__gt=0).exists()
    # an answer is metered as its stream closes, just after the client has read it
    wait_until(lambda: sum(r.requests for r in ServiceTokenUsage.objects.filter(job=service)) == 41,
               what="every answer metered")
