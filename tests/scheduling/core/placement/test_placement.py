"""place() / allocate() / release() on small hand-built clusters."""

import numpy as np
import pytest

from scheduling.core.placement import (
    POLICIES,
    ClusterArrays,
    NodeCapacity,
    Placement,
    PlacementContext,
    PlacementRequest,
    allocate,
    feasible_nodes,
    place,
    release,
)


def node(name, gpus=2, model="A100", mem=40000, cpu=32000, ram=128000, free=None):
    free = free if free is not None else (1000,) * gpus
    return NodeCapacity(name, model, mem, gpus, cpu, ram, tuple(free), (mem,) * gpus, cpu, ram)


def frac(milli, mem=0, cpu=1000, ram=1000):
    return PlacementRequest(gpu_milli=milli, num_gpus=1, gpu_mem_mib=mem, cpu_milli=cpu, mem_mib=ram)


def whole(n, cpu=1000, ram=1000):
    return PlacementRequest(gpu_milli=1000, num_gpus=n, gpu_mem_mib=0, cpu_milli=cpu, mem_mib=ram)


def test_build_pads_absent_gpus():
    arrays = ClusterArrays.build([node("a", gpus=1), node("b", gpus=4)])
    assert arrays.gpu_free_milli.shape == (2, 4)
    assert arrays.gpu_present.tolist() == [[True, False, False, False], [True] * 4]
    assert arrays.gpu_free_milli[0].tolist() == [1000, 0, 0, 0]


def test_fractions_share_a_gpu_while_memory_allows():
    arrays = ClusterArrays.build([node("a", gpus=2, mem=16000)])
    first = place(arrays, frac(500, mem=10000), "binpack")
    assert first == Placement(0, (0,), 500, 10000)
    allocate(arrays, frac(500, mem=10000), first)
    # 500 milli left on GPU 0 but only 6000 MiB: the next fraction must take GPU 1
    second = place(arrays, frac(400, mem=10000), "binpack")
    assert second.gpus == (1,)
    allocate(arrays, frac(400, mem=10000), second)
    # a small one that fits in GPU 0's memory shares it (binpack picks the fullest fitting GPU)
    third = place(arrays, frac(300, mem=5000), "binpack")
    assert third.gpus == (0,)


def test_fraction_without_memory_ask_shares_by_milli_only():
    arrays = ClusterArrays.build([node("a", gpus=1)])
    for _ in range(2):
        allocate(arrays, frac(500), place(arrays, frac(500), "binpack"))
    assert arrays.gpu_free_milli[0, 0] == 0
    assert place(arrays, frac(10), "binpack") is None


def test_whole_gpus_need_fully_free_gpus():
    arrays = ClusterArrays.build([node("a", gpus=2, free=(1000, 900))])
    assert place(arrays, whole(2), "binpack") is None
    one = place(arrays, whole(1), "binpack")
    assert one == Placement(0, (0,), 1000, 40000)
    allocate(arrays, whole(1), one)
    assert arrays.gpu_free_mem[0].tolist() == [0, 40000]


def test_whole_gpu_with_memory_taken_is_not_free():
    arrays = ClusterArrays.build([node("a", gpus=1)])
    arrays.gpu_free_mem[0, 0] -= 1  # someone holds 1 MiB
    assert place(arrays, whole(1), "spread") is None


def test_cpu_and_memory_must_fit():
    arrays = ClusterArrays.build([node("a", cpu=4000, ram=8000), node("b", cpu=16000, ram=8000)])
    assert place(arrays, frac(100, cpu=8000), "binpack").node == 1
    assert place(arrays, frac(100, ram=9000), "binpack") is None


def test_model_constraint_through_allowed_mask():
    arrays = ClusterArrays.build([node("a", model="T4"), node("b", model="V100"), node("c", model="T4")])
    allowed = arrays.model_mask(["V100"])
    assert allowed.tolist() == [False, True, False]
    for policy in POLICIES:
        ctx = PlacementContext(seed=1)
        assert place(arrays, frac(300), policy, allowed, ctx).node == 1
    assert place(arrays, frac(300), "binpack", np.zeros(3, dtype=bool)) is None


def test_allowed_mask_shape_is_checked():
    arrays = ClusterArrays.build([node("a")])
    with pytest.raises(ValueError, match="allowed mask"):
        place(arrays, frac(300), "binpack", np.ones(2, dtype=bool))


def test_binpack_fills_the_fullest_node_and_spread_the_emptiest():
    arrays = ClusterArrays.build([node("a", free=(1000, 1000)), node("b", free=(600, 1000)), node("c", free=(1000, 300))])
    assert place(arrays, frac(200), "binpack") == Placement(2, (1,), 200, 0)
    assert place(arrays, frac(200), "spread") == Placement(0, (0,), 200, 0)


