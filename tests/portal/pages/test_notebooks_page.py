"""The notebooks page (`/notebooks/`): a workspace's notebooks with Open, Stop, Start and Delete, their slice,
idle time, cost so far and idle hours with their cost; members act, viewers only see, another tenant gets
404s and never sees or touches alice's notebooks."""

from __future__ import annotations

import re
import time
from decimal import Decimal

import pytest
from django.test import RequestFactory

from billing.ledger.posting import post_ledger
from billing.models import ChargeLine
from billing.services import submit_quoted_job
from portal.notebook_proxy import _headers
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.models import Job, JobState

NOTEBOOK = ("kind: notebook\nname: lab\nqueue: vision-lab\nnodePool: h100\n"
            "resources: {gpu: 0.5, gpuMemory: 10Gi}\n")


@pytest.fixture
def alice_notebook(cluster, clock, run):
    """alice's notebook, running for an hour on the simulated cluster (its server a real process)."""
    backend = SimulatedBackend(speedup=1, failure_rate=0, clock=clock)
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=NOTEBOOK)
    deadline = time.monotonic() + 20
    while job.state != JobState.RUNNING and time.monotonic() < deadline:
        run(backend, clock)
        job.refresh_from_db()
        time.sleep(0.05)
    assert job.state == JobState.RUNNING
    clock.advance(3600)
    post_ledger(now=clock.now)
    return job


def row(body: str, job: Job) -> str:
    match = re.search(rf'<tr data-job="{job.pk}".*?</tr>', body, re.S)
    assert match, f"no row for job {job.pk}"
    return match.group(0)


def test_the_list_shows_slice_idle_time_costs_and_actions(client, cluster, alice_notebook):
    bobs = submit_quoted_job(user=cluster.bob, workspace=cluster.nlp,
                             spec="kind: notebook\nname: bobs-lab\nqueue: nlp-group\n")
    client.force_login(cluster.alice)
    response = client.get("/notebooks/", {"workspace": "vision-lab"})
    assert response.status_code == 200
    body = response.content.decode()
    mine = row(body, alice_notebook)
    assert 'data-field="state">Running' in mine and "0.5 GPU + 10 GiB" in mine
    assert 'href="/nb/vision-lab/lab/"' in mine and 'data-action="stop"' in mine and 'data-action="start"' not in mine
    assert re.search(r'data-field="idle"[^>]*>\d+ s<', mine)  # asked of its server: no kernel ran yet
    lines = ChargeLine.objects.filter(job=alice_notebook)
    cost = sum(lines.values_list("cost", flat=True), Decimal(0))
    assert cost > 0 and f"${cost:.2f}" in mine
    # no agent samples: the ledger counts the whole half GPU-hour idle, and its whole cost
    assert f"0.50 h · ${cost:.2f}" in mine
    assert "bobs-lab" not in body and f'data-job="{bobs.pk}"' not in body
    assert client.get("/notebooks/", {"workspace": "nlp-group"}).status_code == 404


def test_members_stop_start_and_delete_viewers_and_outsiders_cannot(client, cluster, alice_notebook):
    pk = alice_notebook.pk
    for user, status in ((cluster.bob, 404), (cluster.finance, 403)):
        client.force_login(user)
        for action in ("stop", "start", "delete"):
            assert client.post(f"/notebooks/{pk}/{action}/", {"confirm": "1", "home": "1"}).status_code == status
    client.force_login(cluster.finance)
    body = client.get("/notebooks/", {"workspace": "vision-lab"}).content.decode()
    assert f'data-job="{pk}"' in body and "data-action" not in row(body, alice_notebook)  # sees, cannot act
    alice_notebook.refresh_from_db()
    assert alice_notebook.state == JobState.RUNNING

    client.force_login(cluster.carol)  # a member of vision-lab
    stopped = client.post(f"/notebooks/{pk}/stop/", follow=True)
    assert "Notebook lab stopped" in stopped.content.decode()
    assert Job.objects.get(pk=pk).state == JobState.STOPPED
    assert 'data-action="start"' in row(stopped.content.decode(), alice_notebook)
    again = client.post(f"/notebooks/{pk}/stop/", follow=True)
    assert "was not stopped: job" in again.content.decode() and "already Stopped" in again.content.decode()
    client.post(f"/notebooks/{pk}/start/")
    assert Job.objects.get(pk=pk).state == JobState.PENDING

    confirm = client.get(f"/notebooks/{pk}/delete/")
    assert confirm.status_code == 200 and "Its home volume is kept" in confirm.content.decode()
    assert Job.objects.get(pk=pk).state == JobState.PENDING  # asking changed nothing
    done = client.post(f"/notebooks/{pk}/delete/", {"confirm": "1"}, follow=True)
    body = done.content.decode()
    assert "Notebook lab deleted; its home volume is kept." in body
    assert Job.objects.get(pk=pk).state == JobState.CANCELLED
    assert 'id="ended-notebooks-table"' in body and 'data-action="delete-home"' in body


def test_a_training_job_is_not_a_notebook_here(client, cluster, clock):
    from scheduling.spec.examples import CLEAN_YAML

    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=CLEAN_YAML)
    client.force_login(cluster.alice)
    assert client.post(f"/notebooks/{job.pk}/stop/").status_code == 404
    assert client.get(f"/notebooks/{job.pk}/delete/").status_code == 404


def test_the_proxy_never_forwards_the_portals_cookies_or_credentials():
    request = RequestFactory().get("/nb/vision-lab/lab/lab", HTTP_COOKIE="sessionid=s3ss; csrftoken=c",
                                   HTTP_AUTHORIZATION="Bearer gpt_secret", HTTP_ACCEPT="text/html",
                                   HTTP_CONNECTION="keep-alive, x-hop", HTTP_X_HOP="1", HTTP_X_CSRFTOKEN="c")
    headers = {k.lower(): v for k, v in _headers(request, "nb-token").items()}
    assert headers["authorization"] == "token nb-token" and headers["accept"] == "text/html"
    assert not {"cookie", "connection", "x-hop", "x-csrftoken", "host"} & set(headers)
