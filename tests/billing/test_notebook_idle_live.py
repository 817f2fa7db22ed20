"""Idle notebooks against the real processes of the simulated cluster: a notebook whose kernels stay quiet
for its idleAfter is stopped (notified, its slice freed) and a job waiting for that GPU gets it; a busy
kernel keeps it running; with notify-then-stop the stop waits for the pool's grace. Real time throughout:
the notebook's server measures its idleness on the wall clock (SIM_SPEEDUP 60: idleAfter 1m is 1 s)."""

from __future__ import annotations

import time
from datetime import timedelta

import httpx
import pytest

from billing.idle.services import check_idle_gpus
from billing.services import submit_quoted_job
from portal.models import Notification
from scheduling import clock as platform_clock
from scheduling import services
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.models import IdleAction, Job, JobState, Node, NodePool
from scheduling.notebooks import endpoint_of

NOTEBOOK = ("kind: notebook\nname: lab\nqueue: vision-lab\nnodePool: rtx4090\nidleAfter: 1m\n"
            "resources: {gpu: 0.5, gpuMemory: 8Gi}\n")
WHOLE_NODE = ("name: needs-both-gpus\nqueue: vision-lab\nroles:\n  - name: main\n    image: busybox:1.36\n"
              "    nodePool: rtx4090\n    resources: {gpu: 2}\n")


class WallClock:
    @property
    def now(self):
        return platform_clock.now()


@pytest.fixture
def one_node(cluster):
    """rtx4090 with a single node of 2 GPUs: half of one held by the notebook leaves no room for 2 whole GPUs."""
    Node.objects.filter(pool__name="rtx4090").exclude(name="rtx4090-01").update(cordoned=True)
    return cluster


def run_until(run, backend, job: Job, state: str, timeout: float = 20.0) -> Job:
    deadline = time.monotonic() + timeout
    while True:
        run(backend, WallClock())
        job.refresh_from_db()
        if job.state == state or time.monotonic() > deadline:
            assert job.state == state, list(job.events.values_list("kind", "reason"))
            return job
        time.sleep(0.1)


def kernel_runs(endpoint, seconds: float, gpu: float) -> None:
    auth = {"Authorization": f"token {endpoint.token}"}
    kernel = httpx.post(endpoint.url + "api/kernels", json={"name": "python3"}, headers=auth).json()
    ran = httpx.post(endpoint.url + f"api/kernels/{kernel['id']}/execute", json={"seconds": seconds, "gpu": gpu},
                     headers=auth)
    assert ran.status_code == 202


@pytest.mark.django_db
def test_an_idle_notebook_is_stopped_and_its_gpu_goes_to_the_waiting_job(one_node, run,
                                                                         django_capture_on_commit_callbacks):
    cluster = one_node
    backend = SimulatedBackend(speedup=60, failure_rate=0)
    notebook = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=NOTEBOOK)
    notebook = run_until(run, backend, notebook, JobState.RUNNING)
    waiting = submit_quoted_job(user=cluster.carol, workspace=cluster.vision, spec=WHOLE_NODE)
    run(backend, WallClock())
    waiting.refresh_from_db()
    assert waiting.state == JobState.PENDING  # the notebook's half GPU is in the way

    endpoint = endpoint_of(notebook, backend)
    kernel_runs(endpoint, seconds=2.5, gpu=0.9)
    time.sleep(1.5)  # longer than idleAfter, but the kernel is busy
    with django_capture_on_commit_callbacks(execute=True):
        check = check_idle_gpus(backend=backend)
    assert check.stopped == [] and check.flagged == []
    notebook.refresh_from_db()
    assert notebook.state == JobState.RUNNING

    deadline = time.monotonic() + 20
    while True:  # the run ends, then 1 s of nothing: stopped, with the notice
        with django_capture_on_commit_callbacks(execute=True):
            check = check_idle_gpus(backend=backend)
        if check.stopped or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert check.stopped == [notebook] and check.notified == [notebook]
    notebook.refresh_from_db()
    assert notebook.state == JobState.STOPPED
    kinds = list(notebook.events.values_list("kind", flat=True))
    assert kinds[-2:] == ["idle", "stopped"]
    assert "stopped by policy: no kernel activity and no GPU use for 1 min" in notebook.events.last().reason
    (notice,) = Notification.objects.filter(user=cluster.alice, event="idle.notice")
    assert "notebook lab" in notice.subject and "it is stopped now" in notice.body
    assert not Notification.objects.filter(user__in=[cluster.bob, cluster.carol], event="idle.notice").exists()
    replica = notebook.replicas.get()
    assert replica.state == JobState.STOPPED and replica.ended is not None  # billed until here, not after

    pid = backend.runtime.find((notebook.pk, "notebook", 0)).pid
    waiting = run_until(run, backend, waiting, JobState.SCHEDULED)
    (bound,) = waiting.replicas.all()
    assert (bound.node.name, sorted(bound.gpu_indices)) == ("rtx4090-01", [0, 1])
    assert backend.runtime.find((notebook.pk, "notebook", 0)) is None
    with pytest.raises(ProcessLookupError):
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            import os

            os.kill(pid, 0)
            time.sleep(0.05)

    services.start_workload(cluster.alice, notebook)  # starting again queues like any job
    run(backend, WallClock())
    notebook.refresh_from_db()
    assert notebook.state == JobState.PENDING and notebook.pending_reason


@pytest.mark.django_db
def test_notify_then_stop_waits_for_the_pools_grace(one_node, run, django_capture_on_commit_callbacks):
    cluster = one_node
    NodePool.objects.filter(name="rtx4090").update(idle_action=IdleAction.NOTIFY_THEN_STOP, idle_grace_min=10)
    backend = SimulatedBackend(speedup=60, failure_rate=0)
    notebook = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=NOTEBOOK)
    notebook = run_until(run, backend, notebook, JobState.RUNNING)
    time.sleep(1.2)
    with django_capture_on_commit_callbacks(execute=True):
        first = check_idle_gpus(backend=backend)
    assert first.notified == [notebook] and first.stopped == []
    event = notebook.events.get(kind="idle")
    assert "it will be stopped at" in event.reason
    later = platform_clock.now() + timedelta(minutes=11)
    with django_capture_on_commit_callbacks(execute=True):
        assert check_idle_gpus(now=later, backend=backend).stopped == [notebook]
    notebook.refresh_from_db()
    assert notebook.state == JobState.STOPPED
