"""A job's deadline: `completeBy` / `completeWithin` read and written back, refused at submit with the figures,
its latest start kept on the job and given to the core, and a deadline that can no longer be met reported at
once (event, notification, the job's row), once."""

from __future__ import annotations

from datetime import timedelta

import pytest

from portal.models import Notification, NotificationEvent
from scheduling import deadlines, forecast, services
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.cycle.snapshot import SnapshotCache, build_snapshot
from scheduling.models import Job, JobState
from scheduling.spec import (
    SpecError,
    image_form_values,
    parse_job_spec,
    parse_job_spec_obj,
    spec_from_image_form,
    spec_to_dict,
)

SPEC = """\
name: {name}
queue: vision-lab
preemptible: {preemptible}
expectedDuration: {hours}h
{extra}roles:
  - name: main
    image: busybox
    replicas: {replicas}
    resources: {{gpu: {gpus}}}
    nodePool: h100
"""


def spec(extra="", *, name="train", hours=1, gpus=1, preemptible="false", replicas=1):
    return SPEC.format(name=name, extra=extra, hours=hours, gpus=gpus, preemptible=preemptible, replicas=replicas)


def problems(extra):
    with pytest.raises(SpecError) as caught:
        parse_job_spec(spec(extra))
    return [(i.line, i.column, i.field, i.message) for i in caught.value.errors]


# --------------------------------------------------------------------------- spec


def test_complete_within_and_complete_by_are_read_and_written_back_as_given():
    within = parse_job_spec(spec("completeWithin: 12h\n"))
    assert within.deadline.within_s == 12 * 3600 and within.deadline.at is None
    assert spec_to_dict(within)["completeWithin"] == "12h"
    assert parse_job_spec_obj(spec_to_dict(within)) == within
    by = parse_job_spec(spec("completeBy: 2026-12-01T08:00:00+08:00\n"))
    assert by.deadline.at == "2026-12-01T08:00:00+08:00"
    assert spec_to_dict(by)["completeBy"] == "2026-12-01T08:00:00+08:00"
    assert parse_job_spec_obj(spec_to_dict(by)) == by
    assert parse_job_spec(spec()).deadline is None and "completeBy" not in spec_to_dict(parse_job_spec(spec()))


@pytest.mark.parametrize(("extra", "expected"), [
    ("completeBy: 2026-12-01T08:00:00\n", (5, 13, "completeBy", "has no offset")),
    ("completeBy: tomorrow\n", (5, 13, "completeBy", "is not a time")),
    ("completeWithin: 12\n", (5, 17, "completeWithin", "has no unit")),
    ("completeWithin: 31d\n", (5, 17, "completeWithin", "(31d) is more than 30d ahead")),
    ("completeWithin: 2h\ncompleteBy: 2026-12-01T08:00:00Z\n", (5, 1, "completeWithin", "not both")),
])
def test_each_problem_is_at_its_line_and_column(extra, expected):
    [(line, column, field, message)] = problems(extra)
    assert (line, column, field) == expected[:3]
    assert expected[3] in message


def test_the_image_form_takes_a_deadline_and_shows_it_again():
    form = {"image": "busybox", "completeWithin": "12h"}
    parsed = spec_from_image_form(form)
    assert parsed.deadline.within_s == 12 * 3600
    values, hidden = image_form_values(parsed)
    assert (values["completeWithin"], values["completeBy"], hidden) == ("12h", "", [])
    with pytest.raises(SpecError) as caught:
        spec_from_image_form({"image": "busybox", "completeBy": "soon"})
    assert [e.field for e in caught.value.errors] == ["completeBy"]


# --------------------------------------------------------------------------- submit


