"""People leave, records stay: anonymising a user puts a pseudonym where their name and e-mail were shown
or exported (job page, job events in the API, the audit log and its export, the FOCUS export's
x_Submitter and reports by user) and keeps every id and sum: no ledger line is rewritten. The account is
deactivated, its sessions and API tokens end, and the audit log says who did it and when, not the old name."""

import csv
import io
import json
from datetime import date

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db.models import Sum
from django.forms.models import model_to_dict
from django.test import Client

from billing.ledger.posting import post_ledger
from billing.models import ChargeLine
from portal.console import services as console_services
from portal.console import user_services
from portal.console.models import AuditEntry
from portal.models import ApiToken, UserSession
from portal.services import create_api_token
from tests.billing.reports.tests_reports_helpers import DAY, RANGE, at, csv_body, place, submit

OLD_NAME, OLD_EMAIL, PASSWORD = "dave.l", "dave.l@example.com", "violet-harbour-19"


@pytest.fixture
def departed(cluster):
    """dave.l: made by the operator, a member of vision-lab, a job billed on DAY, a failed sign-in, a token."""
    dave = user_services.create_user(cluster.admin, username=OLD_NAME, email=OLD_EMAIL, password=PASSWORD)
    console_services.set_member(cluster.admin, cluster.vision, OLD_NAME, "member")
    job = submit(dave, cluster.vision, "dave-train")
    place(job, at(DAY, 7), at(DAY, 10))
    bob_job = submit(cluster.bob, cluster.nlp, "nlp-run")
    place(bob_job, at(DAY, 12), at(DAY, 13), node="h100-02")
    post_ledger(now=at(date(2026, 3, 4), 0))
    user_services.reset_password(cluster.admin, dave, PASSWORD + "x")
    Client(REMOTE_ADDR="10.9.9.9").post("/login/", {"username": OLD_NAME, "password": "wrong-Password-1"})
    create_api_token(dave, "laptop")
    return dave, job


def ledger_rows():
    return [model_to_dict(line) for line in ChargeLine.objects.order_by("pk")]


def focus_submitters(user) -> set[str]:
    return {row["x_Submitter"] for row in csv.DictReader(io.StringIO(csv_body(user)))}


def audit_csv(admin) -> str:
    client = Client()
    client.force_login(admin)
    return b"".join(client.get("/console/audit/export.csv").streaming_content).decode()


def shown(cluster, job) -> dict[str, str]:
    """What an owner, the API and the operator see of the departed person."""
    owner = Client()
    owner.force_login(cluster.alice)
    return {
        "job page": owner.get(f"/jobs/{job.pk}/").content.decode(),
        "events api": owner.get(f"/api/v1/jobs/{job.pk}/events/").content.decode(),
        "audit csv": audit_csv(cluster.admin),
        "focus": " ".join(sorted(focus_submitters(cluster.finance))),
        "by user": json.dumps(owner.get("/api/v1/costs/", {**RANGE, "group_by": "user"}).json()["rows"]),
    }


def test_the_pseudonym_replaces_the_name_everywhere_and_no_billed_line_changes(cluster, departed):
    dave, job = departed
    before, lines = shown(cluster, job), ledger_rows()
    sums = ChargeLine.objects.aggregate(cost=Sum("cost"), hours=Sum("allocated_gpu_hours"))
    for where, text in before.items():
        assert OLD_NAME in text, where
    assert OLD_EMAIL in before["audit csv"]

    call_command("anonymise_user", OLD_NAME, "--by", "admin", stdout=io.StringIO())

    pseudonym = f"former-user-{dave.pk}"
    after = shown(cluster, job)
    for where, text in after.items():
        assert OLD_NAME not in text and OLD_EMAIL not in text, where
        assert pseudonym in text, where
    assert focus_submitters(cluster.finance) == {pseudonym, "bob"}
    assert ledger_rows() == lines  # not one column of one line rewritten: the stored name stays, unshown
    assert ChargeLine.objects.filter(job=job, submitter=OLD_NAME).exists()
    assert ChargeLine.objects.aggregate(cost=Sum("cost"), hours=Sum("allocated_gpu_hours")) == sums
    assert not AuditEntry.objects.filter(username__contains=OLD_NAME).exists()
    assert "bob" in after["focus"] and "admin" in after["audit csv"]  # others keep their names
    entry = AuditEntry.objects.get(action="anonymise")
    assert (entry.user, entry.target_id, entry.target_repr) == (cluster.admin, str(dave.pk), pseudonym)
    assert OLD_NAME not in json.dumps([entry.message, entry.said, entry.changes])


