"""bench/replay.py on small hand-made traces with known answers: waits, preemption loss back to the last
checkpoint, the fewest-GPUs search; and that every decision is the production core's (the Celery cycle's
run_cycle) on the replay's own snapshots."""

import json
import math

import pytest

from bench import replay as bench
from bench import replay_pods
from scheduling.core import cycle as core_cycle
from scheduling.core import replay as engine
from scheduling.traces import TraceError, TraceJob, figures, gang, percentile, read_philly

HEADER = "job_id,user,num_gpu,submit_time,duration,best_effort\n"


def trace(*rows: tuple) -> list[TraceJob]:
    """rows: (id, team, gpus, submit, duration, best_effort)"""
    return [TraceJob(str(i), team, gpus, float(submit), float(duration), be) for i, team, gpus, submit, duration, be
            in rows]


def write(tmp_path, rows) -> str:
    path = tmp_path / "trace.csv"
    path.write_text(HEADER + "".join(f"{i},{t},{g},{s},{d},{int(b)}\n" for i, t, g, s, d, b in rows))
    return str(path)


def run_main(capsys, *argv) -> dict:
    assert bench.main(list(argv)) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_a_silo_job_waits_for_the_node_then_its_completion_counts_the_wait():
    jobs = trace(("big", "a", 8, 0, 100, False), ("small", "a", 1, 10, 50, False))
    out = bench.run_silos(jobs, {"a": 1}, bench.Settings())
    assert out.results["small"].start == 100 and out.results["small"].end == 150
    teams, total = out.figures(jobs)
    assert teams["a"].wait_p95_s == 90 and teams["a"].jct_p95_s == 140
    assert total.gpu_hours == pytest.approx((8 * 100 + 50) / 3600)
    assert total.makespan_s == 150 and total.utilisation == pytest.approx(850 / (8 * 150))


def test_best_effort_work_is_evicted_when_a_team_reclaims_and_loses_what_came_after_its_checkpoint():
    # team a's best-effort job holds the only node; team b's strict job arrives at 1000 s. In pool-besteffort
    # it reclaims at once: the best-effort job, checkpointed every 600 s, loses 400 s and runs its last
    # 3000 s after b's job ends at 1100.
    jobs = trace(("be", "a", 8, 0, 3600, True), ("strict", "b", 8, 1000, 100, False))
    s = bench.Settings(checkpoint_s=600)
    out = bench.run_pool(jobs, "pool-besteffort", 1, {"a": 8, "b": 8}, s)
    be, strict = out.results["be"], out.results["strict"]
    assert strict.start == 1000 and strict.end == 1100
    assert (be.evictions, be.lost_s, be.end) == (1, 400, 1100 + 3000)
    teams, total = out.figures(jobs)
    assert total.preemptions == 1 and total.lost_gpu_hours == pytest.approx(8 * 400 / 3600)
    assert teams["a"].best_effort_done_s == 4100 and teams["b"].wait_p95_s == 0
    # its GPU-hours count the work done again
    assert total.gpu_hours == pytest.approx(8 * (3600 + 400 + 100) / 3600)

    # in `pool` the same job is ordinary work over its team's half of the node: b (also at its fair share
    # of half) may not take all of it, so b waits for the job to end
    plain = bench.run_pool(jobs, "pool", 1, {"a": 8, "b": 8}, s)
    assert plain.results["strict"].start == 3600 and plain.results["be"].evictions == 0

    # no checkpoint at all: it starts over
    never = bench.run_pool(jobs, "pool-besteffort", 1, {"a": 8, "b": 8}, bench.Settings(checkpoint_s=None))
    assert never.results["be"].lost_s == 1000 and never.results["be"].end == 1100 + 3600


def test_the_search_finds_the_fewest_nodes_silos_against_one_pool(tmp_path, capsys):
    # each team runs two 8-GPU jobs at once, the teams at different hours: alone a team needs 2 nodes
    # (on 1 node its second job waits 100 s, over the 60 s target), shared the two teams need 2 nodes in all
    rows = [("a1", "a", 8, 0, 100, 0), ("a2", "a", 8, 0, 100, 0), ("b1", "b", 8, 3600, 100, 0),
            ("b2", "b", 8, 3600, 100, 0)]
    out = run_main(capsys, "--trace", write(tmp_path, rows), "--mode", "all", "--find-min-gpus", "--p95-wait", "60",
                   "--json")
    assert out["modes"]["silos"]["min_gpus"] == 32 and out["silo_gpus"] == {"a": 16, "b": 16}
    assert out["modes"]["pool"]["min_gpus"] == 16 and out["modes"]["pool-besteffort"]["min_gpus"] == 16
    assert out["ratio_to_silos"]["pool"] == 0.5
    assert out["modes"]["pool"]["meets_target"] and out["modes"]["pool"]["total"]["wait_p95_s"] == 0
    assert out["modes"]["silos"]["teams"]["a"]["capacity_gpus"] == 16


