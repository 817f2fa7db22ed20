"""Notebooks and services as the core sees them: their stored requests (spec/requests.py) become core jobs;
a notebook is not preempted unless marked preemptible; a service's replicas above its minimum are elastic."""

from __future__ import annotations

from scheduling.core import Job, Pool, Queue, Snapshot
from scheduling.core.builders import cycles, job, nodes, placed, with_jobs
from scheduling.cycle.snapshot import core_roles
from scheduling.spec import parse_job_spec
from scheduling.spec.kinds import service_bounds
from scheduling.spec.requests import role_requests


def core_job(job_id: str, queue: str, text: str, *, desired: int | None = None, created: float = 0.0,
             priority: int = 0) -> Job:
    """The core job the snapshot builds from a submitted spec's stored requests; for a service, with the
    replicas its autoscaler wants."""
    spec = parse_job_spec(text)
    roles = role_requests(spec, None)
    if desired is not None:
        low, high = service_bounds(roles[0]["scale_min"], roles[0]["scale_max"], desired)
        roles = [{**roles[0], "min_replicas": low, "max_replicas": high}]
    return Job(job_id, queue, core_roles(roles), priority=priority, preemptible=spec.preemptible,
               created=created)


def notebook(preemptible: bool) -> str:
    return f"kind: notebook\nname: nb\npreemptible: {str(preemptible).lower()}\nresources: {{gpu: 1}}\n"


def service(preemptible: bool) -> str:
    return ("kind: inference\nname: svc\nmodel: {path: /m}\nresources: {gpu: 1}\nreplicas: {min: 1, max: 4}\n"
            f"preemptible: {str(preemptible).lower()}\n")


def cluster(gpus: int, queues: tuple[Queue, ...], *jobs: Job) -> Snapshot:
    return Snapshot(pools=(Pool("h100"),), nodes=nodes("h100", 1, gpus), queues=queues, jobs=jobs)


def test_a_notebook_is_not_preempted_unless_marked_preemptible():
    queues = (Queue("lab", deserved_milli=1000),)
    for preemptible, survives in ((False, True), (True, False)):
        snap, _ = cycles(cluster(1, queues, core_job("nb", "lab", notebook(preemptible))), 1)
        assert placed(snap) == {"nb": 1}
        urgent = job("urgent", "lab", priority=90, created=5, preemptible=False)
        snap, _ = cycles(with_jobs(snap, urgent), 2)
        assert ("nb" in placed(snap)) is survives
        assert ("urgent" in placed(snap)) is not survives


def test_a_preemptible_service_grows_on_idle_gpus_and_its_extras_yield_to_a_reclaim():
    queues = (Queue("serve", deserved_milli=2000), Queue("train", deserved_milli=2000))
    svc = core_job("svc", "serve", service(True), desired=4)
    assert [(r.min_replicas, r.max_replicas) for r in svc.roles] == [(1, 4)]
    snap, _ = cycles(cluster(4, queues, svc), 1)
    assert placed(snap) == {"svc": 4}
    snap, [decisions] = cycles(with_jobs(snap, job("t", "train", gpus=2, created=5, preemptible=False)), 1)
    assert sorted((e.job_id, e.reason) for e in decisions.evicts) == [("svc", "shrink"), ("svc", "shrink")]
    assert placed(snap) == {"svc": 2, "t": 1}


def test_a_service_that_is_not_preemptible_keeps_its_minimum_and_its_extras_yield_to_a_reclaim():
    """Its minimum is non-preemptible work (within deserved quota, never evicted); the replicas above it
    are elastic: they borrow idle GPUs over the quota and are the first to go when others reclaim."""
    queues = (Queue("serve", deserved_milli=2000), Queue("train", deserved_milli=2000))
    snap, _ = cycles(cluster(4, queues, core_job("svc", "serve", service(False), desired=4)), 2)
    assert placed(snap) == {"svc": 4}
    snap, [decisions] = cycles(with_jobs(snap, job("t", "train", gpus=2, created=5, preemptible=False)), 1)
    assert sorted((e.job_id, e.reason) for e in decisions.evicts) == [("svc", "shrink"), ("svc", "shrink")]
    assert placed(snap) == {"svc": 2, "t": 1}
    # the same cluster, the service at its minimum of 1: a higher-priority job in its own queue waits
    snap, _ = cycles(cluster(1, queues, core_job("svc", "serve", service(False), desired=1)), 1)
    snap, _ = cycles(with_jobs(snap, job("urgent", "serve", priority=90, created=5, preemptible=False)), 2)
    assert placed(snap) == {"svc": 1}


def test_a_non_preemptible_minimum_must_fit_the_deserved_quota():
    queues = (Queue("serve", deserved_milli=1000), Queue("train", deserved_milli=3000))
    text = service(False).replace("min: 1", "min: 2")
    snap, [decisions] = cycles(cluster(4, queues, core_job("svc", "serve", text, desired=2)), 1)
    assert placed(snap) == {} and decisions.binds == ()


def test_a_service_at_its_minimum_and_scaled_to_zero():
    spec = parse_job_spec("kind: inference\nname: s\nmodel: {path: /m}\nresources: {gpu: 1}\n"
                          "replicas: {min: 0, max: 3}\n")
    [stored] = role_requests(spec, None)
    assert core_roles([stored])[0].min_replicas == 1            # a valid core job as submitted
    assert service_bounds(stored["scale_min"], stored["scale_max"], 0) is None
