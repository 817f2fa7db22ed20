"""Per-person reports: GPU-hours, cost, idle share and jobs per person and month across the workspaces of
finance, owners and operators; each figure a sum of that person's lines; another tenant's people never shown;
a member sees only their own usage (account page)."""

import csv
import io
from collections import defaultdict
from datetime import UTC, date, datetime
from decimal import Decimal

import openpyxl
import pytest
from django.test import Client

from billing.models import ChargeLine
from portal.console.anonymise import anonymise_user
from tests.factories import JobFactory, MembershipFactory, UserFactory, WorkspaceFactory

pytestmark = pytest.mark.django_db
RANGE = {"start": "2026-02-01", "end": "2026-03-31"}


@pytest.fixture
def usage(tenants, clock, line):
    """alice and carol in vision-lab, bob in nlp-group, over February and March; dana in a second tenant."""
    clock.now = datetime(2026, 3, 31, 12, tzinfo=UTC)
    other = WorkspaceFactory(slug="other-co", name="Other Co")
    dana = UserFactory(username="dana")
    MembershipFactory(user=dana, workspace=other, role="owner")
    jobs = {
        "alice-1": JobFactory(workspace=tenants.vision, submitted_by=tenants.alice),
        "alice-2": JobFactory(workspace=tenants.vision, submitted_by=tenants.alice),
        "carol-1": JobFactory(workspace=tenants.vision, submitted_by=tenants.carol),
        "bob-1": JobFactory(workspace=tenants.nlp, submitted_by=tenants.bob),
        "dana-1": JobFactory(workspace=other, submitted_by=dana),
    }
    for name, day, hours, cost in [
        ("alice-1", date(2026, 2, 27), "1.5", "4.56"), ("alice-1", date(2026, 3, 1), "2", "6.08"),
        ("alice-2", date(2026, 3, 2), "0.33", "1.01"), ("carol-1", date(2026, 3, 3), "1", "3.04"),
        ("bob-1", date(2026, 3, 3), "4", "12.16"), ("dana-1", date(2026, 3, 3), "8", "24.32"),
    ]:
        job = jobs[name]
        line(workspace=job.workspace, job=job, job_name=job.name, submitter=job.submitted_by.username, day=day,
             allocated_gpu_hours=Decimal(hours), cost=Decimal(cost))
    return dana


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def by_hand(workspaces) -> dict[tuple[str, str], dict]:
    """Per (person, month): the sums of their lines, worked out from the lines themselves."""
    out: dict = defaultdict(lambda: {"gpu_hours": Decimal(0), "cost": Decimal(0), "jobs": set()})
    for x in ChargeLine.objects.filter(workspace__slug__in=workspaces).select_related("job__submitted_by"):
        row = out[(x.job.submitted_by.username, f"{x.period:%Y-%m}")]
        row["gpu_hours"] += x.allocated_gpu_hours
        row["cost"] += x.cost
        row["jobs"].add(x.job_id)
    return out


def test_per_user_rows_match_the_sum_of_the_users_lines(tenants, usage):
    body = client_of(tenants.finance).get("/api/v1/costs/", {**RANGE, "group_by": "user"}).json()
    expected = by_hand(["vision-lab", "nlp-group"])
    got = {(r["user"], r["month"]): r for r in body["rows"]}
    assert set(got) == set(expected) == {("alice", "2026-02"), ("alice", "2026-03"), ("carol", "2026-03"),
                                         ("bob", "2026-03")}
    for key, row in expected.items():
        assert Decimal(got[key]["cost"]) == row["cost"] and Decimal(got[key]["allocated_gpu_hours"]) == row["gpu_hours"]
        assert got[key]["jobs"] == len(row["jobs"]) and got[key]["idle_share"] == "0.00"
    assert Decimal(body["total"]) == sum(Decimal(r["cost"]) for r in body["rows"])


