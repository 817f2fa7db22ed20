"""Units shared by the whole platform: milli-GPU, MiB, MIG slices, and GPU names.

GPU compute is counted in milli-GPU (MILLI_PER_GPU = one GPU), CPU in milli-CPU, memory in MiB.
"""

from __future__ import annotations

MILLI_PER_GPU = 1000
MILLI_PER_CPU = 1000
MIB_PER_GIB = 1024
# The most slices one GPU offers to MIG; a layout may not use more.
MIG_SLICES_PER_GPU = 7


def mig_slices_milli(slices: int) -> int:
    """GPU share of `slices` MIG slices, in milli-GPU (rounded down)."""
    return slices * MILLI_PER_GPU // MIG_SLICES_PER_GPU


def gpu_model_name(name: str) -> str:
    """The one spelling of a GPU model: model names match whatever their case ('a100-80gb' is 'A100-80GB')."""
    return name.strip().upper()


def vendor_name(name: str) -> str:
    """The one spelling of a vendor (or 'any'): lower case."""
    return name.strip().lower()
