"""Choosing a node and GPUs for one request, vectorised over nodes with numpy.

`place()` is the one entry point: the scheduling cycle and the trace benchmark both call it.
Policies:

- ``binpack``: fill the node with the least free GPU milli left (then the least CPU).
- ``spread``: the opposite, most free GPU milli left.
- ``frag``: fragmentation-aware: FGD's score over a fragmentation that also counts the GPU
  milli a node strands for lack of CPU (see `fragmentation.py`, bench/PLACEMENT.md).
- ``default``: what production uses (see `DEFAULT_POLICY`).
- ``random``, ``bestfit``, ``fgd``: the baselines of the FGD paper (USENIX ATC'23), exactly as
  its artifact scores them, so the benchmark compares like with like.

GPU memory: `PlacementRequest.gpu_mem_mib` is the memory one GPU must have free; 0 means the
request asks for no GPU memory (as in the Alibaba trace).  Whole-GPU requests need GPUs with
all their milli and all their memory free, and get the GPU's whole memory.

Determinism: ties go to the node that comes first in `PlacementContext.node_order` (or the
lowest index); ``random`` draws from a generator seeded by `PlacementContext.seed`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from scheduling.core.fragmentation import (
    MILLI,
    Shape,
    ShapeTable,
    ShapeTracker,
    cpu_stranded,
    frag_after_fraction,
    frag_after_whole,
    frag_terms,
    frag_value,
)

POLICIES = ("binpack", "spread", "frag", "default", "random", "bestfit", "fgd")
DEFAULT_POLICY = "frag"  # what "default" resolves to

_uids = itertools.count(1)


@dataclass(frozen=True)
class NodeCapacity:
    """One node's total and free capacity, filled by the caller."""

    name: str
    gpu_model: str
    gpu_total_mem_mib: int  # per GPU
    num_gpus: int
    cpu_milli: int
    mem_mib: int
    gpu_free_milli: tuple[int, ...]  # one entry per GPU
    gpu_free_mem_mib: tuple[int, ...]
    cpu_free: int
    mem_free: int

    def __post_init__(self) -> None:
        if self.num_gpus < 0:
            raise ValueError(f"node {self.name}: num_gpus must be >= 0")
        if len(self.gpu_free_milli) != self.num_gpus or len(self.gpu_free_mem_mib) != self.num_gpus:
            raise ValueError(f"node {self.name}: gpu_free_milli and gpu_free_mem_mib need {self.num_gpus} entries")
        if any(not 0 <= m <= MILLI for m in self.gpu_free_milli):
            raise ValueError(f"node {self.name}: gpu_free_milli entries must be in 0..{MILLI}")
        if any(not 0 <= m <= self.gpu_total_mem_mib for m in self.gpu_free_mem_mib):
            raise ValueError(f"node {self.name}: gpu_free_mem_mib entries must be in 0..gpu_total_mem_mib")
        if not 0 <= self.cpu_free <= self.cpu_milli or not 0 <= self.mem_free <= self.mem_mib:
            raise ValueError(f"node {self.name}: cpu_free/mem_free must be within the node's totals")

    @classmethod
    def empty(
        cls, name: str, gpu_model: str, num_gpus: int, cpu_milli: int, mem_mib: int, gpu_total_mem_mib: int = 0
    ) -> NodeCapacity:
        """A node with everything free."""
        return cls(
            name, gpu_model, gpu_total_mem_mib, num_gpus, cpu_milli, mem_mib,
            (MILLI,) * num_gpus, (gpu_total_mem_mib,) * num_gpus, cpu_milli, mem_mib,
        )


@dataclass
class ClusterArrays:
    """Mutable free-capacity view of N nodes; G = most GPUs on one node, extra slots absent."""

    names: tuple[str, ...]
    model_names: tuple[str, ...]  # table model_id indexes
    model_id: np.ndarray  # int32 [N]
    gpu_present: np.ndarray  # bool [N, G]
    gpu_free_milli: np.ndarray  # int32 [N, G]; 0 for absent GPUs
    gpu_free_mem: np.ndarray  # int64 [N, G] MiB
    gpu_total_mem: np.ndarray  # int64 [N] MiB per GPU
    num_gpus: np.ndarray  # int32 [N]
    cpu_total: np.ndarray  # int64 [N] milli-CPU
    mem_total: np.ndarray  # int64 [N] MiB
    cpu_free: np.ndarray  # int64 [N]
    mem_free: np.ndarray  # int64 [N]
    version: np.ndarray  # int64 [N]; bumped by allocate/release (score caches key on it)
    uid: int = field(default_factory=lambda: next(_uids))

    @classmethod
    def build(cls, nodes: Sequence[NodeCapacity]) -> ClusterArrays:
        n = len(nodes)
        g = max((node.num_gpus for node in nodes), default=0)
        model_names = tuple(sorted({node.gpu_model for node in nodes}))
        index = {name: i for i, name in enumerate(model_names)}
        present = np.zeros((n, g), dtype=bool)
        free_milli = np.zeros((n, g), dtype=np.int32)
        free_mem = np.zeros((n, g), dtype=np.int64)
        for i, node in enumerate(nodes):
            present[i, : node.num_gpus] = True
            free_milli[i, : node.num_gpus] = node.gpu_free_milli
            free_mem[i, : node.num_gpus] = node.gpu_free_mem_mib

        def column(attr: str, dtype: type) -> np.ndarray:
            return np.array([getattr(node, attr) for node in nodes], dtype=dtype)

        return cls(
            names=tuple(node.name for node in nodes),
            model_names=model_names,
            model_id=np.array([index[node.gpu_model] for node in nodes], dtype=np.int32),
            gpu_present=present,
            gpu_free_milli=free_milli,
            gpu_free_mem=free_mem,
            gpu_total_mem=column("gpu_total_mem_mib", np.int64),
            num_gpus=column("num_gpus", np.int32),
            cpu_total=column("cpu_milli", np.int64),
            mem_total=column("mem_mib", np.int64),
            cpu_free=column("cpu_free", np.int64),
            mem_free=column("mem_free", np.int64),
            version=np.zeros(n, dtype=np.int64),
        )

    @property
    def size(self) -> int:
        return len(self.names)

    def copy(self) -> ClusterArrays:
        """An independent copy (for try-then-commit); it gets its own uid."""
        arrays = {
            name: getattr(self, name).copy()
            for name in ("model_id", "gpu_present", "gpu_free_milli", "gpu_free_mem", "gpu_total_mem",
                         "num_gpus", "cpu_total", "mem_total", "cpu_free", "mem_free", "version")
        }
        return ClusterArrays(names=self.names, model_names=self.model_names, **arrays)

    def model_mask(self, models: Sequence[str]) -> np.ndarray:
        """bool [N]: nodes whose GPU model is one of `models` (empty = every node)."""
        if not models:
            return np.ones(self.size, dtype=bool)
        ids = [i for i, name in enumerate(self.model_names) if name in set(models)]
        return np.isin(self.model_id, ids)

    def fully_free(self) -> np.ndarray:
        """bool [N, G]: GPUs with all their milli and memory free."""
        return self.gpu_present & (self.gpu_free_milli == MILLI) & (self.gpu_free_mem == self.gpu_total_mem[:, None])


