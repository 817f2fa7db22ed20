"""Finance's invoices in the console (staff): the list, "issue invoices for YYYY-MM", one invoice with its
credit notes, marking it paid, a credit note and e-mailing it. Thin over billing.invoices; each write audited."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect, render
from django.utils.translation import gettext
from django.views.decorators.http import require_POST

from billing.api import invoice_render, invoice_selectors, invoices
from billing.models import BillingAccount
from portal.console import audit
from portal.console.views import operator_required
from scheduling.api import DomainError


def _refused(request, error: DomainError) -> None:
    for field, texts in error.errors.items():
        for text in texts:
            messages.error(request, text if not field or text.startswith(f"{field}:") else f"{field}: {text}")


@operator_required
def invoice_list(request):
    status = 200
    if request.method == "POST":
        month, slug = request.POST.get("month", ""), request.POST.get("account", "")
        try:
            if slug:
                account = BillingAccount.objects.filter(slug=slug).first()
                if account is None:
                    raise invoices.InvoiceError(gettext("account: no such billing account"), field="account")
                issued = [i for i in [invoices.issue_invoice(user=request.user, account=account, month=month)] if i]
            else:
                issued = invoices.issue_invoices(user=request.user, month=month)
        except DomainError as error:
            _refused(request, error)
            status = 400
        else:
            for invoice in issued:
                audit.record(request.user, "issue invoice", invoice,
                             message=f"{invoice.account.slug} {invoice.period:%Y-%m}: {invoice.total} {invoice.currency}")
            messages.success(request, gettext("%(count)s invoice(s) issued.") % {"count": len(issued)})
            return redirect("console-invoices")
    listed = invoice_selectors.visible_invoices(request.user).order_by("-period", "account__slug", "issued_at")[:500]
    return render(request, "console/invoices.html", {
        "section": "invoices", "invoices": listed, "accounts": BillingAccount.objects.filter(prepaid=False),
        "month": request.POST.get("month", ""),
    }, status=status)


@operator_required
def invoice_detail(request, pk):
    invoice = invoice_selectors.get_invoice(request.user, pk)
    return render(request, "console/invoice_detail.html", {
        "section": "invoices", "invoice": invoice, "document": invoice_render.context(invoice),
        "remaining": invoices.remaining(invoice) if invoice.kind == invoice.Kind.INVOICE else None,
        "credit_notes": invoice.credit_notes.all(), "contacts": invoice_render.contacts(invoice),
    })


@require_POST
@operator_required
def invoice_paid(request, pk):
    invoice = invoice_selectors.get_invoice(request.user, pk)
    try:
        payment = invoices.mark_paid(user=request.user, invoice=invoice, paid_on=request.POST.get("paid_on", ""))
    except DomainError as error:
        _refused(request, error)
    else:
        audit.record(request.user, "mark invoice paid", invoice, message=f"{invoice.number} paid on {payment.paid_on}")
        messages.success(request, gettext("%(number)s is marked paid.") % {"number": invoice.number})
    return redirect("console-invoice", pk=invoice.pk)


@require_POST
@operator_required
def invoice_credit(request, pk):
    invoice = invoice_selectors.get_invoice(request.user, pk)
    try:
        note = invoices.issue_credit_note(user=request.user, invoice=invoice, amount=request.POST.get("amount", ""),
                                          reason=request.POST.get("reason", ""))
    except DomainError as error:
        _refused(request, error)
        return redirect("console-invoice", pk=invoice.pk)
    audit.record(request.user, "issue credit note", note,
                 message=f"{note.number} corrects {invoice.number}: {note.total} {note.currency}: {note.reason}")
    messages.success(request, gettext("Credit note %(number)s issued.") % {"number": note.number})
    return redirect("console-invoice", pk=note.pk)


@require_POST
@operator_required
def invoice_mail(request, pk):
    invoice = invoice_selectors.get_invoice(request.user, pk)
    sent = invoice_render.mail_invoice(invoice)
    if sent:
        audit.record(request.user, "e-mail invoice", invoice, message=f"{invoice.number} to {sent} contact(s)")
        messages.success(request, gettext("%(number)s was e-mailed to the account's contacts.") % {"number": invoice.number})
    else:
        messages.error(request, gettext("%(account)s has no contacts to e-mail.") % {"account": invoice.account.slug})
    return redirect("console-invoice", pk=invoice.pk)
