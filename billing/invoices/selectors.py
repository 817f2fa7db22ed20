"""Who may read which invoices: finance (staff) all of them; the owners and finance members of an account's
workspaces that account's. Anyone else is told nothing exists (404), not that it is forbidden."""

from __future__ import annotations

from django.db.models import Prefetch, Q, QuerySet
from django.http import Http404

from billing.models import Invoice, InvoiceLine


def visible_invoices(user) -> QuerySet[Invoice]:
    invoices = Invoice.objects.select_related("account", "corrects", "payment")
    if not getattr(user, "is_authenticated", False):
        return invoices.none()
    if user.is_staff:
        return invoices
    workspaces = user.memberships.filter(role__in=("owner", "finance")).values("workspace_id")
    return invoices.filter(Q(account__workspace_links__workspace_id__in=workspaces)
                           | Q(lines__workspace_id__in=workspaces)).distinct()


def get_invoice(user, pk) -> Invoice:
    lines = Prefetch("lines", queryset=InvoiceLine.objects.select_related("workspace"))  # each line's workspace
    invoice = visible_invoices(user).prefetch_related(lines).filter(pk=pk).first() if str(pk).isdigit() else None
    if invoice is None:
        raise Http404("No such invoice")
    return invoice


def invoice_filter(invoices: QuerySet[Invoice], *, month=None, account: str = "", kind: str = "") -> QuerySet[Invoice]:
    if month is not None:
        invoices = invoices.filter(period=month)
    if account:
        invoices = invoices.filter(account__slug=account)
    if kind:
        invoices = invoices.filter(kind=kind)
    return invoices


def invoice_issued_at_close(closed) -> Invoice | None:
    """The invoice a month's close issued (its account's last workspace closed), if it did."""
    return (Invoice.objects.filter(kind=Invoice.Kind.INVOICE, period=closed.period, issued_at=closed.closed_at,
                                   account__workspace_links__workspace_id=closed.workspace_id)
            .select_related("account").first())
