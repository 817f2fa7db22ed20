"""What placement keeps per row between calls (the GPUs that fit per node, the fragmentation score's
per-node part) follows every take and give back: a context kept over a run of placements places as a
fresh context (nothing kept) does at every step."""

import random

import numpy as np

from scheduling.core.fragmentation import Shape, ShapeTable
from scheduling.core.placement import (
    ClusterArrays,
    NodeCapacity,
    PlacementContext,
    PlacementRequest,
    allocate,
    place,
    release,
)


def cluster() -> ClusterArrays:
    return ClusterArrays.build([NodeCapacity(f"n{i}", "A100" if i % 3 else "H100", 40000, 4, 32000, 128000,
                                             (1000,) * 4, (40000,) * 4, 32000, 128000) for i in range(12)])


REQUESTS = [PlacementRequest(1000, n, 0, 4000, 1000) for n in (1, 2, 4)] + [
    PlacementRequest(milli, 1, mem, 2000, 1000) for milli, mem in ((250, 8000), (500, 0), (100, 20000))]


def test_a_kept_context_places_as_a_fresh_one_through_takes_and_give_backs():
    shapes = ShapeTable((Shape(4000, 1000, 1), Shape(2000, 500, 1)), np.array([0.6, 0.4]))
    kept_arrays, fresh_arrays = cluster(), cluster()
    kept = PlacementContext(shapes=shapes)
    rng = random.Random(3)
    taken = []
    for step in range(300):
        if taken and rng.random() < 0.35:
            request, placement = taken.pop(rng.randrange(len(taken)))
            release(kept_arrays, request, placement)
            release(fresh_arrays, request, placement)
            continue
        request = rng.choice(REQUESTS)
        found = place(kept_arrays, request, "default", ctx=kept)
        assert found == place(fresh_arrays, request, "default", ctx=PlacementContext(shapes=shapes)), step
        if found is not None:
            allocate(kept_arrays, request, found)
            allocate(fresh_arrays, request, found)
            taken.append((request, found))
    assert len(taken) > 10
