"""The operators' adjustments page (staff only): a credit or a debit for a workspace, against one of its
jobs or one of its billing months, with a reason; shown for confirmation before it is booked.

Billed records are never edited: a correction is an adjustment line of its own
(billing.ledger.services.add_adjustment), with its author, and an audit entry.
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from django import forms
from django.contrib import messages
from django.db import transaction
from django.shortcuts import redirect, render
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from billing.api import MonthError, ledger_selectors, ledger_services, parse_month, period_start, pricing
from billing.models import ChargeLine
from portal import history_catalogue as texts
from portal.console import audit
from portal.console.views import operator_required
from portal.models import Workspace
from portal.templatetags.money import month_year
from scheduling.api import DomainError, clock, formats, said
from scheduling.models import Job

CREDIT, DEBIT = "credit", "debit"
JOB, PERIOD = "job", "period"


class AdjustmentForm(forms.Form):
    workspace = forms.ModelChoiceField(
        label=_("Workspace"), queryset=Workspace.objects.order_by("slug"), to_field_name="slug",
        empty_label=_("(choose a workspace)"), help_text=_("The tenant whose bill is corrected"),
        error_messages={"invalid_choice": _("no such workspace")})
    kind = forms.ChoiceField(
        label=_("Credit or debit"), widget=forms.RadioSelect, initial=CREDIT,
        choices=[(CREDIT, _("Credit: lowers the bill")), (DEBIT, _("Debit: raises the bill"))])
    amount = forms.DecimalField(
        label=_("Amount"), min_value=Decimal("0.0001"), max_value=ledger_services.MAX_AMOUNT - 1, max_digits=18,
        decimal_places=4, help_text=_("More than 0, in the workspace's currency and its smallest unit (0.01 USD)"))
    applies_to = forms.ChoiceField(
        label=_("Applies to"), widget=forms.RadioSelect, initial=PERIOD,
        choices=[(JOB, _("A job: booked now, part of the job's cost")),
                 (PERIOD, _("A billing month: booked in that month's statement"))])
    job = forms.IntegerField(label=_("Job number"), required=False, min_value=1, max_value=2**63 - 1,
                             help_text=_("A job of the workspace (its number, e.g. 42)"))
    period = forms.CharField(label=_("Billing month"), required=False, max_length=7,
                             widget=forms.TextInput(attrs={"placeholder": "YYYY-MM", "inputmode": "numeric"}),
                             help_text=_("YYYY-MM: this month or an earlier one that is not closed"))
    reason = forms.CharField(label=_("Reason"), max_length=ledger_services.MAX_REASON,
                             widget=forms.Textarea(attrs={"rows": 3}),
                             help_text=_("Why: shown on the statement and in the exports"))

    def clean_period(self) -> date | None:
        text = self.cleaned_data["period"].strip()
        if not text:
            return None
        try:
            return parse_month(text)
        except MonthError:
            raise forms.ValidationError(gettext("write a month as YYYY-MM, e.g. 2026-03")) from None

    def clean(self):
        data = super().clean()
        workspace, amount = data.get("workspace"), data.get("amount")
        if data.get("applies_to") == JOB and data.get("job") is None and "job" not in self.errors:
            self.add_error("job", gettext("name the job the adjustment is for"))
        if workspace is None:
            return data
        month = data.get("period") if data.get("applies_to") == PERIOD else None  # a month has one currency
        data["currency"] = currency = ledger_selectors.workspace_currency(workspace, month)
        if amount is not None and amount != pricing.quantize_money(amount, currency):
            places = pricing.minor_unit(currency)
            self.add_error("amount", gettext("%(currency)s amounts have at most %(places)s decimal places") % {
                "currency": currency, "places": places})
        if data.get("applies_to") == JOB:
            self._clean_job(workspace, data)
        elif data.get("applies_to") == PERIOD:
            self._clean_period(workspace, data)
        return data

    def _clean_job(self, workspace: Workspace, data: dict) -> None:
        number = data.get("job")
        if number is None:  # refused above
            return
        job = Job.objects.filter(pk=number, workspace=workspace).select_related("queue").first()
        if job is None:
            self.add_error("job", gettext("#%(job)s is not a job of %(workspace)s") % {
                "job": number, "workspace": workspace.slug})
        data["job_obj"], data["period"] = job, None

    def _clean_period(self, workspace: Workspace, data: dict) -> None:
        data["job_obj"] = None
        if "period" in self.errors:
            return
        if data.get("period") is None:
            data["period"] = period_start(clock.now())
        try:
            ledger_services.check_adjustment_period(workspace, data["period"], clock.now())
        except DomainError as error:  # not started, or closed
            for message in (m for msgs in error.errors.values() for m in msgs):
                self.add_error("period", message)

    def signed_amount(self) -> Decimal:
        amount = self.cleaned_data["amount"]
        return -amount if self.cleaned_data["kind"] == CREDIT else amount


@transaction.atomic
def make_adjustment(user, form: AdjustmentForm) -> ChargeLine:
    """Book the confirmed adjustment and audit it, both or neither."""
    data = form.cleaned_data
    line = ledger_services.add_adjustment(user=user, workspace=data["workspace"], amount=form.signed_amount(),
                                          reason=data["reason"], job=data["job_obj"], period=data["period"])
    target = said(texts.ADJUSTED_JOB, job=line.job_id) if line.job_id else f"{line.period:%Y-%m}"
    audit.record(user, "adjust", line, changes={"cost": [None, line.cost]},
                 message=said(texts.ADJUSTED, category=said(line.category), cost=line.cost,
                              currency=line.currency, workspace=line.workspace.slug, target=target, reason=line.reason))
    return line


@operator_required
def adjustments(request):
    """GET: the form and the latest adjustments. POST: check, then show what will be booked; POST with
    confirm=1: book it; POST with edit=1 (from the confirmation): back to the filled form."""
    form = AdjustmentForm(request.POST or None, initial={"period": f"{period_start(clock.now()):%Y-%m}"})
    if request.method == "POST" and form.is_valid():
        if request.POST.get("confirm") == "1":
            try:
                line = make_adjustment(request.user, form)
            except DomainError as error:  # e.g. the month was closed meanwhile: beside its field
                for field, msgs in error.errors.items():
                    for message in msgs:
                        form.add_error(field if field in form.fields else None, message)
            else:
                target = (gettext("job #%(job)s") % {"job": line.job_id} if line.job_id
                          else month_year(line.period))
                messages.success(request, gettext("%(kind)s of %(cost)s recorded for %(workspace)s (%(target)s).") % {
                    "kind": line.get_category_display(), "cost": formats.money(line.cost, line.currency),
                    "workspace": line.workspace.slug, "target": target})
                return redirect("console-adjustments")
        elif "edit" not in request.POST:
            return render(request, "console/adjustment_confirm.html", {
                "section": "adjustments", "form": form, "data": form.cleaned_data, "amount": form.signed_amount()})
    return render(request, "console/adjustments.html", {
        "section": "adjustments", "form": form, "recent": ledger_selectors.recent_adjustments(),
    }, status=400 if form.errors else 200)