@dataclass(frozen=True)
class PlacementRequest:
    gpu_milli: int  # per GPU: 1..999 a fraction of ONE GPU, 1000 whole GPUs, 0 with num_gpus 0
    num_gpus: int  # > 1 only with gpu_milli 1000; 0 = CPU-only
    gpu_mem_mib: int  # per GPU, 0 = no GPU memory asked (ignored for whole GPUs)
    cpu_milli: int
    mem_mib: int

    def __post_init__(self) -> None:
        if self.num_gpus < 0:
            raise ValueError(f"num_gpus must be >= 0, got {self.num_gpus}")
        if self.num_gpus == 0 and self.gpu_milli != 0:
            raise ValueError(f"a CPU-only request (num_gpus 0) must have gpu_milli 0, got {self.gpu_milli}")
        if self.num_gpus > 0 and not 0 < self.gpu_milli <= MILLI:
            raise ValueError(f"gpu_milli must be in 1..{MILLI}, got {self.gpu_milli}")
        if self.num_gpus > 1 and self.gpu_milli != MILLI:
            raise ValueError(f"a fraction ({self.gpu_milli} milli) can only be asked of one GPU, not {self.num_gpus}")
        for name in ("gpu_mem_mib", "cpu_milli", "mem_mib"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")

    @property
    def is_fraction(self) -> bool:
        return self.num_gpus == 1 and self.gpu_milli < MILLI

    @property
    def total_gpu_milli(self) -> int:
        return self.num_gpus * self.gpu_milli

    def shape(self, models: Sequence[str] = ()) -> Shape:
        """The shape fragmentation scores count this request as."""
        return Shape(self.cpu_milli, self.gpu_milli, self.num_gpus, tuple(sorted(models)))


@dataclass(frozen=True)
class Placement:
    node: int  # row in ClusterArrays
    gpus: tuple[int, ...]  # GPU indices on that node
    gpu_milli: int  # what each listed GPU gives
    gpu_mem_mib: int


@dataclass
class PlacementContext:
    """What policies may use beyond the arrays: tie order, typical shapes, seed, caches.

    `shapes` is a fixed table of typical shapes (what FGD is given); `tracker` learns them from
    requests as they come (its current table is used when `shapes` is None).  One context
    belongs to one scheduling session; its score caches follow `ClusterArrays.version`.
    """

    node_order: np.ndarray | None = None  # permutation of node indices; earlier wins ties
    shapes: ShapeTable | None = None
    tracker: ShapeTracker | None = None
    seed: int = 0
    rng: np.random.Generator = field(init=False, repr=False)
    _rank: np.ndarray | None = field(default=None, init=False, repr=False)
    _caches: dict = field(default_factory=dict, init=False, repr=False)
    _fallback_tables: dict = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)

    def table(self) -> ShapeTable | None:
        if self.shapes is not None:
            return self.shapes
        return self.tracker.table if self.tracker is not None else None

    def rank(self, n: int) -> np.ndarray:
        """rank[i] = position of node i in the tie-break order."""
        if self._rank is None or len(self._rank) != n:
            if self.node_order is None:
                self._rank = np.arange(n)
            else:
                order = np.asarray(self.node_order)
                if sorted(order.tolist()) != list(range(n)):
                    raise ValueError(f"node_order must be a permutation of 0..{n - 1}")
                self._rank = np.empty(n, dtype=np.int64)
                self._rank[order] = np.arange(n)
        return self._rank


# --------------------------------------------------------------------------- feasibility


