"""Billing writes the off-peak calendar the scheduler reads (scheduling.offpeak_calendar): a version
per price table, under its currency, and each workspace's currency per month. Connected to the
saves and deletes of those rows in BillingConfig.ready; a bulk update must call them itself."""

from __future__ import annotations

from billing.models import PriceTable, WorkspaceCurrency
from scheduling.api import CalendarVersion, write_versions, write_workspace_calendars


def write_off_peak_calendars(**kwargs) -> None:
    """Every price version's windows as the calendar of its currency."""
    write_versions(CalendarVersion(calendar=currency, effective_from=since, windows=windows, time_zone=zone)
                   for currency, since, windows, zone in PriceTable.objects.values_list(
                       "currency", "effective_from", "offpeak_windows", "offpeak_time_zone"))


def write_workspace_calendar(sender=None, *, instance: WorkspaceCurrency, **kwargs) -> None:
    """The workspace's currency per month as the calendar its off-peak work follows."""
    write_workspace_calendars(instance.workspace_id, WorkspaceCurrency.objects.filter(
        workspace_id=instance.workspace_id).values_list("period", "currency"))
