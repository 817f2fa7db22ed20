"""Repack (scheduling.core.repack): emptying a GPU by re-packing the residents of several GPUs."""

import itertools
from types import SimpleNamespace

import numpy as np

from scheduling.core import repack
from scheduling.core.placement import Placement, PlacementContext, PlacementRequest, allocate, release
from scheduling.core.room import _RoomPlanner, apply_room_plan, plan_room


def req(milli, gpus=1, cpu=1000):
    return PlacementRequest(milli, gpus, 0, cpu, 1000)


def carry_out(arrays, moves):
    """Apply search() moves on the arrays; allocate() raises if any GPU, CPU or memory overflows."""
    for r, _, _ in moves:
        release(arrays, r.request, r.placement)
    for r, node, gpu in moves:
        allocate(arrays, r.request, Placement(node, (gpu,), r.placement.gpu_milli, 0))


# n0 is the target (500 + 300 movable). The other GPUs' gaps (300, 300, 200) add up to exactly
# what n0 holds, and the 500 fits no gap as it stands: only re-pairing n1's 200 with n3's 300
# makes room for it (n1: 500 fixed + 500; n2: 700 fixed + 300; n3: 500 fixed + 300 + 200).
EXACT = [[(500, True), (300, True)], [(500, False), (200, True)], [(700, False)], [(500, False), (300, True)]]


def test_search_empties_the_target_by_repacking_the_gaps_around_it(gpu_cluster):
    arrays, movable = gpu_cluster(EXACT)
    lifted = repack.fractions_on(movable, 0, 0)
    moves = repack.search(arrays, movable, 0, (0,), lifted, 1000, 1000, repack.bin_candidates(arrays, movable, np.arange(4)), repack.Steps())
    assert moves is not None
    carry_out(arrays, moves)
    assert arrays.gpu_free_milli[:, 0].tolist() == [1000, 0, 0, 0]
    # the 300 already on n3 stays where it is: three moves, not four
    assert sorted((r.placement.gpu_milli, node) for r, node, _ in moves) == [(200, 3), (300, 2), (500, 1)]


# the same gaps in all (800 besides the target's) but no packing: the 500 can only take n3's
# 500 of room, and then 300, 300 and 200 do not go into n1's 450 and n2's 350
NO_PACKING = [[(500, True), (300, True)], [(550, False), (200, True)], [(650, False)], [(500, False), (300, True)]]


def test_search_finds_nothing_when_no_packing_exists(gpu_cluster):
    arrays, movable = gpu_cluster(NO_PACKING)
    lifted = repack.fractions_on(movable, 0, 0)
    assert repack.search(arrays, movable, 0, (0,), lifted, 1000, 1000, repack.bin_candidates(arrays, movable, np.arange(4)), repack.Steps()) is None


def test_search_keeps_cpu_for_the_request_and_for_the_moved_pods(gpu_cluster):
    arrays, movable = gpu_cluster(EXACT, cpu=4000)
    lifted = repack.fractions_on(movable, 0, 0)
    bins = repack.bin_candidates(arrays, movable, np.arange(4))
    # n0 keeps 4 cores once both its pods leave; a request for 5 cannot go there
    assert repack.search(arrays, movable, 0, (0,), lifted, 5000, 1000, bins, repack.Steps()) is None
    # with no CPU left elsewhere a pod can only take the place of one that leaves: n2 takes none,
    # and n1 and n3 have 1000 milli of room for 1300
    arrays.cpu_free[1:] = 0
    assert repack.search(arrays, movable, 0, (0,), lifted, 1000, 1000, bins, repack.Steps()) is None
    arrays.cpu_free[2:] = 1000  # a core more on n2 and n3: room for the fourth pod
    moves = repack.search(arrays, movable, 0, (0,), lifted, 1000, 1000, bins, repack.Steps())
    assert moves is not None
    carry_out(arrays, moves)  # raises if a node's CPU would overflow
    assert arrays.cpu_free.tolist() == [4000, 0, 0, 0]


def test_search_stops_when_the_plan_has_no_steps_left(gpu_cluster):
    arrays, movable = gpu_cluster(EXACT)
    lifted = repack.fractions_on(movable, 0, 0)
    assert repack.search(arrays, movable, 0, (0,), lifted, 1000, 1000, repack.bin_candidates(arrays, movable, np.arange(4)), repack.Steps(0)) is None


def test_plan_room_repacks_and_leaves_the_arrays_as_they_were(gpu_cluster):
    arrays, movable = gpu_cluster(EXACT)
    before = arrays.gpu_free_milli.copy(), arrays.cpu_free.copy()
    plan = plan_room(arrays, req(1000), "default", movable)
    assert plan is not None and plan.placement.node == 0
    assert np.array_equal(before[0], arrays.gpu_free_milli) and np.array_equal(before[1], arrays.cpu_free)
    apply_room_plan(arrays, req(1000), plan, movable)
    assert arrays.gpu_free_milli[:, 0].tolist() == [0, 0, 0, 0]
    assert len(movable) == 4  # every moved pod is still there, on its new GPU


