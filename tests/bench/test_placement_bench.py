"""The trace loader and the replay harness on a small synthetic trace (not the real one)."""

import json

import numpy as np
import pytest

from bench.placement import allocation_at, main, parse_seeds, replay
from bench.traces import build_workload, gpu_capacity, load_nodes, load_pods, typical_shapes

NODES = "sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
    f"n{i}0,32000,131072,2,T4\nn{i}1,32000,131072,4,V100\nn{i}2,64000,262144,8,G2\nn{i}3,16000,65536,0,\n"
    for i in range(5)
)


def _pods_csv(rows: int, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    lines = ["name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos"]
    for i in range(rows):
        kind = rng.integers(4)
        if kind == 0:
            gpus, milli, spec = 0, 0, ""
        elif kind == 1:
            gpus, milli, spec = 1, int(rng.choice([250, 500, 750])), ""
        elif kind == 2:
            gpus, milli, spec = 1, 1000, "V100|G2" if i % 3 == 0 else ""
        else:
            gpus, milli, spec = 2, 1000, ""
        lines.append(f"pod-{i:04d},{int(rng.choice([1000, 4000]))},{4096},{gpus},{milli},{spec},BE")
    return "\n".join(lines) + "\n"


@pytest.fixture
def trace(tmp_path):
    nodes = tmp_path / "nodes.csv"
    pods = tmp_path / "pods.csv"
    nodes.write_text(NODES)
    pods.write_text(_pods_csv(60))
    return nodes, pods


def test_loader_normalises_gpu_asks(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
        "b,1000,10,1,1500,\n"  # above 1000 counts as 1000
        "a,1000,10,0,300,\n"  # CPU-only: gpu_milli ignored
        "c,1000,10,1,250,T4|V100\n"
    )
    pods = load_pods(path)
    assert [p.name for p in pods] == ["a", "b", "c"]  # sorted by name
    assert [(p.request.num_gpus, p.request.gpu_milli) for p in pods] == [(0, 0), (1, 1000), (1, 250)]
    assert pods[2].models == ("T4", "V100")


def test_loader_accepts_missing_optional_columns(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("name,cpu_milli,memory_mib,num_gpu\nx,1000,10,2\n")
    (pod,) = load_pods(path)
    assert (pod.request.num_gpus, pod.request.gpu_milli, pod.models, pod.qos) == (2, 1000, (), "")


def test_loader_names_missing_columns(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("name,cpu_milli\nx,1\n")
    with pytest.raises(ValueError, match="memory_mib"):
        load_pods(path)


def test_workload_is_inflated_to_130_percent(trace):
    nodes, pods = load_nodes(trace[0]), load_pods(trace[1])
    capacity = gpu_capacity(nodes)
    assert capacity == 70000
    w = build_workload(pods, len(nodes), capacity, 42)
    total = sum(p.gpu_milli_total for p in w.pods)
    assert w.tail > 0 and len(w.pods) == len(pods) + w.tail
    assert total <= 1.3 * capacity
    assert sorted(w.node_order.tolist()) == list(range(20))
    assert sorted(p.name for p in w.pods[: len(pods)]) == [p.name for p in pods]  # a shuffle
    again = build_workload(pods, len(nodes), capacity, 42)
    assert [p.name for p in again.pods] == [p.name for p in w.pods]


def test_allocation_is_the_bin_average_at_100_percent():
    capacity = 1000
    arrived = np.array([500, 980, 995, 1004, 1010])
    allocated = np.array([500, 900, 910, 910, 950])
    # events with arrived % rounding to 100: 995 (99.5 -> 100) and 1004; 1010 rounds to 101
    assert allocation_at(arrived, allocated, capacity) == pytest.approx(91.0)
    # no event in bin 100: the nearest bin below (98) stands in
    assert allocation_at(np.array([500, 980, 1020]), np.array([500, 900, 950]), capacity) == pytest.approx(90.0)
    with pytest.raises(ValueError, match="100 %"):
        allocation_at(np.array([10]), np.array([10]), capacity)


def test_replay_keeps_capacity_and_is_deterministic(trace):
    nodes, pods = load_nodes(trace[0]), load_pods(trace[1])
    for policy in ("random", "bestfit", "fgd", "default", "binpack", "spread", "frag"):
        a = replay(nodes, pods, policy, 42)
        b = replay(nodes, pods, policy, 42)
        assert a.unallocated_at_100 == b.unallocated_at_100
        assert 0 <= a.unallocated_at_100 <= 100
        assert a.failed > 0  # 130 % of capacity cannot all fit
    online = replay(nodes, pods, "default", 42, online_shapes=True)
    assert 0 <= online.unallocated_at_100 <= 100


def test_typical_shapes_include_model_constraints(trace):
    table = typical_shapes(load_pods(trace[1]))
    assert table.probs.sum() == pytest.approx(1.0)
    assert any(s.models == ("G2", "V100") for s in table.shapes)


def test_cli_prints_one_json_object(trace, capsys):
    assert main(["--nodes", str(trace[0]), "--pods", str(trace[1]), "--policy", "fgd", "--seeds", "42-44", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["policy"] == "fgd" and out["seeds"] == [42, 43, 44]
    assert len(out["per_seed"]) == 3
    assert out["unallocated_at_100"] == pytest.approx(np.mean(out["per_seed"]), abs=0.01)
    assert out["seconds"] >= 0


def test_seed_ranges():
    assert parse_seeds("42-45") == [42, 43, 44, 45]
    assert parse_seeds("1,5-6") == [1, 5, 6]
    with pytest.raises(Exception, match="seeds"):
        parse_seeds("9-3")


def test_cli_reports_moves(trace, capsys):
    assert main(["--nodes", str(trace[0]), "--pods", str(trace[1]), "--policy", "default", "--seeds", "42",
                 "--moves", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["moves"]) >= {"count", "percent"}
    assert out["moves"]["count"] >= 0 and 0 <= out["moves"]["percent"] <= 100
