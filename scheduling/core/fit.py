"""Can this pool, node or GPU serve a request, and if not, why: the one place that answers it.

Checks return None when the request fits, else an Unfit: a reason code, its parameters, and the
Request field it is about. The core writes no text: callers store the code and render it late from
the catalogue (scheduling/reasons.py), which also words why a job is pending (`Reason`, built by
`actions`, and the few the scheduling layer sets outside a cycle). Names of
GPU models and vendors are compared as given: callers normalise them once, where they read specs
and pools (see `units`).

Pool-level checks (`check_pool`) say whether one pool serves a request at all; cluster-level
checks (`check_pools`) say which constraint no pool of a cluster can meet, naming what is on
offer. Neither looks at free capacity; `check_gpu` does, for one GPU now.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .model import Pool, Request
from .reasons import Reason
from .units import MILLI_PER_GPU

WHOLE_GPU_MODES = ("exclusive", "fraction")   # modes whose GPU memory the pool must hold


@dataclass(frozen=True)
class PoolTraits:
    """What a pool offers, whatever layer describes it (core Pool, spec PoolInfo, quote PoolOffer)."""

    name: str
    vendor: str
    gpu_model: str
    gpu_memory_mib: int
    sharing: frozenset[str]
    mig_profiles: frozenset[str] = frozenset()
    gpus_per_node: int | None = None          # None: unknown, not checked

    @classmethod
    def of(cls, pool: Pool) -> PoolTraits:
        return cls(pool.name, pool.vendor, pool.gpu_model, pool.gpu_memory_mib, frozenset(pool.sharing),
                   frozenset(pool.mig_layout))


@dataclass(frozen=True)
class Unfit(Reason):
    """Why a request cannot be served: a reason code, its parameters, and the Request field."""

    field: str = ""


def has_gpus(request: Request) -> bool:
    return not (request.mode == "exclusive" and request.num_gpus == 0)


# ---------------------------------------------------------------------- one pool


def check_pool(pool: PoolTraits, request: Request) -> Unfit | None:
    """Whether `pool` serves `request` at all (capacity aside)."""
    return check_pool_identity(pool, request) or check_pool_shape(pool, request)


def check_pool_identity(pool: PoolTraits, request: Request) -> Unfit | None:
    """The hard pins: the pool asked for by name, the vendor and the GPU model."""
    if request.pool and request.pool != pool.name:
        return Unfit("pool_pinned_elsewhere", {"pool": pool.name, "requested": request.pool}, "pool")
    if request.vendor != "any" and request.vendor != pool.vendor:
        return Unfit("pool_vendor_differs", {"vendor": request.vendor, "pool_vendor": pool.vendor}, "vendor")
    if request.gpu_model and request.gpu_model != pool.gpu_model:
        return Unfit("pool_model_differs", {"model": request.gpu_model, "pool_model": pool.gpu_model}, "gpu_model")
    return None


def check_pool_shape(pool: PoolTraits, request: Request) -> Unfit | None:
    """How the request shares a GPU: the mode, the MIG profile and the GPU memory."""
    if request.mode not in pool.sharing:
        return Unfit("pool_sharing_not_offered", {"sharing": request.mode, "offered": sorted(pool.sharing)}, "mode")
    if request.mode == "mig" and request.mig_profile not in pool.mig_profiles:
        return Unfit("pool_mig_profile_not_offered",
                     {"profile": request.mig_profile, "offered": sorted(pool.mig_profiles)}, "mig_profile")
    if request.mode in WHOLE_GPU_MODES and request.gpu_mem_mib > pool.gpu_memory_mib:
        return Unfit("pool_gpu_memory_too_small",
                     {"asked_mib": request.gpu_mem_mib, "pool_mib": pool.gpu_memory_mib}, "gpu_mem_mib")
    return None


# ---------------------------------------------------------------------- a whole cluster


def check_pools(pools: Sequence[PoolTraits], request: Request) -> Unfit | None:
    """The first constraint of `request` that no pool of the cluster can meet, naming what is on
    offer; None when some pool serves it. Narrows pool by pool: name, model, vendor, sharing,
    MIG profile, GPUs per node, GPU memory."""
    candidates = list(pools)
    if request.pool:
        candidates = [p for p in pools if p.name == request.pool]
        if not candidates:
            names = sorted({p.name for p in pools})
            return Unfit("pool_unknown", {"pool": request.pool, "pools": names,
                                          "suggestion": closest(request.pool, names)}, "pool")
    if not has_gpus(request):
        return None                          # CPU-only: any pool's nodes will do
    if not pools:
        return Unfit("no_gpu_pools", {}, "num_gpus")

    if request.gpu_model:
        models = sorted({p.gpu_model for p in pools})
        if request.gpu_model not in models:
            return Unfit("gpu_model_not_offered", {"model": request.gpu_model, "offered": models,
                                                   "suggestion": closest(request.gpu_model, models)}, "gpu_model")
        matching = [p for p in candidates if p.gpu_model == request.gpu_model]
        if not matching:
            return Unfit("pool_has_other_model", {"pool": request.pool, "pool_model": candidates[0].gpu_model,
                                                  "model": request.gpu_model}, "gpu_model")
        candidates = matching

    matching = [p for p in candidates if request.vendor in ("any", p.vendor)]
    if not matching:
        found = sorted({p.vendor for p in candidates})
        if request.vendor == "nvidia":
            return Unfit("amd_not_allowed", {"pool": request.pool, "model": request.gpu_model, "found": found},
                         "vendor")
        return Unfit("vendor_not_offered", {"vendor": request.vendor, "found": found}, "vendor")
    candidates = matching

    matching = [p for p in candidates if request.mode in p.sharing]
    if not matching:
        return Unfit("sharing_not_offered", {
            "sharing": request.mode, "offered": sorted({m for p in candidates for m in p.sharing}),
            "pool": request.pool, "model": request.gpu_model, "vendor": request.vendor}, "mode")
    candidates = matching

    if request.mode == "mig":
        matching = [p for p in candidates if request.mig_profile in p.mig_profiles]
        if not matching:
            return Unfit("mig_profile_not_offered", {
                "profile": request.mig_profile, "offered": sorted({m for p in pools for m in p.mig_profiles}),
                "narrowed": bool(request.pool or request.gpu_model)}, "mig_profile")
        candidates = matching

    sized = [p for p in candidates if p.gpus_per_node != 0]  # a pool no node has joined yet bounds nothing
    known = [p.gpus_per_node for p in sized if p.gpus_per_node is not None]
    if known and len(known) == len(sized) and request.num_gpus > max(known):
        return Unfit("too_many_gpus", {"gpus": request.num_gpus, "most": max(known)}, "num_gpus")

    if request.mode in WHOLE_GPU_MODES and request.gpu_mem_mib:
        largest = max(p.gpu_memory_mib for p in candidates)
        if request.gpu_mem_mib > largest:
            return Unfit("gpu_memory_too_large", {"asked_mib": request.gpu_mem_mib, "largest_mib": largest},
                         "gpu_mem_mib")
    return None


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The choice `word` probably meant (same letters in another case, or a near spelling)."""
    options = list(choices)
    folded = {c.casefold(): c for c in options}
    if word.casefold() in folded:
        return folded[word.casefold()]
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return close[0] if close else None


