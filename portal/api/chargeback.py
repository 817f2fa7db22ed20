"""Chargeback API: a month's priced capacity and who pays for it, in one currency (billing.chargeback)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response
from rest_framework.views import APIView

from billing.api import MINOR_UNITS, MONTH_PATTERN, chargeback, money_text
from portal.models import Membership, Role


def finance_workspaces(user) -> list[int] | None:
    """None: every workspace (operators); else the workspaces where the user is finance (none: refused)."""
    if user.is_staff:
        return None
    ids = list(Membership.objects.filter(user=user, role=Role.FINANCE).values_list("workspace_id", flat=True))
    if not ids:
        raise PermissionDenied("Chargeback is for finance and operators.")
    return ids


class ChargebackApi(APIView):
    """A month's chargeback: `capacity_cost` is the priced capacity of the pools under a chargeback policy
    plus what showback pools billed, and operators' `rows` add up to it exactly. Finance members see the
    rows of their own workspaces, and no cluster total. Provisional until the month is final and posted."""

    @extend_schema(
        parameters=[
            OpenApiParameter("month", {"type": "string", "pattern": MONTH_PATTERN}, required=True,
                             description="The billing month, YYYY-MM"),
            OpenApiParameter("currency", {"type": "string", "enum": sorted(MINOR_UNITS)},
                             description="Default: the platform's billing currency"),
        ],
        responses={200: inline_serializer("Chargeback", {
            "month": serializers.CharField(), "currency": serializers.CharField(),
            "as_of": serializers.DateTimeField(allow_null=True), "provisional": serializers.BooleanField(),
            "capacity_cost": serializers.CharField(allow_null=True),
            "pools": serializers.ListField(child=inline_serializer("ChargebackPool", {
                "pool": serializers.CharField(), "policy": serializers.CharField(),
                "account": serializers.CharField(allow_null=True), "capacity_cost": serializers.CharField(),
                "direct": serializers.CharField(), "idle_share": serializers.CharField()}), allow_null=True),
            "rows": serializers.ListField(child=inline_serializer("ChargebackRow", {
                "workspace": serializers.CharField(), "account": serializers.CharField(allow_null=True),
                "direct": serializers.CharField(), "idle_share": serializers.CharField(),
                "total": serializers.CharField()})),
        })},
    )
    def get(self, request):
        scope = finance_workspaces(request.user)
        month = chargeback.parse_month(request.query_params.get("month"))
        figures = chargeback.chargeback(month, currency=request.query_params.get("currency") or None,
                                        workspace_ids=scope)
        currency = figures.currency

        def money(amount):
            return money_text(amount, currency)

        whole = scope is None
        return Response({
            "month": f"{month:%Y-%m}", "currency": currency, "as_of": figures.as_of,
            "provisional": figures.provisional,
            "capacity_cost": money(figures.capacity_cost) if whole else None,
            "pools": [{"pool": p.pool, "policy": p.policy, "account": p.account or None,
                       "capacity_cost": money(p.capacity_cost), "direct": money(p.direct_cost),
                       "idle_share": money(p.idle_share)} for p in figures.pools] if whole else None,
            "rows": [{"workspace": r.workspace, "account": r.account, "direct": money(r.direct),
                      "idle_share": money(r.idle_share), "total": money(r.total)} for r in figures.rows],
        })
