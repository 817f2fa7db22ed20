"""GPU memory a model needs, and the smallest GPU slice that holds it (pure; no Django).

Seed 004's rule of thumb, with phi the model's weights in bytes (P billion parameters times the
bytes per parameter of the precision: fp32 4, fp16 / bf16 2, fp8 / int8 1, int4 0.5):
  training (Adam, mixed precision): weights phi + gradients 2 phi + optimizer states 4 phi
  + activations about phi = 8 phi (fp16/bf16: 2 bytes per parameter, so 16 bytes per parameter);
  in plain fp32 (4 bytes) the gradients are phi and the Adam states 2 phi: 5 phi, 20 bytes per parameter.
  inference, by model size alone: weights phi plus about 0.5 phi for activations and the KV cache = 1.5 phi.
Both are floors: long sequences and big batches need more activation memory.

Inference for a stated context and concurrency (`inference_memory`) counts the KV cache instead:
  weights  = P x 10^9 x bytes per parameter
  KV cache = 2 (keys and values) x layers x hidden x KV bytes x tokens,
             tokens = context length x concurrent sequences; KV bytes = 2 (fp16 cache), 4 for fp32 models
  runtime  = overhead_gib (CUDA context, one batch's activations; 1 GiB unless the caller says)
Layers and hidden size come from the caller, else from P by the rule of thumb of decoder-only
transformers, P = 12 x layers x hidden^2 with hidden = 128 x layers (Llama-2 7B: 32 x 4096, 13B:
40 x 5120): layers = round((P x 10^9 / (12 x 128^2))^(1/3)), hidden = 128 x layers. Grouped-query
attention makes the real KV cache smaller: give the KV width as `hidden` for such models.

`fit_slice` gives the smallest share of a GPU of a given memory that holds a need: a fraction in
steps of 0.01 GPU (memory share rounded up), whole GPUs past one card, and the smallest MIG
profile of the ones offered whose memory holds it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal, InvalidOperation

from scheduling.core.model import MIG_PROFILES
from scheduling.core.units import MILLI_PER_GPU

BYTES_PER_PARAM = {"fp32": Decimal(4), "fp16": Decimal(2), "bf16": Decimal(2), "fp8": Decimal(1),
                   "int8": Decimal(1), "int4": Decimal("0.5")}
# What the memory is estimated for (not workload kinds: a notebook may estimate either)
TRAINING_TASK, INFERENCE_TASK = "training", "inference"
TASKS = (TRAINING_TASK, INFERENCE_TASK)
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
HIDDEN_PER_LAYER = 128
PARAMS_PER_LAYER_HIDDEN2 = 12
MAX_CONTEXT = 10_000_000
MAX_CONCURRENCY = 100_000
DEFAULT_OVERHEAD_GIB = Decimal(1)


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


def _check_precision(precision: str) -> None:
    if precision not in BYTES_PER_PARAM:
        raise ValueError(f"precision: {precision!r} is not one of {', '.join(BYTES_PER_PARAM)}")


def memory_needed(params_b: Decimal | str | float, task: str, precision: str) -> MemoryNeed:
    """GPU memory to train or serve a model of `params_b` billion parameters; errors name the field."""
    params = parse_params(params_b)
    if task not in TASKS:
        raise ValueError(f"task: {task!r} is not one of {', '.join(TASKS)}")
    _check_precision(precision)
    if task == TRAINING_TASK:
        if precision in ("fp8", "int8", "int4"):
            raise ValueError("precision: training needs fp32, fp16 or bf16 (fp8, int8 and int4 are for serving)")
        parts = TRAINING_PARTS["fp32" if precision == "fp32" else "mixed"]
    else:
        parts = INFERENCE_PARTS
    weights_gib = params * Decimal(10**9) * BYTES_PER_PARAM[precision] / GIB
    return MemoryNeed(params, task, precision, tuple((what, weights_gib * k) for what, k in parts))


def model_shape(params_b: Decimal | str | float) -> tuple[int, int]:
    """(layers, hidden) of a decoder-only transformer of that size, by the rule of thumb above."""
    params = float(parse_params(params_b)) * 10**9
    layers = max(1, round((params / (PARAMS_PER_LAYER_HIDDEN2 * HIDDEN_PER_LAYER**2)) ** (1 / 3)))
    return layers, HIDDEN_PER_LAYER * layers


def _whole(name: str, value: int | None, hi: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= hi:
        raise ValueError(f"{name}: must be a whole number from 1 to {hi}")
    return value


def kv_cache_bytes(layers: int, hidden: int, tokens: int, kv_bytes: int = 2) -> int:
    """2 (K and V) x layers x hidden x bytes x tokens."""
    return 2 * layers * hidden * kv_bytes * tokens


def inference_memory(params_b: Decimal | str | float, precision: str, context: int, concurrency: int = 1, *,
                     layers: int | None = None, hidden: int | None = None,
                     overhead_gib: Decimal = DEFAULT_OVERHEAD_GIB) -> MemoryNeed:
    """Memory to serve the model to `concurrency` sequences of `context` tokens each (weights + KV cache +
    runtime); errors name the field."""
    params = parse_params(params_b)
    _check_precision(precision)
    _whole("context", context, MAX_CONTEXT)
    _whole("concurrency", concurrency, MAX_CONCURRENCY)
    _whole("layers", layers, 1000)
    _whole("hidden", hidden, 1_000_000)
    if overhead_gib < 0:
        raise ValueError("overhead_gib: must be at least 0")
    guess_layers, guess_hidden = model_shape(params)
    layers, hidden = layers or guess_layers, hidden or guess_hidden
    kv_bytes = 4 if precision == "fp32" else 2
    weights = params * Decimal(10**9) * BYTES_PER_PARAM[precision] / GIB
    kv = Decimal(kv_cache_bytes(layers, hidden, context * concurrency, kv_bytes)) / GIB
    parts = [("weights", weights),
             (f"KV cache ({concurrency} x {context} tokens, {layers} layers x {hidden})", kv)]
    if overhead_gib:
        parts.append(("runtime (CUDA context, activations)", Decimal(overhead_gib)))
    return MemoryNeed(params, INFERENCE_TASK, precision, tuple(parts))


@dataclass(frozen=True)
class SliceFit:
    """The smallest slices of one GPU type that hold a need. fraction_milli: the share of one card
    (memory share rounded up to 0.01 GPU; None when a whole card or more is needed); whole_gpus: whole
    cards (1 when a fraction fits); mig_profile: the smallest offered MIG profile that holds it, or None."""

    need_mib: int
    gpu_memory_mib: int
    fraction_milli: int | None
    whole_gpus: int
    mig_profile: str | None


def fit_slice(need_mib: int, gpu_memory_mib: int, mig_profiles: Iterable[str] = ()) -> SliceFit:
    if need_mib <= 0 or gpu_memory_mib <= 0:
        raise ValueError("need_mib and gpu_memory_mib must be above 0")
    whole = math.ceil(need_mib / gpu_memory_mib)
    milli = max(10, math.ceil(MILLI_PER_GPU * need_mib / gpu_memory_mib / 10) * 10)
    fraction = milli if milli < MILLI_PER_GPU else None
    fitting = sorted((MIG_PROFILES[p][1], MIG_PROFILES[p][0], p) for p in set(mig_profiles)
                     if p in MIG_PROFILES and MIG_PROFILES[p][1] >= need_mib)
    return SliceFit(need_mib, gpu_memory_mib, fraction, whole, fitting[0][2] if fitting else None)