def test_cpu_only_request_takes_no_gpu():
    arrays = ClusterArrays.build([node("a")])
    req = PlacementRequest(gpu_milli=0, num_gpus=0, gpu_mem_mib=0, cpu_milli=2000, mem_mib=100)
    p = place(arrays, req, "fgd")
    assert p == Placement(0, (), 0, 0)
    allocate(arrays, req, p)
    assert arrays.cpu_free[0] == 30000 and arrays.gpu_free_milli[0].tolist() == [1000, 1000]


def test_ties_follow_node_order_and_are_deterministic():
    arrays = ClusterArrays.build([node(str(i)) for i in range(5)])
    order = np.array([3, 1, 4, 0, 2])
    for policy in ("binpack", "spread", "bestfit", "fgd", "frag", "default"):
        assert place(arrays, frac(500), policy, ctx=PlacementContext(node_order=order)).node == 3
        assert place(arrays, frac(500), policy).node == 0  # no order: lowest index


def test_random_policy_is_reproducible_by_seed():
    arrays = ClusterArrays.build([node(str(i)) for i in range(50)])

    def picks(seed):
        ctx = PlacementContext(seed=seed)
        return [place(arrays, frac(100), "random", ctx=ctx).node for _ in range(20)]

    assert picks(7) == picks(7)
    assert picks(7) != picks(8)
    assert len(set(picks(7))) > 5


def test_node_order_must_be_a_permutation():
    arrays = ClusterArrays.build([node("a"), node("b")])
    with pytest.raises(ValueError, match="permutation"):
        place(arrays, frac(100), "binpack", ctx=PlacementContext(node_order=np.array([0, 0])))


def test_allocate_then_release_restores_everything():
    arrays = ClusterArrays.build([node("a", gpus=4), node("b", gpus=2)])
    before = arrays.copy()
    reqs = [frac(300, mem=1000), whole(2), frac(700), whole(1)]
    done = []
    for req in reqs:
        p = place(arrays, req, "binpack")
        allocate(arrays, req, p)
        done.append((req, p))
    assert arrays.gpu_free_milli.sum() < before.gpu_free_milli.sum()
    for req, p in reversed(done):
        release(arrays, req, p)
    for name in ("gpu_free_milli", "gpu_free_mem", "cpu_free", "mem_free"):
        assert np.array_equal(getattr(arrays, name), getattr(before, name)), name
    assert (arrays.version > before.version).all()


def test_allocate_refuses_capacity_that_is_not_free():
    arrays = ClusterArrays.build([node("a", gpus=1)])
    allocate(arrays, frac(800), Placement(0, (0,), 800, 0))
    with pytest.raises(ValueError, match="do not have"):
        allocate(arrays, frac(300), Placement(0, (0,), 300, 0))
    with pytest.raises(ValueError, match="GPUs"):
        allocate(arrays, whole(2), Placement(0, (0,), 1000, 0))


def test_release_refuses_more_than_capacity():
    arrays = ClusterArrays.build([node("a", gpus=1)])
    with pytest.raises(ValueError, match="exceed"):
        release(arrays, frac(300), Placement(0, (0,), 300, 0))


def test_copy_is_independent():
    arrays = ClusterArrays.build([node("a")])
    other = arrays.copy()
    allocate(other, whole(1), place(other, whole(1), "binpack"))
    assert arrays.gpu_free_milli[0].tolist() == [1000, 1000]
    assert other.uid != arrays.uid


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(gpu_milli=500, num_gpus=2), "fraction"),
        (dict(gpu_milli=1200, num_gpus=1), "gpu_milli"),
        (dict(gpu_milli=0, num_gpus=1), "gpu_milli"),
        (dict(gpu_milli=100, num_gpus=0), "CPU-only"),
        (dict(gpu_milli=100, num_gpus=1, cpu_milli=-1), "cpu_milli"),
    ],
)
def test_bad_requests_name_the_problem(kwargs, message):
    fields = dict(gpu_milli=0, num_gpus=0, gpu_mem_mib=0, cpu_milli=0, mem_mib=0) | kwargs
    with pytest.raises(ValueError, match=message):
        PlacementRequest(**fields)


def test_bad_node_and_policy_name_the_problem():
    with pytest.raises(ValueError, match="entries"):
        NodeCapacity("x", "T4", 0, 2, 1, 1, (1000,), (0,), 1, 1)
    arrays = ClusterArrays.build([node("a")])
    with pytest.raises(ValueError, match="unknown placement policy"):
        place(arrays, frac(100), "nearest")


def test_feasible_nodes_counts_fully_free_gpus():
    arrays = ClusterArrays.build([node("a", gpus=4, free=(1000, 0, 1000, 1000)), node("b", gpus=2)])
    assert feasible_nodes(arrays, whole(3)).tolist() == [True, False]
    assert feasible_nodes(arrays, whole(4)).tolist() == [False, False]