def _gpu_fit(arrays: ClusterArrays, request: PlacementRequest, rows: np.ndarray | slice = slice(None)) -> np.ndarray:
    """bool [n, G] for `rows`: GPUs this request could use (fraction: enough milli+memory; whole: fully free)."""
    present, free_milli, free_mem = arrays.gpu_present[rows], arrays.gpu_free_milli[rows], arrays.gpu_free_mem[rows]
    if request.is_fraction:
        return present & (free_milli >= request.gpu_milli) & (free_mem >= request.gpu_mem_mib)
    return present & (free_milli == MILLI) & (free_mem == arrays.gpu_total_mem[rows][:, None])


def feasible_nodes(
    arrays: ClusterArrays, request: PlacementRequest, allowed: np.ndarray | None = None
) -> np.ndarray:
    """bool [N]: nodes where the request fits now."""
    ok = (arrays.cpu_free >= request.cpu_milli) & (arrays.mem_free >= request.mem_mib)
    if allowed is not None:
        if allowed.shape != (arrays.size,):
            raise ValueError(f"allowed mask has shape {allowed.shape}, expected ({arrays.size},)")
        ok &= allowed
    if request.num_gpus > 0:
        ok &= _gpu_fit(arrays, request).sum(axis=1) >= request.num_gpus
    return ok


# --------------------------------------------------------------------------- GPU choice in a node


def _first_free(arrays: ClusterArrays, node: int, request: PlacementRequest) -> tuple[int, ...]:
    free = np.flatnonzero(arrays.fully_free()[node])
    return tuple(int(g) for g in free[: request.num_gpus])


def _fraction_gpu(arrays: ClusterArrays, node: int, request: PlacementRequest, most_free: bool) -> int:
    """The fitting GPU with the least (or most) free milli; ties to the lowest index."""
    fit = _gpu_fit(arrays, request)[node]
    free = np.where(fit, arrays.gpu_free_milli[node], -1 if most_free else MILLI + 1)
    return int(np.argmax(free) if most_free else np.argmin(free))


def _gpus_bestfit(arrays: ClusterArrays, node: int, request: PlacementRequest) -> tuple[int, ...]:
    if request.num_gpus == 0:
        return ()
    if request.is_fraction:
        return (_fraction_gpu(arrays, node, request, most_free=False),)
    return _first_free(arrays, node, request)


def _gpus_spread(arrays: ClusterArrays, node: int, request: PlacementRequest) -> tuple[int, ...]:
    if request.is_fraction:
        return (_fraction_gpu(arrays, node, request, most_free=True),)
    return _gpus_bestfit(arrays, node, request)


# --------------------------------------------------------------------------- scores
# A scorer returns int64 scores for the candidate nodes `cand` (higher wins) and a function that
# picks the GPUs on the winning node.

Scored = tuple[np.ndarray, Callable[[int], tuple[int, ...]]]


def _free_after(arrays: ClusterArrays, request: PlacementRequest, cand: np.ndarray) -> np.ndarray:
    gpu = arrays.gpu_free_milli[cand].sum(axis=1, dtype=np.int64) - request.total_gpu_milli
    cpu = arrays.cpu_free[cand] - request.cpu_milli
    return gpu * (1 << 32) + cpu  # GPU first, CPU breaks ties


def _score_binpack(arrays, request, cand, ctx) -> Scored:
    return -_free_after(arrays, request, cand), lambda node: _gpus_bestfit(arrays, node, request)


def _score_spread(arrays, request, cand, ctx) -> Scored:
    return _free_after(arrays, request, cand), lambda node: _gpus_spread(arrays, node, request)


def _score_random(arrays, request, cand, ctx) -> Scored:
    scores = np.zeros(len(cand), dtype=np.int64)
    scores[ctx.rng.integers(len(cand))] = 1
    return scores, lambda node: _gpus_bestfit(arrays, node, request)


def _score_bestfit(arrays, request, cand, ctx) -> Scored:
    """The artifact's BestFit: weighted leftover CPU and GPU, min-max normalised with integer division."""
    cpu_left = arrays.cpu_free[cand] - request.cpu_milli
    gpu_left = arrays.gpu_free_milli[cand].sum(axis=1, dtype=np.int64) - request.total_gpu_milli
    raw = np.trunc((1 - (0.5 * cpu_left / 128000 + 0.5 * gpu_left / 8000)) * 100).astype(np.int64)
    high, low = raw.max(), raw.min()
    if high == low:
        low -= 1
    return (raw - low) * 100 // (high - low), lambda node: _gpus_bestfit(arrays, node, request)


_MAX_CACHES = 4096


@dataclass
class _FragCache:
    """Per (arrays, request, table): fragmentation deltas per node and GPU, valid while version matches."""

    version: np.ndarray  # int64 [N]
    delta: np.ndarray  # float64 [N, W]: F_before - F_after; W = G for fractions, else 1; -inf: unusable
    access: np.ndarray  # bool [N, K]


def _table_for(request: PlacementRequest, ctx: PlacementContext) -> ShapeTable:
    table = ctx.table()
    if table is not None:
        return table
    # With no history yet, the request itself is the only shape known (one table per shape, kept
    # in the context so score caches stay valid between calls).
    shape = request.shape()
    if shape not in ctx._fallback_tables:
        ctx._fallback_tables[shape] = ShapeTable((shape,), np.array([1.0]))
    return ctx._fallback_tables[shape]


