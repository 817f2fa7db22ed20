"""The portal's mark for requests it still holds: a live service's `woken_at` moves on, a service stopped
meanwhile is woken again (back in its queue, a cold start counted), a cancelled one is left alone."""

from datetime import timedelta

from scheduling import inference, services
from scheduling.models import JobState, ServiceScale

SERVICE = """\
kind: inference
name: llm
queue: vision-lab
model: {path: /models/llm, name: llm}
resources: {gpu: 1}
replicas: {min: 0, max: 2}
target: {concurrency: 2}
scaleDownDelay: 3s
"""


def test_still_held_marks_a_live_service_and_wakes_a_stopped_one(cluster, clock):
    job = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=SERVICE)
    other = services.submit_job(user=cluster.bob, workspace=cluster.nlp,
                                spec=SERVICE.replace("queue: vision-lab", "queue: nlp-group"))
    inference.still_held(job)
    assert ServiceScale.objects.get(job=job).woken_at == clock.now
    assert ServiceScale.objects.get(job=other).woken_at is None   # another tenant's service is not touched

    services.stop_workload(None, job, "scaled to zero")
    later = clock.now + timedelta(seconds=3)
    inference.still_held(job, later)
    job.refresh_from_db()
    scale = ServiceScale.objects.get(job=job)
    assert job.state == JobState.PENDING and scale.cold_starts == 1 and scale.woken_at == later

    services.cancel_job(user=cluster.alice, job=job)
    inference.still_held(job, later + timedelta(seconds=3))
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED and ServiceScale.objects.get(job=job).woken_at == later


def test_a_stopped_service_kept_from_before_scales_existed_is_woken_and_gets_its_scale(cluster, clock):
    job = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=SERVICE)
    services.stop_workload(None, job, "scaled to zero")
    ServiceScale.objects.filter(job=job).delete()   # as a service submitted before scales were kept

    assert inference.wake(job, clock.now) is True
    job.refresh_from_db()
    scale = ServiceScale.objects.get(job=job)
    assert job.state == JobState.PENDING and scale.cold_starts == 1 and scale.woken_at == clock.now
    assert (scale.min_replicas, scale.max_replicas) == (0, 2)


def test_wake_leaves_what_is_not_a_service_alone(cluster, clock):
    job = services.submit_job(user=cluster.alice, workspace=cluster.vision,
                              spec="name: train\nqueue: vision-lab\nroles:\n  - {name: main, image: busybox, resources: {gpu: 1}}\n")
    assert inference.wake(job, clock.now) is False
    assert not ServiceScale.objects.filter(job=job).exists()
