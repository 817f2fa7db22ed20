"""Planner replays on their own: their progress moves while they replay (also while a backlog is worked
off after the last submission), an operator cancels one from its page and the replay stops at its next
progress update, and the long tasks go to the `long` queue with a time limit."""

import pytest
from django.conf import settings
from django.test import Client

from portal.celery import app
from portal.console import planner_services as services
from portal.console.models import AuditEntry, PlannerRun
from portal.console.tasks import run_planner

TRACE_INPUTS = {"trace_queue": "vision-lab", "checkpoint_min": 30, "preemption": True, "pools": {}, "queues": {}}


def backlog_trace(jobs: int = 40) -> str:
    """`jobs` 8-GPU jobs of an hour, submitted a minute apart: far more than the test world's 8-GPU nodes
    take at once, so most of the replay is the backlog worked off after the last submission."""
    rows = [f"{i},vision-lab,8,{60 * i},3600,{i % 2}" for i in range(jobs)]
    return "job_id,user,num_gpu,submit_time,duration,best_effort\n" + "\n".join(rows) + "\n"


class Seen(list):
    """Progress values written, in order; `on_write(hook)` calls hook(run id, values so far) at each."""

    def __init__(self):
        super().__init__()
        self.hooks = []

    def on_write(self, hook):
        self.hooks.append(hook)


@pytest.fixture
def progress_seen(monkeypatch):
    """Every progress value a replay writes (Seen), through the planner's own writer, updated every 5 cycles
    (a small trace then gives many updates)."""
    monkeypatch.setattr(services, "STEP_CYCLES", 5)
    seen = Seen()
    hooks = seen.hooks
    writer = services._progress_writer

    def recording(run_id, offset, share):
        write = writer(run_id, offset, share)

        def record(fraction):
            seen.append(round(offset + share * fraction, 3))
            for hook in hooks:
                hook(run_id, len(seen))
            write(fraction)
        return record

    monkeypatch.setattr(services, "_progress_writer", recording)
    return seen


def test_an_uploaded_trace_reports_progress_steadily_to_the_end(cluster, progress_seen):
    run = PlannerRun.objects.create(kind="trace", inputs=TRACE_INPUTS, trace_csv=backlog_trace())
    assert run_planner(run.pk) is True
    run.refresh_from_db()
    assert run.state == "done" and run.progress == 1.0
    assert len(progress_seen) >= 10, progress_seen
    assert progress_seen == sorted(progress_seen) and progress_seen[-1] == 1.0
    # it moves past the half (the actual cluster done) and on through the edited one, not in one jump
    assert len({p for p in progress_seen if 0 < p < 0.5}) >= 4 and len({p for p in progress_seen if 0.5 < p < 1}) >= 4
    assert max(b - a for a, b in zip(progress_seen, progress_seen[1:], strict=False)) <= 0.25
    assert run.results["actual"]["queues"]["vision-lab"]["unfinished"] == 0


def test_a_replay_cancelled_while_it_runs_stops_at_its_next_progress_update(cluster, operator, progress_seen):
    run = PlannerRun.objects.create(kind="trace", inputs=TRACE_INPUTS, trace_csv=backlog_trace())

    def cancel_at_the_third(run_id, writes):
        if writes == 3:
            assert services.cancel_run(operator, PlannerRun.objects.get(pk=run_id))

    progress_seen.on_write(cancel_at_the_third)
    assert run_planner(run.pk) is False
    run.refresh_from_db()
    assert run.state == "cancelled" and run.results is None and run.finished is not None
    # cancelled just before the third update was written: that write found it and the replay stopped there
    assert len(progress_seen) == 3
    assert run.progress == progress_seen[1] < 0.5
    entry = AuditEntry.objects.get(action="cancel")
    assert entry.username == "admin" and entry.target_id == str(run.pk) and entry.changes == {
        "state": ["running", "cancelled"]}


def test_a_queued_replay_cancelled_never_runs(cluster, operator):
    run = PlannerRun.objects.create(kind="trace", inputs=TRACE_INPUTS, trace_csv=backlog_trace(4))
    assert services.cancel_run(operator, run)
    assert run_planner(run.pk) is False    # its task, had it not been revoked, finds it taken
    run.refresh_from_db()
    assert run.state == "cancelled" and run.started is None and run.results is None
    assert not services.cancel_run(operator, run)   # once only


