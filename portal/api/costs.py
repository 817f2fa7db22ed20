"""Costs API: the ledger through the one costs selector, grouped and paged; money as strings."""

from __future__ import annotations

from django.http import Http404
from django.utils.translation import gettext
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from billing.api import MINOR_UNITS, money_text, platform_tz
from billing.api import report_selectors as costs
from portal.api.errors import NotFound
from scheduling.api import clock

PARAMS = ("workspace", "start", "end", "group_by", "page", "queue", "gpu_model", "sharing", "job", "currency")
QUANTITIES = ("allocated_gpu_hours", "used_gpu_hours", "idle_gpu_hours", "exclusive_gpu_hours", "cpu_core_hours",
              "memory_gib_hours", "storage_gib_hours")


MAX_PAGE = 10**6
# The days the ledger is read for, as parse_filters bounds them (a year outside is refused).
DAY = {"type": "string", "format": "date",
       "pattern": r"^(19[7-9][0-9]|20[0-9][0-9]|2100)-[0-9]{2}-[0-9]{2}$"}
TEXT = {"type": "string", "maxLength": costs.MAX_FILTER_LENGTH}


def _param(name: str, description: str = "", schema: dict | None = None) -> OpenApiParameter:
    """A filter: an empty value is taken as none (the default), as the report page's form sends it."""
    return OpenApiParameter(name, schema or TEXT, description=description, extensions={"x-allow-empty": True})


def _page(raw: str | None) -> int:
    if raw in (None, ""):
        return 1
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_PAGE:
        raise ValidationError({"page": f"must be a whole number from 1 to {MAX_PAGE}"})
    return int(raw)


# line column -> the name the API gives it
ROW_NAMES = {"job_id": "job", "submitted_by": "user", "workspace__slug": "workspace", "workspace__name": "workspace_name",
             "period": "month"}


def cost_row(row: dict, group: tuple[str, ...]) -> dict:
    currency = row["currency"]
    out = {ROW_NAMES.get(c, c): row[c] for c in group}
    if "day" in out:
        out["day"] = out["day"].isoformat()
    if "month" in out:
        out["month"] = f"{out['month']:%Y-%m}"
    out.update({k: str(row[k].quantize(costs.QUANTITY)) for k in QUANTITIES})
    out["lost_gpu_hours"] = str(row.get("lost_gpu_hours") or 0)   # lost to evictions, since their last checkpoints
    out.update({"list_cost": money_text(row["list_cost"], currency),
                "exclusive_cost": money_text(row["exclusive_cost"], currency),
                "cost": money_text(row["cost"], currency)})
    if "jobs" in row:  # per person: their jobs, and their share of idle capacity charged back
        out["jobs"] = row["jobs"]
        out["idle_share"] = money_text(row["idle_share"], currency)
    if "x_OriginalCurrency" in row:  # consolidated: what the row was before conversion
        original = row["x_OriginalCurrency"]
        rate = row["x_ExchangeRate"]
        out.update({"x_OriginalCost": money_text(row["x_OriginalCost"], original), "x_OriginalCurrency": original,
                    "x_ExchangeRate": None if rate is None else str(rate)})
    return out


class CostsApi(APIView):
    """Costs of the caller's workspaces from the ledger (group_by=user: per person and month, across the
    workspaces where the caller is finance or owner, every one for an operator): `totals` has one total per currency for the whole
    period and filter (`currency` and `total` repeat it when there is one currency, else are null: amounts
    of two currencies are never added); `rows` is one page (at most 500) of the grouping, each row in one
    currency; `as_of` is the latest usage included."""

    @extend_schema(
        parameters=[
            _param("workspace", "A workspace slug (default: all of the caller's)"),
            _param("start", "First day (default: 6 days before end)", DAY),
            _param("end", "Last day, inclusive (default: today)", DAY),
            _param("group_by", "Default: day", {"type": "string", "enum": list(costs.GROUPS)}),
            _param("page", "Page of rows, from 1", {"type": "integer", "minimum": 1, "maximum": MAX_PAGE}),
            _param("queue"), _param("gpu_model"),
            _param("sharing", "", {"type": "string", "enum": list(costs.SHARING_MODES)}),
            _param("job", "", {"type": "integer", "minimum": 1, "maximum": costs.MAX_JOB_ID}),
            _param("currency", "A reporting currency (ISO 4217, e.g. USD): every amount converted into it at the "
                   "rate of its line's day, or of its billing month's last day, as the operator set; each row "
                   "keeps x_OriginalCost, x_OriginalCurrency and x_ExchangeRate. No rate for a day: 422.",
                   {"type": "string", "enum": sorted(MINOR_UNITS)}),
        ],
        responses={200: inline_serializer("Costs", {
            "currency": serializers.CharField(allow_null=True), "as_of": serializers.DateTimeField(allow_null=True),
            "total": serializers.CharField(allow_null=True),
            "totals": serializers.ListField(child=inline_serializer("CurrencyTotal", {
                "currency": serializers.CharField(), "total": serializers.CharField()})),
            "group_by": serializers.CharField(),
            "count": serializers.IntegerField(), "page": serializers.IntegerField(),
            "pages": serializers.IntegerField(), "rows": serializers.ListField(child=serializers.DictField()),
        })},
    )
    def get(self, request):
        unknown = sorted(set(request.query_params) - set(PARAMS))
        if unknown:
            raise ValidationError({name: f"unknown query parameter; this endpoint takes {', '.join(PARAMS)}"
                                   for name in unknown})
        page = _page(request.query_params.get("page"))
        today = clock.now().astimezone(platform_tz()).date()
        filters = costs.parse_filters(request.query_params, today=today)
        try:
            report = costs.costs(request.user, filters, page=page)
        except Http404:  # a workspace the caller is not in: the field that named it
            raise NotFound(gettext("no such workspace: %(workspace)s") % {
                "workspace": request.query_params.get("workspace", "")}, field="workspace") from None
        group = costs.GROUPS[report.group_by]
        return Response({
            "currency": report.currency, "as_of": report.as_of.isoformat() if report.as_of else None,
            "total": money_text(report.total, report.currency) if report.currency else None,
            "totals": [{"currency": c, "total": money_text(t, c)} for c, t in report.totals],
            "group_by": report.group_by,
            "count": report.count, "page": page, "pages": max(1, -(-report.count // costs.MAX_PAGE_ROWS)),
            "rows": [cost_row(r, (*group, "currency")) for r in report.rows],
        })
