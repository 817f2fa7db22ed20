"""The demo's Chinese-speaking team has a history too: ai-lab (owner chen) submits jobs in Shanghai office
hours on the shared preemptible queue, played through the live services as the other teams' month, so
its ledger lines are in CNY over the past days and its reports, dashboard and exports are not empty.
The other teams' month is the same with or without it. A few days are played here (the whole month:
test_demo_history.py)."""

from __future__ import annotations

from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from billing.models import ChargeLine
from portal.demo import chinese, cluster, prices, tenants
from portal.demo.history import DEMO_PREFIX
from portal.demo.usage import _owners, _plans, load_demo_usage
from scheduling.models import Job

DAYS = 4


@pytest.fixture(scope="module")
def loaded(django_db_setup, django_db_blocker, module_clock):
    with django_db_blocker.unblock():
        tenants.load_tenants()
        cluster.load_cluster()
        cluster.load_queues()
        prices.load_prices()
        chinese.load_chinese_team()
        now = module_clock.now
        made = load_demo_usage(days=DAYS, now=now)
        yield now, made
        call_command("flush", interactive=False, verbosity=0)


def ai_lab_jobs():
    return Job.objects.filter(name__startswith=DEMO_PREFIX, workspace__slug="ai-lab")


def test_ai_lab_submits_in_shanghai_office_hours_on_its_queue(db, loaded):
    now, made = loaded
    jobs = list(ai_lab_jobs().select_related("queue", "submitted_by"))
    assert jobs and made == Job.objects.filter(name__startswith=DEMO_PREFIX).count() > len(jobs)
    assert {(j.submitted_by.username, j.queue.name, j.preemptible) for j in jobs} == {("chen", "community", True)}
    shanghai = ZoneInfo("Asia/Shanghai")
    assert all(8 <= j.created.astimezone(shanghai).hour <= 22 for j in jobs)
    assert all(now - timedelta(days=DAYS) <= j.created < now for j in jobs)
    assert len({j.name for j in Job.objects.filter(name__startswith=DEMO_PREFIX)}) == made  # no name twice


def test_ai_labs_ledger_is_in_yuan_over_the_past_days(db, loaded):
    lines = ChargeLine.objects.filter(workspace__slug="ai-lab", category=ChargeLine.Category.USAGE)
    assert lines.exists()
    assert set(lines.values_list("currency", flat=True)) == {"CNY"}
    assert len(set(lines.values_list("day", flat=True))) >= 2
    assert set(ai_lab_jobs().filter(final_cost__isnull=False).values_list("currency", flat=True)) == {"CNY"}


def test_chen_reads_a_report_and_an_export_of_ai_lab(db, loaded):
    chen = get_user_model().objects.get(username="chen")
    assert chen.check_password("chen-demo")  # the demo password is unchanged
    client = Client()
    client.force_login(chen)
    page = client.get("/reports/?workspace=ai-lab").content.decode()
    assert '<html lang="zh-hans">' in page and 'data-currency="CNY"' in page
    assert DEMO_PREFIX in client.get("/jobs/?workspace=ai-lab").content.decode()
    export = client.get("/reports/export.csv?workspace=ai-lab")
    assert export.status_code == 200
    body = b"".join(async_to_sync(_collect)(export.streaming_content))
    assert b"CNY" in body and DEMO_PREFIX.encode() in body


async def _collect(stream) -> list[bytes]:
    return [chunk async for chunk in stream]


def test_the_other_teams_month_does_not_depend_on_ai_lab(db, loaded):
    now, _ = loaded
    owners = _owners()
    start = now - timedelta(days=30)
    with_team = [(p.at, p.workspace, p.kind.name) for p in _plans(owners, start=start, end=now)
                 if p.workspace != "ai-lab"]
    without = [(p.at, p.workspace, p.kind.name) for p in _plans({k: v for k, v in owners.items() if k != "ai-lab"},
                                                                  start=start, end=now)]
    assert with_team == without
