"""GPU selection advice: the job shape that asks for the memory a model needs on a pool.

The memory rules (seed 004's bytes per parameter, the KV cache of a served model) and the smallest
slice that holds a need are pure and shared with serving: `scheduling/serving/memory.py`.
"""

from __future__ import annotations

import math

from django.utils.translation import gettext_lazy as _

from billing.api import PoolOffer
from scheduling import kinds
from scheduling.api import (  # noqa: F401 - re-exported to the console's views and tests
    BYTES_PER_PARAM,
    TASKS,
    JobSpec,
    MemoryNeed,
    RoleSpec,
    fit_slice,
    memory_needed,
    parse_params,
)

# The memory rule's parts (scheduling/serving/memory.py) as the page names them.
PART_NAMES = {
    "weights": _("weights"), "gradients": _("gradients"), "optimizer states (Adam)": _("optimizer states (Adam)"),
    "activations (at least)": _("activations (at least)"), "activations and KV cache": _("activations and KV cache"),
    "runtime (CUDA context, activations)": _("runtime (CUDA context, activations)"),
}


def part_name(what: str) -> str:
    return str(PART_NAMES.get(what, what))


def spec_for_pool(need: MemoryNeed, pool: PoolOffer) -> JobSpec:
    """The job shape that gives `need` on `pool`: a share of one GPU when the memory fits one card
    (the quote then offers fraction, MIG or time-slicing where they honour it), else whole GPUs,
    spread over replicas when one node has too few."""
    name = f"advice-{need.params_b}b-{need.task}"
    common = {"name": "main", "image": "advice", "vendor": "any", "node_pool": pool.name, "cpu_milli": 1000,
              "mem_mib": 4096}
    fit = fit_slice(need.mib, pool.gpu_memory_mib)
    if fit.whole_gpus <= 1:
        if fit.fraction_milli is None:
            role = RoleSpec(sharing="exclusive", num_gpus=1, **common)
        else:
            role = RoleSpec(sharing="fraction", num_gpus=1, gpu_milli=fit.fraction_milli, gpu_mem_mib=need.mib,
                            **common)
        return JobSpec(name=name, type=kinds.DEFAULT_LAUNCH_TYPE, roles=(role,))
    per_node = max(1, min(fit.whole_gpus, pool.gpus_per_node))
    replicas = math.ceil(fit.whole_gpus / per_node)
    role = RoleSpec(sharing="exclusive", num_gpus=per_node, min_replicas=replicas, max_replicas=replicas, **common)
    return JobSpec(name=name, type=kinds.DEFAULT_LAUNCH_TYPE if replicas == 1 else kinds.DISTRIBUTED_LAUNCH_TYPE, roles=(role,))
