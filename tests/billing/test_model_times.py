"""Rows are stamped by the platform clock, not the machine's: when they were made and when last saved."""

from decimal import Decimal

import pytest

from billing.models import Budget
from portal.models import Membership, Workspace
from tests.factories import UserFactory, WorkspaceFactory

pytestmark = pytest.mark.django_db


def test_a_workspace_and_a_membership_are_made_at_the_platform_clocks_time(clock):
    clock.advance(-40 * 86400)   # far from the machine's time, whatever the hour
    workspace = WorkspaceFactory()
    member = Membership.objects.create(workspace=workspace, user=UserFactory())
    assert Workspace.objects.get(pk=workspace.pk).created == clock.now
    assert Membership.objects.get(pk=member.pk).created == clock.now


def test_a_budget_is_stamped_by_the_platform_clock_each_time_it_is_saved(clock):
    clock.advance(-40 * 86400)
    budget = Budget.objects.create(workspace=WorkspaceFactory(), amount=Decimal("10.00"))
    assert Budget.objects.get(pk=budget.pk).updated == clock.now
    clock.advance(3600)
    budget.amount = Decimal("20.00")
    budget.save()
    assert Budget.objects.get(pk=budget.pk).updated == clock.now
