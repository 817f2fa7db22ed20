"""A refused budget is the report page again, with what was typed kept and each error beside its field, not a
bare 400 page; nothing is saved."""

import pytest

from billing.models import Budget

pytestmark = pytest.mark.django_db


def _form(page: str, slug: str) -> str:
    return page.split(f'id="budget-form-{slug}"', 1)[1].split("</form>")[0]


def _errors(form: str, field: str) -> str:
    return form.split(f'data-field="{field}"', 1)[1].split("</ul>")[0]


def test_a_refused_amount_is_shown_beside_it_with_what_was_typed(client, cluster):
    client.force_login(cluster.alice)   # vision-lab's owner
    response = client.post("/reports/budgets/vision-lab/", {"amount": "-5", "currency": "USD",
                                                            "thresholds": "40,90", "block_at_limit": "on"})
    assert response.status_code == 400
    page = response.content.decode()
    assert "<html" in page and 'id="budgets"' in page   # the page itself
    form = _form(page, "vision-lab")
    assert 'name="amount" type="number" step="0.01" min="0.01" value="-5" aria-invalid="true"' in form
    assert "positive number" in _errors(form, "amount")
    assert 'value="40,90"' in form and 'name="block_at_limit" checked' in form
    assert not Budget.objects.exists()


def test_bad_thresholds_are_shown_beside_them(client, cluster):
    client.force_login(cluster.alice)
    response = client.post("/reports/budgets/vision-lab/", {"amount": "250", "thresholds": "50,eighty"})
    assert response.status_code == 400
    form = _form(response.content.decode(), "vision-lab")
    assert 'value="250"' in form and 'value="50,eighty" aria-invalid="true"' in form
    assert "percentages" in _errors(form, "thresholds") and 'data-field="amount"' not in form
    assert not Budget.objects.exists()


def test_a_good_budget_is_saved_and_another_tenants_is_not_reachable(client, cluster):
    client.force_login(cluster.alice)
    assert client.post("/reports/budgets/vision-lab/", {"amount": "250", "thresholds": "50,80"}).status_code == 302
    assert Budget.objects.get(workspace=cluster.vision).amount == 250
    assert client.post("/reports/budgets/nlp-group/", {"amount": "-5"}).status_code == 404
