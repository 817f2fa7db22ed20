"""Deadline jobs in trace replays: `job_type: soft` read with its deadline, softening a trace (the same seed,
the same trace), and a replay that runs a deadline job in the gaps, turns it strict at its latest start and
counts whether it was done by its deadline."""

import csv
import io

import pytest

from bench import replay as bench
from bench import traces as bench_traces
from scheduling.traces import TraceError, TraceJob, read_philly, soften

PHILLY = ("job_id,user,num_gpu,submit_time,iterations,model_name,duration,interval,expect_time_list,"
          "expect_value_list,best_effort,job_type\n")


def rows(count: int = 40) -> list[dict[str, str]]:
    """A Philly trace's rows: every fourth best-effort, the others strict, deadlines 1.5x to 3x the run time."""
    out = []
    for i in range(count):
        duration = 100 + 10 * i
        kind = "best" if i % 4 == 3 else "strict"
        out.append({"job_id": str(i), "user": f"t{i % 3}", "num_gpu": "1", "submit_time": str(5 * i),
                    "iterations": "1", "model_name": "m", "duration": str(duration), "interval": "1",
                    "expect_time_list": str(int(duration * (1.5 + (i % 4) / 2))), "expect_value_list": "10",
                    "best_effort": str(int(kind == "best")), "job_type": kind})
    return out


def test_soft_jobs_are_read_with_their_first_deadline():
    jobs = read_philly([PHILLY, "1,t,2,10,1,m,100,1,250-400,10-5,0,soft\n", "2,t,1,0,1,m,50,1,60,10,0,strict\n",
                        "3,t,1,0,1,m,50,1,60,10,1,best\n"])
    assert [(j.id, j.kind, j.deadline) for j in jobs] == [("2", "strict", None), ("3", "best", None),
                                                          ("1", "soft", 250.0)]
    for bad, message in [("1,t,1,0,1,m,50,1,,10,0,soft\n", "line 2: a soft job needs an expect_time_list"),
                         ("1,t,1,0,1,m,50,1,soon,10,0,soft\n", "line 2: expect_time_list is not a number"),
                         ("1,t,1,0,1,m,50,1,0,10,0,soft\n", "expect_time_list must be > 0"),
                         ("1,t,1,0,1,m,50,1,60,10,,later\n", "job_type must be best, strict or soft")]:
        with pytest.raises(TraceError, match=message):
            read_philly([PHILLY, bad])


def test_softening_makes_that_share_of_strict_jobs_soft_the_same_for_a_seed():
    before = rows()
    strict = [r["job_id"] for r in before if r["job_type"] == "strict"]
    once, again, other = soften(before, 0.5, 1), soften(before, 0.5, 1), soften(before, 0.5, 2)
    assert once == again and once != other
    assert before == rows()                                     # the rows given are left as they were
    soft = [r for r in once if r["job_type"] == "soft"]
    assert len(soft) == round(0.5 * len(strict)) and {r["job_id"] for r in soft} < set(strict)
    assert [r for r in once if r["job_type"] == "best"] == [r for r in before if r["job_type"] == "best"]
    # deadlines are drawn from the strict jobs' own ratios (this trace has no soft job): 1.5x to 2.5x
    for r in soft:
        assert 1.5 <= int(r["expect_time_list"]) / int(r["duration"]) <= 2.5 + 0.01
    assert soften(before, 0, 1) == before and len([r for r in soften(before, 1, 3) if r["job_type"] == "soft"]) == 30
    # a trace with soft jobs: deadlines are drawn like theirs
    with_soft = [dict(r, job_type="soft", expect_time_list=str(4 * int(r["duration"]))) if i < 5 else r
                 for i, r in enumerate(before)]
    drawn = [r for r in soften(with_soft, 1, 1) if r["job_type"] == "soft"]
    assert all(int(r["expect_time_list"]) == 4 * int(r["duration"]) for r in drawn)
    with pytest.raises(TraceError, match="within 0..1"):
        soften(before, 1.5, 1)


def test_the_command_writes_the_softened_trace(tmp_path):
    source, out = tmp_path / "trace.csv", tmp_path / "soft.csv"
    with open(source, "w", newline="") as f:
        writer = csv.DictWriter(f, list(rows()[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows())
    assert bench_traces.main([str(source), "--soften", "0.6", "--seed", "4", "--out", str(out)]) == 0
    written = list(csv.DictReader(io.StringIO(out.read_text())))
    assert written == soften(rows(), 0.6, 4)
    jobs = read_philly(out.read_text().splitlines(keepends=True))
    assert sum(j.kind == "soft" for j in jobs) == 18


def soft(job_id, team, gpus, submit, duration, deadline):
    return TraceJob(job_id, team, gpus, float(submit), float(duration), False, float(deadline))


def test_a_deadline_job_runs_in_the_gaps_gives_way_and_turns_strict_at_its_latest_start():
    # one 1-GPU silo. d1 (a deadline far off) starts at 0 on the idle GPU; d2 arrives at 10 with a deadline
    # 300 s on: it waits for idle GPUs (d1 ranks as it does) until its latest start, 310 - 100 - 10 (its
    # margin) = 200, then preempts d1 and is done at 300, on time. The strict job s arriving at 400
    # preempts d1 again (before d1's latest start, it gives way like best-effort work).
    jobs = [soft("d1", "a", 1, 0, 500, 100_000), soft("d2", "a", 1, 10, 100, 300),
            TraceJob("s", "a", 1, 400.0, 50.0)]
    s = bench.Settings(gpus_per_node=1, checkpoint_s=0)
    out = bench.run_silos(jobs, {"a": 1}, s)
    d1, d2, strict = out.results["d1"], out.results["d2"], out.results["s"]
    assert (d2.start, d2.end) == (200, 300)
    assert (strict.start, strict.end) == (400, 450)
    assert d1.evictions == 2 and d1.lost_s == 0 and d1.end == 500 + 100 + 50
    teams, total = out.figures(jobs)
    assert total.deadline_jobs == 2 and total.deadline_met == 2 and total.deadline_met_share == 1.0
    assert total.strict_jobs == 1 and total.wait_p95_s == 0
    assert out.feasible


def test_a_missed_deadline_fails_the_target_and_counts():
    # the strict job holds the GPU past d's deadline: d starts too late
    jobs = [TraceJob("s", "a", 1, 0.0, 1000.0), soft("d", "a", 1, 10, 100, 300)]
    out = bench.run_silos(jobs, {"a": 1}, bench.Settings(gpus_per_node=1))
    assert out.results["d"].start == 1000
    _, total = out.figures(jobs)
    assert (total.deadline_jobs, total.deadline_met, total.deadline_met_share) == (1, 0, 0.0)
    assert not out.feasible and "deadline jobs not done by their deadlines" in out.why
    # a search stops as soon as it knows
    early = bench.run_silos(jobs, {"a": 1}, bench.Settings(gpus_per_node=1), stop_early=True)
    assert not early.feasible
