import pytest

from scheduling.core.placement import ClusterArrays, NodeCapacity, Placement, PlacementRequest, allocate
from scheduling.core.room import MovableSet, Resident


def req(milli, gpus=1, cpu=1000):
    return PlacementRequest(milli, gpus, 0, cpu, 1000)


@pytest.fixture
def gpu_cluster():
    """Builds arrays and a movable set: one 1-GPU node per entry of `loads`, each entry listing
    (milli, movable) pods on that GPU, one core and 1000 MiB each."""

    def build(loads, cpu=32000):
        nodes = [NodeCapacity.empty(f"n{i}", "T4", 1, cpu, 64000) for i in range(len(loads))]
        arrays = ClusterArrays.build(nodes)
        movable = MovableSet(arrays)
        for node, pods in enumerate(loads):
            for i, (milli, is_movable) in enumerate(pods):
                r = Resident(f"n{node}-{i}-{milli}", req(milli), Placement(node, (0,), milli, 0))
                allocate(arrays, r.request, r.placement)
                if is_movable:
                    movable.add(r)
        return arrays, movable

    return build
