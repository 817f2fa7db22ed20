"""The workspace's queues (/api/v1/workspaces/<slug>/queues/) and a pending job's queue position and
expected start in /api/v1/jobs/<id>/, for two tenants: bob (nlp-group) sees none of vision-lab's."""

from datetime import datetime

import pytest
from rest_framework.test import APIClient

from billing.services import submit_quoted_job
from portal.console.selectors import queue_lines
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.models import Job

SPEC = """name: {name}
queue: {queue}
priority: {priority}
preemptible: false
expectedDuration: 1h
roles:
  - name: main
    image: busybox
    resources: {{gpu: {gpus}}}
    nodePool: h100
"""
FIELDS = {"name", "deserved", "limit", "allocated", "fair_share", "pending"}



@pytest.fixture
def busy(cluster, clock, run):
    """vision-lab runs two 8-GPU jobs on the h100 pool and waits with two more; nlp-group waits with one."""
    backend = SimulatedBackend(speedup=60, failure_rate=0, clock=clock)

    def submit(name, user, workspace, priority=0):
        return submit_quoted_job(user=user, workspace=workspace, spec=SPEC.format(
            name=name, queue=workspace.slug, priority=priority, gpus=8))

    running = [submit(f"run{n}", cluster.alice, cluster.vision) for n in range(2)]
    run(backend, clock)
    clock.advance(2)
    waiting = [submit("wait-low", cluster.alice, cluster.vision), submit("wait-high", cluster.carol, cluster.vision, 5)]
    bobs = submit("bob-waits", cluster.bob, cluster.nlp)
    run(backend, clock)
    return {"running": running, "waiting": waiting, "bob": bobs}


def test_a_member_sees_each_queue_of_the_workspace_with_the_schedulers_figures(cluster, busy, api_as):
    response = api_as(cluster.carol).get("/api/v1/workspaces/vision-lab/queues/")
    assert response.status_code == 200, response.content
    body = response.json()
    assert [q["name"] for q in body] == ["community", "vision-lab"]
    assert all(set(q) == FIELDS for q in body)
    vision = {q["name"]: q for q in body}["vision-lab"]
    assert vision["deserved"] == 16 and vision["limit"] is None
    assert vision["allocated"] == 16 and vision["pending"] == 2
    line = {line.name: line for line in queue_lines()}["vision-lab"]
    assert vision["fair_share"] == pytest.approx(line.fair_share) and vision["fair_share"] > 0
    community = {q["name"]: q for q in body}["community"]
    assert community == {"name": "community", "deserved": 0, "limit": None, "allocated": 0,
                         "fair_share": pytest.approx(community["fair_share"]), "pending": 0}


def test_an_outsider_gets_a_404_problem_and_sees_only_his_own_queues(cluster, busy, api_as):
    bob = api_as(cluster.bob)
    refused = bob.get("/api/v1/workspaces/vision-lab/queues/")
    assert refused.status_code == 404
    assert refused["Content-Type"].startswith("application/problem+json")
    assert "16" not in refused.content.decode()
    mine = bob.get("/api/v1/workspaces/nlp-group/queues/").json()
    assert [q["name"] for q in mine] == ["community", "nlp-group"]
    assert {q["name"]: q["pending"] for q in mine} == {"community": 0, "nlp-group": 1}
    assert APIClient().get("/api/v1/workspaces/vision-lab/queues/").status_code in (401, 403)


def test_a_pending_job_carries_its_queue_position_and_expected_start(cluster, busy, api_as, clock):
    alice = api_as(cluster.alice)
    low, high = busy["waiting"]
    # the higher priority goes first though submitted later
    assert alice.get(f"/api/v1/jobs/{high.pk}/").json()["queue_position"] == 1
    body = alice.get(f"/api/v1/jobs/{low.pk}/").json()
    assert body["state"] == "Pending" and body["queue_position"] == 2
    window = body["expected_start"]
    assert set(window) == {"earliest", "latest", "open_ended", "summary"}
    assert window["open_ended"] is False and window["summary"].startswith("between ")
    earliest, latest = (datetime.fromisoformat(window[k]) for k in ("earliest", "latest"))
    # both running jobs end 59 s from now; of the two nodes, one goes to the high one and the other to
    # nlp-group (below its fair share): the low one waits for the high one to end, 60 s later
    assert clock.now < earliest <= latest
    assert (earliest - clock.now).total_seconds() == pytest.approx(119, abs=1)
    bobs = api_as(cluster.bob).get(f"/api/v1/jobs/{busy['bob'].pk}/").json()["expected_start"]
    assert (datetime.fromisoformat(bobs["earliest"]) - clock.now).total_seconds() == pytest.approx(59, abs=1)


def test_reading_an_expected_start_writes_nothing(cluster, busy, api_as):
    low = busy["waiting"][0]
    response = api_as(cluster.alice).get(f"/api/v1/jobs/{low.pk}/")
    assert response.status_code == 200 and response.json()["expected_start"]["earliest"]
    # the first answer, which calibration learns from, is the beat task's to keep: a GET leaves it alone
    assert not Job.objects.filter(first_forecast__isnull=False).exists()


def test_a_job_that_is_not_pending_has_neither(cluster, busy, api_as):
    body = api_as(cluster.alice).get(f"/api/v1/jobs/{busy['running'][0].pk}/").json()
    assert body["state"] == "Running"
    assert body["queue_position"] is None and body["expected_start"] is None


def test_an_outsider_cannot_read_the_outlook_of_anothers_job(cluster, busy, api_as):
    low = busy["waiting"][0]
    refused = api_as(cluster.bob).get(f"/api/v1/jobs/{low.pk}/")
    assert refused.status_code == 404 and "expected_start" not in refused.content.decode()
    own = api_as(cluster.bob).get(f"/api/v1/jobs/{busy['bob'].pk}/").json()
    assert own["queue_position"] == 1 and own["expected_start"] is not None


def test_an_open_ended_start_says_it_depends_on_jobs_ending_in_the_requests_language(cluster, busy, api_as,
                                                                                      monkeypatch):
    from datetime import timedelta

    from portal.api import outlook as api_outlook
    from scheduling.api import PendingOutlook, StartWindow

    low = busy["waiting"][0]
    floor = datetime.fromisoformat("2026-03-01T10:00:00+00:00")
    monkeypatch.setattr(api_outlook, "pending_outlook", lambda jobs: {
        j.pk: PendingOutlook(1, StartWindow(floor, None)) for j in jobs})
    window = api_as(cluster.alice).get(f"/api/v1/jobs/{low.pk}/").json()["expected_start"]
    assert window["open_ended"] is True and window["latest"] is None
    assert datetime.fromisoformat(window["earliest"]) == floor
    assert "depends on jobs ending" in window["summary"] and "not before" in window["summary"]
    assert timedelta(0) == datetime.fromisoformat(window["earliest"]) - floor
