"""One notification system: a job's start, end and failure reach its submitter, budget alerts the
workspace's owners and finance, idle notices the submitter, each by their own choices (e-mail,
in-app), never anyone of the other tenant; the Notifications page and the header's unread count."""

from datetime import timedelta

import pytest
from django.core import mail
from tests_job_specs import job_spec

from billing.reports.services import check_budgets, set_budget
from billing.services import submit_quoted_job
from portal.members.services import remove_member
from portal.models import Notification
from portal.notifications import services
from portal.notifications.selectors import choices_of
from scheduling.errors import DomainError
from tests.billing.reports.tests_reports_helpers import charge


@pytest.fixture
def play(run, clock, django_capture_on_commit_callbacks):
    """Submit a 1 h job as `user` and run cycles until it started (returned), or ended too."""

    def go(backend, user, workspace, *, name="train", until="ended"):
        job = submit_quoted_job(user=user, workspace=workspace, spec=job_spec(name, queue=workspace.slug))
        run(backend, clock)
        clock.advance(1.5)
        run(backend, clock)
        if until == "ended":
            clock.advance(5)
            run(backend, clock)
        job.refresh_from_db()
        return job

    return go


def told(user, event=None):
    rows = Notification.objects.filter(user=user)
    return list(rows.filter(event=event) if event else rows.values_list("event", flat=True).order_by("id"))


def test_a_job_start_and_end_reach_its_submitter_in_the_app_only(cluster, backend, play, eager_tasks):
    job = play(backend, cluster.alice, cluster.vision)
    assert job.state == "Succeeded"
    assert told(cluster.alice) == ["job.started", "job.finished"]
    started, ended = Notification.objects.filter(user=cluster.alice).order_by("id")
    assert started.in_app and started.email_state == "" and started.link == f"/jobs/{job.pk}/"
    assert started.subject == f"train (#{job.pk}) started: Running"  # no e-mail prefix in the app
    assert ended.subject == f"train (#{job.pk}) ended: Succeeded" and ended.workspace == cluster.vision
    # the other members of vision-lab, and bob of the other tenant, are told nothing
    assert told(cluster.carol) == told(cluster.finance) == told(cluster.bob) == []
    assert mail.outbox == []


def test_a_failure_is_e_mailed_by_default(cluster, failing_backend, play, eager_tasks):
    job = play(failing_backend, cluster.alice, cluster.vision)
    assert job.state == "Failed"
    (failed,) = told(cluster.alice, "job.failed")
    assert failed.email_state == "sent" and failed.in_app
    (message,) = mail.outbox
    assert message.to == [cluster.alice.email]
    assert message.subject == f"[GPU Platform] train (#{job.pk}) failed: Failed"
    assert "simulated failure" in message.body and "vision-lab" in message.body


def test_each_user_chooses_how_each_event_reaches_them(cluster, failing_backend, play, eager_tasks):
    services.save_choices(cluster.alice, {"job.started:email": "on", "job.failed:in_app": "on"})
    play(failing_backend, cluster.alice, cluster.vision)
    (started,) = told(cluster.alice, "job.started")
    (failed,) = told(cluster.alice, "job.failed")
    assert (started.in_app, started.email_state) == (False, "sent")
    assert (failed.in_app, failed.email_state) == (True, "")
    assert [m.subject.split(") ")[1] for m in mail.outbox] == ["started: Running"]


def test_choices_default_to_in_app_and_e_mail_what_needs_acting_on(tenants):
    chosen = {event: (c.email, c.in_app) for event, _, c in choices_of(tenants.alice)}
    assert chosen == {"job.started": (False, True), "job.finished": (False, True), "job.failed": (True, True),
                      "budget.alert": (True, True), "idle.notice": (True, True), "job.deadline": (True, True)}
    services.save_choices(tenants.alice, {"budget.alert:in_app": "on"})
    assert {e: (c.email, c.in_app) for e, _, c in choices_of(tenants.alice)}["budget.alert"] == (False, True)
    assert choices_of(tenants.bob)[3][2].email  # bob's own choices are untouched
    with pytest.raises(DomainError):
        services.save_choices(tenants.alice, {"job.exploded:email": "on"})


def test_a_member_removed_meanwhile_is_no_longer_told(cluster, backend, play, eager_tasks, clock, run):
    job = play(backend, cluster.carol, cluster.vision, until="started")
    assert told(cluster.carol) == ["job.started"]
    remove_member(cluster.alice, cluster.vision.memberships.get(user=cluster.carol))
    clock.advance(5)
    run(backend, clock)
    job.refresh_from_db()
    assert job.state == "Succeeded" and told(cluster.carol) == ["job.started"]


def test_both_tenants_are_told_only_of_their_own_jobs(cluster, backend, play, eager_tasks):
    play(backend, cluster.alice, cluster.vision, name="vision-run")
    play(backend, cluster.bob, cluster.nlp, name="nlp-run")
    assert {n.subject.split(" ")[0] for n in Notification.objects.filter(user=cluster.alice)} == {
        "vision-run"}
    assert {n.subject.split(" ")[0] for n in Notification.objects.filter(user=cluster.bob)} == {
        "nlp-run"}
    assert not Notification.objects.filter(user=cluster.bob, workspace=cluster.vision).exists()


def test_a_service_accounts_jobs_are_told_to_the_webhook_only(cluster, clock):
    from portal import service_accounts

    robot = service_accounts.create_service_account(cluster.alice, cluster.vision, "ci-pipeline", "member").user
    job = submit_quoted_job(user=robot, workspace=cluster.vision, spec=job_spec("ci-run"))
    message = {"job": job.pk, "kind": "failed", "state": "Failed", "reason": "", "time": clock.now.isoformat()}
    [notice] = services.job_notices([(job, message)], now=clock.now)
    assert notice.users == () and notice.data["submitted_by"] == "svc:ci-pipeline@vision-lab"


