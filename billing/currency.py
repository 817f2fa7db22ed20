"""The currency a workspace is billed in, and the rule for changing it.

Each currency has its own timeline of price tables (PriceTable.currency). A workspace is billed in
one currency per billing month (WorkspaceCurrency, else settings.BILLING_CURRENCY): its quotes, ledger
lines, statements, budgets and forecasts use that currency's timeline, so no total ever adds two
currencies. A change never mixes them: it is refused while the workspace has a job that is not
finished (its quote and its lines are in the old currency) or a ledger line in the current month; it
then applies from the current month on (earlier months keep theirs). A workspace never billed takes
the new currency for its whole history.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from datetime import date, datetime
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import transaction

from billing import pricing
from billing.models import ChargeLine, PriceTable, WorkspaceCurrency
from scheduling.api import Conflict, DomainError, clock
from scheduling.models import FINAL_STATES, Job, Replica

EVER = date(1970, 1, 1)  # the period of a currency set before anything was billed: all of history


class CurrencyError(DomainError):
    """A currency code that is not one the platform bills in."""

    field = "currency"


class CurrencyChangeRefused(Conflict):
    field = "currency"


def default_currency() -> str:
    return settings.BILLING_CURRENCY


def check_currency(raw) -> str:
    """An ISO 4217 code the platform knows (upper-cased), else CurrencyError naming the known ones."""
    code = str(raw or "").strip().upper()
    if not code:
        raise CurrencyError("currency: give a three-letter code, e.g. USD or CNY")
    try:
        pricing.minor_unit(code)
    except ValueError as error:
        raise CurrencyError(f"currency: {str(error)[:200]}") from None
    return code


def month_of(at: datetime) -> date:
    """The first day of the billing month `at` falls in (the platform's zone, as billing.ledger.periods)."""
    return at.astimezone(ZoneInfo(settings.TIME_ZONE)).date().replace(day=1)


def currency_in(workspace, month: date) -> str:
    """The currency `workspace` (or its id) is billed in for the billing month starting `month`."""
    workspace_id = getattr(workspace, "pk", workspace)
    found = (WorkspaceCurrency.objects.filter(workspace_id=workspace_id, period__lte=month)
             .order_by("-period").values_list("currency", flat=True).first())
    return found or default_currency()


def currency_at(workspace, at: datetime | None = None) -> str:
    """The currency of the billing month `at` (default: now) falls in."""
    return currency_in(workspace, month_of(at or clock.now()))


class Currencies:
    """Every month's currency of many workspaces from one query (posting the ledger)."""

    def __init__(self, workspace_ids: Iterable[int]):
        self._rows: dict[int, tuple[list[date], list[str]]] = {}
        rows = (WorkspaceCurrency.objects.filter(workspace_id__in=set(workspace_ids))
                .order_by("workspace_id", "period").values_list("workspace_id", "period", "currency"))
        for workspace_id, period, currency in rows:
            periods, currencies = self._rows.setdefault(workspace_id, ([], []))
            periods.append(period)
            currencies.append(currency)
        self._default = default_currency()

    def of(self, workspace_id: int, month: date) -> str:
        periods, currencies = self._rows.get(workspace_id, ((), ()))
        index = bisect_right(periods, month)
        return currencies[index - 1] if index else self._default


def workspace_currencies(workspaces: Iterable, *, at: datetime | None = None) -> dict[int, str]:
    """Workspace id -> the currency it is billed in now (or at `at`)."""
    ids = [getattr(w, "pk", w) for w in workspaces]
    known = Currencies(ids)
    month = month_of(at or clock.now())
    return {workspace_id: known.of(workspace_id, month) for workspace_id in ids}


def why_not_change(workspace, month: date) -> str | None:
    """What makes a currency change mix currencies now: a job not finished, or lines of this month."""
    open_jobs = list(Job.objects.filter(workspace=workspace).exclude(state__in=FINAL_STATES)
                     .order_by("pk").values_list("pk", flat=True)[:5])
    if open_jobs:
        named = ", ".join(f"#{pk}" for pk in open_jobs)
        return (f"{workspace.slug} has jobs that have not finished ({named}): their quotes and costs are in "
                f"{currency_in(workspace, month)}; change the currency once they end")
    if ChargeLine.objects.filter(workspace=workspace, period__gte=month).exists():
        return (f"{workspace.slug} was already billed in {currency_in(workspace, month)} in {month:%Y-%m}: a billing "
                "month has one currency; change it at the start of a month, before its jobs run")
    return None


@transaction.atomic
def set_workspace_currency(workspace, raw, *, user=None, now: datetime | None = None) -> WorkspaceCurrency | None:
    """Bill `workspace` in the currency `raw` from the current month on (from the start if it was never
    billed). None when it already is. CurrencyError for an unknown code; CurrencyChangeRefused when the
    currency has no price table in force or the change would mix currencies (see why_not_change)."""
    currency = check_currency(raw)
    now = now or clock.now()
    type(workspace).objects.select_for_update().filter(pk=workspace.pk).first()  # one change at a time
    month = month_of(now)
    if currency_in(workspace, month) == currency:
        return None
    if not PriceTable.objects.filter(currency=currency, effective_from__lte=now).exists():
        raise CurrencyChangeRefused(f"no {currency} price table is in force: create a {currency} version on the "
                                    "price page first")
    if reason := why_not_change(workspace, month):
        raise CurrencyChangeRefused(reason)
    rows = WorkspaceCurrency.objects.filter(workspace=workspace)
    billed = (ChargeLine.objects.filter(workspace=workspace).exists()
              or Replica.objects.filter(job__workspace=workspace, started__isnull=False).exists())
    since = month if billed else EVER
    rows.filter(period__gte=since).delete()
    return WorkspaceCurrency.objects.create(workspace=workspace, period=since, currency=currency, set_at=now,
                                            set_by=user if getattr(user, "is_authenticated", False) else None)
