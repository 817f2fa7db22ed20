"""Schedules: made from a spec, runs at fire times with Forbid, Replace and Allow, missed runs, suspend and resume,
trigger, keepLast, idempotent firing and queries that do not grow with the number of schedules."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from billing.services import fire_schedules, submit_quoted_job, submit_quoted_schedule
from scheduling import schedules
from scheduling.errors import Conflict, DomainError
from scheduling.models import FiringOutcome, Job, JobState, Schedule, ScheduleFiring

SPEC = """\
name: {name}
queue: vision-lab
roles:
  - name: main
    image: busybox:1.36
    resources: {{gpu: 1}}
schedule:
  cron: "{cron}"
  timeZone: UTC
  concurrency: {concurrency}
  keepLast: {keep}
"""


def make(tenants, name="nightly", cron="0 * * * *", concurrency="Forbid", keep=10, user=None) -> Schedule:
    spec = SPEC.format(name=name, cron=cron, concurrency=concurrency, keep=keep)
    return submit_quoted_schedule(user=user or tenants.alice, workspace=tenants.vision, spec=spec)


def at_next_fire(clock, schedule: Schedule, late_s: int = 5) -> None:
    schedule.refresh_from_db()
    clock.now = schedule.next_fire_at + timedelta(seconds=late_s)


def test_a_scheduled_spec_makes_a_schedule_with_its_next_fire_time_and_no_job(cluster, clock):
    schedule = make(cluster)
    assert schedule.cron == "0 * * * *" and schedule.time_zone == "UTC" and schedule.concurrency == "Forbid"
    assert "schedule" not in schedule.spec and schedule.spec["name"] == "nightly"
    assert schedule.quote["when"] == "now" and schedule.next_fire_at == clock.now.replace(
        minute=0
    ) + timedelta(hours=1)
    assert not Job.objects.exists()
    with pytest.raises(DomainError, match="makes a schedule, not a job"):
        submit_quoted_job(
            user=cluster.alice,
            workspace=cluster.vision,
            spec=SPEC.format(name="x", cron="@daily", concurrency="Allow", keep=1),
        )
    with pytest.raises(Conflict, match="already has a schedule named nightly"):
        make(cluster)


def test_a_run_at_its_fire_time_is_a_normal_job_linked_to_its_schedule(cluster, clock):
    schedule = make(cluster)
    assert fire_schedules().started == []  # not yet
    at_next_fire(clock, schedule)
    report = fire_schedules()
    [job] = Job.objects.all()
    assert report.started == [job.pk] and job.schedule == schedule and job.state == JobState.PENDING
    assert (
        job.submitted_by == cluster.alice
        and job.quote["id"] == schedule.quote["id"]
        and job.name == "nightly"
    )
    firing = ScheduleFiring.objects.get()
    assert firing.outcome == FiringOutcome.STARTED and firing.job == job
    schedule.refresh_from_db()
    assert schedule.next_fire_at == firing.fire_time + timedelta(hours=1)
    assert fire_schedules().started == []  # once per fire time


def test_forbid_skips_while_the_previous_run_is_unfinished(cluster, clock):
    schedule = make(cluster, concurrency="Forbid")
    at_next_fire(clock, schedule)
    [first] = fire_schedules().started
    at_next_fire(clock, schedule)
    report = fire_schedules()
    assert report.started == [] and report.skipped == 1
    skipped = ScheduleFiring.objects.get(outcome=FiringOutcome.SKIPPED_RUNNING)
    assert skipped.job_id == first
    Job.objects.filter(pk=first).update(state=JobState.SUCCEEDED, finished=clock.now)
    at_next_fire(clock, schedule)
    assert len(fire_schedules().started) == 1


def test_replace_cancels_the_unfinished_run_and_allow_runs_both(cluster, clock):
    replacing = make(cluster, name="replacing", concurrency="Replace")
    allowing = make(cluster, name="allowing", concurrency="Allow")
    at_next_fire(clock, replacing)
    fire_schedules()
    first_replacing, first_allowing = (Job.objects.get(schedule=s) for s in (replacing, allowing))
    at_next_fire(clock, replacing)
    assert len(fire_schedules().started) == 2
    first_replacing.refresh_from_db()
    first_allowing.refresh_from_db()
    assert first_replacing.state == JobState.CANCELLED
    assert "replaced by the next run of schedule replacing" in first_replacing.events.last().reason
    assert first_allowing.state == JobState.PENDING
    assert Job.objects.filter(schedule=allowing).exclude(state__in=["Cancelled"]).count() == 2


def test_after_an_outage_the_latest_missed_run_starts_once_and_older_ones_are_recorded_missed(cluster, clock):
    schedule = make(cluster)
    at_next_fire(clock, schedule, late_s=3 * 3600 + 600)  # down for three hours and ten minutes
    report = fire_schedules()
    assert len(report.started) == 1 and report.missed == 3
    firings = list(ScheduleFiring.objects.order_by("fire_time"))
    assert [f.outcome for f in firings] == ["missed"] * 3 + ["started"]
    assert firings[-1].fire_time == clock.now.replace(
        minute=0, second=0
    )  # ten minutes late: less than an hour
    schedule.refresh_from_db()
    assert schedule.next_fire_at > clock.now


def test_the_late_run_rule_counts_the_interval_after_the_missed_fire_time(cluster, clock):
    # at 13:10 a daily 12:05 run (from the day before) is more than a day late only if no 12:05 came since
    schedule = make(cluster, cron="5 12 * * *")
    at_next_fire(clock, schedule, late_s=23 * 3600)
    assert len(fire_schedules().started) == 1


def test_suspended_schedules_do_not_fire_and_resume_does_not_catch_up(cluster, clock):
    schedule = make(cluster)
    schedule = schedules.suspend_schedule(user=cluster.carol, schedule=schedule)
    assert schedule.suspended and schedule.next_fire_at is None and schedules.upcoming(schedule) == []
    clock.advance(5 * 3600)
    assert fire_schedules().due == 0
    schedule = schedules.resume_schedule(user=cluster.carol, schedule=schedule)
    assert schedule.next_fire_at > clock.now and not ScheduleFiring.objects.exists()
    assert len(schedules.upcoming(schedule, 3)) == 3


def test_trigger_now_follows_concurrency_and_the_outsider_is_refused(cluster, clock):
    schedule = make(cluster, concurrency="Forbid")
    job = schedules.trigger_schedule(user=cluster.carol, schedule=schedule)
    assert job.schedule == schedule and job.submitted_by == cluster.carol
    with pytest.raises(Conflict, match="concurrency is Forbid"):
        schedules.trigger_schedule(user=cluster.carol, schedule=schedule)
    with pytest.raises(DomainError):
        schedules.trigger_schedule(user=cluster.bob, schedule=schedule)
    with pytest.raises(DomainError):
        schedules.suspend_schedule(user=cluster.bob, schedule=schedule)
    assert Job.objects.count() == 1


def test_keep_last_lists_the_unfinished_and_the_last_finished_runs_and_keeps_every_job(cluster, clock):
    schedule = make(cluster, concurrency="Allow", keep=2)
    for _ in range(4):
        job = schedules.trigger_schedule(user=cluster.alice, schedule=schedule)
        Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED, finished=clock.now)
        clock.advance(60)
    running = schedules.trigger_schedule(user=cluster.alice, schedule=schedule)
    listed = schedules.runs_of(schedule)
    assert [j.pk for j in listed] == [
        running.pk,
        *Job.objects.filter(state="Succeeded").order_by("-finished").values_list("pk", flat=True)[:2],
    ]
    assert Job.objects.filter(schedule=schedule).count() == 5


def test_a_run_the_workspace_can_no_longer_make_is_recorded_refused_and_the_schedule_goes_on(cluster, clock):
    schedule = make(cluster)
    cluster.vision.memberships.filter(user=cluster.alice).delete()  # its owner left
    at_next_fire(clock, schedule)
    report = fire_schedules()
    assert report.refused == 1 and not Job.objects.exists()
    firing = ScheduleFiring.objects.get()
    assert firing.outcome == FiringOutcome.REFUSED and firing.detail
    schedule.refresh_from_db()
    assert schedule.next_fire_at > clock.now


def test_a_fire_time_another_worker_recorded_makes_no_second_run(cluster, clock):
    schedule = make(cluster)
    at_next_fire(clock, schedule)
    # the other worker recorded the fire time and made its run; this worker read the schedule before it moved on
    ScheduleFiring.objects.create(
        schedule=schedule, fire_time=schedule.next_fire_at, outcome=FiringOutcome.STARTED
    )
    report = fire_schedules()
    assert report.started == [] and ScheduleFiring.objects.count() == 1 and not Job.objects.exists()


def test_firing_reads_the_same_number_of_queries_for_three_schedules_or_twelve(cluster, clock):
    def made(count: int) -> list[Schedule]:
        return [make(cluster, name=f"s{count}-{i}") for i in range(count)]

    def fire(made) -> int:
        Schedule.objects.update(suspended=True)
        Schedule.objects.filter(pk__in=[s.pk for s in made]).update(suspended=False)
        for schedule in made:  # each has a run still going: Forbid skips them all
            job = schedules.trigger_schedule(user=cluster.alice, schedule=schedule)
            assert job.state == JobState.PENDING
        at_next_fire(clock, made[0])
        with CaptureQueriesContext(connection) as queries:
            report = fire_schedules()
        assert report.skipped == len(made)
        return len(queries)

    few, many = made(3), made(12)
    assert fire(few) == fire(many)
    with CaptureQueriesContext(connection) as queries:
        assert fire_schedules().due == 0
    assert [q["sql"].split()[0] for q in queries.captured_queries].count("SELECT") == 1  # and its savepoint


def test_the_beat_task_fires_the_due_schedules_and_a_workspace_at_its_budget_gets_no_run(
    cluster, clock, monkeypatch
):
    from billing import tasks

    schedule = make(cluster)
    at_next_fire(clock, schedule)
    assert tasks.fire_schedules() == 1 and Job.objects.filter(schedule=schedule).count() == 1
    Job.objects.update(state=JobState.SUCCEEDED, finished=clock.now)
    at_next_fire(clock, schedule)
    # the workspace has spent its budget and its owner blocks new work at the limit
    monkeypatch.setattr(
        "billing.services.check_budget_allows_submit",
        lambda workspace: f"Workspace {workspace.slug} has spent its budget",
    )
    assert tasks.fire_schedules() == 0
    refused = ScheduleFiring.objects.get(outcome=FiringOutcome.REFUSED)
    assert refused.detail == "Workspace vision-lab has spent its budget"
    assert Job.objects.filter(schedule=schedule).count() == 1
