"""GET /api/v1/jobs/{id}/logs/: a job's replica logs as text, read back after the job ended, streamed with
follow=1 while it runs; bad parameters are problem details; another tenant's job is a 404."""

from __future__ import annotations

import pytest

from billing.services import submit_quoted_job
from scheduling import logs
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.models import JobState, Replica, ReplicaLog, SimulatedPod

PAIR = """name: {name}
queue: vision-lab
expectedDuration: 1h
roles:
  - name: main
    image: busybox
    replicas: {{min: {count}, max: {count}}}
    resources: {{gpu: 8}}
    nodePool: h100
"""



@pytest.fixture
def backend(clock):
    return SimulatedBackend(speedup=60, failure_rate=0, clock=clock)  # a 1 h job runs 60 s


def submit(cluster, name, count=2):
    return submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=PAIR.format(name=name, count=count))


def running(cluster, backend, clock, run, name="train", count=2):
    job = submit(cluster, name, count)
    run(backend, clock)
    clock.advance(2)
    run(backend, clock)
    job.refresh_from_db()
    assert job.state == JobState.RUNNING
    return job


def finished(cluster, backend, clock, run, name="train", count=2):
    job = running(cluster, backend, clock, run, name, count)
    clock.advance(61)
    run(backend, clock)
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED and not SimulatedPod.objects.exists()
    return job


def url(job) -> str:
    return f"/api/v1/jobs/{job.pk}/logs/"


def test_every_replicas_log_is_read_back_after_the_job_ended(cluster, backend, clock, run, api_as):
    job = finished(cluster, backend, clock, run)
    kept = {entry.name: entry for entry in ReplicaLog.objects.filter(job=job)}
    nodes = {f"{r.role}-{r.index}": r.node.name for r in Replica.objects.filter(job=job)}
    assert set(kept) == {"main-0", "main-1"} and len(set(nodes.values())) == 2
    alice = api_as(cluster.alice)

    response = alice.get(url(job))
    assert response.status_code == 200 and response["Content-Type"] == "text/plain; charset=utf-8"
    assert response.content.decode() == "".join(f"== {name} on {nodes[name]}\n{kept[name].text}"
                                                 for name in ("main-0", "main-1"))
    one = alice.get(url(job), {"replica": "main-1", "follow": "0"})
    assert one.status_code == 200 and one.content.decode() == kept["main-1"].text
    assert "training finished" in kept["main-1"].text


def test_a_capped_log_shows_the_truncated_marker(cluster, backend, clock, run, api_as, settings):
    settings.JOB_LOG_MAX_BYTES = 200
    job = finished(cluster, backend, clock, run, count=1)
    text = api_as(cluster.alice).get(url(job)).content.decode()
    header, marker, *lines = text.splitlines()
    assert header.startswith("== main-0 on ") and marker.startswith("[truncated: ") and "200 bytes" in marker
    assert lines[-1] == "training finished, checkpoint saved"
    assert len("".join(f"{line}\n" for line in [marker, *lines]).encode()) <= 200


def test_follow_streams_new_lines_until_the_job_ends(cluster, backend, clock, run, api_as, monkeypatch, settings):
    settings.JOB_LOG_FOLLOW_SECONDS = 600
    job = running(cluster, backend, clock, run, count=1)
    waits = []

    def time_passes(seconds):  # each wait: 15 s of the simulated run, and a scheduling cycle
        waits.append(seconds)
        clock.advance(15)
        run(backend, clock)

    monkeypatch.setattr(logs, "pause", time_passes)
    response = api_as(cluster.alice).get(url(job), {"replica": "main-0", "follow": "1"})
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    chunks = [chunk.decode() for chunk in response.streaming_content]
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED  # the stream ended with the job, not on its time limit
    assert len(waits) >= 4 and set(waits) == {settings.JOB_LOG_POLL_SECONDS}
    assert len(chunks) >= 4 and "step 1000/1000" not in chunks[0] and "training finished" in chunks[-1]
    assert "".join(chunks) == ReplicaLog.objects.get(job=job).text  # every line once, in order


def test_follow_of_all_replicas_names_each_one(cluster, backend, clock, run, api_as, monkeypatch):
    job = running(cluster, backend, clock, run, count=2)

    def time_passes(seconds):
        clock.advance(30)
        run(backend, clock)

    monkeypatch.setattr(logs, "pause", time_passes)
    text = b"".join(api_as(cluster.alice).get(url(job), {"follow": "1"}).streaming_content).decode()
    for name in ("main-0", "main-1"):
        assert text.count(f"== {name} on ") >= 1 and text.count(f"{name}: step 1000/1000") == 1


def test_follow_ends_at_once_for_a_job_that_does_not_run(cluster, api_as, monkeypatch, clock):
    job = submit(cluster, "waiting")
    monkeypatch.setattr(logs, "pause", lambda seconds: pytest.fail("a pending job is not followed"))
    response = api_as(cluster.alice).get(url(job), {"follow": "1"})
    assert response.status_code == 200 and b"".join(response.streaming_content) == b""


def test_follow_ends_after_its_time_limit(cluster, backend, clock, run, api_as, monkeypatch, settings):
    settings.JOB_LOG_FOLLOW_SECONDS = 0
    job = running(cluster, backend, clock, run, count=1)
    clock.advance(20)
    monkeypatch.setattr(logs, "pause", lambda seconds: pytest.fail("past the time limit"))
    text = b"".join(api_as(cluster.alice).get(url(job), {"follow": "1"}).streaming_content).decode()
    assert "step 300/1000" in text and "training finished" not in text
    job.refresh_from_db()
    assert job.state == JobState.RUNNING


@pytest.mark.parametrize(("params", "status", "field"), [
    ({"follow": "2"}, 400, "follow"),
    ({"follow": "yes"}, 400, "follow"),
    ({"replica": "main"}, 400, "replica"),
    ({"replica": "Main-0"}, 400, "replica"),
    ({"replica": ""}, 400, "replica"),
    ({"replica": "main-0\n"}, 400, "replica"),
    ({"replica": "main-7"}, 404, "replica"),
    ({"replica": "worker-0"}, 404, "replica"),
])
def test_bad_parameters_are_problem_details(cluster, backend, clock, run, api_as, params, status, field):
    job = finished(cluster, backend, clock, run)
    response = api_as(cluster.alice).get(url(job), params, HTTP_ACCEPT="text/plain")
    assert response.status_code == status
    assert response["Content-Type"] == "application/problem+json"
    body = response.json()
    assert body["status"] == status and [e["field"] for e in body["errors"]] == [field]


def test_a_nul_byte_is_refused(cluster, backend, clock, run, api_as):
    job = finished(cluster, backend, clock, run, count=1)
    response = api_as(cluster.alice).get(url(job), {"replica": "main-0\x00"})
    assert response.status_code == 400 and response["Content-Type"] == "application/problem+json"


def test_another_tenants_job_log_is_not_found(cluster, backend, clock, run, api_as):
    job = finished(cluster, backend, clock, run)
    secret = ReplicaLog.objects.filter(job=job).first().text.splitlines()[-1]
    bob = api_as(cluster.bob)
    for params in ({}, {"replica": "main-0"}, {"follow": "1"}, {"replica": "main-9"}):
        response = bob.get(url(job), params)
        assert response.status_code == 404 and secret.encode() not in response.content
        assert response.json()["detail"] == "No such job"
    assert api_as(cluster.alice).get(f"/api/v1/jobs/{job.pk + 1000}/logs/").status_code == 404