def test_an_event_older_than_an_hour_is_no_news(cluster, clock):
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=job_spec("old"))
    message = {"job": job.pk, "kind": "failed", "state": "Failed", "reason": "", "time": clock.now.isoformat()}
    assert len(services.job_notices([(job, message)], now=clock.now + timedelta(minutes=59))) == 1
    assert services.job_notices([(job, message)], now=clock.now + timedelta(minutes=61)) == []


# --------------------------------------------------------------------------- billing's notices


def spend(tenants, amount):
    job = submit_quoted_job(user=tenants.alice, workspace=tenants.vision, spec=job_spec("spend"))
    charge(job, amount)


def test_a_budget_alert_reaches_owners_and_finance_by_their_choices(cluster):
    set_budget(user=cluster.alice, workspace=cluster.vision, amount="100")
    spend(cluster, "50")
    check_budgets()
    (message,) = mail.outbox  # as before: one e-mail to the owners and finance, at once
    assert set(message.to) == {"alice@example.com", "finance@example.com"}
    assert {n.user.username for n in Notification.objects.filter(event="budget.alert")} == {"alice", "finance"}
    assert told(cluster.carol) == told(cluster.bob) == []
    services.save_choices(cluster.finance, {"budget.alert:in_app": "on"})  # no more e-mail for finance
    spend(cluster, "30")
    check_budgets()
    assert mail.outbox[1].to == ["alice@example.com"]
    assert Notification.objects.filter(event="budget.alert", user=cluster.finance).count() == 2


def test_the_header_counts_unread_and_the_page_marks_them_read(client, cluster):
    set_budget(user=cluster.alice, workspace=cluster.vision, amount="10")
    spend(cluster, "6")
    check_budgets()
    client.force_login(cluster.alice)
    page = client.get("/notifications/").content.decode()
    assert 'id="unread-count" title="unread">1<' in page and "50.0 % of the monthly budget" not in page
    assert "60.0 % of the monthly budget spent" in page and 'class="unread"' in page
    (mine,) = Notification.objects.filter(user=cluster.alice)
    theirs = Notification.objects.get(user=cluster.finance)
    assert client.post("/notifications/", {"read": str(theirs.pk)}).status_code == 302
    theirs.refresh_from_db()
    assert theirs.read is None  # not hers: nothing marked
    client.post("/notifications/", {"read": str(mine.pk)})
    mine.refresh_from_db()
    assert mine.read is not None
    assert 'id="unread-count"' not in client.get("/notifications/").content.decode()
    assert client.post("/notifications/", {"read": "x"}).status_code == 400


def test_bob_sees_none_of_vision_labs_notifications(client, cluster):
    set_budget(user=cluster.alice, workspace=cluster.vision, amount="10")
    spend(cluster, "6")
    check_budgets()
    client.force_login(cluster.bob)
    page = client.get("/notifications/").content.decode()
    assert "Vision Lab" not in page and "No notifications yet." in page and 'id="unread-count"' not in page
    client.post("/notifications/", {"read": "all"})
    assert Notification.objects.filter(read__isnull=False).count() == 0


def test_the_choices_page_saves_every_checkbox(client, tenants):
    client.force_login(tenants.carol)
    page = client.get("/notifications/settings/").content.decode()
    assert 'name="job.failed:email" id="job.failed-email" checked' in page
    response = client.post("/notifications/settings/", {"job.finished:email": "on", "job.finished:in_app": "on"})
    assert response.status_code == 302
    chosen = {event: (c.email, c.in_app) for event, _, c in choices_of(tenants.carol)}
    assert chosen["job.finished"] == (True, True) and chosen["job.failed"] == (False, False)
    assert client.post("/notifications/settings/", {"workspace": "nlp-group"}).status_code == 400


def test_an_idle_notice_reaches_the_submitter_in_the_app_and_by_e_mail(cluster, clock, run,
                                                                      django_capture_on_commit_callbacks):
    import uuid

    from billing.idle.services import check_idle_gpus
    from billing.models import UsageSample
    from scheduling.backends.simulated.backend import SimulatedBackend

    backend = SimulatedBackend(speedup=1, failure_rate=0, clock=clock)
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=job_spec("idle", hours=10))
    run(backend, clock)
    clock.advance(1)
    run(backend, clock)
    replica = job.replicas.get(state="Running")
    for _ in range(32):  # 32 min at 1 % utilisation: below the pool's 5 % for its 30 min window
        clock.advance(60)
        UsageSample.objects.create(id=uuid.uuid4(), node=replica.node, ts=clock.now, gpu_index=replica.gpu_indices[0],
                                   gpu_uuid=f"GPU-{replica.node.name}-{replica.gpu_indices[0]}",
                                   pod_uid=str(replica.uid), replica=replica, gpu_util_pct=1, interval_s=60)
    with django_capture_on_commit_callbacks(execute=True):
        assert check_idle_gpus(now=clock.now).notified == [job]
    (notice,) = told(cluster.alice, "idle.notice")
    assert notice.in_app and notice.email_state == "sent" and notice.link == f"/jobs/{job.pk}/"
    assert "holds idle GPUs" in notice.subject and [m.to for m in mail.outbox] == [[cluster.alice.email]]
    assert told(cluster.bob) == told(cluster.carol) == []
