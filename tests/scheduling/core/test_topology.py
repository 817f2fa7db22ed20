"""Topology-aware placement, as a table of scenarios: a gang that asks `required` or `preferred` for a level
(a pool's label key, named by its last part) goes within one domain of the lowest level that holds it; a
`required` one that fits no domain waits, naming the largest free domain; a `preferred` one spills into the
fewest domains. Consolidation and reclaim never leave a `required` gang across domains."""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

import numpy as np
import pytest

from scheduling.core import Node, Pool, Queue, RunningReplica, Slice, Snapshot, Topology, run_cycle
from scheduling.core.actions.topology import PREFERRED_WAIT_S
from scheduling.core.builders import cycles, job
from scheduling.core.cycle import apply_decisions
from scheduling.core.model import Gpu
from scheduling.core.session import Session
from scheduling.core.topology import build_domains, resolve_level

BLOCK, RACK, NVL = "example.com/block", "topology.kubernetes.io/rack", "example.com/nvlink-domain"
POOL = Pool("h100", topology=(BLOCK, RACK))
QUEUES = (Queue("a", deserved_milli=10**6), Queue("b"))


def node(name: str, gpus: int = 4, pool: str = "h100", **labels: str) -> Node:
    return Node(name, pool, tuple(Gpu(i, f"{name}-gpu{i}") for i in range(gpus)),
                labels=tuple(sorted(labels.items())))


def racks(blocks: int, per_block: int, per_rack: int, gpus: int = 4) -> tuple[Node, ...]:
    """Nodes b<i>-r<j>-n<k>, labelled with their block and rack."""
    return tuple(Node(f"b{b}-r{r}-n{n}", "h100", tuple(Gpu(i, f"b{b}r{r}n{n}g{i}") for i in range(gpus)),
                      labels=((BLOCK, f"b{b}"), (RACK, f"r{r}")))
                 for b in range(blocks) for r in range(per_block) for n in range(per_rack))


def on(job_id: str, node_name: str, *gpus: int, index: int = 0) -> RunningReplica:
    return RunningReplica(job_id, "worker", index, node_name, gpus, Slice("whole", 1000, 81920))


def busy(node_name: str, *gpus: int, queue: str = "a", name: str = "") -> tuple:
    """A job holding `gpus` of `node_name` that nothing moves (not preemptible), and its replica."""
    job_id = name or f"busy-{node_name}-{gpus[0]}"
    return job(job_id, queue, gpus=len(gpus), created=-1, preemptible=False), on(job_id, node_name, *gpus)


def required(level: str) -> Topology:
    return Topology(level, required=True)


def preferred(level: str) -> Topology:
    return Topology(level)


def domain_of(snapshot: Snapshot, job_id: str, key: str) -> set[str]:
    labels = {n.name: dict(n.labels) for n in snapshot.nodes}
    return {labels[r.node].get(key, "") for r in snapshot.running if r.job_id == job_id}


def rack_of(snapshot: Snapshot, job_id: str) -> set[str]:
    labels = {n.name: dict(n.labels) for n in snapshot.nodes}
    return {f"{labels[r.node][BLOCK]}/{labels[r.node][RACK]}" for r in snapshot.running if r.job_id == job_id}


@dataclass(frozen=True)
class Scenario:
    name: str
    nodes: tuple[Node, ...]
    busy: tuple = ()                                   # (job, replica) pairs already running
    jobs: tuple = ()                                   # jobs submitted
    placed: dict[str, set[str]] = field(default_factory=dict)   # job -> the block/rack domains it holds
    waits: dict[str, dict] = field(default_factory=dict)        # job -> its pending reason's params
    pools: tuple[Pool, ...] = (POOL,)
    key: str = ""                                      # a label key to read `placed` by, instead of block/rack
    now: float = 0.0                                   # the jobs were submitted at 0


def snapshot_of(sc: Scenario) -> Snapshot:
    return Snapshot(pools=sc.pools, nodes=sc.nodes, queues=QUEUES, now=sc.now,
                    jobs=tuple(j for j, _ in sc.busy) + sc.jobs, running=tuple(r for _, r in sc.busy))