def test_the_operator_sees_every_tenant_and_a_tenant_only_its_own(tenants, usage):
    operator = client_of(tenants.admin).get("/api/v1/costs/", {**RANGE, "group_by": "user"}).json()
    assert {r["user"] for r in operator["rows"]} == {"alice", "carol", "bob", "dana"}
    bob = client_of(tenants.bob).get("/api/v1/costs/", {**RANGE, "group_by": "user"}).json()
    assert {r["user"] for r in bob["rows"]} == {"bob"}  # owner of nlp-group: never vision-lab's or other-co's
    dana = client_of(usage).get("/api/v1/costs/", {**RANGE, "group_by": "user"}).json()
    assert {r["user"] for r in dana["rows"]} == {"dana"}
    assert client_of(usage).get("/api/v1/costs/", {**RANGE, "group_by": "user", "workspace": "vision-lab"}
                                ).status_code == 404


def test_a_member_may_not_group_by_user_across_workspaces(tenants, usage):
    response = client_of(tenants.carol).get("/api/v1/costs/", {**RANGE, "group_by": "user"})
    assert response.status_code == 403 and response["Content-Type"] == "application/problem+json"
    assert client_of(tenants.carol).get("/reports/users/", RANGE).status_code == 403
    # inside the one workspace they are in, as before: its people, nobody else's
    rows = client_of(tenants.carol).get("/api/v1/costs/", {**RANGE, "group_by": "user", "workspace": "vision-lab"}
                                        ).json()["rows"]
    assert {r["user"] for r in rows} == {"alice", "carol"}
    assert client_of(tenants.carol).get("/api/v1/costs/", {**RANGE, "group_by": "user", "workspace": "nlp-group"}
                                        ).status_code == 404
    MembershipFactory(user=tenants.carol, workspace=tenants.nlp, role="finance")
    rows = client_of(tenants.carol).get("/api/v1/costs/", {**RANGE, "group_by": "user"}).json()["rows"]
    assert {r["user"] for r in rows} == {"bob"}  # across: only where carol is finance


def test_the_page_and_its_exports_give_the_same_figures(tenants, usage):
    client = client_of(tenants.finance)
    page = client.get("/reports/users/", RANGE)
    assert page.status_code == 200 and 'data-user="alice"' in page.content.decode()
    assert "dana" not in page.content.decode()
    rows = list(csv.DictReader(io.StringIO(client.get("/reports/users/", {**RANGE, "format": "csv"}).content.decode())))
    expected = by_hand(["vision-lab", "nlp-group"])
    assert {(r["user"], r["month"]): Decimal(r["cost"]) for r in rows} == {k: v["cost"] for k, v in expected.items()}
    book = openpyxl.load_workbook(io.BytesIO(client.get("/reports/users/", {**RANGE, "format": "xlsx"}).content))
    sheet = book.worksheets[0]
    header = [c.value for c in sheet[1]]
    cells = [dict(zip(header, (c.value for c in r), strict=True)) for r in sheet.iter_rows(min_row=2)]
    assert sorted(Decimal(str(c["cost"])) for c in cells) == sorted(v["cost"] for v in expected.values())
    top = page.context["report"].top
    assert [p["user"] for p in top] == ["bob", "alice", "carol"]


def test_an_anonymised_person_stays_pseudonymised(tenants, usage):
    anonymise_user(tenants.admin, tenants.carol)
    rows = client_of(tenants.finance).get("/api/v1/costs/", {**RANGE, "group_by": "user"}).json()["rows"]
    users = {r["user"] for r in rows}
    assert "carol" not in users and any(u.startswith("former-user-") for u in users)
    body = client_of(tenants.finance).get("/reports/users/", {**RANGE, "format": "csv"}).content.decode()
    assert "carol" not in body


def test_my_usage_shows_my_lines_only(tenants, usage):
    page = client_of(tenants.alice).get("/account/usage/")
    rows = page.context["rows"]
    assert [(f"{r['period']:%Y-%m}", r["cost"], r["jobs"]) for r in rows] == [
        ("2026-03", Decimal("7.09"), 2), ("2026-02", Decimal("4.56"), 1)]
    assert "3.04" not in page.content.decode().split('id="my-usage"')[1]  # carol's line is not alice's


def test_an_operator_may_name_any_workspace(tenants, usage):
    rows = client_of(tenants.admin).get("/api/v1/costs/", {**RANGE, "group_by": "user", "workspace": "other-co"}
                                        ).json()["rows"]
    assert {r["user"] for r in rows} == {"dana"}