def _frag_delta(
    arrays: ClusterArrays, request: PlacementRequest, nodes: np.ndarray, access: np.ndarray, table: ShapeTable
) -> np.ndarray:
    """F_before - F_after for `nodes`: [n, G] per GPU for fractions (-inf where it does not fit), else [n, 1]."""
    free = arrays.gpu_free_milli[nodes]
    cpu = arrays.cpu_free[nodes]
    terms = frag_terms(free, table)
    before = frag_value(terms.free_total, terms.big, terms.count, cpu, access, table)
    if request.is_fraction:
        after = frag_after_fraction(free, cpu, access, table, request.gpu_milli, request.cpu_milli, terms)
        fit = _gpu_fit(arrays, request, nodes)
        return np.where(fit, before[:, None] - after, -np.inf)
    after = frag_after_whole(cpu, access, table, terms, request.num_gpus, request.cpu_milli)
    return (before - after)[:, None]


def frag_deltas(
    arrays: ClusterArrays, request: PlacementRequest, cand: np.ndarray, ctx: PlacementContext
) -> np.ndarray:
    """Fragmentation decrease per candidate node (and GPU, for fractions), see `_frag_delta`.

    Cached in `ctx`: only nodes whose `arrays.version` changed since the last call are recomputed.
    """
    table = _table_for(request, ctx)
    key = (arrays.uid, request, id(table))
    entry = ctx._caches.get(key)
    if entry is None:
        if len(ctx._caches) > _MAX_CACHES:  # many array copies or request kinds: start afresh
            ctx._caches.clear()
        # drop caches of older tables for the same request (online learning replaces tables)
        for old in [k for k in ctx._caches if k[:2] == key[:2]]:
            del ctx._caches[old]
        width = arrays.gpu_free_milli.shape[1] if request.is_fraction else 1
        cache = _FragCache(
            np.full(arrays.size, -1, dtype=np.int64),
            np.zeros((arrays.size, width)),
            table.access(arrays.model_id, arrays.model_names),
        )
        ctx._caches[key] = (table, cache)  # holding the table keeps its id unique
    else:
        cache = entry[1]
    stale = cand[cache.version[cand] != arrays.version[cand]]
    if len(stale):
        cache.delta[stale] = _frag_delta(arrays, request, stale, cache.access[stale], table)
        cache.version[stale] = arrays.version[stale]
    return cache.delta[cand]


def _gpus_from_delta(arrays: ClusterArrays, request: PlacementRequest, cand: np.ndarray, gpu: np.ndarray):
    """GPU chooser: the per-candidate GPU for fractions, the first fully free GPUs otherwise."""

    def gpus(node: int) -> tuple[int, ...]:
        if request.is_fraction:
            return (int(gpu[np.searchsorted(cand, node)]),)  # cand is sorted (np.flatnonzero)
        return _gpus_bestfit(arrays, node, request)

    return gpus


def _fgd_score(delta: np.ndarray) -> np.ndarray:
    # the artifact's coarse integer score: int(100 * sigmoid(dF / 1000))
    return (100.0 / (1.0 + np.exp(-delta / 1000.0))).astype(np.int64)


def _score_fgd(arrays, request, cand, ctx) -> Scored:
    """The artifact's FGD: coarse integer score; for fractions the GPU leaving the least fragmentation."""
    delta = frag_deltas(arrays, request, cand, ctx)
    gpu = np.argmax(delta, axis=1)
    best = delta[np.arange(len(cand)), gpu]
    return _fgd_score(best), _gpus_from_delta(arrays, request, cand, gpu)


def _score_frag(arrays, request, cand, ctx) -> Scored:
    """FGD's score over a CPU-aware fragmentation: F plus the GPU milli stranded for lack of CPU."""
    delta = frag_deltas(arrays, request, cand, ctx)
    gpu = np.argmax(delta, axis=1)
    ratio = _table_for(request, ctx).cpu_per_gpu
    free_total = arrays.gpu_free_milli[cand].sum(axis=1, dtype=np.int64)
    cpu = arrays.cpu_free[cand]
    stranded = cpu_stranded(free_total, cpu, ratio) - cpu_stranded(
        free_total - request.total_gpu_milli, cpu - request.cpu_milli, ratio
    )
    best = delta[np.arange(len(cand)), gpu] + stranded
    # keep FGD's coarse integer score: its ties, settled by the node order, spread pods usefully
    return _fgd_score(best), _gpus_from_delta(arrays, request, cand, gpu)


_SCORERS: dict[str, Callable[..., Scored]] = {
    "binpack": _score_binpack,
    "spread": _score_spread,
    "random": _score_random,
    "bestfit": _score_bestfit,
    "fgd": _score_fgd,
    "frag": _score_frag,
}


# --------------------------------------------------------------------------- API


def place(
    arrays: ClusterArrays,
    request: PlacementRequest,
    policy: str,
    allowed: np.ndarray | None = None,
    ctx: PlacementContext | None = None,
) -> Placement | None:
    """Choose a node and GPUs for `request` under `policy`; None when it fits nowhere.

    `allowed` (bool [N]) is the caller's mask: pool, vendor, GPU model, taints, cordons.
    Does not change `arrays`: call `allocate()` to take the capacity.
    """
    name = DEFAULT_POLICY if policy == "default" else policy
    scorer = _SCORERS.get(name)
    if scorer is None:
        raise ValueError(f"unknown placement policy {policy!r}; choose one of {', '.join(POLICIES)}")
    cand = np.flatnonzero(feasible_nodes(arrays, request, allowed))
    if len(cand) == 0:
        return None
    ctx = ctx if ctx is not None else PlacementContext()
    scores, choose_gpus = scorer(arrays, request, cand, ctx)
    top = cand[scores == scores.max()]
    node = int(top[np.argmin(ctx.rank(arrays.size)[top])]) if len(top) > 1 else int(top[0])
    gpus = choose_gpus(node)
    if request.is_fraction:
        return Placement(node, gpus, request.gpu_milli, request.gpu_mem_mib)
    return Placement(node, gpus, MILLI if gpus else 0, int(arrays.gpu_total_mem[node]) if gpus else 0)


