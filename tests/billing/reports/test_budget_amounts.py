"""One budget amount must never break a workspace: amounts that round to nothing or overflow are
refused, and a bad row already stored breaks neither its workspace's pages nor another's alerts."""

from decimal import Decimal

import pytest
from django.db import connection
from django.test import Client
from tests_reports_helpers import charge

from billing.models import Budget, BudgetAlert
from billing.reports.services import budget_status, check_budget_allows_submit, check_budgets, set_budget
from billing.services import submit_quoted_job
from scheduling.errors import DomainError

pytestmark = pytest.mark.usefixtures("clock")  # budgets count the platform clock's month

SPEC = "name: b\nroles:\n  - name: main\n    image: busybox\n    resources: {gpu: 1}\n    nodePool: h100\n"


def spend(user, workspace, amount):
    charge(submit_quoted_job(user=user, workspace=workspace, spec=SPEC), amount)


@pytest.mark.parametrize("amount", ["0.001", "0.004", "1e999999", "1e12", "Infinity", "NaN", "-0.01", "1e-999999"])
def test_amounts_that_cannot_be_a_budget_are_refused_and_nothing_is_stored(cluster, amount):
    with pytest.raises(DomainError):
        set_budget(user=cluster.alice, workspace=cluster.vision, amount=amount)
    client = Client()
    client.force_login(cluster.alice)
    response = client.post("/reports/budgets/vision-lab/", {"amount": amount, "currency": "USD"})
    assert response.status_code == 400
    assert not Budget.objects.exists()


def test_the_smallest_amount_of_the_currency_is_a_budget(cluster):
    assert set_budget(user=cluster.alice, workspace=cluster.vision, amount="0.01").amount == Decimal("0.01")
    with pytest.raises(DomainError):
        set_budget(user=cluster.alice, workspace=cluster.vision, amount="0.4", currency="JPY")


def _store_bad_budget(workspace, kind):
    """A row as the old code stored it: 0 from "0.001", or Infinity from "1e999999" on SQLite."""
    budget = Budget.objects.create(workspace=workspace, amount=Decimal("1"), currency="USD", block_at_limit=True)
    if kind == "zero":
        Budget.objects.filter(pk=budget.pk).update(amount=Decimal(0))
    else:
        with connection.cursor() as cursor:
            cursor.execute(f"UPDATE {Budget._meta.db_table} SET amount = 1e999 WHERE id = %s", [budget.pk])


KINDS = ["zero", pytest.param("infinite", marks=pytest.mark.skipif(
    "connection.vendor != 'sqlite'", reason="only SQLite stores an overflowing amount as Infinity"))]


@pytest.mark.parametrize("kind", KINDS)
def test_a_bad_stored_budget_breaks_neither_its_workspace_nor_another(cluster, kind, clock):
    _store_bad_budget(cluster.vision, kind)
    set_budget(user=cluster.bob, workspace=cluster.nlp, amount="10")
    spend(cluster.alice, cluster.vision, "5")
    spend(cluster.bob, cluster.nlp, "9")
    fired = check_budgets()  # the vision-lab row is skipped, nlp-group's alerts still fire
    assert [(a.budget.workspace.slug, a.threshold, a.percent) for a in fired] == [
        ("nlp-group", 50, Decimal("90.0")), ("nlp-group", 80, Decimal("90.0"))]
    assert budget_status(cluster.vision) is None and check_budget_allows_submit(cluster.vision) is None
    client = Client()
    client.force_login(cluster.alice)
    for url in ["/", "/reports/", f"/reports/statements/vision-lab/{clock.now:%Y-%m}/", "/submit/"]:
        assert client.get(url).status_code == 200, url
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=SPEC)
    assert job.pk
    assert BudgetAlert.objects.filter(budget__workspace=cluster.nlp).count() == 2
