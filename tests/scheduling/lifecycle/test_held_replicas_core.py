"""The pure core: an evicted replica still stopping (its grace) holds its GPUs; nothing is placed on them until
it is gone, and it counts for no job. A cycle with a memo decides as one without."""

from __future__ import annotations

from dataclasses import replace

from scheduling.core import HeldReplica, Pool, Queue, Slice, Snapshot, builders, run_cycle
from scheduling.core.cycle import CycleMemo


def snapshot(*held: HeldReplica) -> Snapshot:
    return Snapshot(
        pools=(Pool("h100"),),
        nodes=builders.nodes("h100", 1, 8),
        queues=(Queue("team", deserved_milli=8000),),
        jobs=(builders.job("2", "team", gpus=8),),
        held=held,
    )


def stopping(gpus=(0, 1, 2, 3, 4, 5, 6, 7)) -> HeldReplica:
    return HeldReplica("1", "worker", 0, "h100-0", gpus, Slice("whole", gpu_mem_mib=81920))


def test_a_stopping_replica_holds_its_gpus_until_it_is_gone():
    assert [b.job_id for b in run_cycle(snapshot()).binds] == ["2"]
    assert not run_cycle(snapshot(stopping())).binds
    assert not run_cycle(snapshot(stopping(gpus=(0,)))).binds  # 7 left: the gang of 8 waits


def test_a_memo_sees_the_stop_end():
    memo = CycleMemo()
    held = snapshot(stopping())
    assert not run_cycle(held, memo).binds
    assert not run_cycle(replace(held, now=1.0), memo).binds
    assert [b.job_id for b in run_cycle(replace(held, held=(), now=2.0), memo).binds] == ["2"]
