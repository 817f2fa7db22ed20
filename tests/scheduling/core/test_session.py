"""The session's transactions and the per-pool placement policies."""

from dataclasses import replace

import pytest

from scheduling.core import Pool, Queue, RunningReplica, Slice, Snapshot, run_cycle
from scheduling.core.actions import allocate, reclaim
from scheduling.core.actions.pending import pending_reasons
from scheduling.core.builders import job, nodes, with_jobs
from scheduling.core.session import Session

MIG = ("3g.40gb", "3g.40gb", "1g.10gb")


def state_of(s: Session) -> tuple:
    arr = s.arrays
    return (arr.gpu_free_milli.tobytes(), arr.gpu_free_mem.tobytes(), arr.cpu_free.tobytes(),
            s.mig_free.tobytes(), s.ts_free.tobytes(), dict(s.alloc), dict(s.assign), set(s.new),
            dict(s.evict_reason), dict(s.evict_cause), {j: {r: set(v) for r, v in st.running.items()} for j, st in s.jobs.items()})


def test_a_failed_scenario_leaves_no_trace():
    snap = Snapshot(
        pools=(Pool("h100"), Pool("mig", sharing=frozenset({"mig"}), mig_layout=MIG),
               Pool("ts", sharing=frozenset({"timeslice"}), timeslice_replicas=2)),
        nodes=nodes("h100", 2, 2) + nodes("mig", 1, 1) + nodes("ts", 1, 1),
        queues=(Queue("q"),),
        jobs=(job("run", "q"), job("new", "q", gpus=2), job("m", "q", mode="mig", mig="1g.10gb"),
              job("t", "q", mode="timeslice")),
        running=(RunningReplica("run", "worker", 0, "h100-0", (0,), Slice("whole", 1000, 81920)),),
    )
    s = Session.build(snap)
    before = state_of(s)

    def scenario() -> bool:
        s.unbind(("run", "worker", 0), "preempt")
        for key, request, pool in [(("new", "worker", 0), job("x", "q", gpus=2).roles[0].request, "h100"),
                                   (("m", "worker", 0), snap.jobs[2].roles[0].request, "mig"),
                                   (("t", "worker", 0), snap.jobs[3].roles[0].request, "ts")]:
            spot = s.find_spot(request, pool)
            assert spot is not None
            s.bind(key, spot)
        assert state_of(s) != before
        return False                    # does not hold: everything goes back

    assert s.transaction(scenario) is False
    assert state_of(s) == before
    assert s.transaction(lambda: True) is True and s.journal == []


@pytest.mark.parametrize(
    "pool, first_two",
    [
        (Pool("p", placement="binpack"), [("p-0", (0,)), ("p-0", (1,))]),
        (Pool("p", placement="spread"), [("p-0", (0,)), ("p-1", (0,))]),
        (Pool("p", sharing=frozenset({"mig"}), mig_layout=MIG, placement="binpack"), [("p-0", (0,)), ("p-0", (0,))]),
        (Pool("p", sharing=frozenset({"mig"}), mig_layout=MIG, placement="spread"), [("p-0", (0,)), ("p-1", (0,))]),
        (Pool("p", sharing=frozenset({"timeslice"}), placement="binpack"), [("p-0", (0,)), ("p-0", (0,))]),
        (Pool("p", sharing=frozenset({"timeslice"}), placement="spread"), [("p-0", (0,)), ("p-1", (0,))]),
    ],
)
def test_placement_policy_per_pool(pool, first_two):
    mode = {"whole": "exclusive", "mig": "mig", "timeslice": "timeslice"}[pool.gpu_mode]
    extra = {"mig": "3g.40gb"} if mode == "mig" else {}
    snap = Snapshot(pools=(pool,), nodes=nodes("p", 2, 2), queues=(Queue("q"),),
                    jobs=tuple(job(f"j{i}", "q", mode=mode, created=i, **extra) for i in range(2)))
    d = run_cycle(snap)
    assert [(b.node, b.gpus) for b in sorted(d.binds, key=lambda b: b.job_id)] == first_two


def test_default_policy_keeps_fractions_off_the_node_a_whole_job_needs():
    snap = Snapshot(pools=(Pool("p", placement="default"),), nodes=nodes("p", 2, 2), queues=(Queue("q"),),
                    jobs=tuple(job(f"f{i}", "q", mode="fraction", milli=300, created=i) for i in range(3))
                    + (job("whole2", "q", gpus=2, created=9),))
    d = run_cycle(snap)
    assert len({b.node for b in d.binds if b.job_id.startswith("f")}) == 1
    assert [b.job_id for b in d.binds if b.job_id == "whole2"] == ["whole2"]
    assert d.pending == {}


def built_state(s: Session) -> tuple:
    """All a build leaves (what actions read), the job states' fields and order included."""
    jobs = {j: (st.job, {r: set(v) for r, v in st.running.items()}, st.held, st.replicas, st.pending, st.grows,
                st.elastic, st.extra, st.evicted, st.min_milli, st.fail, st.plan_version)
            for j, st in s.jobs.items()}
    return (state_of(s), jobs, [st.job.id for st in s.order], [st.job.id for st in s.wanting], dict(s.fair_share),
            dict(s.np_alloc), dict(s.initial), dict(s.lost))


def test_a_kept_build_is_the_whole_build():
    """A build with the last one's cache (states reused, free arrays copied) equals a build without, whether
    jobs were touched, their replicas went away behind the session's back, decisions were not carried out,
    or jobs came and went."""
    from scheduling.core.build import BuildCache
    from scheduling.core.cycle import apply_decisions, without_jobs

    snap = Snapshot(pools=(Pool("h100"),), nodes=nodes("h100", 3, 4), queues=(Queue("a", deserved_milli=6000),
                                                                               Queue("b", deserved_milli=6000)),
                    jobs=tuple(job(f"j{i}", "ab"[i % 2], gpus=1 + i % 3, created=float(i)) for i in range(8)))
    cache = BuildCache()
    for step in range(6):
        s = Session.build(snap, cache)
        assert built_state(s) == built_state(Session.build(snap))
        run_cycle(snap)                                   # the cache's session is not the one that decides
        for action in (allocate, reclaim):
            action(s)
        decisions = s.decisions(pending_reasons(s))
        if step != 3:   # step 3: the decisions were not carried out (the states the session touched are stale)
            snap = apply_decisions(snap, decisions)
        if step == 1:   # a replica gone without the scheduler (its node agent ended it)
            snap = replace(snap, running=snap.running[1:])
        if step == 2:   # one job ends, two arrive
            snap = with_jobs(without_jobs(snap, snap.running[0].job_id), job("late", "b", gpus=2, created=0.5),
                             job("later", "a", gpus=1, created=20.0))
