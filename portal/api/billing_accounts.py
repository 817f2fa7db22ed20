"""Billing accounts over the API, for finance and operators: the accounts they may read (staff: all; a
workspace's finance members: those paying for it), each with its workspaces, budget and prepaid balance,
and POST a top-up to a prepaid account's credit. Accounts are edited in the console. Thin views over
billing's accounts and credits; the top-up is audited by the console's service."""

from __future__ import annotations

from django.http import Http404
from django.utils.translation import gettext
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from billing.api import accounts, credits, report_services
from billing.models import BillingAccount
from portal.console import account_services
from portal.models import Workspace


class AccountOutput(serializers.Serializer):
    slug = serializers.SlugField()
    name = serializers.CharField()
    parent = serializers.SerializerMethodField()
    currency = serializers.CharField()
    tax_rate = serializers.DecimalField(max_digits=5, decimal_places=2)
    prepaid = serializers.BooleanField()
    workspaces = serializers.SerializerMethodField(help_text="The workspaces it pays for (its sub-accounts' too)")
    budget = serializers.SerializerMethodField(help_text="This month's budget: amount, spent, percent; or null")
    credit = serializers.SerializerMethodField(help_text="Prepaid: topped_up, debited, balance, low_balance; "
                                                         "or null")

    def get_parent(self, account) -> str | None:
        return account.parent.slug if account.parent else None

    # A list reads every account's workspaces, budget and credit at once (`listed`); one account, its own.
    def _read(self, account) -> dict:
        found = self.context.get("read")
        if found is None:
            found = self.context["read"] = listed([account])
        return found

    def get_workspaces(self, account) -> list[str]:
        return self._read(account)["workspaces"][account.pk]

    def get_budget(self, account) -> dict | None:
        budget = self._read(account)["budgets"].get(account.pk)
        if budget is None:
            return None
        return {"amount": str(budget.budget.amount), "spent": str(budget.spent), "percent": str(budget.percent),
                "block_at_limit": budget.budget.block_at_limit, "not_counted": list(budget.not_counted)}

    def get_credit(self, account) -> dict | None:
        if not account.prepaid:
            return None
        balance = self._read(account)["credits"][account.pk]
        return {"topped_up": str(balance.topped_up), "debited": str(balance.debited), "balance": str(balance.balance),
                "low_balance": None if account.low_balance is None else str(account.low_balance),
                "since": balance.started.isoformat() if balance.started else None}


class TopUpInput(serializers.Serializer):
    amount = serializers.CharField(max_length=40, help_text="More than 0, in the account's currency")
    note = serializers.CharField(max_length=credits.MAX_NOTE, required=False, allow_blank=True, default="")


class TopUpOutput(serializers.Serializer):
    id = serializers.IntegerField()
    amount = serializers.DecimalField(max_digits=14, decimal_places=2)
    currency = serializers.CharField()
    at = serializers.DateTimeField()
    note = serializers.CharField()
    balance = serializers.SerializerMethodField()

    def get_balance(self, topped) -> str:
        return str(credits.credit_balance(BillingAccount.objects.get(pk=topped.account_id)).balance)


def listed(given) -> dict:
    """What AccountOutput shows of each account of `given`, from a few queries for all of them."""
    given = list(given)
    paid = accounts.workspaces_paid_by({a.pk for a in given})
    slugs = dict(Workspace.objects.filter(pk__in=set().union(*paid.values())).values_list("pk", "slug"))
    return {"workspaces": {pk: sorted(slugs[w] for w in ids) for pk, ids in paid.items()},
            "budgets": report_services.account_budget_statuses(given),
            "credits": credits.credit_balances([a for a in given if a.prepaid])}


def _visible(request, slug) -> BillingAccount:
    account = credits.visible_accounts(request.user).filter(slug=slug).first()
    if account is None:  # another tenant's account is not there at all
        raise Http404(gettext("No such billing account"))
    return account


class AccountListApi(APIView):
    @extend_schema(responses={200: AccountOutput(many=True)})
    def get(self, request):
        shown = list(credits.visible_accounts(request.user).select_related("parent"))
        return Response(AccountOutput(shown, many=True, context={"read": listed(shown)}).data)


class AccountDetailApi(APIView):
    @extend_schema(responses={200: AccountOutput})
    def get(self, request, slug):
        return Response(AccountOutput(_visible(request, slug)).data)


class TopUpApi(APIView):
    """POST adds prepaid credit (finance of a workspace the account pays for, or staff)."""

    @extend_schema(request=TopUpInput, responses={201: TopUpOutput})
    def post(self, request, slug):
        account = _visible(request, slug)
        given = TopUpInput(data=request.data)
        given.is_valid(raise_exception=True)
        topped = account_services.top_up(request.user, account, given.validated_data["amount"],
                                         given.validated_data["note"])
        return Response(TopUpOutput(topped).data, status=status.HTTP_201_CREATED)
