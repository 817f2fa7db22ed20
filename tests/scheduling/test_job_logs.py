"""Replica logs kept past their pods (scheduling.logs): the cycle reads a replica's log from the backend
just before the pod is deleted (a finished replica forgotten, a cancelled job's pod evicted, a preempted
replica evicted), a job's logs are capped with a marker line, and the retention task deletes old ones."""

from __future__ import annotations

from datetime import timedelta

import pytest

from billing.services import submit_quoted_job
from scheduling import logs
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.errors import DomainError
from scheduling.models import Job, JobState, Node, Replica, ReplicaLog, SimulatedPod
from scheduling.services import cancel_job
from scheduling.tasks import purge_old_job_logs
from tests.factories import JobFactory

SPEC = """name: {name}
queue: {queue}
priority: {priority}
preemptible: true
expectedDuration: 1h
roles:
  - name: main
    image: busybox
    resources: {{gpu: {gpus}}}
    nodePool: h100
"""


def submit(user, workspace, name, *, queue=None, priority=0, gpus=1):
    spec = SPEC.format(name=name, queue=queue or workspace.slug, priority=priority, gpus=gpus)
    return submit_quoted_job(user=user, workspace=workspace, spec=spec)


class RecordingBackend(SimulatedBackend):
    """The simulated cluster, noting in order each log read (and whether the pod was still there) and
    each pod deletion (forget calls evict)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.calls: list[tuple] = []

    def logs_many(self, keys, tail_lines=200):
        for key in keys:
            there = SimulatedPod.objects.filter(job_id=key[0], role=key[1], index=key[2]).exists()
            self.calls.append(("logs", key, there))
        return super().logs_many(keys, tail_lines)

    def release_many(self, releases):
        self.calls.extend(("delete", key) for key, _ in releases)
        super().release_many(releases)

    def of(self, key) -> list[tuple]:
        return [call for call in self.calls if call[1] == key]


@pytest.fixture
def backend(clock):
    return RecordingBackend(speedup=60, failure_rate=0, clock=clock)  # a 1 h job runs 60 s


def start(backend, clock, run):
    run(backend, clock)
    clock.advance(2)
    run(backend, clock)


def test_a_finished_replicas_log_is_read_before_its_pod_goes_and_outlives_it(cluster, backend, clock, run):
    job = submit(cluster.alice, cluster.vision, "train")
    start(backend, clock, run)
    clock.advance(61)
    run(backend, clock)
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED and not SimulatedPod.objects.exists()
    key = (job.pk, "main", 0)
    assert backend.of(key) == [("logs", key, True), ("delete", key)]

    kept = ReplicaLog.objects.get(job=job)
    replica = Replica.objects.get(job=job)
    assert (kept.role, kept.index, kept.attempt, kept.node) == ("main", 0, 0, replica.node.name)
    assert "main-0: step 1000/1000" in kept.text and kept.text.endswith("training finished, checkpoint saved\n")
    assert kept.captured_at == clock.now and not kept.truncated and kept.size == len(kept.text.encode())
    assert backend.logs(key) == ""  # the cluster has forgotten it; the platform has not
    assert logs.job_log_text(job, backend) == f"== main-0 on {replica.node.name}\n{kept.text}"
    assert logs.job_log_text(job, backend, ("main", 0)) == kept.text


def test_a_running_replica_is_read_live_from_the_backend(cluster, backend, clock, run):
    job = submit(cluster.alice, cluster.vision, "live")
    start(backend, clock, run)
    clock.advance(30)
    live = backend.logs((job.pk, "main", 0), 5000)
    assert "step 500/1000" in live and "training finished" not in live
    assert logs.job_log_text(job, backend, ("main", 0)) == live
    assert not ReplicaLog.objects.exists()


def test_a_cancelled_jobs_log_is_kept_when_its_pod_is_stopped(cluster, backend, clock, run):
    job = submit(cluster.alice, cluster.vision, "stopped")
    start(backend, clock, run)
    clock.advance(30)
    cancel_job(user=cluster.alice, job=job)
    report = run(backend, clock)  # the pod is no longer held: the next cycle removes it
    assert report.orphans_removed == 1 and not SimulatedPod.objects.exists()
    key = (job.pk, "main", 0)
    assert backend.of(key)[-2:] == [("logs", key, True), ("delete", key)]
    kept = ReplicaLog.objects.get(job=job)
    assert "step 500/1000" in kept.text and "training finished" not in kept.text
    run(backend, clock)
    assert ReplicaLog.objects.filter(job=job).count() == 1


def test_a_preempted_replicas_log_is_kept(cluster, backend, clock, run):
    alice_jobs = [submit(cluster.alice, cluster.vision, f"a{n}", queue="community", gpus=8) for n in range(2)]
    start(backend, clock, run)
    submit(cluster.bob, cluster.nlp, "b0", queue="community", gpus=8, priority=50)
    for _ in range(3):
        clock.advance(2)
        run(backend, clock)
    victims = [j for j in alice_jobs if Replica.objects.filter(job=j, state=JobState.PREEMPTED).exists()]
    assert len(victims) == 1
    victim = Job.objects.get(pk=victims[0].pk)
    key = (victim.pk, "main", 0)
    assert backend.of(key)[:2] == [("logs", key, True), ("delete", key)]
    kept = ReplicaLog.objects.get(job=victim, attempt=0)
    assert "pulling image busybox" in kept.text and kept.node == Replica.objects.get(job=victim, attempt=0).node.name


def test_a_backend_that_cannot_read_the_log_still_deletes_the_pod(cluster, clock, run, caplog):
    class Broken(RecordingBackend):
        def logs_many(self, keys, tail_lines=200):
            super().logs_many(keys, tail_lines)
            raise ConnectionError("the cluster is gone")

    backend = Broken(speedup=60, failure_rate=0, clock=clock)
    job = submit(cluster.alice, cluster.vision, "unlucky")
    start(backend, clock, run)
    clock.advance(61)
    run(backend, clock)
    assert backend.of((job.pk, "main", 0))[-1] == ("delete", (job.pk, "main", 0))
    assert not SimulatedPod.objects.exists() and not ReplicaLog.objects.exists()
    assert "could not be read" in caplog.text


def ended_replicas(job, count):
    node = Node.objects.order_by("name").first()
    return [Replica.objects.create(job=job, role="worker", index=i, state=JobState.SUCCEEDED, node=node)
            for i in range(count)]


def numbered(count, width=20):
    return "".join(f"line {n:04d} é{'x' * (width - 12)}\n" for n in range(count))


def test_a_jobs_logs_are_capped_with_a_marker_line(cluster, clock, settings):
    settings.JOB_LOG_MAX_BYTES = 400
    job = JobFactory(workspace=cluster.vision)
    first, second, third = ended_replicas(job, 3)
    small = numbered(5)  # 5 lines of 21 bytes (é is two)
    assert not logs.store_replica_log(first, small).truncated

    big = numbered(40)
    kept = logs.store_replica_log(second, big)
    marker, *lines = kept.text.splitlines(keepends=True)
    assert kept.truncated and marker.startswith("[truncated: ") and "at most 400 bytes" in marker
    assert kept.size == len(kept.text.encode()) <= 400 - len(small.encode())
    assert lines and big.endswith("".join(lines)) and all(line in big.splitlines(keepends=True) for line in lines)
    assert f"{len(big.encode()) - len(''.join(lines).encode())} earlier bytes dropped" in marker

    late = "a line that no longer fits in what is left\n"
    full = logs.store_replica_log(third, late)  # the job's 400 bytes are spent: only the marker
    assert full.truncated and full.text.startswith(f"[truncated: {len(late)} earlier bytes dropped")
    assert full.text.count("\n") == 1
    assert logs.store_replica_log(third, "another copy\n") == full  # once per placement


def test_logs_stored_together_share_their_jobs_cap_in_order(cluster, clock, settings):
    """A cycle keeps a hundred logs at once: the cap holds across them as if kept one by one."""
    settings.JOB_LOG_MAX_BYTES = 400
    job, other = JobFactory(workspace=cluster.vision), JobFactory(workspace=cluster.nlp)
    first, second = ended_replicas(job, 2)
    (elsewhere,) = ended_replicas(other, 1)
    stored = logs.store_replica_logs([(first, numbered(15)), (elsewhere, numbered(15)), (second, numbered(15)),
                                      (first, "a second copy\n")])
    assert [log.truncated for log in stored] == [False, False, True, False]
    assert stored[3] is stored[0] and ReplicaLog.objects.filter(job=job).count() == 2
    assert sum(ReplicaLog.objects.filter(job=job).values_list("size", flat=True)) <= 400
    assert ReplicaLog.objects.get(job=other).text == numbered(15)
    # stored again later: the copies already kept are returned, nothing is added
    again = logs.store_replica_logs([(second, "late\n"), (elsewhere, "late\n")])
    assert [log.pk for log in again] == [stored[2].pk, stored[1].pk] and ReplicaLog.objects.count() == 3


def test_a_log_without_a_cap_problem_is_kept_whole_and_cleaned(cluster, clock):
    job = JobFactory(workspace=cluster.vision)
    (replica,) = ended_replicas(job, 1)
    kept = logs.store_replica_log(replica, "a\x00b\nno newline at the end")
    assert kept.text == "ab\nno newline at the end\n" and not kept.truncated


def test_logs_past_the_retention_are_deleted(cluster, clock, settings):
    settings.JOB_LOG_RETENTION_DAYS = 30
    job = JobFactory(workspace=cluster.vision)
    old, recent = ended_replicas(job, 2)
    logs.store_replica_log(old, "old\n")
    clock.advance(timedelta(days=20).total_seconds())
    logs.store_replica_log(recent, "recent\n")
    clock.advance(timedelta(days=10).total_seconds() - 1)
    assert purge_old_job_logs() == 0  # 30 days less a second
    clock.advance(2)
    assert purge_old_job_logs() == 1
    assert [entry.text for entry in ReplicaLog.objects.filter(job=job)] == ["recent\n"]
    clock.advance(timedelta(days=20).total_seconds())
    assert purge_old_job_logs() == 1 and not ReplicaLog.objects.exists()


@pytest.mark.parametrize(("seen", "now", "new"), [
    ([], ["a\n", "b\n"], ["a\n", "b\n"]),
    (["a\n", "b\n"], ["a\n", "b\n", "c\n"], ["c\n"]),
    (["1\n", "2\n", "3\n"], ["2\n", "3\n", "4\n", "5\n"], ["4\n", "5\n"]),  # a tail window that moved on
    (["x\n", "x\n"], ["x\n", "x\n", "x\n"], ["x\n"]),  # repeated lines: the longest match, the earliest
    (["b\n", "c\n"], ["[truncated: ...]\n", "b\n", "c\n", "d\n"], ["d\n"]),  # the kept copy, after a marker
    (["a\n"], ["b\n", "c\n"], ["b\n", "c\n"]),  # nothing in common: a new log
    (["a\n", "b\n"], ["a\n", "b\n"], []),
])
def test_new_lines_of_a_log_window(seen, now, new):
    assert logs.new_lines(seen, now) == new


@pytest.mark.parametrize("name", ["worker", "-0", "Worker-0", "worker-", "worker-0 ", "worker-0\n", "a" * 64 + "-0"])
def test_replica_names_are_role_dash_index(name):
    with pytest.raises(DomainError):
        logs.parse_replica_name(name)
    assert logs.parse_replica_name("param-server-12") == ("param-server", 12)
