"""The forward simulation (core/replay.py): hand-made cases with known answers, run through the
production core."""

import pytest

from scheduling.core import Pool, Queue, RunningReplica, Slice, Snapshot
from scheduling.core.builders import cycles, job, nodes, with_jobs
from scheduling.core.replay import Replay, ReplayJob, replay

GPU_MEM = 81920


def cluster(gpus: int, *queues: Queue, running=()) -> Snapshot:
    return Snapshot(pools=(Pool("h100"),), nodes=nodes("h100", 1, gpus), queues=queues or (Queue("q"),), jobs=(),
                    running=running)


def whole(job_id: str, gpus: tuple[int, ...]) -> RunningReplica:
    return RunningReplica(job_id, "worker", 0, "h100-0", gpus, Slice("whole", 1000, GPU_MEM))


def starts(result) -> dict[str, float | None]:
    return {j.id: j.start for j in result.jobs.values()}


def test_a_job_waits_for_the_running_job_to_end():
    # "busy" has run 50 of its 100 s on both GPUs: the next job starts when it ends, 50 s from now
    busy = ReplayJob(job("busy", "q", 2), submit_time=-60, duration=100, done=50, started=-50)
    result = replay(cluster(2, running=(whole("busy", (0, 1)),)), [busy, ReplayJob.simple("next", "q", 1, 0, 30)],
                    start=0)
    assert result.jobs["busy"].start == -50 and result.jobs["busy"].end == 50
    assert result.jobs["next"].start == 50 and result.jobs["next"].end == 80
    assert result.jobs["next"].wait_s == 50


def test_higher_priority_goes_first_then_submission_order():
    jobs = [ReplayJob.simple("old", "q", 1, 0, 10), ReplayJob.simple("urgent", "q", 1, 5, 10, priority=5),
            ReplayJob.simple("newer", "q", 1, 3, 10)]
    # all three wait behind a job that holds the only GPU until t=20
    hold = ReplayJob(job("hold", "q", 1, preemptible=False), submit_time=-1, duration=20, started=0)
    result = replay(cluster(1, running=(whole("hold", (0,)),)), [hold, *jobs], start=0, cycle_s=2)
    assert starts(result) == {"hold": 0, "urgent": 20, "old": 30, "newer": 40}


def test_arrivals_start_when_they_arrive_or_at_the_next_tick():
    jobs = [ReplayJob.simple("a", "q", 1, 3, 100), ReplayJob.simple("b", "q", 1, 7.5, 100)]
    at_once = replay(cluster(2), jobs, start=0, cycle_s=5)
    assert starts(at_once) == {"a": 3, "b": 7.5}
    on_ticks = replay(cluster(2), jobs, start=0, cycle_s=5, on_events=False)
    assert starts(on_ticks) == {"a": 5, "b": 10}
    assert on_ticks.jobs["a"].end == 105


def test_completions_free_gpus_for_the_next_in_line_on_ticks():
    jobs = [ReplayJob.simple("first", "q", 1, 0, 12), ReplayJob.simple("second", "q", 1, 1, 12)]
    result = replay(cluster(1), jobs, start=0, cycle_s=5, on_events=False)
    # first ends at 12, seen at the 15 s tick; second ends at 27, the replay's last cycle is at 30
    assert (result.jobs["first"].end, result.jobs["second"].start, result.jobs["second"].end) == (12, 15, 27)
    assert result.time == 30


def test_a_quiet_cluster_costs_no_cycles():
    jobs = [ReplayJob.simple("long", "q", 1, 0, 1e6), ReplayJob.simple("later", "q", 1, 5e5, 10)]
    result = replay(cluster(2), jobs, start=0, cycle_s=1)
    assert result.jobs["long"].end == 1e6 and result.jobs["later"].start == 5e5
    # never a million idle ticks: a cycle for each start; the tick after each and the two ends find
    # nothing waiting or able to grow, and are skipped
    assert (result.cycles, result.skipped) == (2, 4)


