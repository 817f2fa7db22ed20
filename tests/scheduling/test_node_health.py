"""Node health: a node whose agent goes silent is NotReady and its work is evicted (node-lost) and
placed elsewhere; it is ready again when its agent reports. Nodes whose agent never reported, a
platform that was itself away, and every agent silent at once change nothing."""

import pytest
from tests_job_specs import job_spec

from billing.services import submit_quoted_job
from portal.console.models import AuditEntry
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.cycle.inventory import record_heartbeat
from scheduling.cycle.snapshot import build_snapshot
from scheduling.models import JobState, Node


@pytest.fixture
def backend(clock):
    return SimulatedBackend(speedup=1, failure_rate=0, clock=clock)  # jobs run their full hours


def beat(*names):
    for name in names:
        record_heartbeat(Node.objects.get(name=name), [])


def silent(name):
    return Node.objects.get(name=name).agent_silent


def test_a_silent_agent_makes_its_node_not_ready_and_its_work_moves(cluster, backend, clock, run):
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=job_spec("train", gpus=8, hours=5))
    beat("h100-01", "h100-02")
    run(backend, clock)
    clock.advance(5)
    run(backend, clock)
    first = job.replicas.get(state=JobState.RUNNING)
    lost, other = first.node.name, ({"h100-01", "h100-02"} - {first.node.name}).pop()
    for _ in range(4):  # 4 x 20 s: only `other` keeps reporting
        clock.advance(20)
        beat(other)
        run(backend, clock)
    assert silent(lost) and not silent(other)
    assert not next(n for n in build_snapshot(clock.now).nodes if n.name == lost).ready
    first.refresh_from_db()
    assert (first.state, first.end_reason) == (JobState.PREEMPTED, "node-lost")
    assert job.events.filter(kind="preempted").last().data["reason"] == "node-lost"
    clock.advance(5)
    run(backend, clock)
    moved = job.replicas.get(state__in=(JobState.SCHEDULED, JobState.RUNNING))
    assert moved.node.name == other and moved.attempt == 1
    entry = AuditEntry.objects.get(action="not ready")
    assert entry.username == "system" and entry.target_repr == lost and "not reported for" in entry.message

    beat(lost)  # the agent is back: ready at the next cycle
    clock.advance(2)
    run(backend, clock)
    assert not silent(lost)
    assert next(n for n in build_snapshot(clock.now).nodes if n.name == lost).ready
    assert AuditEntry.objects.filter(action="ready", target_repr=lost).count() == 1


def test_nodes_whose_agent_never_reported_are_never_judged(cluster, backend, clock, run):
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=job_spec("train", gpus=1, hours=5))
    beat("rtx4090-01", "rtx4090-02")  # two agents elsewhere report, none on the h100 nodes
    for _ in range(10):
        clock.advance(30)
        beat("rtx4090-01", "rtx4090-02")
        run(backend, clock)
    assert not Node.objects.filter(agent_silent=True).exists()
    job.refresh_from_db()
    assert job.state == JobState.RUNNING and job.replicas.count() == 1


def test_a_platform_that_was_away_gives_agents_a_full_window(cluster, backend, clock, run):
    beat("h100-01", "h100-02")
    run(backend, clock)
    clock.advance(600)  # no cycle for 10 minutes: the platform itself was down
    run(backend, clock)
    assert not Node.objects.filter(agent_silent=True).exists()
    clock.advance(30)
    beat("h100-02")
    run(backend, clock)
    assert not silent("h100-01")  # 30 s since the platform came back
    clock.advance(31)
    beat("h100-02")
    run(backend, clock)
    assert silent("h100-01") and not silent("h100-02")


def test_every_agent_silent_at_once_marks_no_node(cluster, backend, clock, run):
    beat("h100-01", "h100-02", "rtx4090-01")
    run(backend, clock)
    for _ in range(6):
        clock.advance(30)
        run(backend, clock)
    assert not Node.objects.filter(agent_silent=True).exists()
    beat("h100-02")  # one reports again: the others are the silent ones
    clock.advance(1)
    run(backend, clock)
    assert silent("h100-01") and silent("rtx4090-01") and not silent("h100-02")


def test_the_window_is_a_setting(cluster, backend, clock, run, settings):
    settings.NODE_NOT_READY_AFTER_S = 300
    beat("h100-01", "h100-02")
    run(backend, clock)
    for _ in range(4):
        clock.advance(60)
        beat("h100-02")
        run(backend, clock)
    assert not silent("h100-01")  # 240 s < 300 s
    clock.advance(61)
    beat("h100-02")
    run(backend, clock)
    assert silent("h100-01")


def test_cordon_and_drain_are_unchanged_by_silence(cluster, backend, clock, run):
    beat("h100-01", "h100-02")
    Node.objects.filter(name="h100-01").update(cordoned=True)
    run(backend, clock)
    for _ in range(4):
        clock.advance(20)
        beat("h100-02")
        run(backend, clock)
    node = Node.objects.get(name="h100-01")
    assert node.agent_silent and node.cordoned and node.ready  # the cluster's own flags are left alone
    beat("h100-01")
    run(backend, clock)
    node.refresh_from_db()
    assert not node.agent_silent and node.cordoned
