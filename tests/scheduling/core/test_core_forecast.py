"""The expected-start forecast on core snapshots (core/forecast.py): hand-made clusters with known answers,
every decision the production core's, so backfill, quotas, reclaim and elastic extras are the cycle's."""

import math
from dataclasses import replace

import pytest

from scheduling.core import Pool, Queue, RunningReplica, Slice, Snapshot
from scheduling.core.builders import job, nodes
from scheduling.core.forecast import (
    Arrival,
    JobInput,
    Outcome,
    calibrate,
    expected_arrivals,
    forecast_windows,
    replay_jobs,
    runtime_spread,
    surge,
)
from scheduling.core.replay import ReplayJob, replay

GPU_MEM = 81920
INTERVAL = 10.0


def cluster(node_count: int, gpus: int, *queues: Queue, running=()) -> Snapshot:
    return Snapshot(pools=(Pool("h100"),), nodes=nodes("h100", node_count, gpus), queues=queues or (Queue("q"),),
                    jobs=(), running=running)


def on(job_id: str, node: str, gpus: tuple[int, ...], index: int = 0) -> RunningReplica:
    return RunningReplica(job_id, "worker", index, node, gpus, Slice("whole", 1000, GPU_MEM))


def running(core_job, seconds: float, started: float) -> JobInput:
    return JobInput(core_job, core_job.queue, seconds, started, True, None, False)


def waiting(core_job, seconds: float) -> JobInput:
    return JobInput(core_job, core_job.queue, seconds, None, False, None, True)


def test_a_waiting_job_gets_the_running_jobs_end_with_one_interval_of_slack_each_way():
    busy = job("busy", "q", 8, created=-100)
    snapshot = cluster(1, 8, running=(on("busy", "h100-0", tuple(range(8))),))
    inputs = [running(busy, 300, -100), waiting(job("next", "q", 8, created=-50), 600)]
    earliest, latest = forecast_windows(snapshot, inputs, {}, 0.0, interval=INTERVAL)["next"]
    # busy ends at 200; the late replay runs it one interval longer, sees it on the next tick, adds the phase
    assert earliest == 200 and 200 < latest <= 200 + 3 * INTERVAL


def test_a_smaller_later_job_backfills_ahead_of_a_gang_that_waits_for_a_whole_node():
    # two nodes, one half busy for 1000 s and one full for 100 s: the 16-GPU gang (first in the queue) waits for
    # both; the 4-GPU job behind it starts at once on the free half
    half, full = job("half", "q", 4, created=-10), job("full", "q", 8, created=-10)
    snapshot = cluster(2, 8, running=(on("half", "h100-0", (0, 1, 2, 3)), on("full", "h100-1", tuple(range(8)))))
    gang = job("gang", "q", 8, replicas=2, created=-5)
    small = job("small", "q", 4, created=-1)
    inputs = [running(half, 1010, -10), running(full, 110, -10), waiting(gang, 600), waiting(small, 600)]
    windows = forecast_windows(snapshot, inputs, {}, 0.0, interval=INTERVAL)
    assert windows["small"][0] == 0
    assert windows["gang"][0] == 1000


def test_non_preemptible_work_waits_for_its_queues_quota_even_on_free_gpus():
    # queue a deserves 8 GPUs and uses them; its next non-preemptible job waits for its own job to end,
    # though the other node is free
    mine = job("mine", "a", 8, preemptible=False, created=-10)
    snapshot = cluster(2, 8, Queue("a", deserved_milli=8000), Queue("b", deserved_milli=8000),
                       running=(on("mine", "h100-0", tuple(range(8))),))
    inputs = [running(mine, 510, -10), waiting(job("strict", "a", 8, preemptible=False, created=-1), 600)]
    earliest, latest = forecast_windows(snapshot, inputs, {}, 0.0, interval=INTERVAL)["strict"]
    assert earliest == 500 and latest >= 500


def test_a_queue_under_its_share_reclaims_from_borrowed_work():
    # queue b borrows the whole node with preemptible work; a's job reclaims its share at once
    borrowed = job("borrowed", "b", 8, created=-10)
    snapshot = cluster(1, 8, Queue("a", deserved_milli=8000), Queue("b", deserved_milli=0),
                       running=(on("borrowed", "h100-0", tuple(range(8))),))
    inputs = [running(borrowed, 5000, -10), waiting(job("owner", "a", 8, created=-1), 600)]
    earliest, latest = forecast_windows(snapshot, inputs, {}, 0.0, interval=INTERVAL)["owner"]
    assert earliest == 0 and latest <= 3 * INTERVAL


