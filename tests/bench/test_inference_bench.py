"""bench.inference on a tiny run: the table and the JSON have every figure (structure only, no timings)."""

import json

from bench.inference import main

TINY = ["--steps", "0,5,0", "--step-s", "30", "--max", "3", "--target", "2", "--cold-start", "3",
        "--scale-down-delay", "10", "--sample", "10"]


def test_json_report(capsys):
    result = main([*TINY, "--json"])
    printed = json.loads(capsys.readouterr().out)
    assert printed["total"] == result["total"]
    assert [s["rate"] for s in printed["steps"]] == [0, 5, 0]
    step = printed["steps"][1]
    for key in ("replicas", "p95_s", "p95_warm_s", "cold_starts", "replica_starts", "gpu_seconds",
                "fixed_gpu_seconds", "fixed_p95_s", "cold_requests"):
        assert key in step
    assert len(step["replicas"]) == 3 and step["cold_starts"] == 1
    assert printed["total"]["fixed_gpu_seconds"] == 3 * 0.5 * 90
    assert set(printed["target"]) == {"under_half_of_fixed", "warm_p95_within_2x_saturated"}
    assert printed["wall_s"] >= 0 and printed["cpu_s"] >= 0


def test_table(capsys):
    main(TINY)
    out = capsys.readouterr().out
    assert "saturated single-replica latency" in out and "fixed GPU-s" in out
    assert len([line for line in out.splitlines() if line[:4].strip().isdigit()]) == 3
    assert "target: under half the fixed GPU-seconds:" in out and "s CPU" in out