def allocate(arrays: ClusterArrays, request: PlacementRequest, placement: Placement) -> None:
    """Take the placement's capacity from `arrays`; raises ValueError if it is not free."""
    n, gpus = placement.node, list(placement.gpus)
    if len(gpus) != request.num_gpus:
        raise ValueError(f"placement lists {len(gpus)} GPUs, the request asks for {request.num_gpus}")
    if arrays.cpu_free[n] < request.cpu_milli or arrays.mem_free[n] < request.mem_mib:
        raise ValueError(f"node {arrays.names[n]}: not enough CPU or memory free")
    if gpus:
        if not arrays.gpu_present[n, gpus].all():
            raise ValueError(f"node {arrays.names[n]}: GPU index {gpus} not present")
        if (arrays.gpu_free_milli[n, gpus] < placement.gpu_milli).any() or (
            arrays.gpu_free_mem[n, gpus] < placement.gpu_mem_mib
        ).any():
            raise ValueError(f"node {arrays.names[n]}: GPUs {gpus} do not have the placement's share free")
    arrays.cpu_free[n] -= request.cpu_milli
    arrays.mem_free[n] -= request.mem_mib
    arrays.gpu_free_milli[n, gpus] -= placement.gpu_milli
    arrays.gpu_free_mem[n, gpus] -= placement.gpu_mem_mib
    arrays.version[n] += 1


def release(arrays: ClusterArrays, request: PlacementRequest, placement: Placement) -> None:
    """Give the placement's capacity back; raises ValueError if that would exceed the node's totals."""
    n, gpus = placement.node, list(placement.gpus)
    if (
        arrays.cpu_free[n] + request.cpu_milli > arrays.cpu_total[n]
        or arrays.mem_free[n] + request.mem_mib > arrays.mem_total[n]
        or (arrays.gpu_free_milli[n, gpus] + placement.gpu_milli > MILLI).any()
        or (arrays.gpu_free_mem[n, gpus] + placement.gpu_mem_mib > arrays.gpu_total_mem[n]).any()
    ):
        raise ValueError(f"node {arrays.names[n]}: releasing {placement} would exceed the node's capacity")
    arrays.cpu_free[n] += request.cpu_milli
    arrays.mem_free[n] += request.mem_mib
    arrays.gpu_free_milli[n, gpus] += placement.gpu_milli
    arrays.gpu_free_mem[n, gpus] += placement.gpu_mem_mib
    arrays.version[n] += 1


# --------------------------------------------------------------------------- consolidation
# When a request fits nowhere, running pods that may move (best-effort, preemptible) can be moved
# to make room. `plan_room` decides the moves; the scheduling cycle (actions.consolidate) and the
# trace benchmark (bench.placement --moves) both call it, so they move exactly the same pods.

ROOM_NODES = 20  # nodes tried for the waiting request
ROOM_NODES_NESTED = 4  # nodes tried for each pod a move displaces (chain moves)
ROOM_ATTEMPTS = 120  # placements one plan may try, so a plan costs a bounded time
ROOM_DEPTH = 5  # a displaced pod may displace others, this many levels deep


@dataclass(frozen=True)
class Resident:
    """A running pod consolidation may move: what it asks, where it is, where it may go."""

    key: object  # the caller's id for the pod
    request: PlacementRequest
    placement: Placement
    allowed: np.ndarray | None = None  # nodes it may run on (None: all)


@dataclass(frozen=True)
class RoomPlan:
    """Where the waiting request goes and which residents move where.

    Carry it out by releasing every moved resident's old placement, then allocating the request,
    then the moved residents' new placements in this order (`apply_room_plan`).
    """

    placement: Placement
    moves: tuple[tuple[Resident, Placement], ...]


