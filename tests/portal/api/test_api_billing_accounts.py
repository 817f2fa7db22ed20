"""/api/v1/billing-accounts/: finance and operators read the accounts paying for their workspaces and top up
prepaid credit; another tenant sees nothing of them; a bad top-up is an RFC 9457 problem naming the field."""

from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model

from billing.accounts import assign_workspace, save_account
from billing.models import CreditTopUp
from portal.console.models import AuditEntry
from portal.models import Membership, Role

pytestmark = pytest.mark.django_db


@pytest.fixture
def account(cluster, clock):
    account = save_account(slug="vision-co", name="Vision Co", currency="USD", prepaid=True, low_balance="10")
    assign_workspace(cluster.vision, account)
    return account


def test_finance_reads_and_tops_up_its_account(api_as, cluster, account):
    api = api_as(cluster.finance)
    (listed,) = api.get("/api/v1/billing-accounts/").json()
    assert listed["slug"] == "vision-co" and listed["workspaces"] == ["vision-lab"]
    assert listed["credit"]["balance"] == "0.00" and listed["budget"] is None
    response = api.post("/api/v1/billing-accounts/vision-co/top-ups/", {"amount": "120.5", "note": "PO 9"},
                        format="json")
    assert response.status_code == 201 and response.json()["balance"] == "120.50"
    assert AuditEntry.objects.get(action="top up").username == "finance"
    assert api.get("/api/v1/billing-accounts/vision-co/").json()["credit"]["topped_up"] == "120.50"


@pytest.mark.parametrize("amount", ["0", "-5", "abc"])
def test_a_bad_top_up_is_a_problem_naming_the_amount(api_as, cluster, account, amount):
    response = api_as(cluster.finance).post("/api/v1/billing-accounts/vision-co/top-ups/", {"amount": amount},
                                            format="json")
    assert response.status_code == 400 and response["Content-Type"].startswith("application/problem+json")
    assert [e["field"] for e in response.json()["errors"]] == ["amount"]
    assert not CreditTopUp.objects.exists()


def test_another_tenant_sees_and_tops_up_nothing(api_as, cluster, account):
    outsider = get_user_model().objects.create_user("nlp-finance", "nlp-finance@example.com")
    Membership.objects.create(user=outsider, workspace=cluster.nlp, role=Role.FINANCE)
    for user in (outsider, cluster.bob):
        api = api_as(user)
        assert api.get("/api/v1/billing-accounts/").json() == []
        assert api.get("/api/v1/billing-accounts/vision-co/").status_code == 404
        response = api.post("/api/v1/billing-accounts/vision-co/top-ups/", {"amount": "5"}, format="json")
        assert response.status_code == 404
    # alice owns the workspace but is not finance: she sees no account and cannot top up
    assert api_as(cluster.alice).post("/api/v1/billing-accounts/vision-co/top-ups/", {"amount": "5"},
                                      format="json").status_code == 404
    assert not CreditTopUp.objects.exists()


def test_operators_see_every_account(api_as, cluster, account):
    save_account(slug="other", name="Other", currency="CNY")
    slugs = [a["slug"] for a in api_as(cluster.admin).get("/api/v1/billing-accounts/").json()]
    assert slugs == ["other", "vision-co"]
    assert Decimal(api_as(cluster.admin).post("/api/v1/billing-accounts/vision-co/top-ups/", {"amount": "1"},
                                              format="json").json()["amount"]) == 1


def test_the_list_reads_every_account_at_once_and_shows_what_each_shows_alone(api_as, cluster, clock):
    """Two accounts or four, each prepaid with a budget, a top-up and a billed workspace (one of them a
    sub-account): the list runs as many queries, and each entry is what the account's own URL shows."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from billing.models import BillingAccount
    from tests.factories import billed_prepaid_account

    hour = clock.now.replace(minute=0, second=0, microsecond=0)
    api = api_as(cluster.admin)
    api.get("/api/v1/billing-accounts/")  # the session's first request reads more
    counts = []
    for size in (2, 4):
        while BillingAccount.objects.count() < size:
            n = BillingAccount.objects.count()
            parent = BillingAccount.objects.get(slug="lab-0") if n == 3 else None
            billed_prepaid_account(cluster.admin, n, hour, parent=parent, workspace_slug=f"ws-{n}")
        with CaptureQueriesContext(connection) as listing:
            shown = api.get("/api/v1/billing-accounts/").json()
        counts.append(len(listing.captured_queries))
    assert counts[0] == counts[1]
    assert [a["slug"] for a in shown] == ["lab-0", "lab-1", "lab-2", "lab-3"]
    assert shown[0]["workspaces"] == ["ws-0", "ws-3"] and shown[3]["parent"] == "lab-0"
    assert shown[1]["budget"]["spent"] == "10.00" and shown[1]["credit"]["balance"] == "40.00"
    for entry in shown:
        assert api.get(f"/api/v1/billing-accounts/{entry['slug']}/").json() == entry
