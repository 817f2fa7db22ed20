"""Stored history in the reader's language: a job's events and the audit log keep their English text
(the API's `reason`, the CSV's `message`) and what was said (scheduling.history_texts), rendered when
read: the job page, the events API's reason_text, the console's audit page and its CSV's message_text.
Rows written before it was kept show their English text; another tenant still sees none of it."""

import csv
import io
import re
from datetime import timedelta

import pytest
from django.test import TestCase
from django.utils import translation
from rest_framework.test import APIClient

from portal.console import job_services
from portal.console.models import AuditEntry
from scheduling import history_texts
from scheduling.history_texts import Code, Worded, joined, said
from scheduling.models import JobEvent
from tests.i18n.test_i18n_pages import english_words

CJK = re.compile(r"[\u4e00-\u9fff]")
SPEC = "name: job-0\nqueue: vision-lab\nroles:\n  - name: main\n    image: busybox\n    resources: {gpu: 1}\n"


def _history(tenants):
    """job-0 of vision-lab submitted by alice, placed and running after two cycles, then cancelled by the
    operator with a reason (a job event and an audit entry)."""
    from billing.services import submit_quoted_job
    from scheduling import clock
    from scheduling.backends.simulated.backend import SimulatedBackend
    from scheduling.cycle.run import run_scheduling_cycle

    job = submit_quoted_job(user=tenants.alice, workspace=tenants.vision, spec=SPEC)
    now = [clock.now()]
    backend = SimulatedBackend(speedup=1, failure_rate=0, clock=lambda: now[0])
    for step in (0, 5):
        now[0] += timedelta(seconds=step)
        with TestCase.captureOnCommitCallbacks(execute=True):
            run_scheduling_cycle(backend, now=now[0])
    job.refresh_from_db()
    job = job_services.cancel(tenants.admin, job, reason="选错资源池")
    return job


def _api(user, language):
    client = APIClient()
    client.force_authenticate(user)
    client.credentials(HTTP_ACCEPT_LANGUAGE=language)
    return client


