"""The price-table form shared by the Django admin and the operator console; rules in PriceTable.clean()."""

from django import forms

from billing.models import PriceTable


class PriceTableForm(forms.ModelForm):
    class Meta:
        model = PriceTable
        fields = ["name", "currency", "effective_from", "cpu_core_hour", "memory_gib_hour", "priority_base",
                  "priority_step", "offpeak_windows", "offpeak_discount", "spot_discount"]

    def clean_currency(self):
        return (self.cleaned_data.get("currency") or "USD").strip().upper()
