"""The Schedules page (`/schedules/`) and a schedule's page: next runs in the reader's zone, suspend, resume, run
now and delete for members, a read-only view for finance, 404s for another tenant; the Submit page makes a
schedule from a spec with `schedule:` and quotes a month of its runs."""

from __future__ import annotations

import re

import pytest

from billing.services import submit_quoted_schedule
from portal.services import set_time_zone
from scheduling.models import Job, Schedule

SPEC = """\
name: nightly
queue: vision-lab
roles:
  - name: main
    image: busybox:1.36
    resources: {gpu: 1}
schedule: {cron: "0 2 * * *", timeZone: Asia/Shanghai}
"""


@pytest.fixture
def nightly(cluster, clock) -> Schedule:
    return submit_quoted_schedule(user=cluster.alice, workspace=cluster.vision, spec=SPEC)


def row(body: str, schedule: Schedule) -> str:
    match = re.search(rf'<tr data-schedule="{schedule.pk}".*?</tr>', body, re.S)
    assert match, f"no row for schedule {schedule.pk}"
    return match.group(0)


def test_the_list_shows_next_runs_in_the_readers_zone_and_members_actions(client, cluster, nightly):
    set_time_zone(cluster.alice, "Asia/Shanghai")
    client.force_login(cluster.alice)
    mine = row(client.get("/schedules/", {"workspace": "vision-lab"}).content.decode(), nightly)
    assert '<code data-field="cron">0 2 * * *</code>' in mine and "Asia/Shanghai" in mine and "Forbid" in mine
    assert len(re.findall(r"\d{4}-\d\d-\d\d 02:00 CST", mine)) == 3
    assert (
        'data-action="suspend"' in mine and 'data-action="trigger"' in mine and 'data-action="delete"' in mine
    )
    set_time_zone(cluster.carol, "UTC")
    client.force_login(cluster.carol)
    carols = row(client.get("/schedules/", {"workspace": "vision-lab"}).content.decode(), nightly)
    assert len(re.findall(r"\d{4}-\d\d-\d\d 18:00 UTC", carols)) == 3


def test_finance_sees_without_controls_and_is_refused_the_actions(client, cluster, nightly):
    client.force_login(cluster.finance)
    listed = row(client.get("/schedules/", {"workspace": "vision-lab"}).content.decode(), nightly)
    assert "data-action" not in listed
    assert client.post(f"/schedules/{nightly.pk}/trigger/").status_code == 403
    assert client.post(f"/schedules/{nightly.pk}/delete/", {"confirm": "1"}).status_code == 403
    assert Schedule.objects.filter(pk=nightly.pk).exists() and not Job.objects.exists()


def test_suspend_resume_run_now_and_delete(client, cluster, nightly):
    client.force_login(cluster.carol)
    detail = f"/schedules/{nightly.pk}/"
    assert client.post(f"{detail}suspend/").status_code == 302
    page = client.get(detail).content.decode()
    assert 'data-suspended="true"' in page and 'data-action="resume"' in page
    client.post(f"{detail}resume/")
    response = client.post(f"{detail}trigger/", follow=True)
    job = Job.objects.get(schedule=nightly)
    assert f"run #{job.pk} submitted" in response.content.decode()
    page = client.get(detail).content.decode()
    assert f'<tr data-job="{job.pk}">' in page
    again = client.post(f"{detail}trigger/", follow=True).content.decode()
    assert "concurrency is Forbid" in again and Job.objects.count() == 1
    assert "Delete the schedule" in client.get(f"{detail}delete/").content.decode()
    client.post(f"{detail}delete/", {"confirm": "1"})
    assert not Schedule.objects.exists() and Job.objects.get().schedule is None


def test_bob_gets_404s_and_never_sees_alices_schedule(client, cluster, nightly):
    client.force_login(cluster.bob)
    assert client.get("/schedules/", {"workspace": "vision-lab"}).status_code == 404
    assert "nightly" not in client.get("/schedules/").content.decode()
    assert client.get(f"/schedules/{nightly.pk}/").status_code == 404
    for action in ("suspend", "resume", "trigger", "delete"):
        assert client.post(f"/schedules/{nightly.pk}/{action}/", {"confirm": "1"}).status_code == 404
    assert Schedule.objects.get().suspended is False and not Job.objects.exists()


def test_the_submit_page_quotes_a_month_of_runs_and_makes_a_schedule(client, cluster, clock):
    client.force_login(cluster.alice)
    quoted = client.post("/submit/", {"workspace": "vision-lab", "spec": SPEC}).content.decode()
    assert re.search(r"\$[\d,.]+ a month \(30 runs\)", quoted), "no month of runs in the quote"
    option = re.search(r'name="option" value="([^"]+)"', quoted).group(1)
    response = client.post("/submit/", {"workspace": "vision-lab", "spec": SPEC, "option": option})
    schedule = Schedule.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/schedules/{schedule.pk}/"
    assert schedule.spec_text == SPEC and not Job.objects.exists()


def test_a_runs_job_page_and_api_detail_link_its_schedule(client, cluster, nightly):
    from scheduling import schedules

    job = schedules.trigger_schedule(user=cluster.alice, schedule=nightly)
    client.force_login(cluster.alice)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert f'<p id="job-schedule">A run of <a href="/schedules/{nightly.pk}/">' in page
    assert client.get(f"/api/v1/jobs/{job.pk}/").json()["schedule"] == nightly.pk
