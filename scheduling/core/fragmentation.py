"""GPU fragmentation of nodes measured against typical request shapes.

The measure is the one of "Beware of Fragmentation" (FGD, USENIX ATC'23): for each typical
shape m with probability p(m), the free GPU milli of a node that m could not use counts as
fragment.  When m fits on the node (enough GPUs with enough free milli, and CPU), the fragment
is the free milli of the GPUs with less free milli than m asks; when it does not fit, or m is
CPU-only, all free GPU milli of the node is fragment.

    F(node) = sum_m p(m) * frag_m(node) = S - sum_m p(m) * fits_m * big_m

with S the node's free milli and big_m the free milli on GPUs with at least m's milli free.
Everything here is vectorised over nodes (and GPUs), with no Python loop per node.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .units import MILLI_PER_GPU


@dataclass(frozen=True, order=True)
class Shape:
    """A request shape as FGD sees it (GPU memory is not part of it)."""

    cpu_milli: int
    gpu_milli: int  # per GPU, 0 for CPU-only shapes
    num_gpus: int
    models: tuple[str, ...] = ()  # allowed GPU models, sorted; empty = any model

    def __post_init__(self) -> None:
        if self.num_gpus < 0 or self.cpu_milli < 0:
            raise ValueError(f"shape {self}: num_gpus and cpu_milli must be >= 0")
        if self.num_gpus == 0 and self.gpu_milli != 0:
            raise ValueError(f"shape {self}: a CPU-only shape has gpu_milli 0")
        if self.num_gpus > 0 and not 0 < self.gpu_milli <= MILLI_PER_GPU:
            raise ValueError(f"shape {self}: gpu_milli must be in 1..{MILLI_PER_GPU}")


@dataclass(frozen=True)
class ShapeTable:
    """Typical shapes with renormalised probabilities, as arrays for vectorised use."""

    shapes: tuple[Shape, ...]
    probs: np.ndarray  # float64 [K], sums to 1
    gpu_milli: np.ndarray = field(init=False)  # int64 [K]
    num_gpus: np.ndarray = field(init=False)  # int64 [K]
    cpu_milli: np.ndarray = field(init=False)  # int64 [K]
    uses_gpu: np.ndarray = field(init=False)  # bool [K]

    def __post_init__(self) -> None:
        if len(self.shapes) != len(self.probs):
            raise ValueError("ShapeTable: one probability per shape is needed")
        set_ = object.__setattr__  # frozen dataclass: derived arrays are set once here
        set_(self, "probs", np.asarray(self.probs, dtype=np.float64))
        set_(self, "gpu_milli", np.array([s.gpu_milli for s in self.shapes], dtype=np.int64))
        set_(self, "num_gpus", np.array([s.num_gpus for s in self.shapes], dtype=np.int64))
        set_(self, "cpu_milli", np.array([s.cpu_milli for s in self.shapes], dtype=np.int64))
        set_(self, "uses_gpu", self.num_gpus > 0)

    @classmethod
    def from_counts(cls, counts: Mapping[Shape, float], coverage: float = 0.95) -> ShapeTable:
        """The most frequent shapes until they cover `coverage` of all, renormalised."""
        if not counts:
            raise ValueError("ShapeTable.from_counts: no shapes given")
        if not 0 < coverage <= 1:
            raise ValueError(f"coverage must be in (0, 1], got {coverage}")
        total = float(sum(counts.values()))
        # most frequent first; equal counts in a fixed order so the table is deterministic
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        chosen: list[tuple[Shape, float]] = []
        covered = 0.0
        for shape, count in ranked:
            if covered >= coverage:
                break
            chosen.append((shape, count))
            covered += count / total
        weight = sum(c for _, c in chosen)
        return cls(tuple(s for s, _ in chosen), np.array([c / weight for _, c in chosen]))

    @classmethod
    def from_shapes(cls, shapes: Iterable[Shape], coverage: float = 0.95) -> ShapeTable:
        return cls.from_counts(Counter(shapes), coverage)

    @cached_property
    def cpu_per_gpu(self) -> float:
        """Milli-CPU the typical GPU request brings per whole GPU (inf when no shape uses GPUs)."""
        g = self.uses_gpu
        gpu = float((self.probs[g] * self.gpu_milli[g] * self.num_gpus[g]).sum())
        if gpu == 0:
            return float("inf")
        return float((self.probs[g] * self.cpu_milli[g]).sum()) / gpu * MILLI_PER_GPU

    @cached_property
    def constrained(self) -> tuple[tuple[tuple[str, ...], float], ...]:
        """(allowed models, summed probability) of the GPU shapes limited to some models."""
        probs: dict[tuple[str, ...], float] = {}
        for shape, p in zip(self.shapes, self.probs, strict=True):
            if shape.models and shape.num_gpus > 0:
                probs[shape.models] = probs.get(shape.models, 0.0) + float(p)
        return tuple(sorted(probs.items()))

    def access(self, model_id: np.ndarray, model_names: Sequence[str]) -> np.ndarray:
        """bool [N, K]: may shape k run on node n's GPU model."""
        out = np.ones((len(model_id), len(self.shapes)), dtype=bool)
        for k, shape in enumerate(self.shapes):
            if shape.models:
                ids = [i for i, name in enumerate(model_names) if name in shape.models]
                out[:, k] = np.isin(model_id, ids)
        return out


