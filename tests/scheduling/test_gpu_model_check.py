"""A GPU whose agent reports another model than its pool's (another family, or memory far from the
pool's) is flagged for the operator; names written another way (NVML's vendor and form factor, case)
and cards of one model with a little less memory are not."""

import pytest

from scheduling.core.units import model_family
from scheduling.health import model_differs

H100_MIB, H200_MIB = 80 * 1024, 141 * 1024


@pytest.mark.parametrize(("name", "family"), [
    ("NVIDIA H100 80GB HBM3", "H100"),
    ("NVIDIA A100-SXM4-80GB", "A100"),
    ("a100-80gb", "A100"),
    ("Tesla V100-SXM2-32GB", "V100"),
    ("NVIDIA H200", "H200"),
    ("NVIDIA GH200 480GB", "GH200"),
    ("AMD Instinct MI300X", "MI300X"),
    ("NVIDIA L40S", "L40S"),
    ("NVIDIA GeForce RTX 4090", "4090"),
    ("RTX4090-24GB", "4090"),
    ("RTX-4090-24GB", "4090"),
    ("NVIDIA RTX A6000", "A6000"),
    ("RTXA6000-48GB", "A6000"),
    ("Tesla-T4", "T4"),
    ("", None),
    ("NVIDIA", None),
])
def test_a_models_family_is_read_from_any_spelling(name, family):
    assert model_family(name) == family


@pytest.mark.parametrize(("reported", "mib", "pool", "pool_mib", "differs"), [
    ("NVIDIA H100 80GB HBM3", 81559, "H100-80GB", H100_MIB, False),   # NVML's total, a little under the label
    ("NVIDIA H200", 143771, "H200-141GB", H200_MIB, False),
    ("NVIDIA A100-SXM4-80GB", 81920, "H100-80GB", H100_MIB, True),    # another family
    ("NVIDIA A100-SXM4-40GB", 40960, "A100-80GB", H100_MIB, True),    # the family's smaller card
    ("NVIDIA H100 NVL", 95830, "H100-80GB", H100_MIB, True),          # 94 GB against 80
    ("NVIDIA GeForce RTX 4090", 24564, "RTX4090-24GB", 24 * 1024, False),
    ("NVIDIA L40S", 46068, "L40S-48GB", 48 * 1024, False),
    ("Tesla T4", 15360, "T4-16GB", 16 * 1024, False),
    ("NVIDIA A10", 23028, "A10G-24GB", 24 * 1024, True),               # another card of the line
    ("", 81920, "H100-80GB", H100_MIB, False),                        # not reported: nothing to compare
    ("Graphics Device", 81920, "H100-80GB", H100_MIB, False),         # a name that names no model
])
def test_a_gpu_of_another_model_than_its_pools_is_told_apart(reported, mib, pool, pool_mib, differs):
    assert model_differs(reported, mib, pool, pool_mib) is differs
