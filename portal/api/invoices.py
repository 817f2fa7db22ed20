"""Invoices API: the invoices and credit notes the caller may read, one in detail, and its PDF. Finance
(staff) reads all; the owners and finance members of an account's workspaces that account's; to anyone
else an invoice does not exist (404). Money as strings in the invoice's currency."""

from __future__ import annotations

import re

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.generics import ListAPIView, RetrieveAPIView
from rest_framework.views import APIView

from billing.api import MONTH_PATTERN, invoice_render, invoice_selectors, money_text
from billing.api import invoices as invoice_services
from billing.models import Invoice, InvoiceLine
from scheduling.api import DomainError

MONTH = {"type": "string", "pattern": MONTH_PATTERN}
SLUG = {"type": "string", "pattern": r"^[-a-zA-Z0-9_]*$", "maxLength": 50}


class InvoiceLineSerializer(serializers.ModelSerializer):
    workspace = serializers.SerializerMethodField()
    amount = serializers.SerializerMethodField()
    tax = serializers.SerializerMethodField()
    total = serializers.SerializerMethodField()

    class Meta:
        model = InvoiceLine
        fields = ["position", "workspace", "workspace_name", "service", "description", "amount", "tax", "total"]

    def get_workspace(self, line) -> str | None:
        return line.workspace.slug if line.workspace_id else None

    def get_amount(self, line) -> str:
        return money_text(line.amount, line.invoice.currency)

    def get_tax(self, line) -> str:
        return money_text(line.tax, line.invoice.currency)

    def get_total(self, line) -> str:
        return money_text(line.total, line.invoice.currency)


class InvoiceSerializer(serializers.ModelSerializer):
    account = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    month = serializers.SerializerMethodField()
    corrects = serializers.SerializerMethodField()
    tax_rate = serializers.SerializerMethodField()
    subtotal = serializers.SerializerMethodField()
    tax = serializers.SerializerMethodField()
    total = serializers.SerializerMethodField()
    paid_on = serializers.SerializerMethodField()
    pdf = serializers.SerializerMethodField()

    class Meta:
        model = Invoice
        fields = ["id", "number", "kind", "account", "account_name", "month", "issued_on", "due_on", "currency",
                  "tax_rate", "subtotal", "tax", "total", "corrects", "reason", "paid_on", "pdf"]

    def get_month(self, invoice) -> str:
        return f"{invoice.period:%Y-%m}"

    def get_corrects(self, invoice) -> str | None:
        return invoice.corrects.number if invoice.corrects_id else None

    def get_tax_rate(self, invoice) -> str:
        return invoice_render.percent(invoice.tax_rate)

    def get_subtotal(self, invoice) -> str:
        return money_text(invoice.subtotal, invoice.currency)

    def get_tax(self, invoice) -> str:
        return money_text(invoice.tax, invoice.currency)

    def get_total(self, invoice) -> str:
        return money_text(invoice.total, invoice.currency)

    def get_paid_on(self, invoice) -> str | None:
        payment = getattr(invoice, "payment", None) if invoice.kind == Invoice.Kind.INVOICE else None
        return payment.paid_on.isoformat() if payment else None

    def get_pdf(self, invoice) -> str:
        return f"/api/v1/invoices/{invoice.pk}.pdf"


class InvoiceDetailSerializer(InvoiceSerializer):
    lines = InvoiceLineSerializer(many=True, read_only=True)

    class Meta(InvoiceSerializer.Meta):
        fields = [*InvoiceSerializer.Meta.fields, "lines"]


class InvoiceListApi(ListAPIView):
    """The invoices and credit notes the caller may read, newest first."""

    serializer_class = InvoiceSerializer
    filter_params = ("month", "account", "kind")

    @extend_schema(parameters=[
        OpenApiParameter("month", MONTH, description="Billing month, YYYY-MM", extensions={"x-allow-empty": True}),
        OpenApiParameter("account", SLUG, description="A billing account's slug", extensions={"x-allow-empty": True}),
        OpenApiParameter("kind", {"type": "string", "enum": list(Invoice.Kind.values)},
                         extensions={"x-allow-empty": True}),
    ])
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        params = self.request.query_params
        month = None
        if params.get("month"):
            try:
                month = invoice_services.parse_month(params["month"])
            except DomainError as error:
                raise ValidationError(error.errors) from None
        account = params.get("account", "")
        if not re.fullmatch(SLUG["pattern"], account) or len(account) > SLUG["maxLength"]:
            raise ValidationError({"account": "a billing account's slug: letters, digits, - and _"})
        kind = params.get("kind", "")
        if kind and kind not in Invoice.Kind.values:
            raise ValidationError({"kind": f"one of {', '.join(Invoice.Kind.values)}"})
        invoices = invoice_selectors.visible_invoices(self.request.user)
        return invoice_selectors.invoice_filter(invoices, month=month, account=account,
                                                kind=kind).order_by("-issued_at", "-id")


class InvoiceDetailApi(RetrieveAPIView):
    serializer_class = InvoiceDetailSerializer

    def get_object(self):
        return invoice_selectors.get_invoice(self.request.user, self.kwargs["pk"])


class InvoicePdfApi(APIView):
    """The invoice as PDF, in the account's language."""

    @extend_schema(operation_id="v1_invoices_pdf_retrieve",
                   responses={(200, "application/pdf"): OpenApiResponse(OpenApiTypes.BINARY)})
    def get(self, request, pk):
        invoice = invoice_selectors.get_invoice(request.user, pk)
        response = HttpResponse(invoice_render.invoice_pdf(invoice), content_type="application/pdf")
        response["Content-Disposition"] = f'attachment; filename="{invoice_render.file_name(invoice)}"'
        return response
