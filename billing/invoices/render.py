"""An invoice as HTML (print CSS) and as PDF (WeasyPrint), in the account's language, and by e-mail.

CNY accounts read their invoices in Chinese, set in WenQuanYi Micro Hei (Debian's fonts-wqy-microhei),
which WeasyPrint embeds (a subset) in the PDF.
"""

from __future__ import annotations

import re
from decimal import Decimal

from django.conf import settings
from django.core.mail import EmailMessage
from django.template.loader import render_to_string
from django.utils import translation
from django.utils.translation import gettext, gettext_lazy, pgettext_lazy

from billing.models import Invoice
from scheduling.api import formats

SERVICE_LABELS = {
    "compute": gettext_lazy("Compute"), "storage": gettext_lazy("Storage"),
    "adjustment": gettext_lazy("Adjustment"), "credit": gettext_lazy("Credit"),
    "correction": pgettext_lazy("invoice line", "Correction"),
}
FONTS = {"zh-hans": '"WenQuanYi Micro Hei", "DejaVu Sans", sans-serif'}
DEFAULT_FONT = '"DejaVu Sans", "Liberation Sans", sans-serif'


def percent(rate: Decimal) -> str:
    return f"{rate.normalize():f}"


def context(invoice: Invoice) -> dict:
    def money(amount):
        amount = -amount if invoice.kind == Invoice.Kind.CREDIT_NOTE else amount
        return formats.money(amount, invoice.currency, invoice.language)

    lines = [{"workspace": line.workspace_name, "service": SERVICE_LABELS.get(line.service, line.service),
              "description": line.description, "amount": money(line.amount), "tax": money(line.tax),
              "total": money(line.total)} for line in invoice.lines.all()]
    payment = getattr(invoice, "payment", None) if invoice.kind == Invoice.Kind.INVOICE else None
    return {"invoice": invoice, "lines": lines, "subtotal": money(invoice.subtotal), "tax": money(invoice.tax),
            "total": money(invoice.total), "rate": percent(invoice.tax_rate), "payment": payment,
            "credit_note": invoice.kind == Invoice.Kind.CREDIT_NOTE,
            "font": FONTS.get(invoice.language, DEFAULT_FONT), "provider": settings.PLATFORM_NAME}


def invoice_html(invoice: Invoice) -> str:
    """The document, in the invoice's own language whatever the reader's."""
    with translation.override(invoice.language):
        return render_to_string("billing/invoice_document.html", context(invoice))


def invoice_pdf(invoice: Invoice) -> bytes:
    from weasyprint import HTML  # heavy: loaded when a PDF is asked for

    return HTML(string=invoice_html(invoice)).write_pdf()


def file_name(invoice: Invoice) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", invoice.number) + ".pdf"  # a header value: nothing a prefix could smuggle


def contacts(invoice: Invoice) -> list[str]:
    return [line.strip() for line in invoice.account.contacts.splitlines() if line.strip()]


def mail_invoice(invoice: Invoice) -> int:
    """Send the PDF to the account's contacts; the number of recipients (0: the account has none)."""
    to = contacts(invoice)
    if not to:
        return 0
    with translation.override(invoice.language):
        kind = gettext("Credit note") if invoice.kind == Invoice.Kind.CREDIT_NOTE else gettext("Invoice")
        subject = f"{kind} {invoice.number} · {invoice.account_name}"
        body = gettext("%(kind)s %(number)s for %(month)s: %(total)s, due %(due)s. The PDF is attached.") % {
            "kind": kind, "number": invoice.number, "month": f"{invoice.period:%Y-%m}",
            "total": formats.money(invoice.total, invoice.currency, invoice.language), "due": f"{invoice.due_on:%Y-%m-%d}"}
    message = EmailMessage(subject=subject, body=body, from_email=settings.DEFAULT_FROM_EMAIL, to=to)
    message.attach(file_name(invoice), invoice_pdf(invoice), "application/pdf")
    message.send()
    return len(to)
