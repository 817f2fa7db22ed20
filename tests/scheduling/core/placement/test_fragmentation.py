"""Fragmentation values on a hand-worked node, typical shapes, and FGD's choices."""

import numpy as np
import pytest

from scheduling.core.fragmentation import (
    Shape,
    ShapeTable,
    ShapeTracker,
    cpu_stranded,
    frag_after_fraction,
    frag_after_whole,
    frag_terms,
    model_scarcity,
    node_fragmentation,
)
from scheduling.core.placement import (
    ClusterArrays,
    NodeCapacity,
    PlacementContext,
    PlacementRequest,
    allocate,
    place,
)

# Shapes of the hand-worked example: half-GPU pods (p 0.5), whole-GPU pods (0.25), CPU pods (0.25).
HALF = Shape(1000, 500, 1)
FULL = Shape(1000, 1000, 1)
CPU = Shape(2000, 0, 0)
TABLE = ShapeTable((HALF, FULL, CPU), np.array([0.5, 0.25, 0.25]))


def frag(free, cpu):
    free = np.array([free])
    return node_fragmentation(free, np.array([cpu]), np.ones((1, 3), dtype=bool), TABLE)[0]


def test_fragmentation_of_a_hand_worked_node():
    # GPUs free 1000 and 300, CPU plenty: HALF and FULL fit and leave the 300 as fragment,
    # CPU-only pods see all 1300 as fragment: 0.5*300 + 0.25*300 + 0.25*1300 = 550
    assert frag((1000, 300), 8000) == pytest.approx(550)
    # without CPU no GPU shape fits: everything is fragment
    assert frag((1000, 300), 500) == pytest.approx(1300)
    # an empty GPU pair: only CPU pods count it
    assert frag((1000, 1000), 8000) == pytest.approx(500)


def test_fragmentation_after_a_fraction_matches_recomputation():
    free = np.array([[1000, 300]])
    cpu = np.array([8000])
    access = np.ones((1, 3), dtype=bool)
    after = frag_after_fraction(free, cpu, access, TABLE, 200, 1000)
    # on GPU 1 (300 -> 100): 0.5*100 + 0.25*100 + 0.25*1100 = 350
    assert after[0, 1] == pytest.approx(350)
    # on GPU 0 (1000 -> 800): FULL no longer fits: 0.5*300 + 0.25*1100 + 0.25*1100 = 700
    assert after[0, 0] == pytest.approx(700)
    assert after[0, 0] == pytest.approx(frag((800, 300), 7000))


def test_fragmentation_after_whole_gpus():
    free = np.array([[1000, 1000, 400]])
    cpu = np.array([8000])
    access = np.ones((1, 3), dtype=bool)
    terms = frag_terms(free, TABLE)
    after = frag_after_whole(cpu, access, TABLE, terms, 1, 1000)
    assert after[0] == pytest.approx(frag((0, 1000, 400), 7000))


def test_model_access_turns_a_node_into_fragment_for_that_shape():
    table = ShapeTable((Shape(0, 500, 1, ("V100",)),), np.array([1.0]))
    access = table.access(np.array([0, 1]), ("T4", "V100"))
    assert access[:, 0].tolist() == [False, True]
    values = node_fragmentation(np.array([[1000], [1000]]), np.array([1, 1]), access, table)
    assert values.tolist() == [1000, 0]


def test_typical_shapes_cover_95_percent_and_renormalise():
    counts = {Shape(1, 100, 1): 50, Shape(1, 200, 1): 30, Shape(1, 300, 1): 15, Shape(1, 400, 1): 5}
    table = ShapeTable.from_counts(counts, 0.95)
    assert [s.gpu_milli for s in table.shapes] == [100, 200, 300]
    assert table.probs.tolist() == pytest.approx([50 / 95, 30 / 95, 15 / 95])


def test_shape_tracker_learns_online():
    tracker = ShapeTracker(refresh=10, warmup=2)
    for _ in range(3):
        tracker.observe(Shape(1, 100, 1))
    assert tracker.table.shapes == (Shape(1, 100, 1),)
    for _ in range(7):
        tracker.observe(Shape(1, 700, 1))
    assert set(tracker.table.shapes) == {Shape(1, 100, 1), Shape(1, 700, 1)}


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="CPU-only"):
        Shape(1, 100, 0)
    with pytest.raises(ValueError, match="no shapes"):
        ShapeTable.from_counts({})


def _cluster():
    nodes = [
        NodeCapacity("a", "T4", 0, 2, 8000, 64000, (1000, 300), (0, 0), 8000, 64000),
        NodeCapacity("b", "T4", 0, 2, 8000, 64000, (1000, 1000), (0, 0), 8000, 64000),
    ]
    return ClusterArrays.build(nodes)


def test_fgd_puts_a_small_pod_into_the_existing_gap():
    arrays = _cluster()
    req = PlacementRequest(gpu_milli=200, num_gpus=1, gpu_mem_mib=0, cpu_milli=1000, mem_mib=100)
    for policy in ("fgd", "frag", "default"):
        p = place(arrays, req, policy, ctx=PlacementContext(shapes=TABLE))
        assert (p.node, p.gpus) == (0, (1,)), policy


