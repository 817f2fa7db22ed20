"""An `ai-lab` billing account (CNY, 13 % VAT) holding vision-lab and a robotics workspace, with March 2026's
ledger lines; nlp-group (bob's, the second tenant) belongs to a USD account of its own."""

import os
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

MARCH = date(2026, 3, 1)
AFTER_MARCH = datetime(2026, 4, 2, 12, tzinfo=UTC)


@dataclass
class Books:
    account: object
    other: object
    robotics: object


def charge(workspace, cost: str, *, category="Usage", resource="compute", currency="CNY", day=10):
    from billing.models import ChargeLine

    at = datetime(2026, 3, day, 12, tzinfo=UTC)
    return ChargeLine.objects.create(
        category=category, resource=resource if category == "Usage" else "", hour=at, day=at.date(), period=MARCH,
        charge_start=at, charge_end=at + timedelta(hours=1), workspace=workspace, cost=Decimal(cost),
        currency=currency, provisional=False, computed_at=at)


@pytest.fixture
def books(tenants, clock):
    from billing.accounts import assign_workspace, save_account
    from billing.models import WorkspaceCurrency
    from portal.models import Role
    from tests.factories import MembershipFactory, PriceTableFactory, WorkspaceFactory

    clock.now = datetime(2026, 3, 20, 12, tzinfo=UTC)
    PriceTableFactory(), PriceTableFactory(currency="CNY")  # the ledger posts (and so closes) with prices only
    robotics = WorkspaceFactory(slug="robotics", name="机器人组")
    MembershipFactory(user=tenants.finance, workspace=robotics, role=Role.FINANCE)
    account = save_account(slug="ai-lab", name="人工智能实验室有限公司", currency="CNY", tax_rate="13",
                           address="北京市海淀区中关村大街1号", tax_id="91110108MA01ABCD2X", invoice_prefix="AIL-",
                           contacts="ap@ai-lab.example\nfinance@ai-lab.example\n")
    other = save_account(slug="nlp-co", name="NLP Co", currency="USD", tax_rate="0")
    for workspace in (tenants.vision, robotics):
        WorkspaceCurrency.objects.create(workspace=workspace, period=date(2026, 1, 1), currency="CNY", set_at=clock.now)
        assign_workspace(workspace, account)
    assign_workspace(tenants.nlp, other)
    # vision: compute 60 + 40 = 100.00, storage 0.05, an adjustment 0.05 and a credit -2.00; robotics: storage 0.05
    charge(tenants.vision, "60.00")
    charge(tenants.vision, "40.00", day=11)
    charge(tenants.vision, "0.05", resource="storage")
    charge(tenants.vision, "0.05", category="Adjustment")
    charge(tenants.vision, "-2.00", category="Credit")
    charge(robotics, "0.05", resource="storage")
    charge(tenants.nlp, "7.00", currency="USD")
    clock.now = AFTER_MARCH
    return Books(account=account, other=other, robotics=robotics)


@pytest.fixture
def artifacts() -> Path:
    """Where files for a person to look at go: $CI_ARTIFACTS, else var/artifacts (ignored by git)."""
    root = Path(os.environ.get("CI_ARTIFACTS") or Path(__file__).resolve().parents[3] / "var" / "artifacts")
    root.mkdir(parents=True, exist_ok=True)
    return root
