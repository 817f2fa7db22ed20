"""The price-table form shared by the Django admin and the operator console; rules in PriceTable.clean()."""

from django import forms
from django.utils.translation import gettext_lazy as _

from billing.currency import default_currency
from billing.models import PRICE_FIELDS, PriceTable


class PriceTableForm(forms.ModelForm):
    class Meta:
        model = PriceTable
        fields = list(PRICE_FIELDS)
        labels = {
            "name": _("Name"), "currency": _("Currency"), "effective_from": _("Effective from"),
            "cpu_core_hour": _("CPU core-hour"), "memory_gib_hour": _("Memory GiB-hour"), "priority_base": _("Priority base"),
            "priority_step": _("Priority step"), "offpeak_windows": _("Off-peak windows"), "offpeak_time_zone": _("Off-peak time zone"),
            "offpeak_discount": _("Off-peak discount"), "spot_discount": _("Spot discount"),
        }
        help_texts = {
            "name": _("Shown on statements, e.g. \"Prices from 2026-04-01\"."),
            "currency": _("Three-letter code, e.g. USD or CNY: each currency is a timeline of its own versions."),
            "effective_from": _("YYYY-MM-DD HH:MM in the platform's time zone, in the future: past charges never change."),
            "cpu_core_hour": _("Price of one CPU core for an hour."),
            "memory_gib_hour": _("Price of one GiB of memory for an hour."),
            "priority_base": _("The price multiplier of a priority-0 job."),
            "priority_step": _("Multiplier = base + priority x step (default 1 + priority/100)."),
            "offpeak_windows": _("HH:MM-HH:MM, comma-separated, in the off-peak time zone. Empty: no off-peak."),
            "offpeak_time_zone": _("IANA zone the windows are read in, e.g. Asia/Shanghai for valley electricity; "
                                 "blank: the platform's."),
            # xgettext:no-python-format
            "offpeak_discount": _("0 to 1: the share taken off during off-peak windows (0.40 = 40% off)."),
            "spot_discount": _("0 to 1: the share taken off on spot pools."),
        }

    def clean_currency(self):
        return (self.cleaned_data.get("currency") or default_currency()).strip().upper()