@pytest.mark.django_db
def test_submit_stores_the_deadline_and_its_latest_start(cluster, clock):
    job = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=spec("completeWithin: 12h\n"))
    assert job.complete_by == clock.now + timedelta(hours=12)
    # 12 h less the 1 h run less 10 % of it
    assert job.latest_start == clock.now + timedelta(hours=11) - timedelta(minutes=6)
    by = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=spec(
        f"completeBy: {(clock.now + timedelta(hours=3)).isoformat()}\n", name="by"))
    assert by.complete_by == clock.now + timedelta(hours=3)


@pytest.mark.django_db
@pytest.mark.parametrize(("extra", "message"), [
    ("completeWithin: 1h\n", "completeWithin leaves 1h, less than expectedDuration 1h plus one scheduling "
                             "interval 2s (1h2s)"),
    ("completeWithin: 30m\n", "completeWithin leaves 30m, less than expectedDuration 1h"),
])
def test_submit_refuses_a_deadline_too_close_for_the_run_with_the_figures(cluster, clock, extra, message):
    with pytest.raises(SpecError) as caught:
        services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=spec(extra))
    assert message in str(caught.value)
    assert [e.field for e in caught.value.errors] == ["completeWithin"]
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_submit_refuses_a_complete_by_in_the_past_or_more_than_thirty_days_ahead(cluster, clock):
    for at, message in [(clock.now - timedelta(hours=1), "completeBy leaves 0s, less than expectedDuration 1h"),
                        (clock.now + timedelta(days=31), "completeBy is 31d ahead, more than 30d")]:
        with pytest.raises(SpecError) as caught:
            services.submit_job(user=cluster.alice, workspace=cluster.vision,
                                spec=spec(f"completeBy: {at.isoformat()}\n"))
        assert message in str(caught.value)
    assert not Job.objects.exists()


# --------------------------------------------------------------------------- cycle


@pytest.fixture
def backend(clock):
    return SimulatedBackend(speedup=1, failure_rate=0, clock=clock)


@pytest.mark.django_db
def test_the_snapshot_gives_the_core_each_jobs_latest_start(cluster, clock):
    job = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=spec("completeWithin: 12h\n"))
    plain = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=spec(name="plain"))
    cache = SnapshotCache()
    for snapshot in (build_snapshot(clock.now), cache.build(clock.now)):
        by_id = {j.id: j for j in snapshot.jobs}
        assert by_id[str(job.pk)].latest_start == job.latest_start.timestamp()
        assert by_id[str(plain.pk)].latest_start is None
    # a changed latest start is read again by the incremental snapshot
    Job.objects.filter(pk=job.pk).update(latest_start=clock.now + timedelta(hours=1))
    again = {j.id: j for j in cache.build(clock.now).jobs}
    assert again[str(job.pk)].latest_start == (clock.now + timedelta(hours=1)).timestamp()


@pytest.mark.django_db
def test_the_cycle_widens_the_margin_by_the_queues_run_time_spread(cluster, clock, backend, run):
    job = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=spec(
        "completeWithin: 12h\n", gpus=8))
    queue = job.queue
    for i in range(5):  # the queue's jobs ran 1.5 x what they declared
        Job.objects.create(workspace=cluster.vision, queue=queue, name=f"done-{i}", job_type="single",
                           expected_duration_s=3600, spec_text="", spec={}, state=JobState.SUCCEEDED,
                           started=clock.now - timedelta(hours=3), finished=clock.now - timedelta(hours=1, minutes=30))
    deadlines.refresh(clock.now)
    job.refresh_from_db()
    # margin: 10 % + the spread's 50 % of the 1 h run
    assert job.latest_start == job.complete_by - timedelta(hours=1) - timedelta(minutes=36)


