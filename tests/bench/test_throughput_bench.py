"""bench.cycle_db --throughput on the test database: a burst submitted into an empty cluster, every job bound."""

import pytest

from bench.cycle_db import main
from bench.throughput import run_throughput
from scheduling.models import Job, JobEvent, JobState, Replica, SimulatedPod


@pytest.mark.parametrize("batch", [30, 1])   # batches of the submit service (the last one short), or one by one
@pytest.mark.django_db(transaction=True)  # the cycle's launches run at its commit, as in the worker
def test_a_burst_of_one_gpu_jobs_is_bound_and_launched_and_the_rate_reported(batch):
    result = run_throughput(20, 100, batch=batch)
    assert result["batch"] == batch and result["nodes"] == 20 and result["gpus"] == 160 and result["burst"] == 100
    assert result["binds"] == result["pods_launched"] == result["jobs_bound"] == 100
    assert result["jobs_pending"] == 0
    assert result["wall_s"] == pytest.approx(result["submit_s"] + result["schedule_s"], abs=0.01)
    assert result["binds_per_s"] == pytest.approx(100 / result["wall_s"], rel=0.01)
    assert result["schedule_binds_per_s"] > result["binds_per_s"] > 0
    assert result["all_running_s"] >= result["cycles_done_s"] >= result["wall_s"]
    assert sum(c["binds"] for c in result["cycles"]) == 100
    assert {"database", "submits_per_s", "load_average_1m_before", "load_average_1m_after"} <= result.keys()
    # through the submit service: each job submitted, then placed, one replica on one GPU
    assert Job.objects.filter(state=JobState.SCHEDULED).count() == 100
    assert JobEvent.objects.filter(kind="submitted").count() == JobEvent.objects.filter(kind="scheduled").count() == 100
    assert all(len(gpus) == 1 for gpus in Replica.objects.values_list("gpu_indices", flat=True))
    assert SimulatedPod.objects.count() == 100


@pytest.mark.django_db(transaction=True)   # the worker process reads what the submits committed
def test_a_worker_process_beside_the_submits_binds_the_burst_as_they_come():
    result = run_throughput(20, 100, batch=30, worker=True, interval=0.2)
    assert result["worker"] == "beside the submits" and result["interval_s"] == 0.2
    assert result["binds"] == result["pods_launched"] == result["jobs_bound"] == 100 and result["jobs_pending"] == 0
    assert sum(c["binds"] for c in result["cycles"]) == 100
    assert all("at_s" in c for c in result["cycles"])   # when each began (one begun before the first submit may bind it)
    assert result["binds_per_s"] == pytest.approx(100 / result["wall_s"], rel=0.01)
    assert result["all_running_s"] >= result["wall_s"] > 0
    # the same rows as the cycles after the submits write: each job submitted, then placed once
    assert JobEvent.objects.filter(kind="submitted").count() == JobEvent.objects.filter(kind="scheduled").count() == 100
    assert Replica.objects.count() == SimulatedPod.objects.count() == 100
    assert all(len(gpus) == 1 for gpus in Replica.objects.values_list("gpu_indices", flat=True))


def test_a_burst_larger_than_the_cluster_is_refused(capsys):
    with pytest.raises(SystemExit):
        main(["--throughput", "--nodes", "2", "--burst", "17", "--db", "sqlite"])
    assert "--burst must fit on the cluster: at most 16 jobs" in capsys.readouterr().err