def test_an_operator_cancels_from_the_page_and_tenants_cannot(cluster, operator):
    run = PlannerRun.objects.create(kind="trace", inputs=TRACE_INPUTS, trace_csv=backlog_trace(4),
                                    state=PlannerRun.State.RUNNING)
    url = f"/console/planner/runs/{run.pk}/cancel/"
    for user in (cluster.alice, cluster.bob):   # a tenant, and one from another workspace
        tenant = Client()
        tenant.force_login(user)
        assert tenant.post(url).status_code == 403
        assert tenant.get(f"/console/planner/runs/{run.pk}/").status_code == 403
    anonymous = Client().post(url)
    assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]
    admin = Client(enforce_csrf_checks=True)
    admin.force_login(operator)
    page = admin.get(f"/console/planner/runs/{run.pk}/")
    assert b'id="planner-cancel"' in page.content
    assert admin.post(url).status_code == 403          # no CSRF token
    assert admin.get(url).status_code == 405
    run.refresh_from_db()
    assert run.state == "running" and not AuditEntry.objects.filter(action="cancel").exists()
    answer = admin.post(url, {"csrfmiddlewaretoken": page.context["csrf_token"]})
    assert answer.status_code == 302 and answer["Location"] == f"/console/planner/runs/{run.pk}/"
    run.refresh_from_db()
    assert run.state == "cancelled" and AuditEntry.objects.filter(action="cancel", target_id=str(run.pk)).count() == 1
    page = admin.get(f"/console/planner/runs/{run.pk}/")
    assert b'id="planner-cancelled"' in page.content and b'id="planner-cancel"' not in page.content
    status = admin.get(f"/console/planner/runs/{run.pk}/?partial=status").json()
    assert status["state"] == "cancelled"
    # an ended run cannot be cancelled again; no such run is a 404
    again = admin.post(url, {"csrfmiddlewaretoken": page.context["csrf_token"]})
    assert again.status_code == 400
    assert admin.post("/console/planner/runs/999999/cancel/",
                      {"csrfmiddlewaretoken": page.context["csrf_token"]}).status_code == 404


def test_a_replay_is_sent_under_the_id_that_cancelling_revokes(cluster, operator, monkeypatch,
                                                               django_capture_on_commit_callbacks):
    sent, revoked = [], []
    monkeypatch.setattr(app, "send_task", lambda name, args=(), task_id=None, **o: sent.append((name, task_id)))
    monkeypatch.setattr(app.control, "revoke", lambda task_id, **o: revoked.append(task_id))
    with django_capture_on_commit_callbacks(execute=True):
        run = services.start_run(operator, kind=PlannerRun.Kind.TRACE, inputs=TRACE_INPUTS, trace_csv=backlog_trace(2))
    assert sent == [("portal.console.tasks.run_planner", run.task_id)] and run.task_id.startswith("planner-run-")
    services.cancel_run(operator, run)
    assert revoked == [run.task_id]


def test_a_run_given_a_revoked_runs_key_again_is_sent_under_another_id(cluster, operator):
    """Workers remember revoked ids. A key can be given again (a database restored from a backup; each test's
    database), so a run's task id is its own: a new run under a cancelled run's key is not discarded."""
    first = services.start_run(operator, kind=PlannerRun.Kind.TRACE, inputs=TRACE_INPUTS, trace_csv=backlog_trace(2))
    services.cancel_run(operator, first)
    key, revoked = first.pk, services.task_id(first)
    PlannerRun.objects.filter(pk=key).delete()
    again = services.start_run(operator, kind=PlannerRun.Kind.TRACE, inputs=TRACE_INPUTS, trace_csv=backlog_trace(2))
    PlannerRun.objects.filter(pk=again.pk).update(id=key)
    again = PlannerRun.objects.get(pk=key)
    assert services.task_id(again) != revoked
    older = PlannerRun.objects.create(kind=PlannerRun.Kind.TRACE, created_by=operator, inputs=TRACE_INPUTS)
    assert services.task_id(older) == f"planner-run-{older.pk}"  # queued before ids were stored


@pytest.mark.parametrize("name", ["portal.console.tasks.run_planner", "portal.console.tasks.refresh_pool_savings",
                                  "billing.reports.tasks.build_excel_export"])
def test_long_tasks_go_to_the_long_queue_with_a_time_limit(name):
    assert app.amqp.router.route({}, name)["queue"].name == "long"
    task = app.tasks[name]
    assert task.time_limit == settings.LONG_TASK_TIME_LIMIT_S
    assert 0 < task.soft_time_limit < task.time_limit


@pytest.mark.parametrize("name", ["scheduling.tasks.scheduling_cycle", "billing.tasks.post_usage",
                                  "portal.tasks.sample_queue_allocation"])
def test_the_cycle_and_short_tasks_stay_on_the_default_queue(name):
    app.loader.import_default_modules()   # every task registered, as in a worker
    assert app.amqp.router.route({}, name)["queue"].name == settings.CELERY_TASK_DEFAULT_QUEUE != "long"
    assert app.tasks[name].time_limit is None
