"""Displace (scheduling.core.displace): emptying a GPU by a cascade of moves, the fewest first."""

import numpy as np
import pytest

from scheduling.core import displace, repack
from scheduling.core.placement import Placement, PlacementRequest, allocate, release
from scheduling.core.room import apply_room_plan, plan_room

# n0 is the target (470 + 340 movable). No gap holds either pod as it stands; n1..n3 hold a
# movable pod each beside a fixed one. The fewest moves: the 470 takes the 330's place on n1,
# the 340 takes the 180's on n2, the 330 the 200's on n3, and the 180 and 200 drop into gaps.
# The 31 nodes after them have larger gaps (310 down to 250) but only fixed pods, so a repack
# that opens the largest gaps first (24 of them) opens none of n1..n3 and finds nothing.
DECOYS = [[(690 + 2 * i, False)] for i in range(31)]
CASCADE = [
    [(470, True), (340, True)],
    [(500, False), (330, True)],
    [(620, False), (180, True)],
    [(560, False), (200, True)],
    *DECOYS,
]
# the same with n2's 180 fixed: the 340 can only take n3's 200's place, and the 330 then has none
STUCK = [
    [(470, True), (340, True)],
    [(500, False), (330, True)],
    [(620, False), (180, False)],
    [(560, False), (200, True)],
    *DECOYS,
]


def req(milli, gpus=1, cpu=1000):
    return PlacementRequest(milli, gpus, 0, cpu, 1000)


def cascade(arrays, movable, budget=None):
    lifted = repack.fractions_on(movable, 0, 0)
    table = displace.Table(arrays, movable)
    return displace.search(arrays, table, 0, (0,), lifted, 1000, 1000, budget or repack.Steps())


def carry_out(arrays, moves):
    """Apply moves on the arrays; allocate() raises if any GPU, CPU or memory overflows."""
    for r, _, _ in moves:
        release(arrays, r.request, r.placement)
    for r, node, gpu in moves:
        allocate(arrays, r.request, Placement(node, (gpu,), r.placement.gpu_milli, 0))


@pytest.mark.parametrize(
    ("loads", "expected"),
    [
        (CASCADE, [(180, 33), (200, 34), (330, 3), (340, 2), (470, 1)]),
        (STUCK, None),
    ],
)
def test_cascade_finds_room_the_repack_misses(gpu_cluster, loads, expected):
    arrays, movable = gpu_cluster(loads)
    lifted = repack.fractions_on(movable, 0, 0)
    bins = repack.bin_candidates(arrays, movable, np.arange(arrays.size))
    assert repack.search(arrays, movable, 0, (0,), lifted, 1000, 1000, bins, repack.Steps()) is None
    moves = cascade(arrays, movable)
    if expected is None:
        assert moves is None
        return
    assert sorted((r.placement.gpu_milli, node) for r, node, _ in moves) == expected
    carry_out(arrays, moves)
    assert arrays.gpu_free_milli[0, 0] == 1000


def test_cascade_stops_when_the_plan_has_no_steps_left(gpu_cluster):
    arrays, movable = gpu_cluster(CASCADE)
    assert cascade(arrays, movable, repack.Steps(0)) is None


def test_cascade_keeps_cpu_for_the_request(gpu_cluster):
    arrays, movable = gpu_cluster(CASCADE, cpu=4000)
    lifted = repack.fractions_on(movable, 0, 0)
    table = displace.Table(arrays, movable)
    # n0 keeps 4 cores once its two pods leave: a request for 5 cannot go there
    assert displace.search(arrays, table, 0, (0,), lifted, 5000, 1000, repack.Steps()) is None


@pytest.mark.parametrize(("loads", "moved"), [(CASCADE, 5), (STUCK, None)])
def test_plan_room_moves_pods_only_when_the_request_then_fits(gpu_cluster, loads, moved):
    arrays, movable = gpu_cluster(loads)
    before = arrays.gpu_free_milli.copy(), arrays.cpu_free.copy(), len(movable)
    plan = plan_room(arrays, req(1000), "default", movable)
    # the plan is tried on the arrays and undone: nothing moved yet, whatever it found
    assert np.array_equal(before[0], arrays.gpu_free_milli) and np.array_equal(before[1], arrays.cpu_free)
    assert len(movable) == before[2]
    if moved is None:
        assert plan is None
        return
    assert plan.placement.node == 0 and len(plan.moves) == moved
    apply_room_plan(arrays, req(1000), plan, movable)
    assert arrays.gpu_free_milli[0, 0] == 0
