"""An eviction on Kubernetes: the pod carries the job's terminationGracePeriod, and while the evicted pod stops
(Terminating) its GPUs stay held: the job that took them is placed only once the pod is gone."""

from __future__ import annotations

import pytest

try:
    from django.conf import settings

    DJANGO = settings.configured
except ImportError:  # pragma: no cover
    DJANGO = False

pytestmark = pytest.mark.skipif(not DJANGO, reason="needs the Django test database")

TRAIN = """name: train
queue: community
priority: 0
preemptible: true
expectedDuration: 1h
terminationGracePeriod: 2m
roles:
  - name: main
    image: busybox
    resources: {gpu: 8}
    nodePool: h100
"""


def test_an_evicted_pod_stops_within_its_grace_and_holds_its_gpus_until_gone(
    cluster, api, make_backend, django_capture_on_commit_callbacks
):
    from billing.services import submit_quoted_job
    from scheduling.cycle.run import run_scheduling_cycle
    from scheduling.models import JobState, Node, Replica
    from tests.scheduling.cycle.specs import spec

    for node in Node.objects.select_related("pool"):
        api.add_node(
            node.name,
            capacity={"nvidia.com/gpu": node.gpus.count()},
            labels={
                "gpu-platform/pool": node.pool.name,
                "nvidia.com/gpu.product": node.pool.gpu_model,
                "nvidia.com/gpu.memory": str(node.pool.gpu_memory_mib),
                "nvidia.com/gpu.count": str(node.gpus.count()),
            },
        )
    api.graceful_pods = True
    backend = make_backend()

    def cycle():
        with django_capture_on_commit_callbacks(execute=True):
            return run_scheduling_cycle(backend)

    def pods(ns):
        return {p["metadata"]["labels"]["gpu-platform/job-id"]: p for p in api.list("pods", ns)}

    train = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=TRAIN)
    submit_quoted_job(
        user=cluster.alice,
        workspace=cluster.vision,
        spec=spec("filler", queue="community", gpus=8, priority=10),
    )
    cycle()
    ns = "gpu-ws-vision-lab"
    assert pods(ns)[str(train.pk)]["spec"]["terminationGracePeriodSeconds"] == 120
    for pod in api.list("pods", ns):
        api.set_pod_phase(ns, pod["metadata"]["name"], "Running")
    cycle()

    urgent = submit_quoted_job(
        user=cluster.bob, workspace=cluster.nlp, spec=spec("urgent", queue="community", gpus=8, priority=50)
    )
    cycle()
    evicted = Replica.objects.get(job=train)
    assert evicted.state == JobState.PREEMPTED and evicted.held_until is not None
    assert pods(ns)[str(train.pk)]["metadata"].get("deletionTimestamp")  # Terminating: SIGTERM, the grace
    for _ in range(2):  # still stopping: its GPUs are not given to anyone
        cycle()
        assert not api.list("pods", "gpu-ws-nlp-group")
        assert not Replica.objects.filter(job=urgent).exists()

    api.finish_terminating()  # the pod is gone
    cycle()
    assert Replica.objects.get(job=train).held_until is None
    cycle()
    assert Replica.objects.filter(job=urgent).exists()
    assert api.list("pods", "gpu-ws-nlp-group")
