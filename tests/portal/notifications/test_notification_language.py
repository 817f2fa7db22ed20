"""Notifications are written in their recipient's language (UserPreference.language, else the platform's
LANGUAGE_CODE): a Chinese user gets a Chinese subject and body, by e-mail and in the app, an English user the
English ones as before, and the workspace's webhook the English record."""

import json
import uuid

from django.core import mail
from tests_job_specs import job_spec

from billing.reports.services import check_budgets, set_budget
from billing.services import submit_quoted_job
from portal.models import Notification, UserPreference, Webhook, WebhookDelivery
from portal.notifications import services
from tests.billing.reports.tests_reports_helpers import charge


def chinese(*users):
    for user in users:
        UserPreference.objects.update_or_create(user=user, defaults={"language": "zh-hans"})


def test_a_failed_job_is_e_mailed_in_its_submitters_language(cluster, failing_backend, run, clock, eager_tasks):
    chinese(cluster.alice)
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=job_spec("train"))
    run(failing_backend, clock)
    clock.advance(1.5)
    run(failing_backend, clock)
    clock.advance(5)
    run(failing_backend, clock)
    job.refresh_from_db()
    assert job.state == "Failed"
    (message,) = mail.outbox
    assert message.to == [cluster.alice.email]
    assert message.subject == f"[GPU Platform] train（#{job.pk}）失败：Failed"  # the state is an identifier
    assert message.body.startswith(f"工作空间 vision-lab 中的作业 train（#{job.pk}）于 ")
    assert "失败：Failed。" in message.body and "failed at" not in message.body
    assert "副本 main-0 以退出码 1 退出：" in message.body and "exited with code" not in message.body  # the event's reason
    started = Notification.objects.get(user=cluster.alice, event="job.started")  # in the app, in Chinese too
    assert started.subject == f"train（#{job.pk}）已开始运行：Running"  # the platform's name is the e-mail's only


def test_an_english_reader_gets_the_english_words_as_before(cluster, failing_backend, run, clock, eager_tasks):
    UserPreference.objects.create(user=cluster.alice, time_zone="Asia/Shanghai")  # a preference, no language
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=job_spec("train"))
    for advance in (0, 1.5, 5):
        clock.advance(advance)
        run(failing_backend, clock)
    (message,) = mail.outbox
    assert message.subject == f"[GPU Platform] train (#{job.pk}) failed: Failed"
    assert message.body.startswith(f"Job train (#{job.pk}) in workspace vision-lab failed at ")
    assert "replica main-0 exited with code 1: " in message.body


def test_one_budget_alert_goes_out_in_each_recipients_language(cluster):
    chinese(cluster.alice)  # finance reads English (no preference)
    Webhook.objects.create(workspace=cluster.vision, url="https://hooks.example/gpu", secret=Webhook.new_secret())
    set_budget(user=cluster.alice, workspace=cluster.vision, amount="100")
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=job_spec("spend"))
    charge(job, "50")
    check_budgets()
    by_reader = {tuple(m.to): m for m in mail.outbox}
    assert set(by_reader) == {("alice@example.com",), ("finance@example.com",)}  # one message per language
    zh, en = by_reader[("alice@example.com",)], by_reader[("finance@example.com",)]
    assert zh.subject == "[GPU Platform] Vision Lab：已用掉本月预算的 50.0 %（告警阈值 50 %）"
    assert "工作空间 Vision Lab（vision-lab）在自 " in zh.body and "预算为 $100.00" in zh.body
    assert en.subject == "[GPU Platform] Vision Lab: 50.0 % of the monthly budget spent (alert at 50 %)"
    assert en.body.startswith("Workspace Vision Lab (vision-lab) has spent $50.00 of its $100.00 budget")
    rows = {n.user.username: n for n in Notification.objects.filter(event="budget.alert")}
    assert f"[GPU Platform] {rows['alice'].subject}" == zh.subject
    assert f"[GPU Platform] {rows['finance'].subject}" == en.subject
    (delivery,) = WebhookDelivery.objects.filter(event="budget.alert")
    assert json.loads(delivery.body)["subject"] == rows["finance"].subject  # the webhook gets the English record


def test_an_idle_notice_speaks_the_submitters_language(cluster, clock, run, django_capture_on_commit_callbacks):
    from billing.idle.services import check_idle_gpus
    from billing.models import UsageSample
    from scheduling.backends.simulated.backend import SimulatedBackend

    chinese(cluster.alice)
    backend = SimulatedBackend(speedup=1, failure_rate=0, clock=clock)
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=job_spec("idle", hours=10))
    run(backend, clock)
    clock.advance(1)
    run(backend, clock)
    replica = job.replicas.get(state="Running")
    for _ in range(32):
        clock.advance(60)
        UsageSample.objects.create(id=uuid.uuid4(), node=replica.node, ts=clock.now, gpu_index=replica.gpu_indices[0],
                                   gpu_uuid=f"GPU-{replica.node.name}-{replica.gpu_indices[0]}",
                                   pod_uid=str(replica.uid), replica=replica, gpu_util_pct=1, interval_s=60)
    with django_capture_on_commit_callbacks(execute=True):
        assert check_idle_gpus(now=clock.now).notified == [job]
    (message,) = mail.outbox
    assert message.subject == f"[GPU Platform] idle（#{job.pk}）占用着空闲的 GPU"
    assert "GPU 切分空闲：" in message.body and "如果作业已完成，请停止它" in message.body
    assert job.events.get(kind="idle").reason.startswith("GPU slice idle: ")  # the job's history stays English


def test_a_notice_that_cannot_be_written_again_is_told_as_it_is(cluster):
    from billing.notices import Notice

    chinese(cluster.alice)

    def broken():
        raise KeyError("figures of another shape")

    (row,) = services.notify([Notice(event="budget.alert", workspace=cluster.vision, users=(cluster.alice,),
                                     subject="Subject", body="Body", render=broken)])
    assert (row.subject, row.body) == ("Subject", "Body")
