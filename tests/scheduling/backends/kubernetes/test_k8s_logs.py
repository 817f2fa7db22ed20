"""Replica logs on the emulated cluster: the cycle reads each pod's log before the backend deletes the pod
(a finished pod forgotten, a cancelled job's pod evicted), and keeps it. Needs the database (pytest-django);
skipped under `-p no:django`."""

from __future__ import annotations

import pytest

try:
    from django.conf import settings

    DJANGO = settings.configured
except ImportError:  # pragma: no cover
    DJANGO = False

pytestmark = pytest.mark.skipif(not DJANGO, reason="needs the Django test database")

NS = "gpu-ws-vision-lab"
SPEC = """name: {name}
queue: vision-lab
expectedDuration: 1h
roles:
  - name: main
    image: busybox
    resources: {{gpu: 1}}
    nodePool: h100
"""


@pytest.fixture
def cycle(cluster, api, make_backend, django_capture_on_commit_callbacks):
    """One scheduling cycle against the emulated cluster, which has the database's nodes."""
    from scheduling.cycle.run import run_scheduling_cycle
    from scheduling.models import Node

    for node in Node.objects.select_related("pool"):
        api.add_node(node.name, capacity={"nvidia.com/gpu": node.gpus.count()},
                     labels={"gpu-platform/pool": node.pool.name, "nvidia.com/gpu.product": node.pool.gpu_model,
                             "nvidia.com/gpu.memory": str(node.pool.gpu_memory_mib),
                             "nvidia.com/gpu.count": str(node.gpus.count())})
    backend = make_backend()

    def run():
        with django_capture_on_commit_callbacks(execute=True):
            return run_scheduling_cycle(backend)

    return run


def submit(cluster, name):
    from billing.services import submit_quoted_job

    return submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=SPEC.format(name=name))


def pod_of(api, job) -> str:
    (pod,) = [p for p in api.list("pods", NS) if p["metadata"]["labels"]["gpu-platform/job-id"] == str(job.pk)]
    return pod["metadata"]["name"]


def order(api, name: str) -> list[str]:
    """What was asked of this pod, in order: its log read and its deletion."""
    path = f"/api/v1/namespaces/{NS}/pods/{name}"
    return [("read log" if p.endswith("/log") else "delete") for m, p, _ in api.requests
            if p == f"{path}/log" or (m == "DELETE" and p == path)]


def test_a_finished_pods_log_is_read_before_the_pod_is_deleted(cluster, api, cycle):
    from scheduling.models import JobState, ReplicaLog

    job = submit(cluster, "train")
    cycle()
    name = pod_of(api, job)
    text = "".join(f"epoch {n}: loss {1 / (n + 1):.3f}\n" for n in range(50))
    api.logs[(NS, name)] = text
    api.set_pod_phase(NS, name, "Running")
    cycle()
    api.set_pod_phase(NS, name, "Succeeded")
    cycle()
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED and api.list("pods", NS) == []
    assert order(api, name) == ["read log", "delete"]
    kept = ReplicaLog.objects.get(job=job)
    assert kept.text == text and kept.node == job.replicas.get().node.name and not kept.truncated
    query = next(q for m, p, q in api.requests if p.endswith(f"/{name}/log"))
    assert query["tailLines"] == str(settings.JOB_LOG_TAIL_LINES)


def test_a_cancelled_jobs_pod_log_is_read_before_the_pod_is_evicted(cluster, api, cycle):
    from scheduling.models import ReplicaLog
    from scheduling.services import cancel_job

    job = submit(cluster, "stopped")
    cycle()
    name = pod_of(api, job)
    api.logs[(NS, name)] = "step 1\nstep 2\n"
    api.set_pod_phase(NS, name, "Running")
    cycle()
    cancel_job(user=cluster.alice, job=job)
    assert cycle().orphans_removed == 1
    assert order(api, name) == ["read log", "delete"]
    assert ReplicaLog.objects.get(job=job).text == "step 1\nstep 2\n"
