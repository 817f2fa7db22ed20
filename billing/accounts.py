"""Billing accounts: who pays for which workspaces.

An account is a legal entity or a department; a sub-account nests one level under it (department →
team). Each workspace belongs to at most one account. These services validate and write; the
console audits what they change.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import transaction
from django.db.models import Q

from billing.currency import check_currency, currency_at
from billing.models import AccountWorkspace, BillingAccount
from scheduling.api import DomainError

ACCOUNT_FIELDS = ("slug", "name", "parent", "address", "tax_id", "currency", "tax_rate", "invoice_prefix",
                  "contacts", "prepaid", "low_balance", "suspend_preemptible_at_zero")
MAX_LOW_BALANCE = Decimal("1e12")


class AccountError(DomainError):
    """A billing account field that cannot be saved."""


def check_tax_rate(raw) -> Decimal:
    try:
        rate = Decimal(str(raw))
    except (InvalidOperation, ValueError):
        raise AccountError(f"tax_rate: {raw!r} is not a number", field="tax_rate") from None
    if not rate.is_finite() or rate < 0 or rate > 100:
        raise AccountError(f"tax_rate: {rate} % is outside 0 to 100 %", field="tax_rate")
    return rate


def check_low_balance(raw) -> Decimal:
    try:
        mark = Decimal(str(raw).strip())
    except (InvalidOperation, ValueError):
        raise AccountError(f"low_balance: {raw!r} is not a number", field="low_balance") from None
    if not mark.is_finite() or mark < 0 or mark >= MAX_LOW_BALANCE:
        raise AccountError(f"low_balance: {mark} is not an amount from 0 up", field="low_balance")
    return mark


def check_parent(account: BillingAccount | None, parent: BillingAccount | None) -> None:
    """Sub-accounts nest one level: a parent has no parent, and an account with sub-accounts gets none."""
    if parent is None:
        return
    if account is not None and account.pk is not None:
        if parent.pk == account.pk:
            raise AccountError(f"parent: {account.slug} cannot be its own parent", field="parent")
        if account.sub_accounts.exists():
            raise AccountError(f"parent: {account.slug} has sub-accounts, so it cannot be one", field="parent")
    if parent.parent_id is not None:
        raise AccountError(f"parent: {parent.slug} is itself a sub-account; sub-accounts nest one level", field="parent")


@transaction.atomic
def save_account(account: BillingAccount | None = None, **fields) -> BillingAccount:
    """Create (account None) or update an account from `fields` (names in ACCOUNT_FIELDS)."""
    unknown = set(fields) - set(ACCOUNT_FIELDS)
    if unknown:
        raise AccountError(f"{sorted(unknown)[0]}: not a billing account field", field=sorted(unknown)[0])
    if "currency" in fields:
        fields["currency"] = check_currency(fields["currency"])
    if "tax_rate" in fields:
        fields["tax_rate"] = check_tax_rate(fields["tax_rate"])
    if fields.get("low_balance") not in (None, ""):
        fields["low_balance"] = check_low_balance(fields["low_balance"])
    elif "low_balance" in fields:
        fields["low_balance"] = None
    if "name" in fields and not str(fields["name"]).strip():
        raise AccountError("name: give the account a name", field="name")
    check_parent(account, fields.get("parent", account.parent if account else None))
    account = account or BillingAccount()
    for name, value in fields.items():
        setattr(account, name, value)
    if not account.currency:
        raise AccountError("currency: give a three-letter code, e.g. USD or CNY", field="currency")
    if account.pk is not None and account.top_ups.exclude(currency=account.currency).exists():
        raise AccountError("currency: the account has prepaid credit in another currency", field="currency")
    if account.pk is not None:
        _check_prepaid_currency(account)
    try:
        account.full_clean()
    except ValidationError as error:  # a slug taken or malformed, a field too long: beside its field
        raise AccountError({k if k != NON_FIELD_ERRORS else "": v for k, v in error.message_dict.items()}) from None
    account.save()
    return account


def _check_prepaid_currency(account: BillingAccount) -> None:
    """A prepaid account's workspaces (its non-prepaid sub-accounts' too) are billed in its currency."""
    if not account.prepaid:
        return
    links = AccountWorkspace.objects.select_related("workspace").filter(
        Q(account=account) | Q(account__parent=account, account__prepaid=False))
    for link in links:
        billed = currency_at(link.workspace)
        if billed != account.currency:
            raise AccountError(f"currency: {link.workspace.slug} is billed in {billed}; a prepaid account's "
                               f"workspaces are billed in its currency ({account.currency})", field="currency")


def assign_workspace(workspace, account: BillingAccount | None) -> None:
    """Put `workspace` under `account` (None: under none). Prepaid credit is in one currency: a workspace
    billed in another cannot draw on it (no silent conversion)."""
    if account is None:
        AccountWorkspace.objects.filter(workspace=workspace).delete()
        return
    holder = account if account.prepaid else account.parent if account.parent and account.parent.prepaid else None
    billed = currency_at(workspace)
    if holder is not None and billed != holder.currency:
        raise AccountError(f"account: {workspace.slug} is billed in {billed}; the prepaid credit of {holder.slug} "
                           f"is in {holder.currency}", field="account")
    AccountWorkspace.objects.update_or_create(workspace=workspace, defaults={"account": account})


def account_of(workspace) -> BillingAccount | None:
    link = AccountWorkspace.objects.select_related("account").filter(workspace=workspace).first()
    return link.account if link else None


def paying_for(workspace_ids, via: str = "") -> Q:
    """Accounts (reached through `via`, e.g. "account__") that pay for any of these workspaces, themselves or
    through a sub-account."""
    return (Q(**{f"{via}workspace_links__workspace_id__in": workspace_ids})
            | Q(**{f"{via}sub_accounts__workspace_links__workspace_id__in": workspace_ids}))


def account_workspace_ids(account: BillingAccount) -> list[int]:
    """The workspaces an account pays for: its own and, for a top-level account, its sub-accounts'."""
    return sorted(workspaces_paid_by({account.pk})[account.pk])


def workspaces_paid_by(ids: set[int]) -> dict[int, set[int]]:
    """account_workspace_ids of each account in `ids`, from one query."""
    paid: dict[int, set[int]] = {pk: set() for pk in ids}
    links = AccountWorkspace.objects.filter(Q(account_id__in=ids) | Q(account__parent_id__in=ids))
    for account_id, parent_id, workspace_id in links.values_list("account_id", "account__parent_id", "workspace_id"):
        for owner in (account_id, parent_id):
            if owner in ids:
                paid[owner].add(workspace_id)
    return paid


def accounts_by_workspace(workspace_ids) -> dict[int, BillingAccount]:
    """{workspace id: its account} for those that have one, in one query."""
    links = AccountWorkspace.objects.select_related("account__parent").filter(workspace_id__in=list(workspace_ids))
    return {link.workspace_id: link.account for link in links}
