"""The operators' exchange-rate page (staff only): the stored rates, one added by hand, or the ECB's CSV
uploaded; each change audited. A refused rate or file stores nothing and says why beside its field."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.core.paginator import Paginator
from django.db import transaction
from django.shortcuts import redirect, render
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from billing.api import MINOR_UNITS, exchange_rates
from billing.models import ExchangeRate
from portal.console import audit
from portal.console.views import operator_required

CURRENCIES = [(c, c) for c in sorted(MINOR_UNITS)]


class RateForm(forms.Form):
    base = forms.ChoiceField(label=_("Base currency"), choices=CURRENCIES, initial="EUR")
    quote = forms.ChoiceField(label=_("Quote currency"), choices=CURRENCIES, initial="USD")
    day = forms.DateField(label=_("Day"), widget=forms.DateInput(attrs={"type": "date"}))
    rate = forms.CharField(label=_("Rate"), max_length=30,
                           help_text=_("Units of the quote currency one unit of the base bought that day"))


class ImportForm(forms.Form):
    file = forms.FileField(label=_("ECB reference rates (CSV)"),
                           help_text=_("The ECB's eurofxref.csv or eurofxref-hist.csv: Date, USD, JPY, ... per 1 EUR"))


@transaction.atomic
def _add(user, data) -> ExchangeRate:
    rate = exchange_rates.add_rate(user=user, **data)
    audit.record(user, "create", rate, changes={"rate": [None, rate.rate]}, message=f"exchange rate {rate}")
    return rate


@transaction.atomic
def _import(user, text: str) -> exchange_rates.ImportResult:
    result = exchange_rates.import_ecb_csv(text, user=user)
    span = f"{result.days[0]} to {result.days[-1]}" if result.days else "no day"
    audit.record(user, "import", None, target_type_name="billing.exchangerate", target_repr="ECB reference rates",
                 message=f"ECB rates imported: {result.stored} stored, {result.unchanged} already stored ({span})")
    return result


def _errors_to(form: forms.Form, error: exchange_rates.RateError, default: str | None = None) -> None:
    """Each message beside its field; a file's cells (`line 3, USD`) beside the file, named."""
    for field, msgs in error.errors.items():
        for message in msgs:
            if field in form.fields:
                form.add_error(field, message)
            else:
                form.add_error(default, f"{field}: {message}")


@operator_required
def exchange_rate_page(request):
    add_form, import_form = RateForm(prefix="add"), ImportForm(prefix="import")
    status = 200
    if request.method == "POST" and request.POST.get("action") == "add":
        add_form = RateForm(request.POST, prefix="add")
        if add_form.is_valid():
            try:
                rate = _add(request.user, add_form.cleaned_data)
            except exchange_rates.RateError as error:
                _errors_to(add_form, error)
            else:
                messages.success(request, gettext("Rate stored: %(rate)s") % {"rate": str(rate)})
                return redirect("console-exchange-rates")
        status = 400
    elif request.method == "POST" and request.POST.get("action") == "import":
        import_form = ImportForm(request.POST, request.FILES, prefix="import")
        if import_form.is_valid():
            upload = import_form.cleaned_data["file"]
            try:
                if upload.size > exchange_rates.MAX_IMPORT_BYTES:
                    raise exchange_rates.RateError({"file": gettext("the file is too large")})
                text = upload.read().decode("utf-8-sig")
                result = _import(request.user, text)
            except UnicodeDecodeError:
                import_form.add_error("file", gettext("the file is not UTF-8 text"))
            except exchange_rates.RateError as error:
                _errors_to(import_form, error, default="file")
            else:
                messages.success(request, gettext("%(stored)s rates stored, %(unchanged)s already stored.") % {
                    "stored": result.stored, "unchanged": result.unchanged})
                return redirect("console-exchange-rates")
        status = 400
    page = Paginator(ExchangeRate.objects.select_related("created_by"), 100).get_page(request.GET.get("page"))
    return render(request, "console/exchange_rates.html", {
        "section": "exchange-rates", "add_form": add_form, "import_form": import_form, "page": page,
        "rule": exchange_rates.rule(), "lookback": exchange_rates.lookback_days(),
    }, status=status)