class MovableSet:
    """The residents consolidation may move, per node, with their GPU milli / CPU / memory summed.

    Residents are also kept by kind (request and allowed nodes), so which of them could be placed
    elsewhere right now is found with one feasibility mask per kind.
    """

    def __init__(self, arrays: ClusterArrays) -> None:
        self.on_node: list[dict[object, Resident]] = [{} for _ in range(arrays.size)]
        self.milli = np.zeros(arrays.gpu_free_milli.shape, dtype=np.int64)  # [N, G]
        self.cpu = np.zeros(arrays.size, dtype=np.int64)
        self.mem = np.zeros(arrays.size, dtype=np.int64)
        self.kinds: dict[tuple, dict[object, Resident]] = {}  # (request, id(allowed)) -> residents
        # fractions by GPU slot, for finding swap partners vectorised: [N, G, S] milli (0: empty)
        self.slot_milli = np.zeros((*arrays.gpu_free_milli.shape, 4), dtype=np.int64)
        self.slot_cpu = np.zeros_like(self.slot_milli)
        self.slot_mem = np.zeros_like(self.slot_milli)
        self.slot_key: dict[tuple[int, int, int], object] = {}
        self._slot_of: dict[object, tuple[int, int, int]] = {}

    @classmethod
    def of(cls, arrays: ClusterArrays, residents: Iterable[Resident]) -> MovableSet:
        """A set holding `residents`, built in bulk (the scheduling cycle builds one per cycle)."""
        out = cls(arrays)
        rows: list[tuple[int, int, int, int, int]] = []  # node, gpu, milli, cpu, mem per GPU held
        slots: list[tuple[int, int, int, int, int, int]] = []
        count: dict[tuple[int, int], int] = {}
        for r in residents:
            p = r.placement
            if r.key in out.on_node[p.node]:
                raise ValueError(f"resident {r.key!r} is listed twice")
            out.on_node[p.node][r.key] = r
            out.kinds.setdefault(_kind(r), {})[r.key] = r
            out.cpu[p.node] += r.request.cpu_milli
            out.mem[p.node] += r.request.mem_mib
            rows += [(p.node, g, p.gpu_milli) for g in p.gpus]
            if r.request.is_fraction:
                k = count.get((p.node, p.gpus[0]), 0)
                count[(p.node, p.gpus[0])] = k + 1
                slots.append((p.node, p.gpus[0], k, p.gpu_milli, r.request.cpu_milli, r.request.mem_mib))
                out.slot_key[(p.node, p.gpus[0], k)] = r.key
                out._slot_of[r.key] = (p.node, p.gpus[0], k)
        if rows:
            n, g, milli = np.array(rows, dtype=np.int64).T
            np.add.at(out.milli, (n, g), milli)
        if slots:
            n, g, k, milli, cpu, mem = np.array(slots, dtype=np.int64).T
            width = int(k.max()) + 1
            if width > out.slot_milli.shape[2]:
                out.slot_milli, out.slot_cpu, out.slot_mem = (
                    np.zeros((*out.milli.shape, width), dtype=np.int64) for _ in range(3))
            out.slot_milli[n, g, k], out.slot_cpu[n, g, k], out.slot_mem[n, g, k] = milli, cpu, mem
        return out

    def __len__(self) -> int:
        return sum(len(d) for d in self.on_node)

    def add(self, resident: Resident) -> None:
        p = resident.placement
        if resident.key in self.on_node[p.node]:
            raise ValueError(f"resident {resident.key!r} is already on node {p.node}")
        self.on_node[p.node][resident.key] = resident
        self.kinds.setdefault(_kind(resident), {})[resident.key] = resident
        self._count(resident, +1)

    def remove(self, key: object, node: int) -> Resident:
        resident = self.on_node[node].pop(key)
        del self.kinds[_kind(resident)][key]
        self._count(resident, -1)
        return resident

    def _count(self, r: Resident, sign: int) -> None:
        p = r.placement
        self.milli[p.node, list(p.gpus)] += sign * p.gpu_milli
        self.cpu[p.node] += sign * r.request.cpu_milli
        self.mem[p.node] += sign * r.request.mem_mib
        if r.request.is_fraction:
            self._slot(r, sign)

    def _slot(self, r: Resident, sign: int) -> None:
        n, g = r.placement.node, r.placement.gpus[0]
        if sign < 0:
            slot = self._slot_of.pop(r.key)
            del self.slot_key[slot]
            values = (0, 0, 0)
        else:
            free = np.flatnonzero(self.slot_milli[n, g] == 0)
            if len(free) == 0:  # more fractions on one GPU than slots: widen
                grow = np.zeros_like(self.slot_milli)
                self.slot_milli, self.slot_cpu, self.slot_mem = (
                    np.concatenate([x, grow], axis=2) for x in (self.slot_milli, self.slot_cpu, self.slot_mem))
                free = np.flatnonzero(self.slot_milli[n, g] == 0)
            slot = (n, g, int(free[0]))
            self._slot_of[r.key] = slot
            self.slot_key[slot] = r.key
            values = (r.placement.gpu_milli, r.request.cpu_milli, r.request.mem_mib)
        self.slot_milli[slot], self.slot_cpu[slot], self.slot_mem[slot] = values

    def swap_partners(
        self, arrays: ClusterArrays, request: PlacementRequest, mask: np.ndarray, rank: np.ndarray, limit: int
    ) -> list[Resident]:
        """For a fraction: residents smaller than it whose leaving makes room for it on their GPU
        (with CPU and memory), the tightest fit first, then node order. Moving such a resident
        for the request moves free milli between GPUs; chains of them gather it where needed."""
        m = self.slot_milli
        gap = arrays.gpu_free_milli.astype(np.int64)[:, :, None]
        ok = (m > 0) & (m < request.gpu_milli) & (gap + m >= request.gpu_milli)
        ok &= mask[:, None, None]
        ok &= arrays.cpu_free[:, None, None] + self.slot_cpu >= request.cpu_milli
        ok &= arrays.mem_free[:, None, None] + self.slot_mem >= request.mem_mib
        n, g, k = np.nonzero(ok)
        if len(n) == 0:
            return []
        left = gap[n, g, 0] + m[n, g, k] - request.gpu_milli
        order = np.lexsort((rank[n], left))[:limit]
        out = []
        for i in order.tolist():
            key = self.slot_key[(int(n[i]), int(g[i]), int(k[i]))]
            out.append(self.on_node[int(n[i])][key])
        return out

    def placeable(self, arrays: ClusterArrays) -> tuple[set, np.ndarray, np.ndarray, np.ndarray]:
        """The residents that fit somewhere now besides where they are (another node, or another
        GPU of theirs): their keys, and their GPU milli [N, G], CPU [N] and memory [N] per node."""
        keys: set = set()
        milli, cpu, mem = np.zeros_like(self.milli), np.zeros_like(self.cpu), np.zeros_like(self.mem)
        for residents in self.kinds.values():
            if not residents:
                continue
            first = next(iter(residents.values()))
            if not feasible_nodes(arrays, first.request, first.allowed).any():
                continue
            for r in residents.values():
                p = r.placement
                keys.add(r.key)
                milli[p.node, list(p.gpus)] += p.gpu_milli
                cpu[p.node] += r.request.cpu_milli
                mem[p.node] += r.request.mem_mib
        return keys, milli, cpu, mem