BUSY_RACKS = (busy("b0-r0-n0", 0, 1, 2, 3), busy("b0-r1-n0", 0, 1), busy("b0-r2-n0", 0, 1, 2, 3),
              busy("b0-r2-n1", 0, 1))


SCENARIOS = [
    Scenario(
        # r0 has 6 free GPUs, r1 8: an 8-GPU gang needs r1 whole
        "required fits one rack",
        racks(1, 2, 2), busy=(busy("b0-r0-n0", 0, 1),),
        jobs=(job("g", "a", gpus=2, replicas=4, topology=required("rack")),),
        placed={"g": {"b0/r1"}}),
    Scenario(
        # both racks hold the 4-GPU gang: the one with the least room goes first, the empty rack stays whole
        "required takes the rack that fits best",
        racks(1, 2, 2), busy=(busy("b0-r0-n0", 0, 1, 2, 3),),
        jobs=(job("g", "a", gpus=2, replicas=2, topology=required("rack")),),
        placed={"g": {"b0/r0"}}),
    Scenario(
        # 11 GPUs are free in the pool but at most 6 in one rack: the 8-GPU gang waits and says so
        "required waits naming the largest free rack",
        racks(1, 2, 2), busy=(busy("b0-r0-n0", 0, 1), busy("b0-r1-n0", 0, 1, 2)),
        jobs=(job("g", "a", gpus=2, replicas=4, topology=required("rack")),),
        waits={"g": {"level": "rack", "need_milli": 8000, "domain": "b0/r0", "free_milli": 6000}}),
    Scenario(
        # the same gang without topology runs across the racks: the wait above is the constraint's
        "without topology the same gang runs across racks",
        racks(1, 2, 2), busy=(busy("b0-r0-n0", 0, 1), busy("b0-r1-n0", 0, 1, 2)),
        jobs=(job("g", "a", gpus=2, replicas=4),),
        placed={"g": {"b0/r0", "b0/r1"}}),
    Scenario(
        # no rack holds 10 GPUs; once the gang has waited PREFERRED_WAIT_S for one, the two roomiest (6 + 4)
        # do, the 2-GPU rack is left alone
        "preferred spills into the fewest racks",
        racks(1, 3, 2), busy=BUSY_RACKS, now=PREFERRED_WAIT_S,
        jobs=(job("g", "a", gpus=2, replicas=5, topology=preferred("rack")),),
        placed={"g": {"b0/r0", "b0/r1"}}),
    Scenario(
        # the same gang just submitted waits a while for one rack, and says which rack has the most room
        "preferred waits a while for one rack",
        racks(1, 3, 2), busy=BUSY_RACKS, now=PREFERRED_WAIT_S - 1,
        jobs=(job("g", "a", gpus=2, replicas=5, topology=preferred("rack")),),
        waits={"g": {"level": "rack", "need_milli": 10000, "domain": "b0/r1", "free_milli": 6000}}),
    Scenario(
        # preferred and one rack holds it: exactly as required
        "preferred stays in one rack when one holds it",
        racks(1, 3, 2), busy=(busy("b0-r0-n0", 0, 1), busy("b0-r1-n0", 0)),
        jobs=(job("g", "a", gpus=1, replicas=6, topology=preferred("rack")),),
        placed={"g": {"b0/r0"}}),
    Scenario(
        # block b0 has 10 free GPUs over its two racks, b1 16: the 12-GPU gang goes to b1, over both its racks
        "required block",
        racks(2, 2, 2), busy=(busy("b0-r0-n0", 0, 1, 2), busy("b0-r1-n0", 0, 1, 2)),
        jobs=(job("g", "a", gpus=2, replicas=6, topology=required("block")),),
        placed={"g": {"b1/r0", "b1/r1"}}),
    Scenario(
        # a gang that fits one rack stays in one rack even when it asked only for a block (the lowest level
        # that holds it), and in the rack that fits best
        "required block, one rack holds it",
        racks(2, 2, 2), busy=(busy("b1-r1-n0", 0, 1, 2, 3),),
        jobs=(job("g", "a", gpus=2, replicas=2, topology=required("block")),),
        placed={"g": {"b1/r1"}}),
    Scenario(
        # the level named by its label key works as well as by its last part
        "required by label key",
        racks(1, 2, 2), busy=(busy("b0-r0-n0", 0, 1),),
        jobs=(job("g", "a", gpus=2, replicas=4, topology=required(RACK)),),
        placed={"g": {"b0/r1"}}),
    Scenario(
        # two NVL72-class domains of 18 four-GPU nodes; 8 GPUs busy in d0: the 64-GPU gang fits d0 exactly,
        # the next one d1, the third waits naming the domain with the most free
        "nvlink-domain",
        tuple(node(f"d{d}-n{n}", 4, "gb200", **{NVL: f"d{d}"}) for d in range(2) for n in range(18)),
        busy=(busy("d0-n0", 0, 1, 2, 3), busy("d0-n1", 0, 1, 2, 3)),
        jobs=(job("g1", "a", gpus=4, replicas=16, topology=required("nvlink-domain"), created=1),
              job("g2", "a", gpus=4, replicas=16, topology=required("nvlink-domain"), created=2),
              job("g3", "a", gpus=4, replicas=4, topology=required("nvlink-domain"), created=3)),
        pools=(Pool("gb200", topology=(NVL,)),), key=NVL,
        placed={"g1": {"d0"}, "g2": {"d1"}},
        waits={"g3": {"level": "nvlink-domain", "need_milli": 16000, "domain": "d1", "free_milli": 8000}}),
    Scenario(
        # the node level needs no label: a required node is one node
        "required node",
        racks(1, 1, 2), busy=(busy("b0-r0-n0", 0),),
        jobs=(job("g", "a", gpus=1, replicas=4, topology=required("node")),),
        key="node", placed={"g": {"b0-r0-n1"}}),
    Scenario(
        # a level no pool declares: a required gang waits and says why
        "required level the pool lacks",
        racks(1, 1, 2), jobs=(job("g", "a", gpus=1, replicas=2, topology=required("row")),),
        waits={"g": {"level": "row", "pools": ["h100"]}}),
]


