"""A pool's topology levels: the console edits them (node label keys, outermost first), refuses bad ones at
the field, and the scheduler's snapshot reads them with the nodes' labels of those keys."""

import pytest

from scheduling.cycle.snapshot import build_snapshot
from scheduling.models import Node, NodePool

BLOCK, RACK = "example.com/block", "topology.kubernetes.io/rack"
POLICY = {"placement": "binpack", "sharing": "standard", "timeslice_replicas": "4", "mig_layout": ""}


@pytest.mark.django_db
def test_the_console_saves_topology_levels_and_lists_them(admin_client, cluster):
    saved = admin_client.post("/console/pools/h100/", {**POLICY, "topology_levels": f"{BLOCK}, {RACK}"},
                              follow=True)
    assert saved.status_code == 200
    assert NodePool.objects.get(name="h100").topology_levels == [BLOCK, RACK]
    row = saved.content.decode().split('data-pool="h100"')[1].split("</tr>")[0]
    assert f'<td data-field="topology">{BLOCK} > {RACK}</td>' in row
    form = admin_client.get("/console/pools/h100/").content.decode()
    assert 'id="f-topology"' in form and f'value="{BLOCK}, {RACK}"' in form
    # emptied again: no levels
    admin_client.post("/console/pools/h100/", {**POLICY, "topology_levels": ""})
    assert NodePool.objects.get(name="h100").topology_levels == []


@pytest.mark.django_db
@pytest.mark.parametrize(("levels", "message"), [
    ("rack row!", "must be a list of node label keys"),
    (f"{RACK}, example.com/rack", "names a level twice"),
])
def test_bad_topology_levels_are_refused_at_the_field(admin_client, cluster, levels, message):
    refused = admin_client.post("/console/pools/h100/", {**POLICY, "topology_levels": levels})
    assert refused.status_code == 400
    page = refused.content.decode()
    assert message in page
    assert NodePool.objects.get(name="h100").topology_levels == []


@pytest.mark.django_db
def test_the_snapshot_reads_levels_and_only_their_labels(cluster, clock):
    pool = NodePool.objects.get(name="h100")
    pool.topology_levels = [BLOCK, RACK]
    pool.save()
    node = Node.objects.filter(pool=pool).order_by("name").first()
    node.labels = {BLOCK: "b1", RACK: "r7", "team": "vision"}
    node.save()
    snapshot = build_snapshot(clock.now)
    core_pool = next(p for p in snapshot.pools if p.name == "h100")
    assert core_pool.topology == (BLOCK, RACK)
    core_node = next(n for n in snapshot.nodes if n.name == node.name)
    assert core_node.labels == ((BLOCK, "b1"), (RACK, "r7"))


class Inventory:
    """A backend that only reports nodes."""

    def __init__(self, nodes):
        self.nodes = nodes

    def inventory(self):
        return self.nodes


@pytest.mark.django_db
def test_the_inventory_brings_the_cluster_topology_labels_and_keeps_the_operators(cluster):
    from scheduling.backends.base import GpuInventory, NodeInventory
    from scheduling.cycle.inventory import sync_inventory

    pool = NodePool.objects.get(name="h100")
    pool.topology_levels = ["example.com/nvlink-domain", RACK]
    pool.save()
    node = Node.objects.filter(pool=pool).order_by("name").first()
    node.labels = {"team": "vision", RACK: "old"}
    node.save()
    gpus = tuple(GpuInventory(i, g.uuid, g.memory_mib) for i, g in enumerate(node.gpus.order_by("index")))
    seen = NodeInventory(node.name, "h100", "nvidia", pool.gpu_model, gpus, node.cpu_milli, node.memory_mib,
                         labels=(("example.com/nvlink-domain", "d3"), ("kubernetes.io/os", "linux"),
                                 (RACK, "r2"), ("topology.kubernetes.io/zone", "z1")))
    assert sync_inventory(Inventory([seen])) >= 1
    node.refresh_from_db()
    assert node.labels == {"team": "vision", RACK: "r2", "topology.kubernetes.io/zone": "z1",
                           "example.com/nvlink-domain": "d3"}
    # the same inventory again changes nothing
    assert sync_inventory(Inventory([seen])) == 0