def test_the_search_counts_best_effort_jobs_done_within_the_span(tmp_path, capsys):
    # a strict job then a best-effort one as long as the trace: on one node the best-effort job ends at
    # 200 + 100, within 1.5 x the span (300 s from 0), so one node is enough
    rows = [("s", "a", 8, 0, 100, 0), ("be", "a", 8, 50, 100, 1), ("late", "a", 1, 200, 100, 0)]
    out = run_main(capsys, "--trace", write(tmp_path, rows), "--mode", "pool-besteffort", "--find-min-gpus",
                   "--silo-gpus", "a=8", "--json")
    result = out["modes"]["pool-besteffort"]
    assert result["min_gpus"] == 8 and result["teams"]["a"]["best_effort_done_s"] <= 1.5 * out["span_s"]


def test_a_search_between_earlier_bounds_tries_only_the_sizes_between(tmp_path, capsys, monkeypatch):
    # two strict 8-GPU jobs at once need 2 nodes; 1 to 4 nodes given, 4 known to meet: 4 is not replayed
    rows = [("a1", "a", 8, 0, 100, 0), ("a2", "a", 8, 0, 100, 0)]
    tried = []
    real = bench.run_pool
    monkeypatch.setattr(bench, "run_pool", lambda trace, mode, n, *a, **kw: tried.append(n) or real(trace, mode, n,
                                                                                                     *a, **kw))
    out = run_main(capsys, "--trace", write(tmp_path, rows), "--mode", "pool", "--find-min-gpus", "--silo-gpus",
                   "a=32", "--gpus-between", "8-32", "--json")
    assert out["modes"]["pool"]["min_gpus"] == 16 and out["modes"]["pool"]["meets_target"]
    assert 4 not in tried and "strict_only_min_gpus" not in out
    for bad in (["--gpus-between", "8-12"], ["--gpus-between", "16-8"], ["--gpus-between", "x"]):
        with pytest.raises(SystemExit):
            bench.main(["--trace", write(tmp_path, rows), "--mode", "pool", "--find-min-gpus", *bad])
    with pytest.raises(SystemExit):
        bench.main(["--trace", write(tmp_path, rows), "--mode", "pool", "--gpus", "16", "--gpus-between", "8-16"])


def test_a_given_size_is_replayed_as_it_is(tmp_path, capsys):
    rows = [("a1", "a", 8, 0, 100, 0), ("a2", "a", 8, 0, 100, 0)]
    out = run_main(capsys, "--trace", write(tmp_path, rows), "--mode", "pool", "--gpus", "8", "--silo-gpus", "a=16",
                   "--json")
    result = out["modes"]["pool"]
    assert not result["meets_target"] and result["total"]["wait_p95_s"] == 100 and "min_gpus" not in result
    with pytest.raises(SystemExit):
        bench.main(["--trace", write(tmp_path, rows), "--gpus", "12"])   # not whole nodes


def test_a_decisions_digest_names_every_cycles_decisions_and_a_prefix_stops_early(tmp_path, capsys):
    rows = [("a1", "a", 8, 0, 100, 0), ("a2", "a", 8, 0, 100, 0), ("b1", "b", 8, 50, 100, 1)]
    argv = ["--trace", write(tmp_path, rows), "--mode", "pool-besteffort", "--gpus", "8", "--silo-gpus",
            "a=8,b=8", "--decisions-hash", "--json"]
    first, again = run_main(capsys, *argv), run_main(capsys, *argv)
    digest = first["modes"]["pool-besteffort"]["decisions_sha256"]
    assert len(digest) == 64 and digest == again["modes"]["pool-besteffort"]["decisions_sha256"]
    # another cluster decides otherwise
    other = run_main(capsys, *argv[:5], "16", *argv[6:])
    assert other["modes"]["pool-besteffort"]["decisions_sha256"] != digest
    prefix = run_main(capsys, *argv, "--until-s", "60")["modes"]["pool-besteffort"]
    assert prefix["cycles"] < first["modes"]["pool-besteffort"]["cycles"] and not prefix["meets_target"]
    assert prefix["decisions_sha256"] != digest
    with pytest.raises(SystemExit):
        bench.main([*argv[:4], "--find-min-gpus", *argv[6:]])


