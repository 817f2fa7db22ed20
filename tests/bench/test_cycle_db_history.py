"""bench.cycle_db --history: finished jobs, each with its ended replica, copied by the server from a running one;
the cycle's snapshot does not take them. PostgreSQL only (the copy is SQL of its own)."""

import pytest
from django.db import connection

from bench.cycle_db import load_history, role_dicts
from scheduling.cycle.snapshot import build_snapshot
from scheduling.models import Job, JobState, Replica
from tests.factories import JobFactory, NodeFactory

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="the history is copied by PostgreSQL's SQL")


@pytest.mark.django_db
def test_history_jobs_are_finished_copies_with_one_ended_replica_each(clock):
    node = NodeFactory()
    roles = role_dicts(dict(id="j", min_replicas=1, replicas=1, mode="exclusive", num_gpus=1, gpu_milli=1000,
                            gpu_mem_mib=0, cpu_milli=1000, mem_mib=4096, pool=""))
    running = JobFactory(state=JobState.RUNNING, roles=roles)
    Replica.objects.create(job=running, role="worker", index=0, state=JobState.RUNNING, node=node, gpu_indices=[0],
                           slice={"kind": "whole", "gpu_milli": 1000})
    before = build_snapshot(clock.now)

    assert load_history(3, clock.now) == 3

    history = Job.objects.filter(name__startswith="history-")
    assert history.count() == 3 and set(history.values_list("state", flat=True)) == {JobState.SUCCEEDED}
    assert all(job.roles == running.roles and job.finished is not None for job in history)
    ended = Replica.objects.filter(job__in=history)
    assert ended.count() == 3 and set(ended.values_list("state", "end_reason")) == {(JobState.SUCCEEDED, "Completed")}
    assert len(set(ended.values_list("uid", flat=True))) == 3
    assert build_snapshot(clock.now) == before   # ended work holds nothing and waits for nothing
