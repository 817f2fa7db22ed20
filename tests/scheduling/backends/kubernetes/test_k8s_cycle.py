"""One whole scheduling cycle against the emulated cluster: submit -> Scheduled (a Pod bound with nodeName)
-> Running -> Succeeded (the test marks the pod as the kubelet would), the finished pod forgotten.
Needs the database (pytest-django); skipped under `-p no:django`."""

from __future__ import annotations

import pytest

from scheduling.backends.kubernetes.config import KubernetesConfig

try:
    from django.conf import settings

    DJANGO = settings.configured
except ImportError:  # pragma: no cover
    DJANGO = False

pytestmark = pytest.mark.skipif(not DJANGO, reason="needs the Django test database")

SPEC = """name: train
queue: vision-lab
expectedDuration: 1h
roles:
  - name: main
    image: busybox
    resources: {gpu: 2}
    nodePool: h100
"""


def test_submit_to_succeeded_through_the_kubernetes_backend(cluster, api, make_backend,
                                                           django_capture_on_commit_callbacks):
    from billing.services import submit_quoted_job
    from scheduling.cycle.run import run_scheduling_cycle
    from scheduling.models import JobState, Node

    for node in Node.objects.select_related("pool"):  # the emulated cluster has the database's nodes
        api.add_node(node.name, capacity={"nvidia.com/gpu": node.gpus.count()},
                     labels={"gpu-platform/pool": node.pool.name, "nvidia.com/gpu.product": node.pool.gpu_model,
                             "nvidia.com/gpu.memory": str(node.pool.gpu_memory_mib),
                             "nvidia.com/gpu.count": str(node.gpus.count())})
    backend = make_backend()
    assert isinstance(backend.config, KubernetesConfig)

    def cycle():
        with django_capture_on_commit_callbacks(execute=True):
            return run_scheduling_cycle(backend)

    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=SPEC)
    assert cycle().binds == 1
    job.refresh_from_db()
    replica = job.replicas.get()
    assert job.state == JobState.SCHEDULED
    ns = "gpu-ws-vision-lab"
    (pod,) = api.list("pods", ns)
    assert pod["spec"]["nodeName"] == replica.node.name
    assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert pod["metadata"]["labels"]["gpu-platform/job-id"] == str(job.pk)

    api.set_pod_phase(ns, pod["metadata"]["name"], "Running")
    cycle()
    job.refresh_from_db()
    assert job.state == JobState.RUNNING

    api.set_pod_phase(ns, pod["metadata"]["name"], "Succeeded")
    cycle()
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED
    assert api.list("pods", ns) == []  # forgotten once recorded
    cycle()  # an unchanged cluster: nothing happens
    assert api.count("POST", "/pods$") == 1