def _kind(r: Resident) -> tuple:
    return (r.request, id(r.allowed))


def plan_room(
    arrays: ClusterArrays,
    request: PlacementRequest,
    policy: str,
    movable: MovableSet,
    allowed: np.ndarray | None = None,
    ctx: PlacementContext | None = None,
    nodes: int = ROOM_NODES,
    depth: int = ROOM_DEPTH,
) -> RoomPlan | None:
    """Moves of residents after which `request` fits, or None. `arrays` and `movable` are left as
    they were (the plan is tried on them and undone).

    A node is tried when the request would fit there if its residents left (least GPU milli to
    move first, then node order). On it the fewest residents that make room are chosen (on one
    GPU for a fraction: the set that frees the least milli that is enough); the request is placed
    there, then each displaced resident is placed again anywhere it may run (not where it was) by
    the same policy. A displaced resident that fits nowhere may in turn displace smaller ones
    (`depth` levels, `ROOM_NODES_NESTED` nodes each): chain moves, which also swap pods between
    GPUs. The plan holds only if the request and every displaced resident are placed.
    """
    ctx = ctx if ctx is not None else PlacementContext()
    mask = np.ones(arrays.size, dtype=bool) if allowed is None else allowed
    if int(arrays.gpu_free_milli[mask].sum()) < request.total_gpu_milli:
        return None  # not a fragmentation problem: moving cannot help
    planner = _RoomPlanner(arrays, policy, movable, ctx)
    try:
        placement = planner.make_room(request, mask, depth, nodes, top=True)
        if placement is None:
            return None
        return RoomPlan(placement, tuple((r, new) for r, new in planner.moved if new != r.placement))
    finally:
        planner.undo_all()


def apply_room_plan(arrays: ClusterArrays, request: PlacementRequest, plan: RoomPlan, movable: MovableSet) -> None:
    """Carry out a plan on `arrays` and keep `movable` in step (the request itself is not added)."""
    for r, _ in plan.moves:
        movable.remove(r.key, r.placement.node)
        release(arrays, r.request, r.placement)
    allocate(arrays, request, plan.placement)
    for r, new in plan.moves:
        allocate(arrays, r.request, new)
        movable.add(Resident(r.key, r.request, new, r.allowed))


