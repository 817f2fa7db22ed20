"""Shared inputs for the job spec tests: the seed's YAML, the documented clean example, the test cluster."""

from __future__ import annotations

import pytest

from scheduling.spec import ClusterInfo, PoolInfo
from scheduling.spec.examples import CLEAN_YAML, SEED_YAML  # noqa: F401 - re-exported to the spec tests

MINIMAL_YAML = """\
name: job
roles:
  - name: main
    image: busybox:1.36
"""

_SHARED = frozenset({"exclusive", "fraction"})

# The test world's pools (tests/world.py POOLS) as the spec checks see them; never the demo data.
WORLD_POOLS = ClusterInfo(
    pools=(
        PoolInfo("h100", "nvidia", "H100-80GB", 81920, 8, _SHARED),
        PoolInfo(
            "h100-mig",
            "nvidia",
            "H100-80GB",
            81920,
            8,
            frozenset({"mig"}),
            frozenset({"3g.40gb", "2g.20gb", "1g.10gb"}),
        ),
        PoolInfo("a100-spot", "nvidia", "A100-80GB", 81920, 8, _SHARED),
        PoolInfo("l40s-shared", "nvidia", "L40S-48GB", 49152, 4, frozenset({"timeslice"})),
        PoolInfo("rtx4090", "nvidia", "RTX-4090-24GB", 24576, 2, _SHARED),
        PoolInfo("mi300x", "amd", "MI300X-192GB", 196608, 8, _SHARED),
    )
)

VISION_QUEUES = frozenset({"vision-lab", "community"})


@pytest.fixture
def seed_yaml() -> str:
    return SEED_YAML


@pytest.fixture
def clean_yaml() -> str:
    return CLEAN_YAML


@pytest.fixture
def minimal_yaml() -> str:
    return MINIMAL_YAML


@pytest.fixture
def world_pools() -> ClusterInfo:
    """The test world's pools as the spec checks see them."""
    return WORLD_POOLS


@pytest.fixture
def vision_queues() -> frozenset[str]:
    return VISION_QUEUES
