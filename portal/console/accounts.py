"""Operator console: billing accounts and sub-accounts, the workspaces each pays for, an account's monthly
budget and its prepaid credit (staff only; thin views over portal.console.account_services, which audit)."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Sum
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from billing.api import accounts, credits, report_services
from billing.models import BillingAccount
from portal.console import account_services
from portal.console.views import operator_required
from portal.models import Workspace
from scheduling.api import DomainError

DEBITS_SHOWN = 62  # days of debits on the credit page


class AccountForm(forms.Form):
    """Types only: the rules (one level of nesting, tax 0 to 100 %, a known currency) are billing's, and
    its messages land beside these fields."""

    slug = forms.SlugField(label=_("Slug"), max_length=50, help_text=_("Its id in exports and URLs; fixed once made"))
    name = forms.CharField(label=_("Name"), max_length=200)
    parent = forms.ModelChoiceField(label=_("Sub-account of"), queryset=BillingAccount.objects.all(), required=False,
                                    to_field_name="slug", empty_label=_("(none: a top-level account)"),
                                    help_text=_("Sub-accounts nest one level, e.g. department → team"))
    currency = forms.CharField(label=_("Currency"), max_length=8, help_text=_("ISO 4217 code, e.g. USD or CNY"))
    tax_rate = forms.CharField(label=_("Tax rate (%)"), max_length=20, initial="0",
                               help_text=_("Applied to each invoice line, 0 to 100"))
    tax_id = forms.CharField(label=_("Tax id"), max_length=64, required=False)
    address = forms.CharField(label=_("Address"), required=False, widget=forms.Textarea(attrs={"rows": 3}))
    invoice_prefix = forms.CharField(label=_("Invoice prefix"), max_length=16, required=False)
    contacts = forms.CharField(label=_("Contacts"), required=False, widget=forms.Textarea(attrs={"rows": 2}),
                               help_text=_("E-mail addresses invoices go to, one per line"))
    prepaid = forms.BooleanField(label=_("Runs on prepaid credit"), required=False)
    low_balance = forms.CharField(label=_("Low-balance alert at"), max_length=20, required=False,
                                  help_text=_("Owners and finance are told once when the credit falls to this amount"))
    suspend_preemptible_at_zero = forms.BooleanField(
        label=_("Suspend preemptible jobs when the credit is spent"), required=False)


def _account_form(account: BillingAccount | None, data=None) -> AccountForm:
    initial = None
    if account is not None and data is None:
        initial = {name: getattr(account, name) for name in accounts.ACCOUNT_FIELDS}
        initial["parent"] = account.parent.slug if account.parent else ""
    form = AccountForm(data, initial=initial)
    if account is not None:
        form.fields["slug"].disabled = True
        form.fields["slug"].initial = account.slug
    return form


def _fields(form: AccountForm, account: BillingAccount | None) -> dict:
    data = dict(form.cleaned_data)
    if account is not None:
        data.pop("slug")
    return data


def _field_rows(form: AccountForm, errors: dict[str, list[str]]) -> list[tuple]:
    return [(form[name], errors.get(name, [])) for name in form.fields]


@operator_required
def account_list(request):
    listed = list(BillingAccount.objects.select_related("parent").annotate(n=Count("workspace_links")))
    # Balances and budgets read for all the listed accounts at once, not account by account
    balances = credits.credit_balances([a for a in listed if a.prepaid])
    budgets = report_services.account_budget_statuses(listed)
    rows = [(account, balances.get(account.pk), budgets.get(account.pk)) for account in listed]
    rows.sort(key=lambda row: ((row[0].parent or row[0]).slug, row[0].parent_id is not None, row[0].slug))
    return render(request, "console/accounts.html", {"section": "accounts", "rows": rows})


@operator_required
def account_edit(request, slug=None):
    account = get_object_or_404(BillingAccount, slug=slug) if slug else None
    errors: dict[str, list[str]] = {}
    form = _account_form(account, request.POST if request.method == "POST" else None)
    if request.method == "POST":
        if not form.is_valid():
            errors = {("" if k == "__all__" else k): list(v) for k, v in form.errors.items()}
        else:
            try:
                saved = account_services.save_account(request.user, account, _fields(form, account))
            except DomainError as error:
                errors = error.errors
            else:
                messages.success(request, (gettext("Account %(account)s saved.") if account
                                           else gettext("Account %(account)s created.")) % {"account": saved.slug})
                return redirect("console-account", slug=saved.slug)
        if account is not None:
            account = BillingAccount.objects.get(pk=account.pk)  # the service changed it in memory
    unplaced = {k: v for k, v in errors.items() if k not in form.fields}
    return render(request, "console/account_form.html", {
        "section": "accounts", "account": account, "field_rows": _field_rows(form, errors),
        "form_errors": [m for msgs in unplaced.values() for m in msgs], **_detail(account),
    }, status=400 if errors else 200)


def _detail(account: BillingAccount | None, **extra) -> dict:
    if account is None:
        return {}
    linked = Workspace.objects.filter(billing_account_link__account=account).order_by("slug")
    return {"workspaces": linked, "sub_accounts": account.sub_accounts.all(),
            "unassigned": Workspace.objects.filter(billing_account_link__isnull=True).order_by("slug"),
            "budget_status": report_services.account_budget_status(account),
            "balance": credits.credit_balance(account) if account.prepaid else None,
            "budget_errors": {}, "workspace_errors": {}, **extra}


def _refused(request, account: BillingAccount, **errors) -> object:
    return render(request, "console/account_form.html", {
        "section": "accounts", "account": account, "field_rows": _field_rows(_account_form(account), {}),
        "form_errors": [], **_detail(account, **errors)}, status=400)


@operator_required
@require_POST
def account_workspaces(request, slug):
    """Assign a workspace to the account (or, with remove=1, take it off)."""
    account = get_object_or_404(BillingAccount, slug=slug)
    workspace = Workspace.objects.filter(slug=str(request.POST.get("workspace") or "")[:50]).first()
    if workspace is None:
        return _refused(request, account, workspace_errors={"workspace": [gettext("no such workspace")]})
    remove = request.POST.get("remove") == "1"
    if remove and accounts.account_of(workspace) != account:
        return _refused(request, account, workspace_errors={
            "workspace": [gettext("%(workspace)s is not paid for by this account") % {"workspace": workspace.slug}]})
    try:
        account_services.assign_workspace(request.user, workspace, None if remove else account)
    except DomainError as error:
        return _refused(request, account, workspace_errors={"workspace": [m for ms in error.errors.values() for m in ms]})
    messages.success(request, (gettext("%(workspace)s is no longer paid for by %(account)s.") if remove
                               else gettext("%(workspace)s is paid for by %(account)s.")) % {
        "workspace": workspace.slug, "account": account.slug})
    return redirect("console-account", slug=account.slug)


@operator_required
@require_POST
def account_budget(request, slug):
    account = get_object_or_404(BillingAccount, slug=slug)
    try:
        if request.POST.get("remove") == "1":
            account_services.remove_budget(request.user, account)
            messages.success(request, gettext("Budget of %(account)s removed.") % {"account": account.slug})
        else:
            account_services.set_budget(request.user, account, amount=request.POST.get("amount", ""),
                                        block_at_limit=request.POST.get("block_at_limit") == "on",
                                        suspend_preemptible=request.POST.get("suspend_preemptible") == "on",
                                        thresholds=request.POST.get("thresholds") or None)
            messages.success(request, gettext("Budget of %(account)s saved.") % {"account": account.slug})
    except DomainError as error:
        return _refused(request, account, budget_errors=error.errors)
    return redirect("console-account", slug=account.slug)


@operator_required
def account_credits(request, slug):
    """The prepaid credit: balance, top-ups, debits by day; POST tops it up."""
    account = get_object_or_404(BillingAccount, slug=slug)
    errors: dict[str, list[str]] = {}
    if request.method == "POST":
        try:
            topped = account_services.top_up(request.user, account, request.POST.get("amount", ""),
                                             str(request.POST.get("note") or ""))
        except DomainError as error:
            errors = error.errors
        except PermissionDenied as error:
            errors = {"": [str(error)]}
        else:
            messages.success(request, gettext("%(amount)s %(currency)s added to the credit of %(account)s.") % {
                "amount": topped.amount, "currency": topped.currency, "account": account.slug})
            return redirect("console-account-credits", slug=account.slug)
        account = BillingAccount.objects.get(pk=account.pk)
    return render(request, "console/account_credits.html", {
        "section": "accounts", "account": account, "balance": credits.credit_balance(account),
        "top_ups": account.top_ups.select_related("author")[:50], "debits": _debits_by_day(account),
        "errors": errors, "amount": request.POST.get("amount", "") if errors else "",
        "note": request.POST.get("note", "") if errors else "",
    }, status=400 if errors else 200)


def _debits_by_day(account: BillingAccount) -> list[dict]:
    """The credit's debits: the sum of each workspace's ledger lines per day, newest first."""
    rows = (credits.debit_lines(account).order_by().values("day", "workspace__slug").annotate(cost=Sum("cost"))
            .order_by("-day", "workspace__slug"))
    return list(rows[:DEBITS_SHOWN * 4])

