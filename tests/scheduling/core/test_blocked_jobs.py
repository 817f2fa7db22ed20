"""The core's Blocked jobs (they wait for others to end): never placed, no demand, no pending reason; the rest
decides exactly as without them."""

from dataclasses import replace

from scheduling.core import Pool, Queue, Snapshot, run_cycle
from scheduling.core.builders import cycles, job, nodes, placed
from scheduling.core.cycle import CycleMemo


def world(*jobs, blocked=()):
    return Snapshot(
        pools=(Pool("h100"),),
        nodes=nodes("h100", 2, 4),
        queues=(Queue("a", deserved_milli=4000), Queue("b", deserved_milli=4000)),
        jobs=jobs,
        blocked=frozenset(blocked),
    )


def test_a_blocked_job_is_not_placed_nor_given_a_reason():
    snapshot = world(job("first", "a", 2), job("then", "a", 2, created=1), blocked={"then"})
    decisions = run_cycle(snapshot)
    assert {b.job_id for b in decisions.binds} == {"first"} and "then" not in decisions.pending


def test_blocked_jobs_are_no_demand_the_others_decide_as_without_them():
    jobs = [job(f"a{i}", "a", 2, created=i) for i in range(6)] + [
        job(f"b{i}", "b", 2, created=10 + i) for i in range(4)
    ]
    blocked = {"a0", "a1", "a2", "a3"}  # queue a's demand would take its over-quota share
    with_blocked = world(*jobs, blocked=blocked)
    without = world(*(j for j in jobs if j.id not in blocked))
    assert run_cycle(with_blocked) == run_cycle(without)
    assert run_cycle(with_blocked, CycleMemo()) == run_cycle(without, exact=True)


def test_once_released_a_job_is_placed_in_the_next_cycle():
    snapshot = world(
        job("first", "a", 4, replicas=2), job("then", "a", 4, replicas=2, created=1), blocked={"then"}
    )
    snapshot, _ = cycles(snapshot, 2)
    assert placed(snapshot) == {"first": 2}
    snapshot = replace(
        snapshot, jobs=tuple(j for j in snapshot.jobs if j.id != "first"), running=(), blocked=frozenset()
    )  # first ended: its follower is released
    snapshot, _ = cycles(snapshot, 1)
    assert placed(snapshot) == {"then": 2}