def test_preempted_work_is_lost_back_to_the_last_checkpoint():
    def run(checkpoint_s):
        low = ReplayJob.simple("low", "q", 1, 0, 100, checkpoint_s=checkpoint_s)
        high = ReplayJob.simple("high", "q", 1, 45, 10, priority=10)
        return replay(cluster(1), [low, high], start=0, cycle_s=1).jobs

    never = run(None)
    assert never["high"].start == 45 and never["low"].evictions == 1
    assert never["low"].lost_s == 45 and never["low"].end == 55 + 100   # starts over at 55
    every_20 = run(20)
    assert every_20["low"].lost_s == 5 and every_20["low"].end == 55 + 60   # 40 s kept
    always = run(0)
    assert always["low"].lost_s == 0 and always["low"].end == 55 + 55


def test_a_queue_within_its_deserved_quota_reclaims():
    queues = (Queue("a", deserved_milli=1000), Queue("b", deserved_milli=1000))
    jobs = [ReplayJob.simple("b1", "b", 1, 0, 1000), ReplayJob.simple("b2", "b", 1, 0, 1000),
            ReplayJob.simple("a1", "a", 1, 10, 50)]
    result = replay(cluster(2, *queues), jobs, start=0, cycle_s=1)
    assert result.jobs["a1"].start == 10 and result.jobs["a1"].end == 60
    assert sorted(j.evictions for j in result.jobs.values()) == [0, 0, 1]
    assert result.evicts == 1


def test_the_replay_makes_the_cores_own_decisions():
    """Cycle by cycle the same binds and evictions as the core applied to its own snapshot."""
    snap = Snapshot(pools=(Pool("h100"),), nodes=nodes("h100", 2, 4), queues=(Queue("a", deserved_milli=4000),
                    Queue("b", deserved_milli=4000)), jobs=())
    borrowers = [job(f"b{i}", "b", 1, created=i) for i in range(8)]
    snap, _ = cycles(with_jobs(snap, *borrowers), 1)   # b holds all 8 GPUs, half of them borrowed
    takers = [job("a-three", "a", 3, created=10), job("a-small", "a", 1, priority=3, created=11),
              job("a-two", "a", 2, created=12)]
    seen = []
    jobs = [ReplayJob(j, 0, 1e6, started=0) for j in borrowers] + [ReplayJob(j, 0, 1e6) for j in takers]
    replay(snap, jobs, start=0, cycle_s=1, until=100, on_cycle=lambda at, snapshot, decisions: seen.append(decisions))
    _, expected = cycles(with_jobs(snap, *takers), len(seen))
    assert [(d.evicts, d.binds) for d in seen] == [(d.evicts, d.binds) for d in expected]
    assert any(d.evicts for d in seen) and not seen[-1].changes


def test_watch_until_and_max_cycles_stop_early():
    jobs = [ReplayJob.simple(f"j{i}", "q", 1, i * 100, 50) for i in range(5)]
    watched = replay(cluster(1), jobs, start=0, watch=["j1"])
    assert watched.jobs["j1"].start == 100 and watched.jobs["j4"].start is None
    until = replay(cluster(1), jobs, start=0, until=250)
    assert [until.jobs[f"j{i}"].start for i in range(5)] == [0, 100, 200, None, None]
    engine = Replay(cluster(1), jobs, start=0)
    engine.run(max_cycles=1)
    assert engine.run().jobs["j4"].end == 450   # goes on where it stopped


def test_bad_input_names_what_is_wrong():
    with pytest.raises(ValueError, match="not a replay job"):
        Replay(cluster(2, running=(whole("ghost", (0,)),)), [])
    with pytest.raises(ValueError, match="duplicate"):
        Replay(cluster(2), [ReplayJob.simple("x", "q", 1, 0, 1), ReplayJob.simple("x", "q", 1, 0, 1)])
    with pytest.raises(ValueError, match="duration"):
        ReplayJob.simple("x", "q", 1, 0, -1)
    with pytest.raises(ValueError, match="no replay job"):
        replay(cluster(1), [], watch=["nobody"])


