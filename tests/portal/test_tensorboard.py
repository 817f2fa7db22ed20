"""A job's TensorBoard from its page: the link, the portal's redirect to `<id>-6006` on the notebook origin with
a ticket (never the portal's own origin), members of the job's workspace only (another tenant: 404), and a
real TensorBoard process of the simulated cluster fetched through the proxy, stopped with its job."""

from __future__ import annotations

import gzip
import json
import os
import time
from urllib.parse import urlsplit

import pytest
from django.test import Client

from billing.services import submit_quoted_job
from portal import notebook_origin
from portal.notebook_origin import COOKIE_NAME, NOTEBOOK_PORT, session_cookie
from scheduling import services
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.models import JobState
from scheduling.tensorboard import PORT

pytestmark = pytest.mark.django_db

SPEC = ("name: train-tb\nqueue: vision-lab\ntensorboard: {logdir: /ckpt/tb}\nexpectedDuration: 10h\n"
        "roles:\n  - name: main\n    image: pytorch/pytorch:2.3.0\n    replicas: 2\n    nodePool: h100\n"
        "    resources: {gpu: 1}\n")


def host(job_id: int, port: int = PORT) -> str:
    return f"{notebook_origin.label(job_id, port)}.nb.localhost:8001"


def on_host(job_id: int, user=None, port: int = PORT) -> Client:
    client = Client(HTTP_HOST=host(job_id))
    if user is not None:
        client.cookies[COOKIE_NAME] = session_cookie(user, job_id, port)
    return client


@pytest.fixture
def job(cluster):
    return submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=SPEC)


def test_the_job_page_links_its_tensorboard_and_strangers_see_nothing(cluster, job, client):
    client.force_login(cluster.alice)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="job-tensorboard"' in page and f"/jobs/{job.pk}/tensorboard/" in page and "/ckpt/tb" in page
    waiting = client.get(f"/jobs/{job.pk}/tensorboard/")
    assert waiting.status_code == 503 and "TensorBoard of train-tb cannot be opened now" in waiting.content.decode()
    plain = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=SPEC.replace(
        "tensorboard: {logdir: /ckpt/tb}\n", "").replace("train-tb", "plain"))
    assert 'id="job-tensorboard"' not in client.get(f"/jobs/{plain.pk}/").content.decode()
    assert client.get(f"/jobs/{plain.pk}/tensorboard/").status_code == 404
    client.force_login(cluster.bob)
    assert client.get(f"/jobs/{job.pk}/tensorboard/").status_code == 404


def test_its_host_answers_members_only_and_a_notebook_cookie_does_not_open_it(cluster, job):
    assert on_host(job.pk, cluster.alice).get("/").status_code == 503  # a member, not running yet
    assert on_host(job.pk, cluster.bob).get("/").status_code == 404     # another tenant
    assert on_host(job.pk).get("/").status_code == 403                  # no cookie
    assert on_host(job.pk, cluster.alice, port=NOTEBOOK_PORT).get("/").status_code == 403


def wait_for(probe, timeout: float):
    deadline = time.monotonic() + timeout
    while (found := probe()) is None and time.monotonic() < deadline:
        time.sleep(0.2)
    return found


def write_scalar(folder, tag: str, value: float) -> None:
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(folder))
    summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
    writer.add_event(event_pb2.Event(wall_time=time.time(), step=1, summary=summary))
    writer.close()


@pytest.mark.slow
def test_a_real_tensorboard_beside_the_first_replica_through_the_proxy(cluster, job, clock, run, client):
    """One real TensorBoard for this module (it takes seconds to start)."""
    backend = SimulatedBackend(speedup=1, failure_rate=0, clock=clock)
    for _ in range(3):
        run(backend, clock)
        clock.advance(30)
    job.refresh_from_db()
    assert job.state in (JobState.SCHEDULED, JobState.RUNNING), job.pending_reason
    assert set(backend.runtime.keys()) == {backend.tensorboard_key(job.pk)}  # one, beside main-0 only
    endpoint = wait_for(lambda: backend.tensorboard_endpoint(job.pk), 90)
    assert endpoint is not None, backend.runtime.log_tail(backend.tensorboard_key(job.pk))
    assert urlsplit(endpoint.url).hostname == "127.0.0.1"
    logs = backend.runtime.folder(backend.tensorboard_key(job.pk)) / "logdir"
    write_scalar(logs / "run-1", "loss", 0.5)

    client.force_login(cluster.alice)
    sent = client.get(f"/jobs/{job.pk}/tensorboard/")
    assert sent.status_code == 302 and sent["Cache-Control"] == "no-store"
    link = urlsplit(sent["Location"])
    assert f"{link.scheme}://{link.netloc}" == notebook_origin.origin_of(job.pk, PORT)  # never the portal's
    host_client = Client(HTTP_HOST=host(job.pk))
    exchanged = host_client.get(link.path + "?" + link.query)
    assert exchanged.status_code == 302 and exchanged["Location"] == "/"
    page = host_client.get("/")
    assert page.status_code == 200 and "tb-relative-root" in page.content.decode()
    runs = wait_for(lambda: (r := _json(host_client.get("/data/runs"))) and "run-1" in r and r or None, 30)
    assert runs == ["run-1"]  # the job's logdir, read by the real TensorBoard
    assert on_host(job.pk, cluster.bob).get("/data/runs").status_code == 404

    pid = backend.runtime.find(backend.tensorboard_key(job.pk)).pid
    services.cancel_job(user=cluster.alice, job=job)
    run(backend, clock)
    assert backend.tensorboard_endpoint(job.pk) is None
    gone = wait_for(lambda: None if _alive(pid) else True, 10)
    assert gone, "the TensorBoard outlived its job"
    assert on_host(job.pk, cluster.alice).get("/").status_code == 404  # the job ended: its host opens nothing


def _json(response):
    """TensorBoard gzips its JSON; the proxy passes it on as sent."""
    body = response.content
    return json.loads(gzip.decompress(body) if response.get("Content-Encoding") == "gzip" else body)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
