"""GPU advice for inference, for a tenant: the memory a model needs to serve a context length to a number
of concurrent sequences (weights + KV cache + runtime, `scheduling/serving/memory.py`), and on each pool
the tenant's workspaces can use the smallest fraction, MIG profile or number of whole GPUs that holds it.

Pools are shared by every workspace: a workspace can use them all once a queue is open to it, none
without one. The page (`portal/pages/advice.py`) and the API (`portal/api/advice.py`) read the same
`InferenceAdvice`.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from scheduling.api import (
    MAX_CONCURRENCY,
    MAX_CONTEXT,
    MILLI_PER_GPU,
    MemoryNeed,
    PoolInfo,
    fit_slice,
    format_memory,
    inference_memory,
    model_shape,
)
from scheduling.api import selectors as scheduling_selectors
from scheduling.models import QueueAccess

PRECISIONS = ("fp16", "bf16", "fp8", "int8", "int4")
MAX_LAYERS = 1000
MAX_HIDDEN = 1_000_000
DEFAULTS = {"params_b": "7", "precision": "fp16", "context": "4096", "concurrency": "1"}


@dataclass(frozen=True)
class PoolFit:
    """What holds the need on one pool. Each mode is None where the pool does not offer it;
    `fraction_gpu` / `mig_profile` / `whole_gpus` None also where no slice of that mode holds it."""

    pool: str
    vendor: str
    gpu_model: str
    gpu_memory_mib: int
    gpus_per_node: int
    modes: tuple[str, ...]
    fraction_gpu: Decimal | None          # share of one card, steps of 0.01, its memory reserved
    mig_profile: str | None               # the smallest of the pool's profiles that holds it
    whole_gpus: int | None                # whole cards in one replica
    timeslice: bool | None                # a time-sliced slot on a card with the memory (not isolated)
    fits_one_node: bool                   # the whole cards fit one node (a replica runs on one node)
    smallest: str                         # fraction | mig | exclusive | timeslice | none
    spec_lines: str                       # what the inference spec asks for it, as YAML

    @property
    def gpu_memory_gib(self) -> Decimal:
        return (Decimal(self.gpu_memory_mib) / 1024).normalize()

    def to_json(self) -> dict[str, Any]:
        return {
            "pool": self.pool, "vendor": self.vendor, "gpu_model": self.gpu_model,
            "gpu_memory_mib": self.gpu_memory_mib, "gpus_per_node": self.gpus_per_node, "modes": list(self.modes),
            "fraction_gpu": None if self.fraction_gpu is None else format(self.fraction_gpu, "f"),
            "mig_profile": self.mig_profile, "whole_gpus": self.whole_gpus, "timeslice": self.timeslice,
            "fits_one_node": self.fits_one_node, "smallest": self.smallest, "spec": self.spec_lines,
        }


@dataclass(frozen=True)
class InferenceAdvice:
    need: MemoryNeed
    context: int
    concurrency: int
    layers: int
    hidden: int
    shape_given: bool                     # layers or hidden came from the caller, not only the rule of thumb
    pools: tuple[PoolFit, ...]

    @property
    def weights_gib(self) -> Decimal:
        return self.need.parts[0][1]

    @property
    def kv_cache_gib(self) -> Decimal:
        return self.need.parts[1][1]

    @property
    def runtime_gib(self) -> Decimal:
        return self.need.parts[2][1] if len(self.need.parts) > 2 else Decimal(0)

    def to_json(self) -> dict[str, Any]:
        places = Decimal("0.01")
        return {
            "params_b": format(self.need.params_b, "f"), "precision": self.need.precision,
            "context": self.context, "concurrency": self.concurrency,
            "layers": self.layers, "hidden": self.hidden, "shape": "given" if self.shape_given else "rule of thumb",
            "memory": {"total_gib": format(self.need.gib, "f"), "total_mib": self.need.mib,
                       "weights_gib": format(self.weights_gib.quantize(places), "f"),
                       "kv_cache_gib": format(self.kv_cache_gib.quantize(places), "f"),
                       "runtime_gib": format(self.runtime_gib.quantize(places), "f")},
            "pools": [p.to_json() for p in self.pools],
        }


def _spec_lines(smallest: str, fit, need_mib: int) -> str:
    if smallest == "fraction":
        return f"sharing: fraction\nresources: {{gpu: {fit.fraction_milli / MILLI_PER_GPU:g}, " \
               f"gpuMemory: {format_memory(need_mib)}}}"
    if smallest == "mig":
        return f"sharing: mig\nresources: {{mig: {fit.mig_profile}}}"
    if smallest == "exclusive":
        return f"sharing: exclusive\nresources: {{gpu: {fit.whole_gpus}}}"
    if smallest == "timeslice":
        return "sharing: timeslice\nresources: {gpu: 1}"
    return ""


def pool_fit(need_mib: int, pool: PoolInfo) -> PoolFit:
    """The smallest slices of `pool` that hold `need_mib` of GPU memory, by sharing mode."""
    modes = tuple(m for m in ("fraction", "mig", "exclusive", "timeslice") if m in pool.sharing_modes)
    fit = fit_slice(need_mib, pool.gpu_memory_mib, pool.mig_profiles)
    fraction = (Decimal(fit.fraction_milli) / MILLI_PER_GPU if "fraction" in modes and fit.fraction_milli
                else None)
    mig = fit.mig_profile if "mig" in modes else None
    whole = fit.whole_gpus if "exclusive" in modes else None
    timeslice = fit.whole_gpus == 1 if "timeslice" in modes else None
    one_node = fit.whole_gpus <= pool.gpus_per_node
    if fraction is not None:
        smallest = "fraction"
    elif mig is not None:
        smallest = "mig"
    elif whole is not None and one_node:
        smallest = "exclusive"
    elif timeslice:
        smallest = "timeslice"
    else:
        smallest = "none"
    return PoolFit(pool.name, pool.vendor, pool.gpu_model, pool.gpu_memory_mib, pool.gpus_per_node, modes,
                   fraction, mig, whole, timeslice, one_node, smallest, _spec_lines(smallest, fit, need_mib))


def pools_for_user(user) -> list[PoolInfo]:
    """The pools the user's workspaces can use: every pool with GPUs, once one of them has a queue."""
    if not QueueAccess.objects.filter(workspace__memberships__user=user).exists():
        return []
    return [p for p in scheduling_selectors.cluster_info().pools if p.gpus_per_node > 0]


def inference_advice(user, *, params_b, precision: str, context: int, concurrency: int,
                     layers: int | None = None, hidden: int | None = None) -> InferenceAdvice:
    """The memory and every usable pool's fit; ValueError naming the field for input out of range."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision: {precision!r} is not one of {', '.join(PRECISIONS)}")
    need = inference_memory(params_b, precision, context, concurrency, layers=layers, hidden=hidden)
    guess_layers, guess_hidden = model_shape(params_b)
    fits = tuple(pool_fit(need.mib, pool) for pool in pools_for_user(user))
    return InferenceAdvice(need, context, concurrency, layers or guess_layers, hidden or guess_hidden,
                           layers is not None or hidden is not None, fits)


LIMITS = {"context": MAX_CONTEXT, "concurrency": MAX_CONCURRENCY, "layers": MAX_LAYERS, "hidden": MAX_HIDDEN}