def test_a_steady_queue_comes_again_at_the_upper_count_over_the_span_not_every_window():
    # 6 jobs an hour, one every 10 minutes: the rate now is the hour's; over 2 h 12 are expected and the upper
    # count is 12 + z*sqrt(12) + 1 (the bound grows as the square root), not 2 x (6 + z*sqrt(6) + 1)
    seen = [Arrival(job(f"s{i}", "q", 1, created=-300.0 - 600 * i), 60.0, 300.0 + 600 * i) for i in range(6)]
    coming, until = expected_arrivals(seen, 0.0, window_s=3600.0, span_s=7200.0, z=1.0)
    assert until == 7200.0
    assert len(coming) == math.floor(12 + 1.0 * math.sqrt(12) + 1)
    assert [at for at, _, _ in coming] == sorted(at for at, _, _ in coming)
    assert len({j.id for _, j, _ in coming}) == len(coming) and all(j.created == at for at, j, _ in coming)
    assert coming[0][0] == 0.0 and coming[0][1].roles == seen[0].job.roles   # the newest comes again first
    few, cut = expected_arrivals(seen, 0.0, window_s=3600.0, span_s=7200.0, limit=5)
    assert len(few) == 5 and few[-1][0] <= cut < 7200.0   # cut short: modelled until the first left out


def test_a_burst_comes_again_soon_and_fades():
    # 20 jobs in the last 5 minutes and none before in the hour: they come again at once, not an hour later,
    # and the rate falls back to the hour's (20 an hour) within the burst's fade
    seen = [Arrival(job(f"b{i}", "q", 1, created=-15.0 * i), 60.0, 15.0 * i) for i in range(20)]
    coming, _ = expected_arrivals(seen, 0.0, window_s=3600.0, span_s=3 * 3600.0, burst_s=600.0, lasts=3.0, z=0.0)
    times = [at for at, _, _ in coming]
    burst = sum(1 for t in times if t <= 1800)
    assert burst >= 20                                       # the burst goes on: 20 in 10 minutes, fading
    later = sum(1 for t in times if 7200 < t <= 10800)
    assert later <= 20 + 1                                   # the last hour of the span: the hour's rate


def test_a_new_platforms_burst_is_measured_on_what_it_has_seen_and_ends():
    # the platform has run 60 s and seen 30 jobs: that rate (one every 2 s) fades over 3 x 60 s, it is not kept
    # up for the span (or taken as 30 an hour)
    seen = [Arrival(job(f"n{i}", "q", 1, created=-2.0 * i), 60.0, 2.0 * i) for i in range(30)]
    coming, _ = expected_arrivals(seen, 0.0, window_s=3600.0, observed_s=60.0, span_s=3 * 3600.0,
                                  burst_s=600.0, lasts=3.0, z=0.0)
    times = [at for at, _, _ in coming]
    assert sum(1 for t in times if t <= 180) >= 30 * 0.6     # most of 90 s x (1 - 1/e) in the first fade
    assert len(times) <= 30 * 3 + 30 * 3 + 1                 # the fade's 90 and the hour's rate over 3 h
    unseen, _ = expected_arrivals(seen, 0.0, window_s=3600.0, span_s=3 * 3600.0, burst_s=600.0, lasts=3.0, z=0.0)
    assert sum(1 for at, _, _ in unseen if at <= 180) < sum(1 for t in times if t <= 180)


def test_arrivals_widen_the_range_of_work_that_others_can_take_ahead():
    # a best-effort job (a queue deserving nothing, lowest priority) waits for the node; queue a submits an
    # 8-GPU job every 10 minutes: each new one goes ahead of it
    busy = job("busy", "a", 8, created=-10)
    queues = (Queue("a", deserved_milli=8000), Queue("be", deserved_milli=0, over_quota_weight=0.0, priority=-1))
    snapshot = cluster(1, 8, *queues, running=(on("busy", "h100-0", tuple(range(8))),))
    inputs = [running(busy, 310, -10), waiting(job("spare", "be", 8, created=-1), 120)]
    alone = forecast_windows(snapshot, inputs, {}, 0.0, interval=INTERVAL)["spare"]
    recent = [Arrival(job(f"r{i}", "a", 8, created=-600.0 * i), 250.0, 600.0 * i) for i in range(1, 6)]
    busier = forecast_windows(snapshot, inputs, {}, 0.0, interval=INTERVAL, arrivals=recent)["spare"]
    assert alone[0] == busier[0] == 300
    assert busier[1] is None or busier[1] > alone[1] + 200