@pytest.mark.django_db
def test_a_deadline_that_can_no_longer_be_met_is_reported_at_once_and_once(cluster, clock, backend, run):
    full = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=spec(name="full", gpus=8,
                                                                                         hours=5, replicas=2))
    run(backend, clock)
    late = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=spec(
        "completeWithin: 2h\n", name="late", gpus=8))
    on_time = services.submit_job(user=cluster.bob, workspace=cluster.nlp, spec=spec(
        "completeWithin: 20h\n", name="later", gpus=8).replace("vision-lab", "nlp-group"))
    run(backend, clock)
    assert not Job.objects.filter(deadline_missed__isnull=False).exists()
    assert Job.objects.get(pk=full.pk).state in (JobState.SCHEDULED, JobState.RUNNING)
    late.refresh_from_db()
    clock.now = late.latest_start + timedelta(seconds=1)   # its latest start passed, and it still waits
    run(backend, clock)
    late.refresh_from_db()
    assert late.state == JobState.PENDING and late.deadline_missed == clock.now
    [event] = late.events.filter(kind=deadlines.MISSED_EVENT)
    assert "can no longer finish by its deadline" in event.reason and "still waiting after its latest start" in (
        event.reason)
    [notice] = Notification.objects.filter(event=NotificationEvent.JOB_DEADLINE)
    assert notice.user == cluster.alice and notice.link == f"/jobs/{late.pk}/"
    assert "can no longer finish by its deadline" in notice.subject
    assert deadlines.phase_of(late, clock.now) == "missed"
    # once: the next cycles say nothing more; the other tenant's job, with time in hand, nothing at all
    clock.advance(2)
    run(backend, clock)
    assert late.events.filter(kind=deadlines.MISSED_EVENT).count() == 1
    assert Notification.objects.filter(event=NotificationEvent.JOB_DEADLINE).count() == 1
    on_time.refresh_from_db()
    assert on_time.deadline_missed is None and not Notification.objects.filter(user=cluster.bob).filter(
        event=NotificationEvent.JOB_DEADLINE).exists()


@pytest.mark.django_db
def test_a_running_job_expected_to_finish_past_its_deadline_is_reported(cluster, clock, backend, run):
    job = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=spec("completeWithin: 3h\n"))
    run(backend, clock)
    clock.advance(5)
    run(backend, clock)
    job.refresh_from_db()
    assert job.state == JobState.RUNNING and job.deadline_missed is None
    for i in range(5):  # the queue's jobs turn out to run 4 x what they declare
        Job.objects.create(workspace=cluster.vision, queue=job.queue, name=f"done-{i}", job_type="single",
                           expected_duration_s=600, spec_text="", spec={}, state=JobState.SUCCEEDED,
                           started=clock.now - timedelta(minutes=50), finished=clock.now - timedelta(minutes=10))
    clock.advance(2)
    run(backend, clock)
    job.refresh_from_db()
    assert job.deadline_missed == clock.now
    [event] = job.events.filter(kind=deadlines.MISSED_EVENT)
    assert "expected to finish at" in event.reason


@pytest.mark.django_db
def test_a_cycle_reads_the_queues_run_time_factors_once(cluster, clock, backend, run, monkeypatch):
    # in each of two queues a deadline job runs (the unmeetable check reads its queue) and one waits (the latest
    # start's refresh reads it)
    def submit(name, user, workspace, queue):
        return services.submit_job(user=user, workspace=workspace, spec=spec(
            "completeWithin: 12h\n", name=name).replace("vision-lab", queue))

    running = [submit("run-a", cluster.alice, cluster.vision, "vision-lab"),
               submit("run-b", cluster.bob, cluster.nlp, "nlp-group")]
    run(backend, clock)
    clock.advance(5)
    run(backend, clock)
    assert {j.state for j in Job.objects.filter(pk__in=[j.pk for j in running])} == {JobState.RUNNING}
    submit("wait-a", cluster.alice, cluster.vision, "vision-lab")
    submit("wait-b", cluster.bob, cluster.nlp, "nlp-group")
    real, reads = forecast.runtime_factors, []

    def counted(queues):
        queues = list(queues)
        reads.append(sorted(set(queues)))
        return real(queues)

    monkeypatch.setattr(forecast, "runtime_factors", counted)
    clock.advance(2)
    run(backend, clock)
    assert reads == [["nlp-group", "vision-lab"]]
