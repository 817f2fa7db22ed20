"""Units shared by the whole platform: milli-GPU, MiB, MIG slices, and GPU names and families.

GPU compute is counted in milli-GPU (MILLI_PER_GPU = one GPU), CPU in milli-CPU, memory in MiB.
"""

from __future__ import annotations

import re

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


# Words of a device's name that say its vendor, line, form factor or memory kind, not its model.
NOT_MODEL_WORDS = frozenset({"NVIDIA", "TESLA", "GEFORCE", "QUADRO", "RTX", "AMD", "INSTINCT", "PCIE", "SXM", "SXM2",
                             "SXM3", "SXM4", "SXM5", "SXM6", "NVL", "OAM", "HBM2", "HBM2E", "HBM3", "HBM3E"})
# A line's name written joined to the model in a label ("RTX4090", "RTXA6000"): NVML writes them apart.
LINE_PREFIX = re.compile(r"^(?:GEFORCE|QUADRO)?RTX(?=\w)")


def model_family(name: str) -> str | None:
    """The family a GPU model's name gives, whichever way it is written: "NVIDIA A100-SXM4-80GB", "a100-80gb"
    and "A100" are all A100; None when no word of it names one."""
    for word in re.split(r"[\s_-]+", name.upper()):
        word = LINE_PREFIX.sub("", word)
        if word and word not in NOT_MODEL_WORDS and not re.fullmatch(r"\d+GB", word) and any(c.isdigit() for c in word):
            return word
    return None