@pytest.mark.django_db
def test_a_jobs_events_read_in_chinese_and_in_english(client, cluster, clock):
    job = _history(cluster)
    kinds = list(job.events.values_list("kind", flat=True))
    assert kinds[:3] == ["submitted", "scheduled", "running"] and kinds[-1] == "cancelled"
    english = {e["kind"]: e for e in _api(cluster.alice, "en").get(f"/api/v1/jobs/{job.pk}/events/").json()}
    chinese = {e["kind"]: e for e in _api(cluster.alice, "zh-hans").get(f"/api/v1/jobs/{job.pk}/events/").json()}

    assert english["submitted"]["reason"] == "submitted to queue vision-lab by alice"
    assert english["submitted"]["reason_text"] == english["submitted"]["reason"]
    assert english["cancelled"]["reason"].startswith("cancelled by operator admin: 选错资源池; final cost ")
    assert english["cancelled"]["reason_text"] == english["cancelled"]["reason"]
    assert english["cancelled"]["kind_text"] == "cancelled"
    # the API's English fields stay as they are in any language; the *_text fields follow it
    for kind in ("submitted", "scheduled", "running", "cancelled"):
        assert chinese[kind]["reason"] == english[kind]["reason"]
        assert CJK.search(chinese[kind]["reason_text"]), chinese[kind]["reason_text"]
    assert chinese["submitted"]["reason_text"] == "由 alice 提交到队列 vision-lab"
    assert chinese["cancelled"]["reason_text"].startswith("已取消，由运维人员 admin 操作：选错资源池；最终费用 ")
    assert chinese["cancelled"]["kind_text"] == "已取消"

    client.force_login(cluster.alice)
    page = client.get(f"/jobs/{job.pk}/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "由 alice 提交到队列 vision-lab" in page and "submitted to queue" not in page
    assert english_words(page) == [], english_words(page)
    page = client.get(f"/jobs/{job.pk}/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "submitted to queue vision-lab by alice" in page and "由 alice" not in page


@pytest.mark.django_db
def test_another_tenant_sees_none_of_a_jobs_events(client, cluster, clock):
    job = _history(cluster)
    assert _api(cluster.bob, "zh-hans").get(f"/api/v1/jobs/{job.pk}/events/").status_code == 404
    client.force_login(cluster.bob)
    assert client.get(f"/jobs/{job.pk}/", HTTP_ACCEPT_LANGUAGE="zh-hans").status_code == 404


@pytest.mark.django_db
def test_an_audit_entry_reads_in_the_readers_language(client, cluster, clock):
    job = _history(cluster)
    entry = AuditEntry.objects.get(action="cancel", target_id=str(job.pk))
    assert entry.message == "reason: 选错资源池"
    client.force_login(cluster.admin)

    page = client.get("/console/audit/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "原因：选错资源池" in page and "reason: 选错资源池" not in page
    assert english_words(page) == [], english_words(page)
    page = client.get("/console/audit/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "reason: 选错资源池" in page and "原因" not in page

    for language, expected in (("zh-hans", "原因：选错资源池"), ("en", "reason: 选错资源池")):
        response = client.get("/console/audit/export.csv?action=cancel", HTTP_ACCEPT_LANGUAGE=language)
        rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
        assert [(r["message"], r["message_text"]) for r in rows] == [("reason: 选错资源池", expected)]


@pytest.mark.django_db
def test_tenants_do_not_read_the_audit_log(client, cluster, clock):
    _history(cluster)
    client.force_login(cluster.alice)
    for path in ("/console/audit/", "/console/audit/export.csv"):
        response = client.get(path, HTTP_ACCEPT_LANGUAGE="zh-hans")
        assert response.status_code == 403
        assert "选错资源池".encode() not in response.content


@pytest.mark.django_db
def test_rows_from_before_show_their_english_text(cluster, clock):
    job = _history(cluster)
    old = JobEvent.objects.create(job=job, kind="submitted", state="Pending", reason="submitted by an old release")
    entry = AuditEntry.objects.create(username="admin", action="drain", target_type="scheduling.node",
                                      message="evicted 2 replicas")
    with translation.override("zh-hans"):
        assert old.reason_text == "submitted by an old release"
        assert entry.message_text == "evicted 2 replicas"
        assert old.kind_label == "已提交"


@pytest.mark.parametrize("stored", [
    {"t": "a sentence since reworded %(n)s", "p": {"n": 1}},    # not in the catalogue: English msgid, still right
    {"t": "submitted to queue %(queue)s by %(user)s", "p": {"queue": "q"}},   # a figure missing
    {"c": "no_such_code", "p": {}},
    {"j": " / ", "i": ["a", "b"]},
    {"x": 1},
    ["a list"],
])
def test_what_cannot_be_rendered_falls_back_to_the_english_text(stored):
    with translation.override("zh-hans"):
        rendered = history_texts.text(stored, "the English text")
    assert rendered in ("the English text", "a sentence since reworded 1")


def test_english_and_translation_of_nested_values():
    value = joined([said("cancelled %(by)s", by=said("by operator %(operator)s", operator="admin")),
                    Worded("waiting for the next cycle", Code("next_cycle", {})), said("Credit")])
    assert history_texts.english(value) == "cancelled by operator admin; waiting for the next cycle; Credit"
    stored = history_texts.stored(value)
    with translation.override("zh-hans"):
        text = history_texts.text(stored, "fallback")
    assert text.startswith("已取消，由运维人员 admin 操作；") and text.endswith("抵扣"), text
    with translation.override("en"):
        assert history_texts.text(stored) == history_texts.english(value)
    assert history_texts.stored("plain text") is None


def test_the_autoscalers_reasons_are_worded_by_the_catalogue():
    from scheduling import inference
    from scheduling.serving import autoscaler

    assert not hasattr(autoscaler, "REASON_TEXTS")  # the pure autoscaler gives a key and figures only
    policy = autoscaler.ScalePolicy(0, 4, target=2.0, scale_down_delay_s=60)
    decision = autoscaler.Autoscaler(policy).decide(0.0, 5.0, 1)
    assert set(inference.SCALE_REASONS) >= {decision.reason_key, "woken", "down", "stays", "stays_delayed"}
    assert history_texts.english(inference.scale_said(decision)) == (
        "up from 1 to 3: concurrency 5 for a target of 2 per replica")
    with translation.override("zh-hans"):
        assert history_texts.text(history_texts.stored(inference.scale_said(decision))) == (
            "从 1 扩容到 3：concurrency 为 5，目标为每副本 2")
