"""The console's billing accounts: create, edit and nest them, assign workspaces, set a budget and top up
prepaid credit; every change audited with its diff, every bad input refused beside its field with
nothing saved; tenants see their workspace's credit and nothing of another's."""

from decimal import Decimal

import pytest

from billing.accounts import assign_workspace, save_account
from billing.models import AccountBudget, BillingAccount, CreditTopUp
from portal.console.models import AuditEntry

pytestmark = pytest.mark.django_db

FIELDS = {"slug": "ai-lab", "name": "AI Lab", "parent": "", "currency": "cny", "tax_rate": "13", "tax_id": "91-310",
          "address": "Shanghai", "invoice_prefix": "AIL", "contacts": "ap@ai-lab.example", "low_balance": ""}


def errors_of(response) -> dict[str, list[str]]:
    """The messages beside each field (data-field), as the page shows them."""
    import re

    body = response.content.decode()
    found = {}
    for field, items in re.findall(r'data-field="([^"]*)">(.*?)</ul>', body, re.S):
        found.setdefault(field, []).extend(re.findall(r"<li>(.*?)</li>", items, re.S))
    return found


def test_create_edit_and_audit(admin_client, cluster):
    response = admin_client.post("/console/accounts/new/", FIELDS)
    assert response.status_code == 302 and response["Location"] == "/console/accounts/ai-lab/"
    account = BillingAccount.objects.get(slug="ai-lab")
    assert account.currency == "CNY" and account.tax_rate == Decimal("13")
    created = AuditEntry.objects.get(action="create", target_type="billing.billingaccount")
    assert created.changes["tax_rate"] == [None, "13"] and created.username == "admin"
    response = admin_client.post("/console/accounts/ai-lab/", {**FIELDS, "tax_rate": "6", "name": "AI Lab Ltd"})
    assert response.status_code == 302
    changed = AuditEntry.objects.get(action="change", target_type="billing.billingaccount")
    assert changed.changes == {"tax_rate": ["13", "6"], "name": ["AI Lab", "AI Lab Ltd"]}
    page = admin_client.get("/console/accounts/").content.decode()
    assert 'data-account="ai-lab"' in page and "AI Lab Ltd" in page


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"tax_rate": "100.5"}, "tax_rate", "outside 0 to 100"),
    ({"tax_rate": "lots"}, "tax_rate", "not a number"),
    ({"currency": "XYZ"}, "currency", "XYZ"),
    ({"parent": "team"}, "parent", "has sub-accounts"),
    ({"parent": "ai-lab"}, "parent", "own parent"),
    ({"low_balance": "-1"}, "low_balance", "from 0 up"),
])
def test_bad_input_is_refused_beside_its_field_and_nothing_changes(admin_client, cluster, change, field, words):
    dept = save_account(slug="ai-lab", name="AI Lab", currency="CNY", tax_rate="13")
    save_account(slug="team", name="Team", currency="CNY", parent=dept)
    response = admin_client.post("/console/accounts/ai-lab/", {**FIELDS, **change})
    assert response.status_code == 400
    shown = errors_of(response)
    assert list(shown) == [field] and words in shown[field][0]
    dept.refresh_from_db()
    assert (dept.tax_rate, dept.currency, dept.parent, dept.low_balance) == (Decimal("13"), "CNY", None, None)
    assert not AuditEntry.objects.filter(target_type="billing.billingaccount").exists()


def test_a_cycle_through_a_sub_account_is_refused(admin_client, cluster):
    dept = save_account(slug="ai-lab", name="AI Lab", currency="CNY")
    save_account(slug="team", name="Team", currency="CNY", parent=dept)
    response = admin_client.post("/console/accounts/new/", {**FIELDS, "slug": "squad", "parent": "team"})
    assert response.status_code == 400 and "parent" in errors_of(response)
    assert not BillingAccount.objects.filter(slug="squad").exists()