def test_an_elastic_job_grows_and_giving_back_extras_does_not_stop_it():
    grower = ReplayJob.simple("grower", "q", 1, 0, 100, replicas=3, min_replicas=1)
    urgent = ReplayJob.simple("urgent", "q", 2, 10, 20, priority=5)
    seen = []
    result = replay(cluster(4), [grower, urgent], start=0, cycle_s=1,
                    on_cycle=lambda at, snapshot, decisions: seen.append((at, decisions)))
    assert len(seen[0][1].binds) == 3   # its minimum, and two more on idle GPUs
    assert result.jobs["urgent"].start == 10
    shrunk = [e.reason for _, d in seen for e in d.evicts]
    assert shrunk == ["shrink"]
    assert result.jobs["grower"].evictions == 0 and result.jobs["grower"].end == 100


def test_allocation_records_every_change_of_what_jobs_hold():
    low = ReplayJob.simple("low", "q", 1, 0, 100, checkpoint_s=0)
    high = ReplayJob.simple("high", "q", 1, 45, 10, priority=10)
    engine = Replay(cluster(1), [low, high], start=0, cycle_s=1, record_allocation=True)
    assert not engine.finished()
    result = engine.run()
    assert engine.finished() and engine.result().jobs["low"].end == result.jobs["low"].end == 110
    assert result.allocation == [(0, "low", "h100-0", 1000), (45, "low", "h100-0", -1000),
                                 (45, "high", "h100-0", 1000), (55, "high", "h100-0", -1000),
                                 (55, "low", "h100-0", 1000), (110, "low", "h100-0", -1000)]
    assert replay(cluster(1), [low], start=0).allocation == []   # only when asked for


def _backlog(count: int) -> list[ReplayJob]:
    """`count` jobs of mixed sizes in two queues, all waiting at once for a 4-GPU node, some more urgent."""
    sizes = (1, 2, 4, 3)
    return [ReplayJob.simple(f"j{i}", "a" if i % 3 else "b", sizes[i % 4], i * 5.0, 60 + 7 * (i % 5),
                             priority=1 if i % 7 == 0 else 0) for i in range(count)]


def test_a_pending_window_as_long_as_the_backlog_changes_nothing():
    queues = (Queue("a", deserved_milli=2000), Queue("b", deserved_milli=2000))
    exact = replay(cluster(4, *queues), _backlog(40), start=0, cycle_s=10)
    windowed = Replay(cluster(4, *queues), _backlog(40), start=0, cycle_s=10, pending_window=40).run()
    assert starts(windowed) == starts(exact) and windowed.cycles == exact.cycles


def test_a_short_pending_window_still_runs_every_job_in_the_queue_order():
    # same-size jobs in one queue: nothing can be backfilled, so a window of 2 decides as the whole queue would
    jobs = [ReplayJob.simple(f"j{i:02d}", "q", 2, float(i), 30, priority=i % 2) for i in range(30)]
    exact = replay(cluster(4), jobs, start=0, cycle_s=10)
    engine = Replay(cluster(4), jobs, start=0, cycle_s=10, pending_window=2)
    shown = []
    engine.on_cycle = lambda at, snapshot, decisions: shown.append(len(snapshot.jobs))
    windowed = engine.run()
    assert starts(windowed) == starts(exact)
    assert all(j.end is not None for j in windowed.jobs.values())
    assert max(shown) <= 2 + 2      # the two running and at most two waiting
    assert engine.ended() == 30


def test_a_pending_window_must_be_positive():
    with pytest.raises(ValueError, match="pending_window"):
        Replay(cluster(1), [], start=0, pending_window=0)
