"""The generator of model-constrained pod lists (bench.constrained) on small synthetic traces."""

import csv
import json
from collections import Counter

import pytest

from bench.constrained import constrain_rows, main, model_hosts, write_variant
from bench.traces import load_pods

# 30 T4 GPUs, 60 G2 GPUs, 10 V100 GPUs; the V100 nodes are small (8 cores, one GPU)
NODES = "sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
    [f"t{i},64000,262144,2,T4\n" for i in range(15)]
    + [f"g{i},96000,393216,8,G2\n" for i in range(6)]
    + ["g6,96000,393216,4,G2\nc0,32000,131072,0,\n"]
    + [f"v{i},8000,65536,1,V100\n" for i in range(10)]
)


def _pods(rows: int) -> str:
    lines = ["name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase"]
    for i in range(rows):
        if i % 5 == 0:
            lines.append(f"p{i:05d},4000,8192,0,0,,LS,Running")  # CPU-only
        elif i % 5 == 1:
            lines.append(f"p{i:05d},16000,8192,4,1000,,BE,Running")  # only G2 nodes hold 4 GPUs
        else:
            lines.append(f"p{i:05d},4000,8192,1,{250 * (i % 4 + 1)},,LS,Running")
    return "\n".join(lines) + "\n"


@pytest.fixture
def files(tmp_path):
    nodes, pods = tmp_path / "nodes.csv", tmp_path / "pods.csv"
    nodes.write_text(NODES)
    pods.write_text(_pods(2000))
    return nodes, pods


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_models_and_their_gpus(files):
    hosts = model_hosts(files[0])
    assert {m: h.gpus for m, h in hosts.items()} == {"G2": 52, "T4": 30, "V100": 10}
    assert hosts["V100"].can_hold(1, 8000, 1) and not hosts["V100"].can_hold(1, 8001, 1)
    assert not hosts["T4"].can_hold(4, 1000, 1) and hosts["G2"].can_hold(8, 96000, 393216)


@pytest.mark.parametrize("share", [0.05, 0.2, 0.33])
def test_share_of_gpu_pods_is_constrained_and_nothing_else_changes(files, share):
    rows = _rows(files[1])
    out = constrain_rows(rows, model_hosts(files[0]), share, seed=7)
    gpu_pods = [r for r in rows if r["num_gpu"] != "0"]
    constrained = [r for r in out if r["gpu_spec"]]
    assert len(constrained) == round(share * len(gpu_pods))
    assert all(r["num_gpu"] != "0" for r in constrained)  # CPU-only pods have no model to ask for
    for before, after in zip(rows, out, strict=True):
        assert {k: v for k, v in after.items() if k != "gpu_spec"} == {k: v for k, v in before.items() if k != "gpu_spec"}
    assert all(not r["gpu_spec"] for r in rows)  # the input is not modified


def test_seeds_are_reproducible_and_differ(files):
    hosts = model_hosts(files[0])
    rows = _rows(files[1])
    a = constrain_rows(rows, hosts, 0.25, seed=1)
    assert a == constrain_rows(rows, hosts, 0.25, seed=1)
    assert a != constrain_rows(rows, hosts, 0.25, seed=2)


def test_models_are_drawn_in_proportion_to_their_gpus_among_those_that_can_hold_the_pod(files):
    hosts = model_hosts(files[0])
    out = constrain_rows(_rows(files[1]), hosts, 1.0, seed=3, set_share=0.0)
    singles = Counter(r["gpu_spec"] for r in out if r["num_gpu"] == "1" and r["cpu_milli"] == "4000")
    total = sum(singles.values())  # 1,200 pods that every model can hold
    for model, h in hosts.items():
        assert singles[model] / total == pytest.approx(h.gpus / 92, abs=0.04)
    # 4-GPU pods fit on G2 nodes only, so that is the only model they are given
    assert {r["gpu_spec"] for r in out if r["num_gpu"] == "4"} == {"G2"}


def test_sets_of_two_models(files):
    out = constrain_rows(_rows(files[1]), model_hosts(files[0]), 1.0, seed=5, set_share=1.0)
    specs = [r["gpu_spec"].split("|") for r in out if r["num_gpu"] == "1"]
    assert all(len(s) == 2 and s == sorted(s) and s[0] != s[1] for s in specs)
    pairs = Counter("|".join(s) for s in specs)
    # proportional draws: the two big models together most often, the two small ones least
    assert pairs["G2|T4"] > pairs["G2|V100"] > pairs["T4|V100"] > 0


def test_existing_constraints_are_kept_and_bad_shares_refused(files, tmp_path):
    rows = _rows(files[1])
    rows[2]["gpu_spec"] = "V100"
    out = constrain_rows(rows, model_hosts(files[0]), 0.5, seed=1)
    assert out[2]["gpu_spec"] == "V100"
    with pytest.raises(ValueError, match="share"):
        constrain_rows(rows, model_hosts(files[0]), 1.5, seed=1)
    with pytest.raises(ValueError, match="only"):
        constrain_rows(rows, model_hosts(files[0]), 1.0, seed=1)  # one pod is taken already


def test_written_variant_loads_with_the_trace_loader(files, tmp_path):
    path = write_variant(files[0], files[1], tmp_path / "out", 20, seed=4)
    assert path.name == "pods_spec20_s4.csv"
    pods = load_pods(path)
    assert len(pods) == 2000
    assert sum(1 for p in pods if p.models) == 320  # 20 % of 1,600 GPU pods
    assert all(set(p.models) <= {"G2", "T4", "V100"} for p in pods)


def test_file_without_gpu_spec_column_gets_one(files, tmp_path):
    pods = tmp_path / "bare.csv"
    pods.write_text("name,cpu_milli,memory_mib,num_gpu\na,1000,10,1\nb,1000,10,1\n")
    path = write_variant(files[0], pods, tmp_path, 50, seed=1)
    rows = _rows(path)
    assert list(rows[0]) == ["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_spec"]
    assert sum(1 for r in rows if r["gpu_spec"]) == 1


def test_cli_writes_every_share_and_seed(files, tmp_path, capsys):
    assert main(["--nodes", str(files[0]), "--pods", str(files[1]), "--out", str(tmp_path / "v"),
                 "--shares", "5,33", "--seeds", "1-2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [p.rsplit("/", 1)[1] for p in out["files"]] == [
        "pods_spec05_s1.csv", "pods_spec05_s2.csv", "pods_spec33_s1.csv", "pods_spec33_s2.csv"]
    assert _rows(out["files"][0]) != _rows(out["files"][1])
    with pytest.raises(SystemExit):
        main(["--nodes", str(files[0]), "--pods", str(files[1]), "--out", str(tmp_path), "--shares", "120"])