def test_a_request_that_found_no_room_is_not_searched_again_until_pods_move(gpu_cluster):
    arrays, movable = gpu_cluster(NO_PACKING)
    assert plan_room(arrays, req(1000, cpu=2000), "default", movable) is None
    assert len(movable.no_room) == 1
    # one that needs as much is answered from the memo, one that needs less is searched
    assert plan_room(arrays, req(1000, cpu=3000), "default", movable) is None
    assert len(movable.no_room) == 1
    assert plan_room(arrays, req(1000, cpu=1000), "default", movable) is None
    assert len(movable.no_room) == 2


# n0 is the target (350 + 450). Both fit the gaps of n1 (750) and n2 (600) as they are: two moves.
# A packing that takes the first fit for each pod moves one of n1's or n2's own pods as well.
TWO_GAPS = [[(350, True), (450, True)], [(250, True)], [(400, True)]]


def test_search_returns_the_packing_with_the_fewest_moves(gpu_cluster):
    arrays, movable = gpu_cluster(TWO_GAPS)
    lifted = repack.fractions_on(movable, 0, 0)
    bins = repack.bin_candidates(arrays, movable, np.arange(3))
    moves = repack.search(arrays, movable, 0, (0,), lifted, 1000, 1000, bins, repack.Steps())
    assert moves is not None
    assert sorted(r.placement.gpu_milli for r, _, _ in moves) == [350, 450]
    carry_out(arrays, moves)
    assert arrays.gpu_free_milli[0, 0] == 1000


def test_search_finds_nothing_unless_it_beats_the_limit(gpu_cluster):
    arrays, movable = gpu_cluster(TWO_GAPS)
    lifted = repack.fractions_on(movable, 0, 0)
    bins = repack.bin_candidates(arrays, movable, np.arange(3))
    assert repack.search(arrays, movable, 0, (0,), lifted, 1000, 1000, bins, repack.Steps(), limit=2) is None
    moves = repack.search(arrays, movable, 0, (0,), lifted, 1000, 1000, bins, repack.Steps(), limit=3)
    assert moves is not None and len(moves) == 2


# Two targets: n0 (500) comes first (the smaller biggest pod) and takes three moves: the 500 into
# n1 once its 700 goes to n2, whose 450 goes to n1 too. n1 (700) takes two: the 700 to n2, n2's 450
# into n0's gap.
TWO_TARGETS = [[(500, True)], [(700, True)], [(100, False), (450, True)], [(700, True), (300, True)]]


def test_plan_room_takes_the_repack_with_the_fewest_moves(gpu_cluster):
    arrays, movable = gpu_cluster(TWO_TARGETS)
    plan = plan_room(arrays, req(1000), "default", movable)
    assert plan is not None and plan.placement.node == 1
    assert sorted((r.placement.gpu_milli, new.node) for r, new in plan.moves) == [(450, 0), (700, 2)]
    apply_room_plan(arrays, req(1000), plan, movable)
    assert arrays.gpu_free_milli[:, 0].tolist() == [50, 0, 200, 0]


def test_repacks_try_one_target_per_kind_of_pod_sizes(gpu_cluster):
    # n0 and n1 hold the same sizes: after n0 the next target is n2, not n1
    arrays, movable = gpu_cluster([[(600, True)], [(600, True)], [(650, True)], [(900, False)]])
    planner = _RoomPlanner(arrays, "default", movable, PlacementContext(), repack.Steps())
    targets = planner._repack_targets(req(1000), np.ones(arrays.size, dtype=bool))
    assert [node for node, _, _ in targets] == [0, 2]


def test_the_packer_finds_a_packing_whenever_one_exists(monkeypatch):
    # small random packings against every assignment of items to bins: its bounds (slack, room lost
    # below the smallest pod) never cut one off
    monkeypatch.setattr(repack, "REPACK_STEPS", 10**6)
    monkeypatch.setattr(repack, "REPACK_BRANCHES", 10)
    rng = np.random.default_rng(7)
    resident = SimpleNamespace(allowed=None)
    checked = 0
    for _ in range(300):
        sizes = rng.choice([110, 160, 230, 320, 470, 550, 650], size=int(rng.integers(2, 6))).tolist()
        rooms = rng.choice([100, 210, 320, 450, 530, 700, 1000], size=int(rng.integers(1, 4))).tolist()
        packable = any(
            all(sum(s for s, b in zip(sizes, where, strict=True) if b == i) <= room for i, room in enumerate(rooms))
            for where in itertools.product(range(len(rooms)), repeat=len(sizes)))
        items = [repack.Item(resident, s, 0, 0, 0, None) for s in sizes]
        bins = [repack.Bin(i, 0, room, 0) for i, room in enumerate(rooms)]
        nodes = {i: 0 for i in range(len(rooms))}
        found = repack.Packer(items, bins, dict(nodes), dict(nodes), repack.Steps(10**6)).solve()
        assert (found is not None) == packable, (sizes, rooms)
        checked += packable
    assert checked > 30  # both outcomes were checked
