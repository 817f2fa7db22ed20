"""The benchmarks on small excerpts of the public traces, kept in tests/fixtures/traces/ (the upstream sources
are named in docs/developer/benchmarks.md): the readers take the real files' columns, and the figures of each
excerpt are pinned, so a change that moves a decision or a reader shows here before it shows in a full run.

- philly_mix1_excerpt.csv: the MIX1 jobs of three teams submitted in the trace's first 120 s (339 jobs);
- openb_node_list_gpu_node_excerpt.csv: every 50th GPU node of the Alibaba 2023 node list (25 nodes);
- openb_pod_list_gpushare40_excerpt.csv: every 25th pod of its gpushare40 pod list (327 pods)."""

import json
from pathlib import Path

from bench import placement as placement_bench
from bench import replay as replay_bench
from scheduling.traces import read_philly_file

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
PHILLY = TRACES / "philly_mix1_excerpt.csv"
NODES = TRACES / "openb_node_list_gpu_node_excerpt.csv"
PODS = TRACES / "openb_pod_list_gpushare40_excerpt.csv"


def last_json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_the_philly_reader_takes_the_upstream_columns():
    jobs = read_philly_file(PHILLY)
    assert len(jobs) == 339 and sum(job.gpus == 0 for job in jobs) == 3
    assert {job.team for job in jobs} == {"vc_6214e9", "vc_ed69ec", "vc_ee9e8c"}
    assert sum(job.best_effort for job in jobs) == 99
    assert max(job.gpus for job in jobs) == 16


def test_the_mix1_excerpt_needs_fewer_gpus_pooled_than_in_silos(capsys):
    assert replay_bench.main(["--trace", str(PHILLY), "--mode", "all", "--find-min-gpus", "--p95-wait", "60",
                              "--gpus-per-node", "8", "--cycle-s", "10", "--checkpoint-min", "30", "--json"]) == 0
    out = last_json(capsys)
    assert (out["jobs"], out["cpu_only_left_out"]) == (336, 3)
    assert out["silo_gpus"] == {"vc_6214e9": 80, "vc_ed69ec": 56, "vc_ee9e8c": 72}
    assert {mode: figures["min_gpus"] for mode, figures in out["modes"].items()} == {
        "silos": 208, "pool": 200, "pool-besteffort": 152}
    assert out["strict_only_min_gpus"] == 152


def test_the_alibaba_excerpt_places_with_the_default_policy(capsys):
    assert placement_bench.main(["--nodes", str(NODES), "--pods", str(PODS), "--policy", "default",
                                 "--seeds", "42-44", "--json"]) == 0
    out = last_json(capsys)
    assert out["per_seed"] == [6.56, 7.62, 6.47]
    assert out["failed_pods"] == [10, 11, 10]


def test_the_alibaba_pods_replayed_with_their_times_share_gpus(capsys):
    assert replay_bench.main(["--trace-format", "alibaba", "--trace", str(PODS), "--nodes-file", str(NODES),
                              "--find-min-gpus", "--json"]) == 0
    out = last_json(capsys)
    assert (out["pods"], out["left_out"]) == (236, 91)
    exclusive, shared = out["modes"]["exclusive"], out["modes"]["shared"]
    assert exclusive["gpu_hours_held"] == 1611.89 and shared["gpu_hours_held"] == 1556.212
    assert exclusive["min_gpus"] == shared["min_gpus"] == 8
