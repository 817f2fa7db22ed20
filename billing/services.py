"""Quotes for a workspace's spec, priced with the table in force now."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.exceptions import PermissionDenied

from billing import selectors
from billing.quotes import Quote, choose_option, quote_at
from scheduling import clock
from scheduling.errors import Forbidden
from scheduling.models import Job
from scheduling.services import read_spec, require_submitter, submit_job
from scheduling.spec import JobSpec


class BudgetBlocked(Forbidden, PermissionDenied):
    """The workspace spent its budget and its owner blocks new submissions at the limit."""

    field = "budget"


def platform_tz() -> ZoneInfo:
    return ZoneInfo(settings.TIME_ZONE)


def quote_spec(spec: JobSpec, *, now: datetime | None = None) -> Quote:
    return quote_at(spec, selectors.pool_offers(), selectors.price_tables(),
                    now=now or clock.now(), tz=platform_tz())


def quote_for_workspace(workspace, spec: str | bytes | Mapping[str, Any], *, now: datetime | None = None
                        ) -> tuple[JobSpec, Quote]:
    """Parse (SpecError) and quote (QuoteError) a spec as the workspace would submit it."""
    parsed = read_spec(workspace, spec)
    return parsed, quote_spec(parsed, now=now)


def submit_quoted_job(*, user, workspace, spec: str | bytes | Mapping[str, Any], option: str | None = None,
                      now: datetime | None = None) -> Job:
    """Quote the spec, pick the option (the named one, else the spec's own choice that can start
    now, else the cheapest), and submit the job with that option frozen on it."""
    require_submitter(user, workspace)
    from billing.reports.services import check_budget_allows_submit  # budgets build on quotes' models

    if reason := check_budget_allows_submit(workspace):
        raise BudgetBlocked(reason)
    parsed, quote = quote_for_workspace(workspace, spec, now=now)
    chosen = choose_option(quote, option or None, parsed)
    frozen = {**chosen.to_json(), "currency": quote.currency, "quoted_at": quote.quoted_at.isoformat(),
              "expected_duration_hours": quote.to_json()["expected_duration_hours"]}
    not_before = chosen.starts_at if chosen.when == "off-peak" else None
    return submit_job(user=user, workspace=workspace, spec=spec, quote=frozen, parsed=parsed, not_before=not_before)
