"""Operator console: each pool's chargeback policy, and a month's chargeback with its invariant (direct
cost plus idle shares equals the priced capacity). Thin views over billing.chargeback."""

from __future__ import annotations

from django.contrib import messages
from django.db import transaction
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext

from billing.api import ChargebackError, chargeback, platform_tz
from billing.models import BillingAccount, ChargebackPolicy
from portal.console import audit
from portal.console.views import operator_required
from scheduling.api import clock
from scheduling.models import NodePool


def _state(pool: NodePool) -> dict:
    rule = ChargebackPolicy.objects.filter(pool=pool).select_related("account").first()
    return {"policy": rule.policy if rule else ChargebackPolicy.Policy.SHOWBACK,
            "account": rule.account.slug if rule and rule.account else ""}


@transaction.atomic
def save_policy(user, pool: NodePool, policy: str, account_slug: str) -> None:
    """Set and audit a pool's policy; ChargebackError names the bad field and nothing changes."""
    account = BillingAccount.objects.filter(slug=account_slug).first() if account_slug else None
    if account_slug and account is None:
        raise ChargebackError(gettext("account: no billing account %(slug)s") % {"slug": account_slug},
                              field="account")
    before = _state(pool)
    chargeback.save_policy(pool, policy, account)
    changes = audit.diff(before, _state(pool))
    if changes:
        audit.record(user, "chargeback policy", pool, changes=changes)


@operator_required
def chargeback_page(request):
    now = clock.now()
    raw = request.GET.get("month") or f"{now.astimezone(platform_tz()):%Y-%m}"
    errors = {}
    if request.method == "POST":
        pool = get_object_or_404(NodePool, name=request.POST.get("pool", ""))
        try:
            save_policy(request.user, pool, request.POST.get("policy", ""), request.POST.get("account", ""))
            messages.success(request, gettext("Chargeback policy of pool %(pool)s saved.") % {"pool": pool.name})
            return redirect(reverse("console-chargeback") + f"?month={raw}")
        except ChargebackError as error:
            errors = error.errors
    figures = chargeback.chargeback(chargeback.parse_month(raw), now=now)  # a bad month: the styled 400 page
    return render(request, "console/chargeback.html", {
        "section": "capacity", "month": raw, "figures": figures, "errors": errors,
        "policies": ChargebackPolicy.Policy.choices, "accounts": BillingAccount.objects.order_by("slug"),
        "uncharged": sum((p.uncharged for p in figures.pools), 0),
    }, status=400 if errors else 200)