def test_assigning_workspaces_is_audited(admin_client, cluster):
    save_account(slug="ai-lab", name="AI Lab", currency="USD")
    response = admin_client.post("/console/accounts/ai-lab/workspaces/", {"workspace": "vision-lab"})
    assert response.status_code == 302
    entry = AuditEntry.objects.get(action="set account")
    assert entry.changes == {"billing_account": [None, "ai-lab"]} and entry.target_repr == "vision-lab"
    assert 'data-workspace="vision-lab"' in admin_client.get("/console/accounts/ai-lab/").content.decode()
    response = admin_client.post("/console/accounts/ai-lab/workspaces/", {"workspace": "no-such"})
    assert response.status_code == 400 and errors_of(response) == {"workspace": ["no such workspace"]}
    admin_client.post("/console/accounts/ai-lab/workspaces/", {"workspace": "vision-lab", "remove": "1"})
    assert AuditEntry.objects.filter(action="set account").count() == 2
    assert not cluster.vision.__class__.objects.filter(billing_account_link__isnull=False).exists()


def test_account_budget_through_the_console(admin_client, cluster):
    save_account(slug="ai-lab", name="AI Lab", currency="USD")
    response = admin_client.post("/console/accounts/ai-lab/budget/", {"amount": "-5"})
    assert response.status_code == 400 and "amount" in errors_of(response)
    assert not AccountBudget.objects.exists() and not AuditEntry.objects.filter(action="set budget").exists()
    response = admin_client.post("/console/accounts/ai-lab/budget/", {"amount": "500", "block_at_limit": "on"})
    assert response.status_code == 302
    budget = AccountBudget.objects.get()
    assert budget.amount == Decimal("500") and budget.block_at_limit
    entry = AuditEntry.objects.get(action="set budget")
    assert entry.changes["amount"] == [None, "500"] and entry.changes["block_at_limit"] == [None, True]


def test_top_up_through_the_console(admin_client, cluster, clock):
    account = save_account(slug="vision-co", name="Vision Co", currency="USD", prepaid=True)
    assign_workspace(cluster.vision, account)
    for bad in ("0", "-3"):
        response = admin_client.post("/console/accounts/vision-co/credits/", {"amount": bad})
        assert response.status_code == 400 and list(errors_of(response)) == ["amount"]
    assert not CreditTopUp.objects.exists() and not AuditEntry.objects.filter(action="top up").exists()
    response = admin_client.post("/console/accounts/vision-co/credits/", {"amount": "250", "note": "PO 12"})
    assert response.status_code == 302
    entry = AuditEntry.objects.get(action="top up")
    assert entry.changes == {"credit_balance": ["0", "250"]} and "PO 12" in entry.message
    page = admin_client.get("/console/accounts/vision-co/credits/").content.decode()
    assert 'data-balance="250.00"' in page and "PO 12" in page


def test_tenants_see_their_credit_and_nothing_of_another(client, cluster, clock):
    account = save_account(slug="vision-co", name="Vision Co", currency="USD", prepaid=True)
    assign_workspace(cluster.vision, account)
    save_account(account, low_balance="5")
    from billing.credits import top_up

    top_up(cluster.finance, account, "42")
    client.force_login(cluster.alice)
    assert 'data-credit="42.00"' in client.get("/reports/").content.decode()
    client.force_login(cluster.bob)
    page = client.get("/reports/").content.decode()
    assert "data-credit" not in page and "Vision Co" not in page
    for url in ("/console/accounts/", "/console/accounts/vision-co/credits/"):
        assert client.get(url).status_code == 403
    assert client.post("/console/accounts/vision-co/credits/", {"amount": "1"}).status_code == 403
    assert CreditTopUp.objects.count() == 1


def test_the_account_list_reads_budgets_and_credit_for_all_accounts_at_once(admin_client, cluster, clock):
    """Two accounts or four, each prepaid with a budget and a billed workspace: the list runs as many queries."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tests.factories import billed_prepaid_account

    hour = clock.now.replace(minute=0, second=0, microsecond=0)
    admin_client.get("/console/accounts/")  # the session's first request reads more
    counts = []
    for size in (2, 4):
        while BillingAccount.objects.count() < size:
            billed_prepaid_account(cluster.admin, BillingAccount.objects.count(), hour)
        with CaptureQueriesContext(connection) as listing:
            page = admin_client.get("/console/accounts/")
        assert page.status_code == 200
        counts.append(len(listing.captured_queries))
    html = page.content.decode()
    assert all(f'data-account="lab-{n}"' in html for n in range(4)) and html.count("40.00") >= 4
    assert counts[0] == counts[1]