def test_the_account_is_closed_its_sessions_and_tokens_end(cluster, departed):
    dave, _ = departed
    browser = Client(REMOTE_ADDR="10.9.9.10")
    assert browser.post("/login/", {"username": OLD_NAME, "password": PASSWORD + "x"}).status_code == 302
    assert UserSession.objects.filter(user=dave).exists()
    call_command("anonymise_user", OLD_NAME, stdout=io.StringIO())
    dave.refresh_from_db()
    assert (dave.username, dave.email, dave.is_active, dave.has_usable_password()) == (
        f"former-user-{dave.pk}", "", False, False)
    assert browser.get("/").status_code == 302 and not UserSession.objects.filter(user=dave).exists()
    assert not ApiToken.objects.filter(user=dave, revoked__isnull=True).exists()
    assert Client().post("/login/", {"username": dave.username, "password": PASSWORD + "x"}).status_code == 200
    assert AuditEntry.objects.get(action="anonymise").username == "system"  # no --by: the command itself


def test_a_second_run_changes_nothing(cluster, departed):
    dave, _ = departed
    call_command("anonymise_user", OLD_NAME, stdout=io.StringIO())
    audit_rows = list(AuditEntry.objects.order_by("pk").values())
    out = io.StringIO()
    call_command("anonymise_user", f"former-user-{dave.pk}", stdout=out)
    call_command("anonymise_user", str(dave.pk), stdout=out)
    assert "already anonymised" in out.getvalue()
    assert list(AuditEntry.objects.order_by("pk").values()) == audit_rows


def test_an_unknown_user_or_operator_is_refused_with_an_error_status(cluster):
    with pytest.raises(CommandError, match="no user named 'nobody'") as unknown:
        call_command("anonymise_user", "nobody")
    assert unknown.value.returncode == 1
    with pytest.raises(CommandError, match="is an operator"):
        call_command("anonymise_user", "admin")
    assert get_user_model().objects.get(pk=cluster.admin.pk).username == "admin"
    with pytest.raises(CommandError, match="not an active operator"):
        call_command("anonymise_user", "carol", "--by", "bob")
    assert not AuditEntry.objects.filter(action="anonymise").exists()
    operator = user_services.create_user(cluster.admin, username="op2", email="", password=PASSWORD, is_staff=True)
    call_command("anonymise_user", "op2", "--force", stdout=io.StringIO())
    operator.refresh_from_db()
    assert operator.username == f"former-user-{operator.pk}" and not operator.is_active


def test_the_console_asks_first_and_tenants_cannot(cluster, departed):
    dave, _ = departed
    bob = Client()
    bob.force_login(cluster.bob)
    assert bob.post(f"/console/users/{OLD_NAME}/anonymise/").status_code == 403
    operator = Client()
    operator.force_login(cluster.admin)
    page = operator.get(f"/console/users/{OLD_NAME}/anonymise/")
    assert page.status_code == 200 and f"former-user-{dave.pk}" in page.content.decode()
    dave.refresh_from_db()
    assert dave.username == OLD_NAME and dave.is_active  # asking changed nothing
    assert operator.post("/console/users/admin/anonymise/").status_code == 400  # not oneself
    done = operator.post(f"/console/users/{OLD_NAME}/anonymise/")
    assert done.status_code == 302
    dave.refresh_from_db()
    assert dave.username == f"former-user-{dave.pk}"
    assert AuditEntry.objects.get(action="anonymise").user == cluster.admin
    assert get_user_model().objects.get(username="alice").is_active
