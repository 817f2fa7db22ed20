"""Consolidation in the replay (--moves): best-effort pods move only when everything fits again."""

import numpy as np

from bench.placement import Mover
from bench.traces import TracePod
from scheduling.core.placement import (
    ClusterArrays,
    NodeCapacity,
    PlacementContext,
    PlacementRequest,
    allocate,
    place,
)


def pod(name, milli, qos, gpus=1, cpu=1000):
    return TracePod(name, PlacementRequest(milli, gpus, 0, cpu, 1000), (), qos)


def cluster(second_node_used_milli):
    arrays = ClusterArrays.build([NodeCapacity.empty(f"n{i}", "T4", 1, 32000, 64000) for i in range(2)])
    mover = Mover(arrays, "default", PlacementContext())
    for node, p in ((0, pod("be", 500, "BE")), (1, pod("ls", second_node_used_milli, "LS"))):
        only = np.arange(2) == node
        placement = place(arrays, p.request, "binpack", only)
        allocate(arrays, p.request, placement)
        mover.add(p, placement, None)
    return arrays, mover


def test_a_best_effort_pod_moves_to_make_room_for_a_whole_gpu():
    arrays, mover = cluster(second_node_used_milli=400)
    whole = pod("big", 1000, "LS")
    assert place(arrays, whole.request, "default") is None
    placement = mover.make_room(whole, None)
    assert placement is not None and placement.node == 0
    assert mover.moves == 1
    # the BE pod now shares node 1's GPU with the LS pod: 500 + 400 milli used there
    assert arrays.gpu_free_milli[:, 0].tolist() == [0, 100]
    assert [r.pod.name for r in mover.on_node[1].values()] == ["ls", "be"]


def test_nothing_moves_when_the_moved_pod_would_not_fit_again():
    arrays, mover = cluster(second_node_used_milli=700)
    before = arrays.gpu_free_milli.copy(), arrays.cpu_free.copy()
    assert mover.make_room(pod("big", 1000, "LS"), None) is None
    assert mover.moves == 0
    assert np.array_equal(arrays.gpu_free_milli, before[0]) and np.array_equal(arrays.cpu_free, before[1])


def test_latency_sensitive_pods_never_move():
    # an LS pod blocks the only GPU: nothing may be moved to free it
    arrays = ClusterArrays.build([NodeCapacity.empty(f"n{i}", "T4", 1, 32000, 64000) for i in range(2)])
    mover = Mover(arrays, "default", PlacementContext())
    for node, name in ((0, "ls-a"), (1, "ls-b")):
        blocker = pod(name, 300, "LS")
        placement = place(arrays, blocker.request, "binpack", np.arange(2) == node)
        allocate(arrays, blocker.request, placement)
        mover.add(blocker, placement, None)
    assert mover.make_room(pod("big", 1000, "LS"), None) is None
    assert mover.moves == 0
