"""Bad snapshots fail with errors that name the problem; multi-role jobs, CPU-only roles, cordons."""

from dataclasses import replace

import pytest

from scheduling.core import (
    Bind,
    Decisions,
    Job,
    Pool,
    Queue,
    Request,
    Role,
    RunningReplica,
    Slice,
    Snapshot,
    apply_decisions,
    run_cycle,
)
from scheduling.core.builders import cycles, job, nodes


def base(**changes) -> Snapshot:
    snap = Snapshot(pools=(Pool("h100"),), nodes=nodes("h100", 1, 2), queues=(Queue("q"),), jobs=(job("a", "q"),))
    return replace(snap, **changes)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: Pool("p", vendor="intel"), "pool 'p': vendor 'intel' is not one of"),
        (lambda: Pool("p", sharing=frozenset({"mig", "exclusive"}), mig_layout=("1g.5gb",)), "mixes MIG"),
        (lambda: Pool("p", sharing=frozenset({"mig"})), "pool 'p': MIG pool needs a mig_layout"),
        (lambda: Pool("p", sharing=frozenset({"mig"}), mig_layout=("7g.40gb", "1g.5gb")), "uses 8 slices"),
        (lambda: Queue("q", deserved_milli=-1), "queue 'q': deserved_milli must be >= 0"),
        (lambda: job("j", "q", mode="fraction", milli=1000), "job 'j' role 'worker': fraction gpu_milli must be"),
        (lambda: job("j", "q", mode="fraction", milli=255), "steps of 10"),
        (lambda: job("j", "q", mode="mig", mig="9g.99gb"), "unknown MIG profile '9g.99gb'"),
        (lambda: job("j", "q", mode="teleport"), "mode 'teleport' is not one of"),
        (lambda: job("j", "q", replicas=2, min_replicas=3), "need 0 <= min_replicas <= max_replicas"),
        (lambda: Job("j", "q", ()), "job 'j': has no roles"),
    ],
)
def test_bad_objects_name_the_problem(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(jobs=(job("a", "nope"),)), "job 'a': unknown queue 'nope'"),
        (dict(queues=(Queue("org"), Queue("q", parent="org")), jobs=(job("a", "org"),)), "has child queues"),
        (dict(nodes=nodes("x", 1, 1)), "node 'x-0': unknown pool 'x'"),
        (dict(jobs=(job("a", "q"), job("a", "q"))), "job 'a': duplicate job id"),
        (dict(running=(RunningReplica("ghost", "worker", 0, "h100-0", (0,), Slice("whole")),)),
         "job 'ghost' is not in the snapshot"),
        (dict(running=(RunningReplica("a", "worker", 0, "h100-0", (5,), Slice("whole")),)), "bad GPU indices"),
        (dict(jobs=(job("a", "q"), job("b", "q")),
              running=(RunningReplica("a", "worker", 0, "h100-0", (0,), Slice("whole", 1000, 81920)),
                       RunningReplica("b", "worker", 0, "h100-0", (0,), Slice("fraction", 500, 100)))),
         "GPU 0 of 'h100-0' is over-committed"),
        # a whole GPU held with no memory would give none back when evicted
        (dict(jobs=(job("a", "q"),), running=(RunningReplica("a", "worker", 0, "h100-0", (0,), Slice("whole", 1000, 0)),)),
         r"running replica \('a', 'worker', 0\): a whole-GPU slice must hold 1000 milli and the GPU's memory, "
         "got gpu_milli 1000 and gpu_mem_mib 0"),
        (dict(jobs=(job("a", "q"),), running=(RunningReplica("a", "worker", 0, "h100-0", (0,), Slice("whole", 500, 81920)),)),
         "a whole-GPU slice must hold 1000 milli"),
    ],
)
def test_bad_snapshots_name_the_problem(changes, message):
    with pytest.raises(ValueError, match=message):
        run_cycle(base(**changes))


def test_apply_decisions_refuses_impossible_changes():
    snap = base()
    bind = Bind("a", "worker", 0, "h100-0", (0,), Slice("whole", 1000, 81920))
    once = apply_decisions(snap, Decisions(binds=(bind,)))
    with pytest.raises(ValueError, match="already running"):
        apply_decisions(once, Decisions(binds=(bind,)))


def test_multi_role_gang_with_a_cpu_only_launcher():
    launcher = Role("launcher", Request(num_gpus=0, cpu_milli=2000), 1, 1)
    workers = Role("worker", Request(num_gpus=2), 2, 2)
    snap = base(nodes=nodes("h100", 2, 2), jobs=(Job("mpi", "q", (launcher, workers)),))
    d = run_cycle(snap)
    assert sorted((b.role, b.replica, len(b.gpus)) for b in d.binds) == [("launcher", 0, 0), ("worker", 0, 2),
                                                                          ("worker", 1, 2)]
    # one node short: the whole gang waits, launcher included
    d = run_cycle(base(jobs=(Job("mpi", "q", (launcher, workers)),)))
    assert d.binds == ()
    assert d.pending["mpi"] == "role worker gang needs 4 GPUs (2 GPUs each), only 2 free in pool h100"


def test_cordoned_node_keeps_its_work_but_takes_no_new_work():
    snap, _ = cycles(base(), 1)
    cordoned = replace(snap, nodes=tuple(replace(n, cordoned=True) for n in snap.nodes),
                       jobs=snap.jobs + (job("b", "q", created=1),))
    d = run_cycle(cordoned)
    assert d.evicts == () and d.binds == ()
    assert d.pending == {"b": "pool h100 has no schedulable node"}
