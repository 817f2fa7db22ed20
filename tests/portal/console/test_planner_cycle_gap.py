"""Replays never hold up the scheduling cycle: `make run`'s real worker programs (portal/run.py: the cycle's
worker on the default queue, the long worker on `long`) and its beat, ticking every second, on the test
database and Redis; two big planner replays run on the long worker while the cycle goes on every tick.
The cycle's runs are read from the time it records at the end of each (the shared metric
gpu_platform_scheduler_last_cycle_timestamp_seconds)."""

import contextlib
import os
import signal
import subprocess
import time
import uuid

import pytest
from celery.result import AsyncResult

from portal import run as make_run
from portal.celery import app
from portal.console import planner_services as services
from portal.console.models import PlannerRun
from portal.testing import ROOT, child_env, stop_processes
from scheduling import metrics

INTERVAL_S = 1.0
MEASURE_S = 20.0
LAST_CYCLE = "gpu_platform_scheduler_last_cycle_timestamp_seconds"
TRACE_INPUTS = {"trace_queue": "vision-lab", "checkpoint_min": 30, "preemption": True, "pools": {}, "queues": {}}


def big_trace(jobs: int = 3000) -> str:
    """Far more 8-GPU hours than the test world's nodes take: a replay of minutes."""
    rows = [f"{i},vision-lab,{1 + i % 8},{20 * i},{3600 + 60 * (i % 30)},{i % 2}" for i in range(jobs)]
    return "job_id,user,num_gpu,submit_time,duration,best_effort\n" + "\n".join(rows) + "\n"


def last_cycle() -> float | None:
    for _, _, value in metrics.read_shared().get(LAST_CYCLE, []):
        return value
    return None


def wait_until(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, what
        time.sleep(0.1)
    return found


@pytest.mark.slow_server
@pytest.mark.django_db(transaction=True)
def test_two_replays_on_the_long_worker_leave_the_cycle_every_tick(cluster, operator, tmp_path):
    env = child_env(CELERY_QUEUE=f"gap-{uuid.uuid4().hex[:8]}", SCHEDULER_INTERVAL_S=str(INTERVAL_S),
                    LONG_TASK_CONCURRENCY="2")
    # no web server here: each program waits for the database and Redis itself (web=False)
    programs = make_run.processes(8000, tmp_path, web=False)
    procs = []
    try:
        for name in ("worker", "worker-long", "beat"):
            with open(tmp_path / f"{name}.log", "wb") as log:
                procs.append(subprocess.Popen(["bash", "-c", programs[name]], cwd=ROOT, env=env, stdout=log,
                                              stderr=subprocess.STDOUT, start_new_session=True))
        first = wait_until(last_cycle, 120, "no scheduling cycle ran")
        wait_until(lambda: (last_cycle() or 0) > first, 30, "the cycle does not run every tick")

        runs = [services.start_run(operator, kind=PlannerRun.Kind.TRACE, inputs=TRACE_INPUTS, trace_csv=big_trace())
                for _ in range(2)]   # sent to `long` as each commits
        try:
            wait_until(lambda: PlannerRun.objects.filter(state=PlannerRun.State.RUNNING).count() == 2, 180,
                       "the long worker does not run both replays at once")
        except AssertionError as failed:  # what the runs and the long worker say, to tell load from a fault
            states = list(PlannerRun.objects.filter(pk__in=[r.pk for r in runs]).values_list("state", "progress", "error"))
            raise AssertionError(f"{failed}; runs {states}; worker-long said: "
                                 f"{(tmp_path / 'worker-long.log').read_text()[-2000:]}") from None
        seen, start = [last_cycle()], time.monotonic()
        while time.monotonic() - start < MEASURE_S:
            if (at := last_cycle()) != seen[-1]:
                seen.append(at)
            time.sleep(0.05)
        seen.append(time.time())   # the time since the last cycle counts as a gap too
        states = set(PlannerRun.objects.filter(pk__in=[r.pk for r in runs]).values_list("state", flat=True))
        assert states == {PlannerRun.State.RUNNING}, "a replay ended before the measure did: make the trace bigger"

        gaps = [b - a for a, b in zip(seen, seen[1:], strict=False)]
        print(f"cycle runs while two replays ran {MEASURE_S:.0f} s: {len(gaps)}, longest gap {max(gaps):.2f} s "
              f"(interval {INTERVAL_S} s)")
        assert len(gaps) >= MEASURE_S / (3 * INTERVAL_S)
        assert max(gaps) <= 3 * INTERVAL_S, gaps

        # cancelled, the replays stop on the long worker at their next progress update: their tasks end
        for run in runs:
            assert services.cancel_run(operator, run)
        for run in runs:
            assert AsyncResult(services.task_id(run), app=app).get(timeout=30) is False
    finally:
        stop_processes(procs)
        for proc in procs:   # the workers' pool children too
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
