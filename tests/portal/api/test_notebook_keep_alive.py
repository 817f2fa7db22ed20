"""Keep a notebook alive until a time in the user's time zone: the API field and the page's action, capped at
the queue's maximum runtime (refused beyond, with the figures, nothing changed), audited and in the job's
history; another tenant and a viewer are refused."""

from __future__ import annotations

from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from rest_framework.test import APIClient
from tests_job_specs import job_spec

from billing.models import KeepAlive
from billing.services import submit_quoted_job
from portal.console.models import AuditEntry
from portal.models import Membership, Role
from portal.services import create_api_token, set_time_zone
from scheduling.models import Queue
from tests.factories import UserFactory

NOTEBOOK = "kind: notebook\nname: lab\nqueue: vision-lab\nnodePool: h100\n"
URL = "/api/v1/notebooks/{}/keep-alive/"
SHANGHAI = ZoneInfo("Asia/Shanghai")


def api_with(user, scope: str = "submit") -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {create_api_token(user, f'{scope} token', scope=scope)[1]}")
    return api


@pytest.fixture
def notebook(cluster, clock):
    set_time_zone(cluster.alice, "Asia/Shanghai")
    return submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=NOTEBOOK)


def next_at(now: datetime, hour: int, zone: ZoneInfo) -> datetime:
    local = now.astimezone(zone)
    at = datetime.combine(local.date(), time(hour), tzinfo=zone)
    return at if at > local else at + timedelta(days=1)


def test_a_time_of_day_is_read_in_the_users_zone_audited_and_listed(cluster, notebook, clock):
    response = api_with(cluster.alice).post(URL.format(notebook.pk), {"keep_alive_until": "18:00"}, format="json")
    assert response.status_code == 200, response.json()
    until = next_at(clock.now, 18, SHANGHAI)
    assert datetime.fromisoformat(response.json()["keep_alive_until"]) == until
    assert KeepAlive.objects.get(job=notebook).until == until
    event = notebook.events.get(kind="keep_alive")
    assert f"kept alive until {until:%Y-%m-%d %H:%M} CST by alice" in event.reason
    entry = AuditEntry.objects.get(action="keep alive")
    assert entry.source == AuditEntry.Source.TENANT and entry.target_id == str(notebook.pk)
    (item,) = api_with(cluster.alice, "read").get("/api/v1/notebooks/").json()["results"]
    assert datetime.fromisoformat(item["keep_alive_until"]) == until

    cleared = api_with(cluster.alice).post(URL.format(notebook.pk), {"keep_alive_until": None}, format="json")
    assert cleared.status_code == 200 and cleared.json()["keep_alive_until"] is None
    assert not KeepAlive.objects.exists() and notebook.events.filter(kind="keep_alive").count() == 2


def test_beyond_the_queues_maximum_runtime_is_refused_with_the_figures(cluster, notebook, clock):
    Queue.objects.filter(name="vision-lab").update(max_runtime_s=2 * 3600)
    asked = (clock.now + timedelta(hours=3)).astimezone(SHANGHAI).replace(tzinfo=None).isoformat(timespec="minutes")
    response = api_with(cluster.alice).post(URL.format(notebook.pk), {"keep_alive_until": asked}, format="json")
    assert response.status_code == 400 and response["Content-Type"] == "application/problem+json"
    detail = response.json()["detail"]
    assert "is 3h from now; queue 'vision-lab' allows at most 2h" in detail, detail
    assert not KeepAlive.objects.exists() and not AuditEntry.objects.filter(action="keep alive").exists()
    within = (clock.now + timedelta(hours=1)).isoformat()
    assert api_with(cluster.alice).post(URL.format(notebook.pk), {"keep_alive_until": within},
                                        format="json").status_code == 200


@pytest.mark.parametrize("text, says", [("25:00", "is not a time"), ("tomorrow", "is not a time"),
                                        ("2020-01-01T10:00", "is not in the future")])
def test_bad_times_are_refused_and_nothing_changes(cluster, notebook, text, says):
    response = api_with(cluster.alice).post(URL.format(notebook.pk), {"keep_alive_until": text}, format="json")
    assert response.status_code == 400 and says in response.json()["detail"]
    assert not KeepAlive.objects.exists()


def test_another_tenant_a_viewer_and_a_training_job_are_refused(cluster, notebook):
    assert api_with(cluster.bob).post(URL.format(notebook.pk), {"keep_alive_until": "18:00"},
                                      format="json").status_code == 404
    viewer = UserFactory(username="victor")
    Membership.objects.create(user=viewer, workspace=cluster.vision, role=Role.VIEWER)
    assert api_with(viewer).post(URL.format(notebook.pk), {"keep_alive_until": "18:00"},
                                 format="json").status_code == 403
    training = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=job_spec("train", gpus=1, hours=1))
    assert api_with(cluster.alice).post(URL.format(training.pk), {"keep_alive_until": "18:00"},
                                        format="json").status_code == 404
    assert not KeepAlive.objects.exists()


def test_the_notebooks_page_keeps_alive_and_shows_until_when(cluster, notebook, client, clock):
    client.force_login(cluster.alice)
    response = client.post(f"/notebooks/{notebook.pk}/keep-alive/", {"until": "18:00"}, follow=True)
    assert response.status_code == 200
    until = next_at(clock.now, 18, SHANGHAI)
    assert "is kept alive until" in response.content.decode()
    page = client.get("/notebooks/?workspace=vision-lab").content.decode()
    assert f"kept alive until {until:%Y-%m-%d %H:%M}" in page and 'data-action="keep-alive-clear"' in page
    refused = client.post(f"/notebooks/{notebook.pk}/keep-alive/", {"until": "99:99"}, follow=True)
    assert "was not kept alive" in refused.content.decode()
    client.post(f"/notebooks/{notebook.pk}/keep-alive/", {"clear": "1"})
    assert not KeepAlive.objects.exists()
    client.force_login(cluster.bob)
    assert client.post(f"/notebooks/{notebook.pk}/keep-alive/", {"until": "18:00"}).status_code == 404