def test_every_decision_is_the_production_cores_on_the_replays_own_snapshot(monkeypatch):
    """The bench has no scheduler of its own: each cycle is core.cycle.run_cycle (what the Celery cycle calls,
    scheduling/cycle/run.py), and run again on the same snapshot it decides the same."""
    from scheduling.cycle import run as celery_cycle

    assert celery_cycle.core.run_cycle is core_cycle.run_cycle is engine.run_cycle
    seen = []

    def spy(snapshot, *memo, **options):
        decisions = core_cycle.run_cycle(snapshot, *memo, **options)
        seen.append((snapshot, decisions))
        return decisions

    monkeypatch.setattr(engine, "run_cycle", spy)
    jobs = trace(("be", "a", 8, 0, 3600, True), ("s1", "b", 4, 100, 500, False), ("s2", "b", 8, 200, 50, False),
                 ("s3", "a", 2, 250, 60, False))
    out = bench.run_pool(jobs, "pool-besteffort", 1, {"a": 8, "b": 8}, bench.Settings(checkpoint_s=600))
    assert len(seen) == out.cycles > 3
    assert any(d.evicts for _, d in seen) and any(d.binds for _, d in seen)
    monkeypatch.undo()
    for snapshot, decisions in seen:
        again = core_cycle.run_cycle(snapshot)
        assert (again.evicts, again.binds) == (decisions.evicts, decisions.binds)


def test_gangs_percentiles_and_trace_errors():
    assert gang(4, 8) == (4, 1) and gang(16, 8) == (8, 2) and gang(12, 8) == (6, 2) and gang(20, 8) == (5, 4)
    assert percentile([1, 2, 3, 4, 100], 95) == 100 and percentile([5.0] * 20 + [90.0], 95) == 5.0
    assert percentile([], 50) is None and percentile([1, math.inf], 95) == math.inf
    jobs = read_philly(["job_id,user,num_gpu,submit_time,duration,job_type", "7,t,2,5,10,best", "3,t,1,1,4,strict"])
    assert [(j.id, j.best_effort) for j in jobs] == [("3", False), ("7", True)]
    for bad, message in [("user,num_gpu,submit_time\n", "lacks column"),
                         ("user,num_gpu,submit_time,duration\nx,1,0,1\n", "best_effort or a job_type"),
                         (HEADER + "1,a,two,0,1,0\n", "line 2: num_gpu is not a number"),
                         (HEADER + "1,a,1,-3,1,0\n", "submit_time must be"),
                         (HEADER + "1,a,1,0,1,0\n1,a,1,0,1,0\n", "appears twice"),
                         (HEADER + "1,a,1,0,1,maybe\n", "best_effort must be 0 or 1")]:
        with pytest.raises(TraceError, match=message):
            read_philly(bad.splitlines())
    r = engine.JobResult("x", "q", 0.0, start=None)
    f = figures([r], {"x": 1}, {"x": 10})
    assert f.never_started == 1 and f.unfinished == 1 and f.as_dict()["wait_p95_s"] is None


def test_fractions_share_a_gpu_that_exclusive_pods_queue_for(tmp_path):
    pods = [replay_pods.Pod("p1", 1, 500, 0, 0, 0.0, 100.0), replay_pods.Pod("p2", 1, 400, 0, 0, 0.0, 100.0)]
    node = bench.cluster(1, [], bench.Settings(gpus_per_node=1)).nodes
    shared = replay_pods.replay_pods(pods, node, "shared", host=False, cycle_s=10)
    exclusive = replay_pods.replay_pods(pods, node, "exclusive", host=False, cycle_s=10)
    assert shared["wait_p95_s"] == 0 and shared["peak_gpus_in_use"] == 1
    assert shared["gpu_hours_held"] == pytest.approx(0.9 * 100 / 3600, abs=0.001)
    assert shared["gpu_hours_in_use"] == pytest.approx(100 / 3600, abs=0.001)
    assert exclusive["wait_p95_s"] == 100 and exclusive["gpu_hours_in_use"] == pytest.approx(200 / 3600, abs=0.001)
    found, at_min = replay_pods.min_nodes(pods, "shared", 1, 10, 60)
    assert found == 1 and replay_pods.min_nodes(pods, "exclusive", 1, 10, 60)[0] == 2