def test_fgd_scores_with_cache_equal_fresh_scores():
    """The per-node score cache must give the same placements as recomputing everything."""
    rng = np.random.default_rng(3)
    nodes = [NodeCapacity.empty(f"n{i}", "T4" if i % 2 else "V100", int(rng.choice([1, 2, 4, 8])), 64000, 256000)
             for i in range(40)]
    shapes = [Shape(4000, 500, 1), Shape(8000, 1000, 1), Shape(2000, 250, 1), Shape(16000, 1000, 2), Shape(4000, 0, 0)]
    table = ShapeTable.from_shapes(shapes * 3 + shapes[:2])
    cached_arrays, fresh_arrays = ClusterArrays.build(nodes), ClusterArrays.build(nodes)
    order = rng.permutation(40)
    cached_ctx = PlacementContext(node_order=order, shapes=table)
    for policy in ("fgd", "frag"):
        for _ in range(150):
            s = shapes[int(rng.integers(len(shapes)))]
            req = PlacementRequest(s.gpu_milli, s.num_gpus, 0, s.cpu_milli, 1000)
            a = place(cached_arrays, req, policy, ctx=cached_ctx)
            b = place(fresh_arrays, req, policy, ctx=PlacementContext(node_order=order, shapes=table))
            assert a == b
            if a is not None:
                allocate(cached_arrays, req, a)
                allocate(fresh_arrays, req, b)


def test_cpu_per_gpu_and_stranded_gpu_milli():
    table = ShapeTable((Shape(4000, 1000, 1), Shape(2000, 500, 1), CPU), np.array([0.25, 0.5, 0.25]))
    # (0.25*4000 + 0.5*2000) CPU for (0.25*1000 + 0.5*500) GPU milli: 4000 milli-CPU per GPU
    assert table.cpu_per_gpu == pytest.approx(4000)
    stranded = cpu_stranded(np.array([8000, 8000, 0]), np.array([40000, 24000, 0]), 4000)
    # 24000 CPU feeds 6 of the 8 free GPUs: 2000 milli stranded
    assert stranded.tolist() == [0, 2000, 0]
    assert ShapeTable((CPU,), np.array([1.0])).cpu_per_gpu == float("inf")


def test_default_keeps_cpu_for_the_gpus_where_fgd_does_not():
    # two empty 8-GPU nodes; node 0 has 4500 CPU per GPU, node 1 plenty; typical pods bring 4000
    nodes = [NodeCapacity.empty("tight", "G2", 8, 36000, 512000), NodeCapacity.empty("rich", "G2", 8, 96000, 512000)]
    table = ShapeTable((Shape(4000, 1000, 1),), np.array([1.0]))
    hungry = PlacementRequest(gpu_milli=1000, num_gpus=1, gpu_mem_mib=0, cpu_milli=12000, mem_mib=100)
    arrays = ClusterArrays.build(nodes)
    # FGD sees no shape stop fitting on either node and takes the first; the CPU left on node 0
    # would feed only 6 of its 7 remaining GPUs, so default goes to the CPU-rich node
    assert place(arrays, hungry, "fgd", ctx=PlacementContext(shapes=table)).node == 0
    assert place(arrays, hungry, "default", ctx=PlacementContext(shapes=table)).node == 1


def test_model_scarcity_grows_as_a_limited_models_free_share_shrinks():
    models = ("G2", "T4", "V100")
    table = ShapeTable((FULL, Shape(1000, 1000, 1, ("T4",)), Shape(1000, 500, 1, ("G2", "T4"))), np.array([0.6, 0.1, 0.3]))
    assert table.constrained == ((("G2", "T4"), 0.3), (("T4",), 0.1))
    free = np.array([6000.0, 2000.0, 2000.0])  # total 10000; G2+T4 hold 8000, T4 alone 2000
    cost = model_scarcity(table, models, free)
    assert cost == pytest.approx([0.3 * (10 / 8 - 1), 0.3 * (10 / 8 - 1) + 0.1 * (10 / 2 - 1), 0.0])
    assert model_scarcity(table, models, np.array([6000.0, 1000.0, 2000.0]))[1] > cost[1]
    assert not model_scarcity(TABLE, models, free).any()  # no limited shape: no cost


def test_default_leaves_a_scarce_model_to_the_pods_limited_to_it():
    # one 2-GPU T4 node, one 8-GPU G2 node; 30 % of pods may use G2 only, 10 % T4 only
    nodes = [NodeCapacity.empty("t4", "T4", 2, 64000, 512000), NodeCapacity.empty("g2", "G2", 8, 64000, 512000)]
    table = ShapeTable((FULL, Shape(1000, 1000, 1, ("G2",)), Shape(1000, 1000, 1, ("T4",))), np.array([0.6, 0.3, 0.1]))
    anywhere = PlacementRequest(gpu_milli=1000, num_gpus=1, gpu_mem_mib=0, cpu_milli=1000, mem_mib=100)
    arrays = ClusterArrays.build(nodes)
    # FGD: fewer typical shapes may use the T4 node, so taking it looks cheaper; but the T4 pods
    # have 2 GPUs for a tenth of the demand, the G2 pods 8 for three tenths
    assert place(arrays, anywhere, "fgd", ctx=PlacementContext(shapes=table)).node == 0
    assert place(arrays, anywhere, "default", ctx=PlacementContext(shapes=table)).node == 1
    # a pod limited to T4 still goes there, scored as before
    only_t4 = arrays.model_mask(("T4",))
    assert place(arrays, anywhere, "default", only_t4, ctx=PlacementContext(shapes=table)).node == 0
