"""The kept snapshot (`SnapshotCache`, read incrementally) is the snapshot read whole, after random
sequences of the writes the platform makes: jobs submitted, reprioritised, moved, held, stopped and
ended, placements made and ended, nodes and queues renamed, GPUs changed, time passing. Some rows
are written twice between two reads, inside one transaction, the second write putting a value back.
Runs on SQLite and on PostgreSQL (DATABASE_URL=postgres://...)."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from django.db import connection

from bench.cycle_db import role_dicts
from scheduling.cycle.snapshot import SnapshotCache, build_snapshot, scheduled_jobs
from scheduling.models import ACTIVE_STATES, Gpu, Job, JobState, Node, Queue, Replica

LEAVES = ("vision-lab", "nlp-group", "community")
SHAPES = [dict(mode="exclusive", num_gpus=1, gpu_milli=1000, gpu_mem_mib=0),
          dict(mode="exclusive", num_gpus=2, gpu_milli=1000, gpu_mem_mib=0),
          dict(mode="fraction", num_gpus=1, gpu_milli=250, gpu_mem_mib=8192)]


def roles(rng: random.Random) -> list[dict]:
    shape = rng.choice(SHAPES)
    replicas = rng.choice([1, 1, 2, 3])
    return role_dicts(dict(id="j", min_replicas=rng.choice([1, replicas]), replicas=replicas, cpu_milli=1000,
                           mem_mib=4096, pool="", **shape))


class World:
    """Random writes on the test cluster, as the platform's services and cycle make them."""

    def __init__(self, cluster, clock, rng: random.Random) -> None:
        self.cluster, self.clock, self.rng = cluster, clock, rng
        self.queues = {q.name: q for q in Queue.objects.filter(name__in=LEAVES)}
        self.nodes = list(Node.objects.filter(pool__name="h100"))
        self.count = 0

    def submit(self) -> None:
        self.count += 1
        rng = self.rng
        Job.objects.create(workspace=self.cluster.vision, queue=self.queues[rng.choice(LEAVES)],
                           name=f"job-{self.count}", job_type="single", priority=rng.choice([0, 50]),
                           preemptible=rng.random() < 0.8, spec_text="", spec={}, roles=roles(rng),
                           not_before=self.clock.now + timedelta(hours=1) if rng.random() < 0.15 else None)

    def pick(self, rows):
        """One row of `rows` chosen by the test's seed (the database's own random order is not seeded)."""
        pks = sorted(rows.values_list("pk", flat=True))
        return rows.model.objects.get(pk=self.rng.choice(pks)) if pks else None

    def job(self) -> Job | None:
        return self.pick(Job.objects.all())

    def reprioritise(self) -> None:
        job = self.job()
        if job:
            Job.objects.filter(pk=job.pk).update(priority=self.rng.choice([0, 10, 100]))

    def save_twice(self) -> None:
        job = self.job()
        if job:   # two writes of one row in one transaction, the second putting the first value back
            old = job.priority
            job.priority = (old + 1) % 100
            job.save(update_fields=["priority"])
            job.priority = old
            job.save(update_fields=["priority"])
            job.reduce_cost = not job.reduce_cost
            job.save(update_fields=["reduce_cost"])

    def move(self) -> None:
        job = self.job()
        if job:
            Job.objects.filter(pk=job.pk).update(queue=self.queues[self.rng.choice(LEAVES)])

    def end(self) -> None:
        job = self.job()
        if job:
            state = self.rng.choice([JobState.SUCCEEDED, JobState.CANCELLED, JobState.STOPPED, JobState.PENDING])
            Job.objects.filter(pk=job.pk).update(state=state)

    def hold(self) -> None:
        job = self.job()
        if job:
            later = self.clock.now + timedelta(minutes=self.rng.choice([-5, 5, 30]))
            Job.objects.filter(pk=job.pk).update(not_before=later)

    def place(self) -> None:
        job = self.pick(Job.objects.exclude(state__in=(JobState.SUCCEEDED, JobState.CANCELLED)))
        if job is None:
            return
        role = job.roles[0]
        taken = set(Replica.objects.filter(job=job, state__in=ACTIVE_STATES).values_list("index", flat=True))
        free = [i for i in range(role["max_replicas"]) if i not in taken]
        if free:
            attempt = Replica.objects.filter(job=job, role=role["name"], index=free[0]).count()
            Replica.objects.create(job=job, role=role["name"], index=free[0], attempt=attempt,
                                   state=self.rng.choice(ACTIVE_STATES), node=self.rng.choice(self.nodes),
                                   gpu_indices=[self.rng.randrange(8)],
                                   slice={"kind": "fraction", "gpu_milli": 250, "gpu_mem_mib": 8192})
            Job.objects.filter(pk=job.pk).update(state=JobState.SCHEDULED)

    def unplace(self) -> None:
        replica = self.pick(Replica.objects.filter(state__in=ACTIVE_STATES))
        if replica:
            Replica.objects.filter(pk=replica.pk).update(state=self.rng.choice([JobState.SUCCEEDED, JobState.PREEMPTED]))

    def reslice(self) -> None:
        replica = self.pick(Replica.objects.filter(state__in=ACTIVE_STATES))
        if replica:
            Replica.objects.filter(pk=replica.pk).update(gpu_indices=[self.rng.randrange(8)],
                                                         node=self.rng.choice(self.nodes))

    def cluster_change(self) -> None:
        rng = self.rng
        what = rng.choice(["node", "gpu", "queue", "ready"])
        if what == "node":
            node = rng.choice(self.nodes)
            Node.objects.filter(pk=node.pk).update(name=f"{node.name.split('~')[0]}~{rng.randrange(1000)}")
        elif what == "gpu":
            Gpu.objects.filter(pk=self.pick(Gpu.objects.all()).pk).update(memory_mib=rng.choice([40960, 81920]))
        elif what == "queue":
            queue = Queue.objects.get(name="community")
            queue.priority = rng.choice([0, 1])
            queue.save(update_fields=["priority"])
        else:
            node = rng.choice(self.nodes)
            Node.objects.filter(pk=node.pk).update(ready=rng.random() < 0.7)

    def tick(self) -> None:
        self.clock.advance(self.rng.choice([60, 600, 1800]))

    def step(self) -> None:
        rng = self.rng
        action = rng.choices(
            [self.submit, self.reprioritise, self.save_twice, self.move, self.end, self.hold, self.place,
             self.unplace, self.reslice, self.cluster_change, self.tick],
            weights=[6, 2, 2, 1, 2, 1, 5, 3, 1, 1, 1])[0]
        action()


