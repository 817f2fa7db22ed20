"""Finance sees both workspaces, alice only hers, bob nothing of alice's: pages and exports."""

import csv
import io

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.test import AsyncClient, Client
from tests_reports_helpers import DAY

from billing.models import ReportExport
from billing.reports.tasks import build_excel_export
from portal.models import Membership, Role

RANGE = {"start": "2026-03-01", "end": "2026-03-08"}


def page(user, **params):
    client = Client()
    client.force_login(user)
    return client.get("/reports/", {**RANGE, **params})


def csv_rows(user, **params) -> tuple[int, list[dict]]:
    client = AsyncClient()
    client.force_login(user)

    async def fetch():
        response = await client.get("/reports/export.csv", {**RANGE, **params})
        if response.status_code != 200:
            return response.status_code, b""
        return 200, b"".join([chunk async for chunk in response.streaming_content])

    status, body = async_to_sync(fetch)()
    return status, list(csv.DictReader(io.StringIO(body.decode())))


def test_finance_sees_both_workspaces(usage):
    response = page(usage.tenants.finance)
    assert response.status_code == 200
    slugs = {w["workspace__slug"] for w in response.context["by_workspace"]}
    assert slugs == {"vision-lab", "nlp-group"}
    status, rows = csv_rows(usage.tenants.finance)
    assert status == 200 and {r["BillingAccountId"] for r in rows} == {"vision-lab", "nlp-group"} and len(rows) == 9


def test_alice_sees_only_her_workspace(usage):
    response = page(usage.tenants.alice)
    assert {w["workspace__slug"] for w in response.context["by_workspace"]} == {"vision-lab"}
    assert b"nlp-finetune" not in response.content
    status, rows = csv_rows(usage.tenants.alice)
    assert status == 200 and {r["BillingAccountId"] for r in rows} == {"vision-lab"} and len(rows) == 7


def test_bob_gets_nothing_of_alices(usage):
    bob = usage.tenants.bob
    assert page(bob, workspace="vision-lab").status_code == 404
    assert csv_rows(bob, workspace="vision-lab")[0] == 404
    status, rows = csv_rows(bob)
    assert status == 200 and {r["BillingAccountId"] for r in rows} == {"nlp-group"} and len(rows) == 2
    client = Client()
    client.force_login(bob)
    assert client.post("/reports/exports/", {**RANGE, "workspace": "vision-lab"}).status_code == 404
    assert client.get(f"/reports/statements/vision-lab/{DAY:%Y-%m}/").status_code == 404


def test_viewers_see_and_outsiders_see_nothing(usage):
    users = get_user_model().objects
    viewer = users.create_user("vic", password="x")
    Membership.objects.create(user=viewer, workspace=usage.tenants.vision, role=Role.VIEWER)
    assert {w["workspace__slug"] for w in page(viewer).context["by_workspace"]} == {"vision-lab"}
    outsider = users.create_user("olga", password="x")
    assert page(outsider).context["by_workspace"] == []
    assert csv_rows(outsider) == (200, [])
    anonymous = Client()
    assert anonymous.get("/reports/export.csv").status_code == 302 and anonymous.get("/reports/").status_code == 302


def test_excel_exports_are_scoped_and_only_their_owner_downloads_them(usage, settings, tmp_path):
    settings.REPORT_EXPORT_DIR = tmp_path
    client = Client()
    client.force_login(usage.tenants.alice)
    response = client.post("/reports/exports/", RANGE, HTTP_ACCEPT="application/json")
    assert response.status_code == 202
    export = ReportExport.objects.get(pk=response.json()["id"])
    build_excel_export(str(export.pk))  # what the Celery worker runs
    status = client.get(response.json()["status_url"]).json()
    assert status["state"] == "done" and status["percent"] == 100 and status["rows_total"] == 7
    assert client.get(status["download_url"]).status_code == 200
    finance = Client()
    finance.force_login(usage.tenants.finance)
    assert finance.get(status["download_url"]).status_code == 404
    assert finance.get(response.json()["status_url"]).status_code == 404


def test_bad_filters_name_the_field(usage):
    client = Client()
    client.force_login(usage.tenants.finance)
    response = client.post("/reports/exports/", {"start": "2026-13-01"})
    assert response.status_code == 400 and b"start" in response.content
    assert csv_rows(usage.tenants.finance, sharing="bogus")[0] == 400


@pytest.mark.parametrize("who", ["alice", "finance"])
def test_drill_down_from_workspace_to_jobs(usage, who):
    response = page(getattr(usage.tenants, who), workspace="vision-lab")
    jobs = {j["job_name"]: j for j in response.context["jobs"]}
    assert set(jobs) == {"vision-train", "vision-notebook"}
    assert jobs["vision-train"]["estimate_low"] == usage.vision_job.quote["estimate_low"]