class _RoomPlanner:
    """Tries a plan on the live arrays with an undo log."""

    def __init__(self, arrays: ClusterArrays, policy: str, movable: MovableSet, ctx: PlacementContext) -> None:
        self.arrays, self.policy, self.movable, self.ctx = arrays, policy, movable, ctx
        self.log: list[Callable[[], None]] = []
        self.moved: list[tuple[Resident, Placement]] = []
        self.failed: set[tuple] = set()  # (request, allowed, depth) that found no room in this plan
        self.budget = ROOM_ATTEMPTS  # placements tried in one plan, chains included

    def undo_to(self, mark: int) -> None:
        while len(self.log) > mark:
            self.log.pop()()

    def undo_all(self) -> None:
        self.undo_to(0)

    def _take(self, request: PlacementRequest, placement: Placement) -> None:
        allocate(self.arrays, request, placement)
        self.log.append(lambda: release(self.arrays, request, placement))

    def _evict(self, r: Resident) -> None:
        self.movable.remove(r.key, r.placement.node)
        release(self.arrays, r.request, r.placement)

        def undo() -> None:
            allocate(self.arrays, r.request, r.placement)
            self.movable.add(r)

        self.log.append(undo)

    def _record(self, r: Resident, new: Placement) -> None:
        self.moved.append((r, new))
        self.log.append(self.moved.pop)

    def make_room(
        self, request: PlacementRequest, mask: np.ndarray, depth: int, nodes: int, top: bool = False
    ) -> Placement | None:
        if self.budget <= 0:
            return None
        self.budget -= 1
        placement = place(self.arrays, request, self.policy, mask, self.ctx)
        if placement is not None:
            self._take(request, placement)
            return placement
        if depth <= 0:
            return None
        memo = (request, id(mask), depth)
        if memo in self.failed:
            return None
        for node, victims in self._scenarios(request, mask, depth, nodes, top):
            mark = len(self.log)
            for r in victims:
                self._evict(r)
            only = np.zeros(self.arrays.size, dtype=bool)
            only[node] = True
            placement = place(self.arrays, request, self.policy, only, self.ctx)
            if placement is not None:
                self._take(request, placement)
                if all(self._move(r, depth - 1) for r in victims):
                    return placement
            self.undo_to(mark)
        self.failed.add(memo)
        return None

    def _scenarios(
        self, request: PlacementRequest, mask: np.ndarray, depth: int, nodes: int, top: bool
    ) -> Iterator[tuple]:
        """(node, residents to evict there) to try in turn. For the waiting request: nodes cleared
        of residents that fit elsewhere now. For a fraction (at any level): one smaller resident
        swapped out of a GPU, which a chain of such swaps places in turn. For the waiting request,
        with levels to spare: nodes cleared of any residents, each then placed by such chains."""
        tried = set()
        if top:
            keys, milli, cpu, mem = self.movable.placeable(self.arrays)
            for node in self._candidates(request, mask, nodes, milli, cpu, mem).tolist():
                tried.add(node)
                victims = self._victims(node, request, keys)
                if victims:
                    yield node, victims
        if request.is_fraction:
            for r in self.movable.swap_partners(self.arrays, request, mask, self.ctx.rank(self.arrays.size), nodes):
                if r.key in self.movable.on_node[r.placement.node]:  # not moved by an earlier try
                    yield r.placement.node, [r]
        if top and depth >= 2:
            m = self.movable
            for node in self._candidates(request, mask, nodes, m.milli, m.cpu, m.mem).tolist():
                if node not in tried:
                    victims = self._victims(node, request, None)
                    if victims:
                        yield node, victims

    def _move(self, r: Resident, depth: int) -> bool:
        """Place an evicted resident again (not on the GPUs it left), displacing others if allowed."""
        mask = np.ones(self.arrays.size, dtype=bool) if r.allowed is None else r.allowed
        new = self.make_room(r.request, mask, depth, ROOM_NODES_NESTED)
        if new is None:
            return False
        self._record(r, new)
        return True

    def _candidates(
        self, request: PlacementRequest, mask: np.ndarray, limit: int, milli: np.ndarray, cpu: np.ndarray,
        mem: np.ndarray,
    ) -> np.ndarray:
        """Nodes where the request fits if their residents that fit elsewhere left (`milli`, `cpu`,
        `mem` per node); least GPU milli to move first, then node order."""
        a = self.arrays
        ok = mask & (a.cpu_free + cpu >= request.cpu_milli) & (a.mem_free + mem >= request.mem_mib)
        ok &= milli.any(axis=1) | (a.cpu_free < request.cpu_milli) | (a.mem_free < request.mem_mib)
        fixed = MILLI - a.gpu_free_milli - milli  # milli held by pods that cannot move now
        if request.is_fraction:
            reachable = a.gpu_present & (MILLI - fixed >= request.gpu_milli)
            ok &= reachable.any(axis=1)
            need = np.where(reachable, np.maximum(0, request.gpu_milli - a.gpu_free_milli), 2 * MILLI).min(axis=1)
        elif request.num_gpus > 0:
            clearable = a.gpu_present & (fixed == 0)
            ok &= clearable.sum(axis=1) >= request.num_gpus
            taken = np.sort(np.where(clearable, MILLI - a.gpu_free_milli, 2 * MILLI), axis=1)
            need = taken[:, : request.num_gpus].sum(axis=1)
        else:
            need = np.maximum(0, request.cpu_milli - a.cpu_free)
        cand = np.flatnonzero(ok)
        order = np.lexsort((self.ctx.rank(a.size)[cand], need[cand]))
        return cand[order[:limit]]

    def _victims(self, node: int, request: PlacementRequest, keys: set | None) -> list[Resident]:
        """The residents (among `keys`; None: any) to evict from `node` so the request fits there,
        biggest first; [] if none do."""
        a = self.arrays
        here = [r for r in self.movable.on_node[node].values() if keys is None or r.key in keys]
        chosen: list[Resident] = []
        if request.is_fraction:
            best: tuple | None = None
            for g in np.flatnonzero(a.gpu_present[node]).tolist():
                on_gpu = [r for r in here if g in r.placement.gpus]
                free = int(a.gpu_free_milli[node, g])
                if free + sum(r.placement.gpu_milli for r in on_gpu) < request.gpu_milli:
                    continue
                for subset in _subsets(on_gpu):
                    freed = free + sum(r.placement.gpu_milli for r in subset)
                    if freed >= request.gpu_milli:
                        key = (freed, len(subset), g)
                        if best is None or key < best[0]:
                            best = (key, subset)
            if best is None:
                return []
            chosen = list(best[1])
        elif request.num_gpus > 0:
            load = {g: [r for r in here if g in r.placement.gpus] for g in np.flatnonzero(a.gpu_present[node]).tolist()}
            held = {g: sum(r.placement.gpu_milli for r in load[g]) for g in load}
            clearable = [g for g in load if int(a.gpu_free_milli[node, g]) + held[g] == MILLI]
            if len(clearable) < request.num_gpus:
                return []
            for g in sorted(clearable, key=lambda g: (MILLI - int(a.gpu_free_milli[node, g]), g))[: request.num_gpus]:
                chosen += [r for r in load[g] if r not in chosen]
        # then CPU and memory: the biggest CPU users first
        cpu = a.cpu_free[node] + sum(r.request.cpu_milli for r in chosen)
        mem = a.mem_free[node] + sum(r.request.mem_mib for r in chosen)
        for r in sorted((r for r in here if r not in chosen), key=lambda r: -r.request.cpu_milli):
            if cpu >= request.cpu_milli and mem >= request.mem_mib:
                break
            chosen.append(r)
            cpu += r.request.cpu_milli
            mem += r.request.mem_mib
        if cpu < request.cpu_milli or mem < request.mem_mib:
            return []
        return sorted(chosen, key=lambda r: -r.request.total_gpu_milli)


def _subsets(items: list[Resident], limit: int = 6) -> Iterator[tuple[Resident, ...]]:
    """Non-empty subsets of a GPU's residents (the first `limit` of them), smallest first."""
    items = items[:limit]
    for k in range(1, len(items) + 1):
        yield from itertools.combinations(items, k)