@pytest.mark.parametrize("seed", range(6))
def test_the_kept_snapshot_is_the_snapshot_read_whole(cluster, clock, seed):
    rng = random.Random(seed)
    world = World(cluster, clock, rng)
    cache = SnapshotCache()
    for _ in range(8):
        world.submit()
    first = cache.build(clock.now)
    assert first == build_snapshot(clock.now)
    assert cache.reads["jobs"] == len(first.jobs) > 0   # a cold cache reads every row it takes
    for _ in range(30):
        for _ in range(rng.randint(1, 4)):
            world.step()
        kept = cache.build(clock.now)
        assert kept == build_snapshot(clock.now)
    assert kept.jobs and kept.running   # the sequences did make and place work


def test_a_quiet_database_is_read_by_versions_only(cluster, clock):
    world = World(cluster, clock, random.Random(7))
    cache = SnapshotCache()
    for _ in range(20):
        world.submit()
    for _ in range(10):
        world.place()
    first = cache.build(clock.now)
    assert cache.reads == {"jobs": len(first.jobs), "replicas": len(first.running)}
    cache.build(clock.now)
    assert cache.reads == {"jobs": 0, "replicas": 0}
    assert cache.checked == {"jobs": 0, "replicas": 0}   # nothing written: no row's content hashed either
    Job.objects.filter(state=JobState.PENDING).update(pending_reason="still waiting")  # not read by the snapshot
    cache.build(clock.now)
    assert cache.reads == {"jobs": 0, "replicas": 0}
    if connection.vendor == "postgresql":   # the rows written have a new stamp: their versions are checked, once
        waiting = scheduled_jobs(clock.now).filter(state=JobState.PENDING).count()
        assert cache.checked == {"jobs": waiting, "replicas": 0} and waiting > 0
        cache.build(clock.now)
        assert cache.checked == {"jobs": 0, "replicas": 0}
    taken = int(first.jobs[0].id)
    Job.objects.filter(pk=taken).update(priority=Job.objects.get(pk=taken).priority + 1)
    after = cache.build(clock.now)
    assert after == build_snapshot(clock.now) != first
    assert cache.reads == {"jobs": 1, "replicas": 0}