class ShapeTracker:
    """Learns typical shapes online from the requests seen so far (production use).

    The table is rebuilt every `refresh` observations (and at the first ones), so scores that
    depend on it stay cacheable between rebuilds.
    """

    def __init__(self, coverage: float = 0.95, refresh: int = 200, warmup: int = 50) -> None:
        self.coverage = coverage
        self.refresh = refresh
        self.warmup = warmup
        self.counts: Counter[Shape] = Counter()
        self.seen = 0
        self.table: ShapeTable | None = None

    def observe(self, shape: Shape) -> None:
        self.counts[shape] += 1
        self.seen += 1
        if self.table is None or self.seen <= self.warmup or self.seen % self.refresh == 0:
            self.table = ShapeTable.from_counts(self.counts, self.coverage)


@dataclass
class FragTerms:
    """Per-node quantities F is made of, for a subset of nodes."""

    free_total: np.ndarray  # int64 [n]  S
    big: np.ndarray  # int64 [n, K] free milli on GPUs with >= shape milli free
    count: np.ndarray  # int64 [n, K] number of such GPUs


def frag_terms(gpu_free_milli: np.ndarray, table: ShapeTable) -> FragTerms:
    """gpu_free_milli: int [n, G] (absent GPUs hold 0)."""
    free = gpu_free_milli.astype(np.int64)
    ge = free[:, :, None] >= np.maximum(table.gpu_milli, 1)[None, None, :]  # [n, G, K]
    return FragTerms(
        free_total=free.sum(axis=1),
        big=(free[:, :, None] * ge).sum(axis=1),
        count=ge.sum(axis=1),
    )


def frag_value(
    free_total: np.ndarray,
    big: np.ndarray,
    count: np.ndarray,
    cpu_free: np.ndarray,
    access: np.ndarray,
    table: ShapeTable,
) -> np.ndarray:
    """F for any broadcastable leading shape; last axis of big/count/access is K."""
    fits = (
        table.uses_gpu
        & access
        & (count >= table.num_gpus)
        & (cpu_free[..., None] >= table.cpu_milli)
    )
    return free_total - (fits * big * table.probs).sum(axis=-1)


def node_fragmentation(
    gpu_free_milli: np.ndarray, cpu_free: np.ndarray, access: np.ndarray, table: ShapeTable
) -> np.ndarray:
    """F(node) for every row: float64 [n]."""
    t = frag_terms(gpu_free_milli, table)
    return frag_value(t.free_total, t.big, t.count, cpu_free, access, table)


def frag_after_fraction(
    gpu_free_milli: np.ndarray,
    cpu_free: np.ndarray,
    access: np.ndarray,
    table: ShapeTable,
    milli: int,
    cpu: int,
    terms: FragTerms | None = None,
) -> np.ndarray:
    """float64 [n, G]: F of each node after `milli` of GPU g and `cpu` are taken.

    Entries for GPUs with less than `milli` free are meaningless; callers mask them.
    """
    t = terms or frag_terms(gpu_free_milli, table)
    r = np.maximum(table.gpu_milli, 1)[None, None, :]
    before = gpu_free_milli.astype(np.int64)[:, :, None]  # [n, G, 1]
    after = before - milli
    was = before >= r
    now = after >= r
    big = t.big[:, None, :] - before * was + after * now  # [n, G, K]
    count = t.count[:, None, :] - was + now
    free_total = (t.free_total - milli)[:, None]
    return frag_value(free_total, big, count, (cpu_free - cpu)[:, None], access[:, None, :], table)


def frag_after_whole(
    cpu_free: np.ndarray, access: np.ndarray, table: ShapeTable, terms: FragTerms, num_gpus: int, cpu: int
) -> np.ndarray:
    """float64 [n]: F after `num_gpus` fully free GPUs (and `cpu`) are taken (num_gpus may be 0)."""
    taken = MILLI_PER_GPU * num_gpus
    big = terms.big - taken * table.uses_gpu
    count = terms.count - num_gpus * table.uses_gpu
    return frag_value(terms.free_total - taken, big, count, cpu_free - cpu, access, table)


def cpu_stranded(free_total: np.ndarray, cpu_free: np.ndarray, cpu_per_gpu: float) -> np.ndarray:
    """GPU milli a node cannot hand out for lack of CPU, if GPU work keeps its typical CPU ratio.

    FGD only sees CPU through whether each typical shape still fits, so it happily spends a
    node's CPU on pods that bring much CPU per GPU and leaves whole GPUs behind that no pod can
    use.  Counting this amount as fragment too steers CPU-hungry pods to CPU-rich nodes.
    """
    if not np.isfinite(cpu_per_gpu) or cpu_per_gpu <= 0:
        return np.zeros(np.shape(free_total))
    return np.maximum(0.0, free_total - cpu_free * (MILLI_PER_GPU / cpu_per_gpu))


def model_scarcity(table: ShapeTable, model_names: Sequence[str], free_per_model: np.ndarray) -> np.ndarray:
    """float64 [M]: what one milli taken from a node of each model costs the model-limited shapes.

    Taking x milli from a node lowers F by about x (1 - A), A the probability of the shapes that
    may use the node, so F finds a node of a model few shapes are limited to cheap to fill:
    unconstrained pods drift to the small models, and the pods limited to them find them full.
    Counting each limited shape's claim by how scarce its models' capacity is (probability times
    free_total / free_S for the set S of models it may use, instead of its probability alone)
    adds p_S (free_total / free_S - 1) per set S, summed over the sets that include the model.
    Zero for every model when no shape is limited.
    """
    cost = np.zeros(len(model_names))
    if not table.constrained:
        return cost
    total = float(free_per_model.sum())
    index = {name: i for i, name in enumerate(model_names)}
    for models, p in table.constrained:
        ids = [index[m] for m in models if m in index]
        if not ids:
            continue
        free = float(free_per_model[ids].sum())
        cost[ids] += p * (total / max(free, 1.0) - 1.0)
    return cost