def test_a_start_that_depends_on_arrivals_past_the_modelled_span_is_open_ended():
    # queue a keeps the node busy all the time: the best-effort job has a floor and no bound
    busy = job("busy", "a", 8, created=-10)
    queues = (Queue("a", deserved_milli=8000), Queue("be", deserved_milli=0, over_quota_weight=0.0, priority=-1))
    snapshot = cluster(1, 8, *queues, running=(on("busy", "h100-0", tuple(range(8))),))
    inputs = [running(busy, 310, -10), waiting(job("spare", "be", 8, created=-1), 120)]
    recent = [Arrival(job(f"r{i}", "a", 8, created=-300.0 * i), 600.0, 300.0 * i) for i in range(1, 13)]
    earliest, latest = forecast_windows(snapshot, inputs, {}, 0.0, interval=INTERVAL, arrivals=recent)["spare"]
    assert earliest == 300 and latest is None


def test_elastic_extras_give_way_to_a_waiting_jobs_minimum():
    # an elastic job of queue b holds both nodes (its minimum: one replica, within b's share); queue a's waiting
    # 8-GPU job takes the extra's node at once, and the elastic job runs on
    elastic = job("elastic", "b", 8, replicas=2, min_replicas=1, created=-10)
    snapshot = cluster(2, 8, Queue("a", deserved_milli=8000), Queue("b", deserved_milli=8000),
                       running=(on("elastic", "h100-0", tuple(range(8))),
                                on("elastic", "h100-1", tuple(range(8)), index=1)))
    inputs = [running(elastic, 5000, -10), waiting(job("next", "a", 8, created=-1), 600)]
    earliest, latest = forecast_windows(snapshot, inputs, {}, 0.0, interval=INTERVAL)["next"]
    assert earliest == 0 and latest <= 3 * INTERVAL


def test_run_time_spread_is_the_quartiles_once_there_is_enough_history():
    assert runtime_spread([0.5, 2.0]) == (1.0, 1.0)
    assert runtime_spread([0.5, 0.8, 1.0, 1.2, 2.0]) == (pytest.approx(0.8), pytest.approx(1.2))
    assert runtime_spread([1.5, 1.6, 1.7, 1.8, 1.9]) == (1.0, pytest.approx(1.8))


def test_a_burst_that_goes_on_a_little_and_ends_falls_inside_a_bounded_range():
    # queue a submitted a 30-s job of the whole node every minute for the last 3 minutes (none before in the
    # hour); the best-effort job waits for the node. The burst goes on 3 minutes more and ends: the job starts in
    # the gap after the second, as the replay of that future says. Taking the hour's jobs again an hour later
    # (the burst's newest last) would give a range ending when the running job ends, before that start.
    busy = job("busy", "a", 8, created=-10)
    queues = (Queue("a", deserved_milli=8000), Queue("be", deserved_milli=0, over_quota_weight=0.0, priority=-1))
    snapshot = cluster(1, 8, *queues, running=(on("busy", "h100-0", tuple(range(8))),))
    inputs = [running(busy, 110, -10), waiting(job("spare", "be", 8, created=-1), 600)]
    seen = [Arrival(job(f"r{i}", "a", 8, created=-60.0 * i), 30.0, 60.0 * i) for i in range(4)]
    future = [ReplayJob(job(f"f{k}", "a", 8, created=60.0 * k), 60.0 * k, 30.0) for k in (1, 2, 3)]
    truth = replay(snapshot, [*replay_jobs(inputs, {}, 0.0, high=False, extra_s=0.0), *future], start=0.0,
                   cycle_s=INTERVAL, watch=["spare"]).jobs["spare"].start
    earliest, latest = forecast_windows(snapshot, inputs, {}, 0.0, interval=INTERVAL, arrivals=seen)["spare"]
    assert earliest == 100 < truth
    assert latest is not None and truth <= latest <= 600


def outcome(queue: str, waited: float, early: float, late: float | None = None, started: float = -10.0) -> Outcome:
    # a job first told it starts `early` (to `late`, None: open-ended) seconds after it asked; it waited `waited`
    asked = started - waited
    return Outcome(queue, asked, asked + early, None if late is None else asked + late, started)


