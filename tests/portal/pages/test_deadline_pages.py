"""The pages of work with a deadline: the job page shows the deadline, the latest start and the phase (and says
plainly when it can no longer be met), the workspace page lists its deadline jobs by slack, the operator
dashboard lists those at risk, and the API's job detail gives them; a second tenant sees none of another's."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client

from scheduling import services
from scheduling.models import Job, JobState

pytestmark = pytest.mark.django_db
SPEC = """\
name: {name}
queue: {queue}
expectedDuration: 1h
completeWithin: {within}
roles:
  - name: main
    image: busybox
    resources: {{gpu: 1}}
    nodePool: h100
"""


def submit(user, workspace, name, within, queue="vision-lab"):
    return services.submit_job(user=user, workspace=workspace, spec=SPEC.format(name=name, within=within, queue=queue))


def client_for(user):
    client = Client()
    client.force_login(user)
    return client


def text(response) -> str:
    return re.sub(r"\s+", " ", response.content.decode())


def test_the_job_page_shows_the_deadline_the_latest_start_and_the_phase(cluster, clock):
    job = submit(cluster.alice, cluster.vision, "train", "12h")
    page = text(client_for(cluster.alice).get(f"/jobs/{job.pk}/"))
    assert 'id="job-deadline-card" data-phase="gaps"' in page
    assert f'datetime="{job.complete_by.astimezone(clock.now.tzinfo).isoformat()}"' in page
    assert 'id="job-latest-start"' in page
    assert "waits for idle GPUs until its latest start, then starts for sure" in page
    assert 'id="job-deadline-missed"' not in page
    Job.objects.filter(pk=job.pk).update(deadline_missed=clock.now)
    page = text(client_for(cluster.alice).get(f"/jobs/{job.pk}/"))
    assert 'data-phase="missed"' in page and 'id="job-deadline-missed"' in page
    assert "this job can no longer finish by its deadline" in page
    plain = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=SPEC.replace(
        "completeWithin: {within}\n", "").format(name="plain", queue="vision-lab"))
    assert 'id="job-deadline-card"' not in text(client_for(cluster.alice).get(f"/jobs/{plain.pk}/"))


def test_the_api_job_detail_gives_complete_by_and_latest_start(cluster, clock, api_as):
    job = submit(cluster.alice, cluster.vision, "train", "12h")
    body = api_as(cluster.alice).get(f"/api/v1/jobs/{job.pk}/").json()
    assert body["complete_by"] == job.complete_by.isoformat()
    assert body["latest_start"] == job.latest_start.isoformat()
    assert (body["deadline_phase"], body["deadline_missed"]) == ("gaps", None)
    plain = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=SPEC.replace(
        "completeWithin: {within}\n", "").format(name="plain", queue="vision-lab"))
    body = api_as(cluster.alice).get(f"/api/v1/jobs/{plain.pk}/").json()
    assert (body["complete_by"], body["latest_start"], body["deadline_phase"]) == (None, None, None)
    assert api_as(cluster.bob).get(f"/api/v1/jobs/{job.pk}/").status_code == 404


def test_the_api_refuses_an_unmeetable_deadline_with_the_figures_and_stores_nothing(cluster, clock, api_as):
    response = api_as(cluster.alice).post("/api/v1/jobs/", {"workspace": "vision-lab", "spec": SPEC.format(
        name="tight", within="30m", queue="vision-lab")}, format="json")
    assert response.status_code == 400
    assert response["content-type"].startswith("application/problem+json")
    assert "completeWithin leaves 30m, less than expectedDuration 1h" in response.content.decode()
    assert not Job.objects.exists()


def test_the_workspace_page_lists_its_deadline_jobs_least_slack_first_and_only_its_own(cluster, clock):
    later = submit(cluster.alice, cluster.vision, "later", "20h")
    sooner = submit(cluster.alice, cluster.vision, "sooner", "3h")
    done = submit(cluster.alice, cluster.vision, "done", "5h")
    Job.objects.filter(pk=done.pk).update(state=JobState.SUCCEEDED)
    bobs = submit(cluster.bob, cluster.nlp, "bobs", "4h", queue="nlp-group")
    page = text(client_for(cluster.alice).get("/w/vision-lab/"))
    section = page.split('id="workspace-deadlines"')[1].split("</section>")[0]
    rows = re.findall(r'<tr data-job="(\d+)"', section)
    assert rows == [str(sooner.pk), str(later.pk)]   # least slack first; a finished one is not listed
    assert "1h54m" in section   # 3 h less the 1 h run and its 6 min margin
    assert f"#{bobs.pk}" not in page
    bob_page = text(client_for(cluster.bob).get("/w/nlp-group/"))
    assert f"#{sooner.pk}" not in bob_page and f'data-job="{bobs.pk}"' in bob_page
    assert client_for(cluster.bob).get("/w/vision-lab/").status_code == 404


def test_the_operator_dashboard_lists_the_deadline_jobs_at_risk(cluster, clock):
    risky = submit(cluster.alice, cluster.vision, "risky", "1h30m")   # its latest start is 24 min away
    missed = submit(cluster.bob, cluster.nlp, "missed", "20h", queue="nlp-group")
    Job.objects.filter(pk=missed.pk).update(deadline_missed=clock.now)
    safe = submit(cluster.alice, cluster.vision, "safe", "20h")
    page = text(client_for(cluster.admin).get("/console/"))
    section = page.split('id="deadlines-at-risk"')[1].split("</section>")[0]
    rows = re.findall(r'<tr data-job="(\d+)" data-phase="(\w+)"', section)
    assert set(rows) == {(str(risky.pk), "gaps"), (str(missed.pk), "missed")}
    assert f'data-job="{safe.pk}"' not in section
    assert client_for(cluster.alice).get("/console/").status_code in (302, 403)
    clock.advance(timedelta(hours=2).total_seconds())   # past its latest start: negative slack, strict
    later = text(client_for(cluster.admin).get("/console/")).split('id="deadlines-at-risk"')[1].split("</section>")[0]
    row = later.split(f'<tr data-job="{risky.pk}"')[1].split("</tr>")[0]
    assert 'data-phase="strict"' in row and 'data-field="slack">-1h36m<' in row