@pytest.mark.parametrize("sc", SCENARIOS, ids=lambda sc: sc.name)
@pytest.mark.parametrize("exact", [False, True], ids=["quiet", "exact"])
def test_scenario(sc: Scenario, exact: bool):
    snap = snapshot_of(sc)
    decisions = run_cycle(snap, exact=exact)
    after = apply_decisions(snap, decisions)
    for job_id, domains in sc.placed.items():
        assert job_id not in decisions.pending_codes, decisions.pending.get(job_id)
        if sc.key == "node":
            held = {r.node for r in after.running if r.job_id == job_id}
        elif sc.key:
            held = domain_of(after, job_id, sc.key)
        else:
            held = rack_of(after, job_id)
        assert held == domains
    for job_id, params in sc.waits.items():
        reason = decisions.pending_codes[job_id]
        assert reason.code in ("topology_no_domain", "topology_level_unknown")
        assert reason.params == params
    # nothing moves in the cycles after
    _, later = cycles(after, 2)
    assert all(d.changes == 0 for d in later)


def test_domains_are_nested_and_unlabelled_nodes_in_none():
    nodes = (*racks(2, 1, 1), node("loose", 4))
    domains = build_domains(nodes, (BLOCK, RACK))
    # rack r0 of b0 and rack r0 of b1 are two racks
    assert list(domains.ids[1]) == [0, 1, -1]
    assert domains.names[1] == ("b0/r0", "b1/r0")
    assert list(domains.ids[2]) == [0, 1, 2]
    assert resolve_level((POOL,), "rack") == ((BLOCK, RACK), 1)
    assert resolve_level((POOL,), "node") == ((BLOCK, RACK), 2)
    assert resolve_level((Pool("other"),), "rack") is None


def test_required_never_uses_unlabelled_nodes():
    nodes = (node("loose-0", 4), node("loose-1", 4), *racks(1, 1, 1))
    snap = Snapshot(pools=(POOL,), nodes=nodes, queues=QUEUES,
                    jobs=(job("g", "a", gpus=4, replicas=2, topology=required("rack")),
                          job("one", "a", gpus=2, topology=required("rack"))))
    after, _ = cycles(snap, 1)
    assert {r.node for r in after.running if r.job_id == "one"} == {"b0-r0-n0"}
    assert "g" not in {r.job_id for r in after.running}