# ---------------------------------------------------------------------- one node, one GPU, now


def check_gpu(request: Request, *, free_milli: int = 0, free_mem_mib: int = 0, free_mig: Sequence[str] = (),
              free_slots: int = 0, node_free_whole: int = 0) -> Unfit | None:
    """Whether one replica of `request` could use this GPU's free room now (pool rules aside).
    An exclusive ask needs this GPU wholly free and enough wholly free GPUs on its node."""
    if request.mode == "exclusive":
        if not has_gpus(request):
            return Unfit("no_gpu_asked", {}, "num_gpus")
        if free_milli != MILLI_PER_GPU or node_free_whole < request.num_gpus:
            return Unfit("whole_gpus_busy", {"asked": request.num_gpus, "free": node_free_whole}, "num_gpus")
        return None
    if request.mode == "fraction":
        if free_milli < request.gpu_milli:
            return Unfit("gpu_share_busy", {"asked": request.gpu_milli, "free": free_milli}, "gpu_milli")
        if free_mem_mib < request.gpu_mem_mib:
            return Unfit("gpu_memory_busy", {"asked_mib": request.gpu_mem_mib, "free_mib": free_mem_mib},
                         "gpu_mem_mib")
        return None
    if request.mode == "mig":
        if request.mig_profile not in free_mig:
            return Unfit("mig_instance_busy", {"profile": request.mig_profile}, "mig_profile")
        return None
    if free_slots < 1:
        return Unfit("timeslice_slots_busy", {}, "num_gpus")
    return None

