"""Consolidation planning (room.plan_room), which both the cycle and `bench.placement --moves` use."""

import json

import numpy as np

from bench.placement import main
from scheduling.core.placement import PlacementRequest
from scheduling.core.room import MovableSet, apply_room_plan, plan_room


def req(milli, gpus=1, cpu=1000):
    return PlacementRequest(milli, gpus, 0, cpu, 1000)


def state(arrays):
    return arrays.gpu_free_milli.copy(), arrays.cpu_free.copy(), arrays.mem_free.copy()


def same(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def test_a_best_effort_pod_moves_to_make_room_for_a_whole_gpu(gpu_cluster):
    arrays, movable = gpu_cluster([[(500, True)], [(400, False)]])
    before = state(arrays)
    plan = plan_room(arrays, req(1000), "default", movable)
    assert same(before, state(arrays))  # planning changes nothing
    assert plan is not None and plan.placement.node == 0
    assert [(r.key, new.node) for r, new in plan.moves] == [("n0-0-500", 1)]
    apply_room_plan(arrays, req(1000), plan, movable)
    assert arrays.gpu_free_milli[:, 0].tolist() == [0, 100]
    assert list(movable.on_node[1]) == ["n0-0-500"] and not movable.on_node[0]


def test_nothing_moves_when_the_moved_pod_would_not_fit_again(gpu_cluster):
    arrays, movable = gpu_cluster([[(500, True)], [(700, False)]])
    assert plan_room(arrays, req(1000), "default", movable) is None


def test_pods_that_may_not_move_stay(gpu_cluster):
    arrays, movable = gpu_cluster([[(300, False)], [(300, False)]])
    assert plan_room(arrays, req(1000), "default", movable) is None


def test_a_chain_move_when_the_second_displaced_pod_fits_nowhere(gpu_cluster):
    # the whole GPU of n0 is cleared; its first 300 takes n1's gap, the second fits nowhere until
    # the 200 on n2 moves to n3's gap: three moves, and only with chains (depth 2)
    loads = [[(300, True), (300, True)], [(700, False)], [(600, False), (200, True)], [(800, False)]]
    arrays, movable = gpu_cluster(loads)
    assert plan_room(arrays, req(1000), "binpack", movable, depth=1) is None
    plan = plan_room(arrays, req(1000), "binpack", movable, depth=2)
    assert plan is not None and plan.placement.node == 0
    assert sorted((r.placement.node, new.node) for r, new in plan.moves) == [(0, 1), (0, 2), (2, 3)]
    apply_room_plan(arrays, req(1000), plan, movable)
    assert arrays.gpu_free_milli[:, 0].tolist() == [0, 0, 100, 0]
    assert len(movable) == 3


def test_the_request_goes_only_where_it_is_allowed(gpu_cluster):
    arrays, movable = gpu_cluster([[(500, True)], [(400, False)]])
    assert plan_room(arrays, req(1000), "default", movable, allowed=np.array([False, True])) is None


def test_replay_with_moves_reports_them(tmp_path, capsys):
    nodes = tmp_path / "nodes.csv"
    pods = tmp_path / "pods.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\n" + "".join(f"n{i},32000,131072,1,T4\n" for i in range(4)))
    # fractions fill GPUs in pairs, then whole GPUs arrive: moving the best-effort halves makes room
    rows = [f"p{i:03d},1000,1024,1,{600 if i % 2 else 400},,{'BE' if i % 2 else 'LS'}" for i in range(4)]
    rows += [f"w{i:03d},1000,1024,1,1000,,LS" for i in range(8)]
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\n" + "\n".join(rows) + "\n")
    assert main(["--nodes", str(nodes), "--pods", str(pods), "--policy", "binpack", "--seeds", "42", "--moves",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["moves"]) == {"count", "percent", "per_seed"}
    assert out["moves"]["count"] == sum(out["moves"]["per_seed"])


def test_a_movable_set_built_in_bulk_equals_one_built_pod_by_pod(gpu_cluster):
    arrays, one_by_one = gpu_cluster([[(300, True), (300, True)], [(700, False), (200, True)], [(1000, True)]])
    residents = [r for d in one_by_one.on_node for r in d.values()]
    bulk = MovableSet.of(arrays, residents)
    for name in ("milli", "cpu", "mem", "slot_milli", "slot_cpu", "slot_mem"):
        assert np.array_equal(getattr(bulk, name), getattr(one_by_one, name)), name
    assert bulk.slot_key == one_by_one.slot_key and len(bulk) == 4
