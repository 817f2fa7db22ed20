"""GPU selection advice (pure): the memory a model needs, and the job shape that asks for it.

Seed 004's rule of thumb, with phi the model's weights in bytes:
  training (Adam, mixed precision): weights phi + gradients 2 phi + optimizer states 4 phi
  + activations about phi = 8 phi (fp16/bf16: 2 bytes per parameter, so 16 bytes per parameter);
  in plain fp32 (4 bytes) the gradients are phi and the Adam states 2 phi: 5 phi, 20 bytes per parameter.
  inference: weights phi plus about 0.5 phi for activations and the KV cache = 1.5 phi.
Both are floors: long sequences and big batches need more activation memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal, InvalidOperation

from billing.quotes import PoolOffer
from scheduling.core.units import MILLI_PER_GPU
from scheduling.spec.model import JobSpec, RoleSpec

BYTES_PER_PARAM = {"fp32": Decimal(4), "fp16": Decimal(2), "bf16": Decimal(2), "int8": Decimal(1),
                   "int4": Decimal("0.5")}
TASKS = ("training", "inference")
GIB = Decimal(2**30)
# Multiples of the weights (phi), per task and precision family.
TRAINING_PARTS = {
    "mixed": (("weights", Decimal(1)), ("gradients", Decimal(2)), ("optimizer states (Adam)", Decimal(4)),
              ("activations (at least)", Decimal(1))),
    "fp32": (("weights", Decimal(1)), ("gradients", Decimal(1)), ("optimizer states (Adam)", Decimal(2)),
             ("activations (at least)", Decimal(1))),
}
INFERENCE_PARTS = (("weights", Decimal(1)), ("activations and KV cache", Decimal("0.5")))
MAX_PARAMS_B = Decimal(100000)


@dataclass(frozen=True)
class MemoryNeed:
    params_b: Decimal
    task: str
    precision: str
    parts: tuple[tuple[str, Decimal], ...]  # (what, GiB)

    @property
    def gib(self) -> Decimal:
        return sum((gib for _, gib in self.parts), Decimal(0)).quantize(Decimal("0.1"), rounding=ROUND_CEILING)

    @property
    def mib(self) -> int:
        return int((self.gib * 1024).to_integral_value(rounding=ROUND_CEILING))


def parse_params(raw: str | Decimal | float) -> Decimal:
    try:
        value = Decimal(str(raw).strip())
    except (InvalidOperation, ValueError) as error:
        raise ValueError(f"params_b: {raw!r} is not a number of parameters in billions (e.g. 7 or 0.35)") from error
    if not value.is_finite() or value <= 0 or value > MAX_PARAMS_B:
        raise ValueError(f"params_b: must be above 0 and at most {MAX_PARAMS_B} (billions of parameters)")
    return value


def memory_needed(params_b: Decimal | str | float, task: str, precision: str) -> MemoryNeed:
    """GPU memory to train or serve a model of `params_b` billion parameters; errors name the field."""
    params = parse_params(params_b)
    if task not in TASKS:
        raise ValueError(f"task: {task!r} is not one of {', '.join(TASKS)}")
    if precision not in BYTES_PER_PARAM:
        raise ValueError(f"precision: {precision!r} is not one of {', '.join(BYTES_PER_PARAM)}")
    if task == "training":
        if precision in ("int8", "int4"):
            raise ValueError("precision: training needs fp32, fp16 or bf16 (int8 / int4 are for serving)")
        parts = TRAINING_PARTS["fp32" if precision == "fp32" else "mixed"]
    else:
        parts = INFERENCE_PARTS
    weights_gib = params * Decimal(10**9) * BYTES_PER_PARAM[precision] / GIB
    return MemoryNeed(params, task, precision, tuple((what, weights_gib * k) for what, k in parts))


def spec_for_pool(need: MemoryNeed, pool: PoolOffer) -> JobSpec:
    """The job shape that gives `need` on `pool`: a share of one GPU when the memory fits one card
    (the quote then offers fraction, MIG or time-slicing where they honour it), else whole GPUs,
    spread over replicas when one node has too few."""
    name = f"advice-{need.params_b}b-{need.task}"
    common = {"name": "main", "image": "advice", "vendor": "any", "node_pool": pool.name, "cpu_milli": 1000,
              "mem_mib": 4096}
    if need.mib <= pool.gpu_memory_mib:
        milli = max(10, math.ceil(MILLI_PER_GPU * need.mib / pool.gpu_memory_mib / 10) * 10)
        if milli >= MILLI_PER_GPU:
            role = RoleSpec(sharing="exclusive", num_gpus=1, **common)
        else:
            role = RoleSpec(sharing="fraction", num_gpus=1, gpu_milli=milli, gpu_mem_mib=need.mib, **common)
        return JobSpec(name=name, type="single", roles=(role,))
    gpus = math.ceil(need.mib / pool.gpu_memory_mib)
    per_node = max(1, min(gpus, pool.gpus_per_node))
    replicas = math.ceil(gpus / per_node)
    role = RoleSpec(sharing="exclusive", num_gpus=per_node, min_replicas=replicas, max_replicas=replicas, **common)
    return JobSpec(name=name, type="single" if replicas == 1 else "pytorch", roles=(role,))
