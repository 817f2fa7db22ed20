from decimal import Decimal

import pytest

from billing.accounts import AccountError, account_of, assign_workspace, save_account
from tests.factories import WorkspaceFactory

pytestmark = pytest.mark.django_db

def test_accounts_nest_one_level_and_refuse_bad_fields():
    dept = save_account(slug="ai-lab", name="AI Lab", currency="cny", tax_rate="13")
    assert dept.currency == "CNY" and dept.tax_rate == Decimal("13")
    team = save_account(slug="vision", name="Vision", currency="CNY", parent=dept)
    with pytest.raises(AccountError) as e:
        save_account(slug="deep", name="Deep", currency="CNY", parent=team)
    assert e.value.errors.keys() == {"parent"}
    with pytest.raises(AccountError) as e:
        save_account(dept, parent=team)
    assert "parent" in e.value.errors
    with pytest.raises(AccountError) as e:
        save_account(dept, tax_rate="100.5")
    assert "tax_rate" in e.value.errors
    dept.refresh_from_db()
    assert dept.tax_rate == Decimal("13") and dept.parent is None
    ws = WorkspaceFactory()
    assign_workspace(ws, team)
    assert account_of(ws) == team


def test_a_taken_slug_is_a_field_error():
    save_account(slug="ai-lab", name="AI Lab", currency="CNY")
    with pytest.raises(AccountError) as e:
        save_account(slug="ai-lab", name="Again", currency="USD")
    assert list(e.value.errors) == ["slug"]
