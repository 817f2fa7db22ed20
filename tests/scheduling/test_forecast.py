"""Expected starts and queue positions against what really happens: the simulated cluster runs the real
scheduling cycle forward on the test clock, and every waiting job must start inside its forecast."""

from datetime import timedelta

import pytest

from billing.services import submit_quoted_job
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.core.forecast import ARRIVAL_WINDOW_S, SURGE_AT, Outcome, surge
from scheduling.forecast import (
    forecast_starts,
    forget_kept,
    keep_first_forecasts,
    observed_since,
    pending_outlook,
    queue_positions,
    recent_arrivals,
    recent_outcomes,
    runtime_factors,
    saved_work,
)
from scheduling.models import Job, JobEvent, JobState, Queue, Replica

SPEC = """name: {name}
queue: {queue}
priority: {priority}
preemptible: false
expectedDuration: {duration}
roles:
  - name: main
    image: busybox
    resources: {{gpu: {gpus}}}
    nodePool: h100
"""


def submit(cluster, name, *, gpus=8, duration="1h", priority=0, queue="vision-lab", user=None, workspace=None):
    return submit_quoted_job(user=user or cluster.alice, workspace=workspace or cluster.vision,
                             spec=SPEC.format(name=name, queue=queue, priority=priority, duration=duration, gpus=gpus))


@pytest.fixture
def backend(clock):
    return SimulatedBackend(speedup=60, failure_rate=0, clock=clock)  # a 1 h job runs 60 s


def scheduled_at(job):
    return JobEvent.objects.filter(job=job, kind="scheduled").order_by("id").values_list("time", flat=True).first()


def test_every_waiting_job_starts_inside_its_forecast(cluster, backend, clock, run):
    # the h100 pool's two 8-GPU nodes are taken by a 1 h and a 2 h job (60 s and 120 s simulated)
    first, second = submit(cluster, "first"), submit(cluster, "second", duration="2h")
    run(backend, clock)
    clock.advance(2)
    waiting = []
    for name, duration in (("third", "1h"), ("fourth", "30m"), ("fifth", "1h")):
        waiting.append(submit(cluster, name, duration=duration))
        clock.advance(0.001)  # the queue's order is this one (at one instant the ids would decide it)
    run(backend, clock)
    assert {Job.objects.get(pk=j.pk).state for j in (first, second)} == {JobState.RUNNING}
    waiting = [Job.objects.get(pk=j.pk) for j in waiting]
    assert {j.state for j in waiting} == {JobState.PENDING}

    outlook = pending_outlook(waiting)
    assert [outlook[j.pk].position for j in waiting] == [1, 2, 3]

    for _ in range(150):
        if all(scheduled_at(j) for j in waiting):
            break
        clock.advance(2)
        run(backend, clock)
    for job in waiting:
        actual = scheduled_at(job)
        window = outlook[job.pk].expected_start
        assert actual is not None, job.name
        assert window.earliest <= actual <= window.latest, (job.name, window, actual)
        assert window.latest - window.earliest <= timedelta(seconds=10), (job.name, window)
    # the third takes the first's node when it ends (60 s after it started), the fifth the third's
    started = {j.name: scheduled_at(j) for j in waiting}
    assert started["third"] < started["fifth"]
    assert started["fifth"] - started["third"] >= timedelta(seconds=60)


def test_run_times_widen_by_how_the_queues_jobs_ran_against_what_they_declared(cluster, clock):
    from tests.factories import JobFactory

    vision = Queue.objects.get(name="vision-lab")

    def finished(ratio, declared=3600):
        started = clock.now - timedelta(days=1)
        return JobFactory(workspace=cluster.vision, queue=vision, state=JobState.SUCCEEDED, expected_duration_s=declared,
                          started=started, finished=started + timedelta(seconds=declared * ratio))

    for ratio in (0.5, 0.8, 1.2, 2.0):
        finished(ratio)
    assert runtime_factors(["vision-lab", "nlp-group"]) == {"vision-lab": (1.0, 1.0), "nlp-group": (1.0, 1.0)}
    finished(1.0)   # five jobs: enough to judge by
    low, high = runtime_factors(["vision-lab"])["vision-lab"]
    assert (low, high) == (pytest.approx(0.8), pytest.approx(1.2))
    for ratio in (1.5, 1.6, 1.7, 1.8, 1.9):
        finished(ratio)   # jobs that overran: the low estimate stays at what they declared
    assert runtime_factors(["vision-lab"])["vision-lab"][0] == 1.0


