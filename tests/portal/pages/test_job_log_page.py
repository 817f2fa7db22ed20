"""The job page's log: live while the job runs, the kept copy with a download link once it ended;
another tenant gets a 404."""

from __future__ import annotations

import pytest

from billing.services import submit_quoted_job
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.models import JobState, ReplicaLog, SimulatedPod

SPEC = """name: page-log
queue: vision-lab
expectedDuration: 1h
roles:
  - name: main
    image: busybox
    resources: {gpu: 1}
    nodePool: h100
"""


@pytest.fixture
def backend(clock):
    return SimulatedBackend(speedup=60, failure_rate=0, clock=clock)


@pytest.fixture
def job(cluster, backend, clock, run):
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=SPEC)
    run(backend, clock)
    clock.advance(32)
    run(backend, clock)
    job.refresh_from_db()
    assert job.state == JobState.RUNNING
    return job


def test_a_running_jobs_log_is_read_live(client, cluster, job, backend):
    client.force_login(cluster.alice)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'data-active="1"' in page and f'href="/jobs/{job.pk}/log/?download=1"' in page
    text = client.get(f"/jobs/{job.pk}/log/").content.decode()
    node = job.replicas.get().node.name
    assert text == f"== main-0 on {node}\n" + backend.logs((job.pk, "main", 0), 5000)
    assert "step 500/1000" in text and not ReplicaLog.objects.exists()


def test_an_ended_jobs_page_shows_the_kept_log_and_offers_it_as_a_file(client, cluster, job, backend, clock, run,
                                                                         settings):
    settings.JOB_LOG_RETENTION_DAYS = 12
    clock.advance(40)
    run(backend, clock)
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED and not SimulatedPod.objects.exists()
    kept = ReplicaLog.objects.get(job=job)
    client.force_login(cluster.alice)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'data-active="0"' in page and "training finished, checkpoint saved" in page
    assert f"== main-0 on {kept.node}" in page and "kept 12 days" in page
    download = client.get(f"/jobs/{job.pk}/log/", {"download": "1"})
    assert download["Content-Disposition"] == f'attachment; filename="job-{job.pk}-logs.txt"'
    assert download.content.decode() == f"== main-0 on {kept.node}\n{kept.text}"

    client.force_login(cluster.bob)
    assert client.get(f"/jobs/{job.pk}/").status_code == 404
    assert client.get(f"/jobs/{job.pk}/log/", {"download": "1"}).status_code == 404
