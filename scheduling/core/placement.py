"""Choosing a node and GPUs for one request, vectorised over nodes with numpy.

`place()` is the one entry point: the scheduling cycle and the trace benchmark both call it.
Policies:

- ``binpack``: fill the node with the least free GPU milli left (then the least CPU).
- ``spread``: the opposite, most free GPU milli left.
- ``frag``: fragmentation-aware: FGD's score over a fragmentation that also counts the GPU
  milli a node strands for lack of CPU and, when some typical shapes may use only some GPU
  models, what taking a scarce model's capacity costs them (see `fragmentation.py`,
  bench/PLACEMENT.md).
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from scheduling.core.fragmentation import (
    Shape,
    ShapeTable,
    ShapeTracker,
    cpu_stranded,
    frag_after_fraction,
    frag_after_whole,
    frag_terms,
    frag_value,
    model_scarcity,
)
from scheduling.core.units import MILLI_PER_GPU

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
        if any(not 0 <= m <= MILLI_PER_GPU for m in self.gpu_free_milli):
            raise ValueError(f"node {self.name}: gpu_free_milli entries must be in 0..{MILLI_PER_GPU}")
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
            (MILLI_PER_GPU,) * num_gpus, (gpu_total_mem_mib,) * num_gpus, cpu_milli, mem_mib,
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
    # GPUs per node that fit a kind of request (`_fit_count`), with the rows' versions they were counted at
    _fit: dict = field(default_factory=dict, repr=False, compare=False)

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
        return self.gpu_present & (self.gpu_free_milli == MILLI_PER_GPU) & (self.gpu_free_mem == self.gpu_total_mem[:, None])


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
        if self.num_gpus > 0 and not 0 < self.gpu_milli <= MILLI_PER_GPU:
            raise ValueError(f"gpu_milli must be in 1..{MILLI_PER_GPU}, got {self.gpu_milli}")
        if self.num_gpus > 1 and self.gpu_milli != MILLI_PER_GPU:
            raise ValueError(f"a fraction ({self.gpu_milli} milli) can only be asked of one GPU, not {self.num_gpus}")
        for name in ("gpu_mem_mib", "cpu_milli", "mem_mib"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")

    @property
    def is_fraction(self) -> bool:
        return self.num_gpus == 1 and self.gpu_milli < MILLI_PER_GPU

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
    _rng: np.random.Generator | None = field(default=None, init=False, repr=False)
    _rank: np.ndarray | None = field(default=None, init=False, repr=False)
    _caches: dict = field(default_factory=dict, init=False, repr=False)
    _fallback_tables: dict = field(default_factory=dict, init=False, repr=False)

    @property
    def rng(self) -> np.random.Generator:
        # made on first use: a session makes a context every cycle and only the `random` policy draws
        if self._rng is None:
            self._rng = np.random.default_rng(self.seed)
        return self._rng

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
    return present & (free_milli == MILLI_PER_GPU) & (free_mem == arrays.gpu_total_mem[rows][:, None])


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
        ok &= _fit_count(arrays, request) >= request.num_gpus
    return ok


def _fit_count(arrays: ClusterArrays, request: PlacementRequest) -> np.ndarray:
    """int [N]: GPUs per node this request could use (`_gpu_fit` summed). Kept in `arrays` per kind of
    request (whole GPUs; a fraction's milli and memory): only rows whose `version` changed since are
    counted again."""
    key = (request.gpu_milli, request.gpu_mem_mib) if request.is_fraction else None
    found = arrays._fit.get(key)
    if found is None or len(found[0]) != arrays.size:
        count = _gpu_fit(arrays, request).sum(axis=1)
        arrays._fit[key] = (arrays.version.copy(), count)
        return count
    version, count = found
    stale = np.flatnonzero(version != arrays.version)
    if len(stale):
        count[stale] = _gpu_fit(arrays, request, stale).sum(axis=1)
        version[stale] = arrays.version[stale]
    return count


# --------------------------------------------------------------------------- GPU choice in a node


def _first_free(arrays: ClusterArrays, node: int, request: PlacementRequest) -> tuple[int, ...]:
    # the node's row alone (`fully_free` of that row)
    free = np.flatnonzero(arrays.gpu_present[node] & (arrays.gpu_free_milli[node] == MILLI_PER_GPU)
                          & (arrays.gpu_free_mem[node] == arrays.gpu_total_mem[node]))
    return tuple(int(g) for g in free[: request.num_gpus])


def _fraction_gpu(arrays: ClusterArrays, node: int, request: PlacementRequest, most_free: bool) -> int:
    """The fitting GPU with the least (or most) free milli; ties to the lowest index."""
    fit = _gpu_fit(arrays, request, [node])[0]
    free = np.where(fit, arrays.gpu_free_milli[node], -1 if most_free else MILLI_PER_GPU + 1)
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
    # `_score_frag`'s per-node part (`frag_best`): valid for the rows whose `score_version` matches
    score_version: np.ndarray | None = None  # int64 [N]
    best: np.ndarray | None = None  # float64 [N]: the best GPU's delta plus the CPU-stranded change
    gpu: np.ndarray | None = None  # int64 [N]: that GPU (argmax of the row's delta)


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
    table, cache = _frag_cache(arrays, request, ctx)
    stale = cand[cache.version[cand] != arrays.version[cand]]
    if len(stale):
        cache.delta[stale] = _frag_delta(arrays, request, stale, cache.access[stale], table)
        cache.version[stale] = arrays.version[stale]
    return cache.delta[cand]


def _frag_cache(arrays: ClusterArrays, request: PlacementRequest, ctx: PlacementContext) -> tuple[ShapeTable, _FragCache]:
    """The request's table and its `_FragCache` in `ctx` (made empty when there is none)."""
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
    return table, cache


def frag_best(
    arrays: ClusterArrays, request: PlacementRequest, cand: np.ndarray, ctx: PlacementContext
) -> tuple[np.ndarray, np.ndarray]:
    """Per candidate node: the GPU leaving the least fragmentation (argmax of `frag_deltas`' row) and its
    delta plus the change in GPU milli stranded for lack of CPU (`_score_frag`'s score before scarcity).
    Each node's figures depend on its own row only: cached with the deltas, recomputed for the rows whose
    `arrays.version` changed."""
    table, cache = _frag_cache(arrays, request, ctx)
    if cache.score_version is None:
        cache.score_version = np.full(arrays.size, -1, dtype=np.int64)
        cache.best = np.zeros(arrays.size)
        cache.gpu = np.zeros(arrays.size, dtype=np.int64)
    stale = cand[cache.score_version[cand] != arrays.version[cand]]
    if len(stale):
        delta = frag_deltas(arrays, request, stale, ctx)
        gpu = np.argmax(delta, axis=1)
        ratio = table.cpu_per_gpu
        free_total = arrays.gpu_free_milli[stale].sum(axis=1, dtype=np.int64)
        cpu = arrays.cpu_free[stale]
        stranded = cpu_stranded(free_total, cpu, ratio) - cpu_stranded(
            free_total - request.total_gpu_milli, cpu - request.cpu_milli, ratio
        )
        cache.best[stale] = delta[np.arange(len(stale)), gpu] + stranded
        cache.gpu[stale] = gpu
        cache.score_version[stale] = arrays.version[stale]
    return cache.best[cand], cache.gpu[cand]


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
    best, gpu = frag_best(arrays, request, cand, ctx)
    table = _table_for(request, ctx)
    if table.constrained and request.num_gpus > 0:
        best -= _scarcity_cost(arrays, request, cand, table)
    # keep FGD's coarse integer score: its ties, settled by the node order, spread pods usefully
    return _fgd_score(best), _gpus_from_delta(arrays, request, cand, gpu)


def _scarcity_cost(arrays: ClusterArrays, request: PlacementRequest, cand: np.ndarray, table: ShapeTable) -> np.ndarray:
    """Milli-equivalent cost of taking capacity the model-limited shapes of `table` will need.

    Relative to the cheapest candidate model, so a pod that may use one model only is scored as before.
    """
    free = np.bincount(arrays.model_id, weights=arrays.gpu_free_milli.sum(axis=1), minlength=len(arrays.model_names))
    cost = model_scarcity(table, arrays.model_names, free)[arrays.model_id[cand]]
    return request.total_gpu_milli * (cost - cost.min())


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
    return Placement(node, gpus, MILLI_PER_GPU if gpus else 0, int(arrays.gpu_total_mem[node]) if gpus else 0)


def allocate(arrays: ClusterArrays, request: PlacementRequest, placement: Placement) -> None:
    """Take the placement's capacity from `arrays`; raises ValueError if it is not free."""
    n, gpus = placement.node, list(placement.gpus)
    if len(gpus) != request.num_gpus:
        raise ValueError(f"placement lists {len(gpus)} GPUs, the request asks for {request.num_gpus}")
    if arrays.cpu_free[n] < request.cpu_milli or arrays.mem_free[n] < request.mem_mib:
        raise ValueError(f"node {arrays.names[n]}: not enough CPU or memory free")
    if len(gpus) == 1 and 0 <= gpus[0] < arrays.gpu_present.shape[1]:
        # one scalar check and update: numpy's fancy indexing costs many times as much (the common case)
        g = gpus[0]
        if not arrays.gpu_present[n, g]:
            raise ValueError(f"node {arrays.names[n]}: GPU index {gpus} not present")
        if arrays.gpu_free_milli[n, g] < placement.gpu_milli or arrays.gpu_free_mem[n, g] < placement.gpu_mem_mib:
            raise ValueError(f"node {arrays.names[n]}: GPUs {gpus} do not have the placement's share free")
        arrays.cpu_free[n] -= request.cpu_milli
        arrays.mem_free[n] -= request.mem_mib
        arrays.gpu_free_milli[n, g] -= placement.gpu_milli
        arrays.gpu_free_mem[n, g] -= placement.gpu_mem_mib
        arrays.version[n] += 1
        return
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
    if len(gpus) == 1 and 0 <= gpus[0] < arrays.gpu_free_milli.shape[1]:
        # the common case with scalars, as `allocate`
        g = gpus[0]
        if (
            arrays.cpu_free[n] + request.cpu_milli > arrays.cpu_total[n]
            or arrays.mem_free[n] + request.mem_mib > arrays.mem_total[n]
            or arrays.gpu_free_milli[n, g] + placement.gpu_milli > MILLI_PER_GPU
            or arrays.gpu_free_mem[n, g] + placement.gpu_mem_mib > arrays.gpu_total_mem[n]
        ):
            raise ValueError(f"node {arrays.names[n]}: releasing {placement} would exceed the node's capacity")
        arrays.cpu_free[n] += request.cpu_milli
        arrays.mem_free[n] += request.mem_mib
        arrays.gpu_free_milli[n, g] += placement.gpu_milli
        arrays.gpu_free_mem[n, g] += placement.gpu_mem_mib
        arrays.version[n] += 1
        return
    if (
        arrays.cpu_free[n] + request.cpu_milli > arrays.cpu_total[n]
        or arrays.mem_free[n] + request.mem_mib > arrays.mem_total[n]
        or (arrays.gpu_free_milli[n, gpus] + placement.gpu_milli > MILLI_PER_GPU).any()
        or (arrays.gpu_free_mem[n, gpus] + placement.gpu_mem_mib > arrays.gpu_total_mem[n]).any()
    ):
        raise ValueError(f"node {arrays.names[n]}: releasing {placement} would exceed the node's capacity")
    arrays.cpu_free[n] += request.cpu_milli
    arrays.mem_free[n] += request.mem_mib
    arrays.gpu_free_milli[n, gpus] += placement.gpu_milli
    arrays.gpu_free_mem[n, gpus] += placement.gpu_mem_mib
    arrays.version[n] += 1
