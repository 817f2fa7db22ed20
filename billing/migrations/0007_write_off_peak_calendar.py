"""The off-peak calendar the scheduler reads, written once from the price versions and workspace
currencies already stored (billing.offpeak_sync keeps it up to date from then on)."""

from django.db import migrations


def write_calendars(apps, schema_editor):
    PriceTable = apps.get_model("billing", "PriceTable")
    WorkspaceCurrency = apps.get_model("billing", "WorkspaceCurrency")
    OffPeakCalendar = apps.get_model("scheduling", "OffPeakCalendar")
    WorkspaceCalendar = apps.get_model("scheduling", "WorkspaceCalendar")
    OffPeakCalendar.objects.all().delete()
    OffPeakCalendar.objects.bulk_create(
        OffPeakCalendar(calendar=currency, effective_from=since, windows=windows, time_zone=zone)
        for currency, since, windows, zone in PriceTable.objects.values_list(
            "currency", "effective_from", "offpeak_windows", "offpeak_time_zone"))
    WorkspaceCalendar.objects.all().delete()
    WorkspaceCalendar.objects.bulk_create(
        WorkspaceCalendar(workspace_id=workspace_id, period=period, calendar=currency)
        for workspace_id, period, currency in WorkspaceCurrency.objects.values_list("workspace_id", "period", "currency"))


class Migration(migrations.Migration):

    dependencies = [
        ("billing", "0006_price_table_per_currency_workspace_currency"),
        ("scheduling", "0013_off_peak_calendar"),
    ]

    operations = [migrations.RunPython(write_calendars, migrations.RunPython.noop)]