def test_elastic_replicas_of_a_required_gang_stay_in_its_rack():
    # the gang runs in r0; its elastic replicas may take r0's free GPUs only, though r1 is empty
    snap = Snapshot(pools=(POOL,), nodes=racks(1, 2, 2), queues=QUEUES,
                    jobs=(job("g", "a", gpus=2, replicas=6, min_replicas=2, topology=required("rack")),),
                    running=(on("g", "b0-r0-n0", 0, 1, index=0), on("g", "b0-r0-n0", 2, 3, index=1)))
    after, _ = cycles(snap, 4)
    assert rack_of(after, "g") == {"b0/r0"}
    assert sum(1 for r in after.running if r.job_id == "g") == 4


# ------------------------------------------------------------------ consolidation and reclaim


def consolidation_snapshot(topology: Topology | None) -> Snapshot:
    # r0: n0 and n1, each with one 2-GPU replica of j, n1 full; r1: n2 with a 2-GPU filler. 4 GPUs free, none
    # with 4 on one node: the 4-GPU job p fits only if a replica moves
    nodes = (node("n0", **{BLOCK: "b0", RACK: "r0"}), node("n1", **{BLOCK: "b0", RACK: "r0"}),
             node("n2", **{BLOCK: "b0", RACK: "r1"}))
    return Snapshot(
        pools=(POOL,), nodes=nodes, queues=QUEUES,
        jobs=(job("j", "a", gpus=2, replicas=2, topology=topology, created=0), job("f", "a", gpus=2, created=0),
              job("k", "a", gpus=2, created=0, preemptible=False), job("p", "a", gpus=4, created=5)),
        running=(on("j", "n0", 0, 1, index=0), on("j", "n1", 0, 1, index=1), on("k", "n1", 2, 3),
                 on("f", "n2", 0, 1)))


def reclaim_snapshot(topology: Topology | None) -> Snapshot:
    # queue b (deserved 8) reclaims from queue a (deserved 0): its 4-GPU job takes n0 or n1, where j's
    # replicas run; a victim could be re-placed on the 2 GPUs left free in r1
    nodes = (node("n0", **{BLOCK: "b0", RACK: "r0"}), node("n1", **{BLOCK: "b0", RACK: "r0"}),
             node("n2", **{BLOCK: "b0", RACK: "r1"}))
    queues = (Queue("a"), Queue("b", deserved_milli=8000))
    return Snapshot(
        pools=(POOL,), nodes=nodes, queues=queues,
        jobs=(job("j", "a", gpus=2, replicas=2, topology=topology, created=0),
              job("x", "a", gpus=2, created=1), job("y", "a", gpus=2, created=1),
              job("z", "b", gpus=2, created=2, preemptible=False), job("p", "b", gpus=4, created=5)),
        running=(on("j", "n0", 0, 1, index=0), on("j", "n1", 0, 1, index=1), on("x", "n0", 2, 3),
                 on("y", "n1", 2, 3), on("z", "n2", 0, 1)))


@pytest.mark.parametrize("make", [consolidation_snapshot, reclaim_snapshot], ids=["consolidation", "reclaim"])
def test_moves_never_break_required(make):
    # without topology the action moves j's replica to r1 (so the scenario does exercise the move) ...
    blind, _ = cycles(make(None), 3)
    assert "p" in {r.job_id for r in blind.running}
    assert rack_of(blind, "j") == {"b0/r0", "b0/r1"}
    # ... and with `required: rack` j never spans racks, in any cycle
    snap = make(required("rack"))
    for _ in range(3):
        snap = apply_decisions(snap, run_cycle(snap))
        assert len(rack_of(snap, "j")) <= 1


def random_snapshot(rng: random.Random) -> Snapshot:
    nodes = racks(rng.randint(1, 2), rng.randint(1, 3), rng.randint(1, 3), gpus=rng.choice((2, 4)))
    levels = ("rack", "block")
    jobs = []
    for i in range(rng.randint(4, 14)):
        topo = rng.choice((None, required(rng.choice(levels)), preferred(rng.choice(levels))))
        replicas = rng.randint(1, 4)
        jobs.append(job(f"j{i}", rng.choice("ab"), gpus=rng.choice((1, 2)), replicas=replicas,
                        min_replicas=rng.randint(1, replicas), priority=rng.choice((0, 0, 1)),
                        topology=topo, created=i))
    queues = (Queue("a", deserved_milli=rng.choice((0, 4000))), Queue("b", deserved_milli=rng.choice((0, 4000))))
    return Snapshot(pools=(POOL,), nodes=nodes, queues=queues, jobs=tuple(jobs))


