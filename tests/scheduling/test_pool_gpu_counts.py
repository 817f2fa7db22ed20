"""pool_gpu_counts: each pool's GPUs and its largest node's, counted in the database."""

import pytest

from scheduling.models import Gpu, Node, NodePool
from scheduling.selectors import PoolGpus, cluster_info, pool_gpu_counts

pytestmark = pytest.mark.django_db


def test_each_pool_counts_its_gpus_and_its_largest_node(cluster):
    pools = dict(NodePool.objects.values_list("name", "pk"))
    counts = pool_gpu_counts()
    assert counts[pools["h100"]] == PoolGpus(16, 8)  # two nodes of 8
    assert counts[pools["a100-spot"]] == PoolGpus(32, 8)
    assert counts[pools["rtx4090"]] == PoolGpus(8, 2)  # four nodes of 2
    node = Node.objects.filter(pool_id=pools["rtx4090"]).first()
    Gpu.objects.bulk_create([Gpu(node=node, index=i, uuid=f"extra-{i}", memory_mib=24 * 1024) for i in (2, 3, 4)])
    assert pool_gpu_counts()[pools["rtx4090"]] == PoolGpus(11, 5)
    assert {p.name: p.gpus_per_node for p in cluster_info().pools}["rtx4090"] == 5


def test_a_pool_of_nodes_without_gpus_counts_none_and_a_pool_without_nodes_is_absent(cluster):
    bare = NodePool.objects.create(name="cpu-only", gpu_model="none", gpu_memory_mib=1)
    Node.objects.create(pool=bare, name="cpu-01")
    empty = NodePool.objects.create(name="empty", gpu_model="none", gpu_memory_mib=1)
    counts = pool_gpu_counts()
    assert counts[bare.pk] == PoolGpus(0, 0)
    assert empty.pk not in counts