def test_the_position_follows_priority_then_submission_and_ignores_held_jobs(cluster, clock):
    first = submit(cluster, "first")
    clock.advance(1)
    held = submit(cluster, "held")
    Job.objects.filter(pk=held.pk).update(not_before=clock.now + timedelta(hours=8))   # waits for off-peak
    clock.advance(1)
    urgent = submit(cluster, "urgent", priority=7)
    clock.advance(1)
    last = submit(cluster, "last")
    other_queue = submit(cluster, "bobs", user=cluster.bob, workspace=cluster.nlp, queue="nlp-group")
    jobs = list(Job.objects.filter(pk__in=[first.pk, held.pk, urgent.pk, last.pk, other_queue.pk]))
    positions = {j.name: p for j in jobs for pk, p in queue_positions(jobs).items() if pk == j.pk}
    # the held job is ranked as if it were in the queue, but is not counted ahead of the last one
    assert positions == {"urgent": 1, "first": 2, "held": 3, "last": 3, "bobs": 1}


def test_a_new_platform_has_seen_submissions_since_its_first_job(cluster, clock):
    assert observed_since(clock.now) == ARRIVAL_WINDOW_S                   # nothing submitted: a full window
    submit(cluster, "first")
    clock.advance(90)
    assert observed_since(clock.now) == pytest.approx(90.0)
    clock.advance(2 * ARRIVAL_WINDOW_S)
    assert observed_since(clock.now) == ARRIVAL_WINDOW_S


def test_a_jobs_first_answer_is_kept_and_once_it_started_it_is_its_queues_history(cluster, clock):
    job = submit(cluster, "first")
    shown = forecast_starts(clock.now)[job.pk]                      # what a page shows: read, not kept
    assert shown.earliest is not None and Job.objects.get(pk=job.pk).first_forecast is None
    assert keep_first_forecasts(clock.now) == 1                     # the beat task keeps it
    first = Job.objects.get(pk=job.pk).first_forecast
    assert first["asked"] == clock.now.timestamp() and first["earliest"] == shown.earliest.timestamp()
    clock.advance(60)
    forget_kept()
    later = submit(cluster, "later")
    assert keep_first_forecasts(clock.now) == 1                     # only the job without one
    assert Job.objects.get(pk=job.pk).first_forecast == first      # the first answer, not the newest
    assert Job.objects.get(pk=later.pk).first_forecast["asked"] == clock.now.timestamp()
    assert keep_first_forecasts(clock.now) == 0                     # every pending job has one: no forecast made
    assert recent_outcomes(clock.now) == ()                         # it has not started
    began = clock.now - timedelta(seconds=30)
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, started=began)
    assert recent_outcomes(clock.now) == (
        Outcome("vision-lab", first["asked"], first["earliest"], first["latest"], began.timestamp()),)
    assert recent_outcomes(began - timedelta(seconds=1)) == ()     # not known before it started
    assert recent_outcomes(began + timedelta(days=8)) == ()        # nor once it is old news


def test_a_stopped_jobs_checkpoints_keep_its_work_for_the_forecast(cluster, clock):
    # a resumable job (checkpoints every 10 min) stopped twice on a cluster 60 times faster: after 25 min of
    # work (20 kept), then 15 min more (35 worked, 30 kept); a job without checkpoints keeps nothing
    resumable, plain = submit(cluster, "resumable"), submit(cluster, "plain")
    Job.objects.filter(pk=resumable.pk).update(spec={**resumable.spec, "checkpoint": {
        "path": "/ckpt", "volume": "runs", "every": "10m"}})
    start = clock.now
    for job in (resumable, plain):
        for attempt, (begun, worked_min) in enumerate(((0, 25), (60, 15))):
            began = start + timedelta(seconds=begun)
            Replica.objects.create(job=job, role="main", index=0, attempt=attempt, state=JobState.PREEMPTED,
                                   started=began, ended=began + timedelta(seconds=worked_min), clock_scale=60.0)
    assert saved_work() == {str(resumable.pk): 30 * 60.0}
    Job.objects.filter(pk=resumable.pk).update(state=JobState.SUCCEEDED)
    assert saved_work() == {}                                          # a finished job is forecast no more


def test_in_a_surge_of_submissions_every_late_bound_is_stretched_by_it(cluster, clock):
    # one job 55 minutes ago, then eight in the last two minutes: they come far faster than over the hour
    submit(cluster, "early", gpus=1)
    clock.advance(3180)
    for i in range(8):
        submit(cluster, f"burst{i}", gpus=1)
        clock.advance(15)
    job = submit(cluster, "asked", gpus=1)
    factor = surge(recent_arrivals(clock.now), observed_s=observed_since(clock.now))
    assert factor >= SURGE_AT
    assert keep_first_forecasts(clock.now) == 10                  # the replays' own answers, no history yet
    raw = Job.objects.get(pk=job.pk).first_forecast
    shown = forecast_starts(clock.now)[job.pk]
    asked = clock.now.timestamp()
    assert shown.earliest.timestamp() == raw["earliest"]
    assert shown.latest.timestamp() - asked == pytest.approx(factor * (raw["latest"] - asked))
    assert raw["latest"] > asked                                   # so the stretch shows