def test_an_open_ended_answer_is_bounded_by_how_its_queues_first_answers_fared():
    # five jobs of the queue started 2 to 4 times their early wait after they asked: the 95th percentile is 4,
    # so "not before now + 200" becomes now + 200 to now + 800
    history = [outcome("be", 100.0 * r, 100.0, started=-10.0 * i) for i, r in enumerate((2, 2.5, 3, 3.5, 4))]
    assert calibrate({"j": (200.0, None)}, {"j": "be"}, 0.0, history) == {"j": (200.0, 800.0)}
    # an early wait under a minute is taken as a minute: a job that may start now is bounded 4 minutes on
    assert calibrate({"j": (0.0, None)}, {"j": "be"}, 0.0, history) == {"j": (0.0, 240.0)}
    # four jobs are too few to judge by: it stays open-ended, as does an unknown answer; jobs that started
    # within a minute of asking do not count
    quick = [outcome("be", 30.0, 10.0, started=-1.0) for _ in range(5)]
    assert calibrate({"j": (200.0, None), "u": (None, None)}, {"j": "be", "u": "be"}, 0.0,
                     history[:4] + quick) == {"j": (200.0, None), "u": (None, None)}


def test_only_jobs_started_by_now_calibrate_and_a_quiet_queue_borrows_the_clusters():
    history = [outcome("be", 100.0 * r, 100.0, started=-10.0 * i) for i, r in enumerate((2, 2.5, 3, 3.5, 4))]
    later = [outcome("be", 100.0 * r, 100.0, started=5.0) for r in (2, 2.5, 3, 3.5, 4)]
    assert calibrate({"j": (200.0, None)}, {"j": "be"}, 0.0, later) == {"j": (200.0, None)}   # not known yet
    # queue q has started two jobs, the cluster five in all: the cluster's ratios
    mixed = [replace(o, queue="q") if i < 2 else o for i, o in enumerate(history)]
    assert calibrate({"j": (200.0, None)}, {"j": "q"}, 0.0, mixed) == {"j": (200.0, 800.0)}


def test_a_late_bound_is_stretched_where_the_queues_late_bounds_were_too_soon_and_never_tightened():
    # five bounded first answers (late 100 s) that started 110 to 150 s on: the 90th percentile is 1.5
    too_soon = [outcome("a", 100.0 * r, 50.0, 100.0, started=-10.0 * i) for i, r in enumerate((1.1, 1.2, 1.3, 1.4, 1.5))]
    assert calibrate({"j": (100.0, 300.0)}, {"j": "a"}, 0.0, too_soon) == {"j": (100.0, 450.0)}
    held = [outcome("a", 100.0 * r, 50.0, 100.0, started=-10.0 * i) for i, r in enumerate((0.5, 0.6, 0.7, 0.8, 0.9))]
    assert calibrate({"j": (100.0, 300.0)}, {"j": "a"}, 0.0, held) == {"j": (100.0, 300.0)}


def arrivals_at(*agos: float) -> list[Arrival]:
    return [Arrival(job(f"a{i}", "q", 1, created=-ago), 600.0, ago) for i, ago in enumerate(agos)]


def test_a_surge_is_the_last_five_minutes_rate_against_the_hours_from_twice_on():
    steady = arrivals_at(*range(0, 3600, 60))                      # one a minute all hour
    assert surge(steady) == 1.0
    # 60 in the hour, 30 of them in the last 5 minutes: 6 a minute against 1
    burst = arrivals_at(*range(0, 300, 10), *range(300, 3600, 110))
    assert surge(burst) == pytest.approx(6.0)
    assert surge(arrivals_at(*range(0, 300, 30), *range(300, 3600, 36))) == 1.0   # 2 a minute against 1.7
    # a platform that has seen 5 minutes or less has no hour to compare with; one that has seen 15 compares with those
    assert surge(burst, observed_s=300.0) == 1.0
    assert surge(arrivals_at(*range(0, 300, 10), 400.0), observed_s=900.0) == pytest.approx(30 / 300 / (31 / 900))
    assert surge([]) == 1.0


def test_in_a_surge_every_late_wait_is_stretched_by_it_and_open_ended_answers_stay_so():
    windows = {"j": (100.0, 300.0), "o": (200.0, None), "u": (None, None)}
    queues = {"j": "a", "o": "a", "u": "a"}
    assert calibrate(windows, queues, 0.0, [], 3.0) == {"j": (100.0, 900.0), "o": (200.0, None), "u": (None, None)}
    assert calibrate(windows, queues, 0.0, []) == windows
