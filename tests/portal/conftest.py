"""A running notebook on the simulated cluster, for the tests of the notebook's HTTP and websocket proxies."""

from __future__ import annotations

import time

import pytest

NOTEBOOK = "kind: notebook\nname: lab\nqueue: vision-lab\nresources: {gpu: 0.5, gpuMemory: 10Gi}\n"


class WallClock:
    @property
    def now(self):
        from scheduling import clock

        return clock.now()


@pytest.fixture
def running_notebook(cluster, run):
    from billing.services import submit_quoted_job
    from scheduling.backends.simulated.backend import SimulatedBackend
    from scheduling.models import JobState

    backend = SimulatedBackend(speedup=60, failure_rate=0)
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=NOTEBOOK)
    deadline = time.monotonic() + 20
    while job.state != JobState.RUNNING and time.monotonic() < deadline:
        run(backend, WallClock())
        job.refresh_from_db()
        time.sleep(0.1)
    assert job.state == JobState.RUNNING
    return job