def assert_required_hold(snap: Snapshot) -> None:
    labels = {n.name: dict(n.labels) for n in snap.nodes}
    for j in snap.jobs:
        if j.topology is None or not j.topology.required:
            continue
        keys = (BLOCK,) if j.topology.level == "block" else (BLOCK, RACK)
        held = {tuple(labels[r.node][k] for k in keys) for r in snap.running if r.job_id == j.id}
        assert len(held) <= 1, (j.id, j.topology, held)


@pytest.mark.parametrize("seed", range(12))
def test_random_clusters_keep_required_through_every_action(seed):
    # work arrives and ends while reclaim, preempt, consolidation and elastic run
    rng = random.Random(seed)
    snap = random_snapshot(rng)
    waiting = list(random_snapshot(rng).jobs)
    for step in range(8):
        snap = apply_decisions(snap, run_cycle(snap, exact=step % 2 == 0))
        assert_required_hold(snap)
        if waiting and rng.random() < 0.6:
            arrived = replace(waiting.pop(), id=f"late{step}", created=100 + step)
            snap = replace(snap, jobs=snap.jobs + (arrived,))
        if snap.running and rng.random() < 0.4:
            gone = rng.choice(snap.running).job_id
            snap = replace(snap, jobs=tuple(j for j in snap.jobs if j.id != gone),
                           running=tuple(r for r in snap.running if r.job_id != gone))


def test_no_topology_costs_no_domains():
    # a cycle where no job asks for topology never builds a domain table
    snap = Snapshot(pools=(POOL,), nodes=racks(1, 2, 2), queues=QUEUES,
                    jobs=tuple(job(f"j{i}", "a", gpus=2, replicas=2, created=i) for i in range(6)))
    session = Session.build(snap)
    from scheduling.core.actions import allocate
    allocate(session)
    assert session._domains == {}
    assert np.count_nonzero(session.arrays.gpu_free_milli) < session.arrays.gpu_free_milli.size


@pytest.mark.parametrize("seed", range(10))
def test_the_early_stops_decide_as_visiting_every_job(seed):
    # jobs of equal roles that differ in topology (or in whether they still wait for one domain) are kept
    # apart by the walks' groups and the plans' signatures
    rng = random.Random(100 + seed)
    snap = random_snapshot(rng)
    roles = job("x", "a", gpus=1, replicas=3).roles
    twins = tuple(replace(job(f"t{i}", rng.choice("ab"), created=rng.choice((0, 700))), roles=roles,
                          topology=rng.choice((None, required("rack"), preferred("rack"), preferred("block"))))
                  for i in range(6))
    snap = replace(snap, jobs=snap.jobs + twins, now=rng.choice((0.0, PREFERRED_WAIT_S + 1)))
    for _ in range(3):
        quiet, exact = run_cycle(snap), run_cycle(snap, exact=True)
        assert (quiet.binds, quiet.evicts, quiet.pending) == (exact.binds, exact.evicts, exact.pending)
        snap = apply_decisions(snap, exact)


def test_a_required_gang_that_waits_does_not_hold_back_its_twin_without_topology():
    # same roles: the older one needs a rack with 8 free GPUs (none has), the younger one runs across racks
    snap = snapshot_of(Scenario("twins", racks(1, 2, 2), busy=(busy("b0-r0-n0", 0, 1), busy("b0-r1-n0", 0, 1, 2))))
    roles = job("x", "a", gpus=2, replicas=4).roles
    older = replace(job("older", "a", created=1), roles=roles, topology=required("rack"))
    younger = replace(job("younger", "a", created=2), roles=roles)
    decisions = run_cycle(replace(snap, jobs=snap.jobs + (older, younger)))
    assert decisions.pending_codes["older"].code == "topology_no_domain"
    assert "younger" not in decisions.pending_codes
