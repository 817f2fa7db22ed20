"""Quotes for a workspace's spec, priced with the table in force now."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from decimal import ROUND_CEILING, Decimal
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.utils.translation import gettext

from billing import selectors
from billing.currency import currency_at
from billing.quotes import (
    DEFAULT_DURATION_S,
    Quote,
    QuoteOption,
    choose_option,
    quote_at,
    with_duration_source,
    with_expected_loss,
    with_schedule_month,
)
from billing.reports.services import check_budget_allows_submit
from billing.starts import with_cluster_starts
from billing.time_zone import platform_tz
from billing.token_costs import per_million_tokens
from scheduling import kinds
from scheduling.api import (
    DomainError,
    Forbidden,
    JobSpec,
    ServerModel,
    SpecError,
    clock,
    default_queue,
    load_yaml,
    queue_eviction_rate,
    read_spec,
    replicas_at_rate,
    require_submitter,
    runs_in_month,
    schedules,
    slice_share,
    submit_job,
)
from scheduling.models import Job, Schedule


class BudgetBlocked(Forbidden, PermissionDenied):
    """The workspace spent its budget and its owner blocks new submissions at the limit."""

    field = "budget"


def quote_spec(spec: JobSpec, *, now: datetime | None = None, currency: str | None = None) -> Quote:
    """The spec priced on `currency`'s timeline (default: the platform's billing currency)."""
    return quote_at(spec, selectors.pool_offers(), selectors.price_tables(currency),
                    now=now or clock.now(), tz=platform_tz())


def states_duration(spec: str | bytes | Mapping[str, Any]) -> bool:
    """Whether the spec itself says how long the job runs (`expectedDuration`)."""
    if isinstance(spec, Mapping):
        return "expectedDuration" in spec
    try:
        return "expectedDuration" in load_yaml(spec).value
    except SpecError:
        return False


def with_duration(parsed: JobSpec, spec: str | bytes | Mapping[str, Any], duration_hours: Decimal | None
                  ) -> tuple[JobSpec, str]:
    """The spec with the duration it is quoted and run for, and who chose it: the request's
    `duration_hours`, else the spec's `expectedDuration`, else DEFAULT_DURATION_S (2 h; a notebook: 1 h)."""
    if duration_hours is not None:
        seconds = int((Decimal(duration_hours) * 3600).to_integral_value(rounding=ROUND_CEILING))
        return replace(parsed, expected_duration_s=max(seconds, 1)), "request"
    if states_duration(spec):
        return parsed, "spec"
    # a kind that runs until stopped (a notebook) is quoted for its own duration (an hour)
    default = kinds.kind_of(parsed).quote_duration_s or DEFAULT_DURATION_S
    return replace(parsed, expected_duration_s=default), "default"


def quote_for_workspace(workspace, spec: str | bytes | Mapping[str, Any], *, now: datetime | None = None,
                        duration_hours: Decimal | None = None) -> tuple[JobSpec, Quote]:
    """Parse (SpecError) and quote (QuoteError) a spec as the workspace would submit it, in the currency
    it is billed in, for the duration `with_duration` decides, each option's expected start read from
    the cluster now."""
    parsed, source = with_duration(read_spec(workspace, spec), spec, duration_hours)
    queue = parsed.queue or getattr(default_queue(workspace), "name", None)
    now = now or clock.now()
    quote = with_cluster_starts(quote_spec(parsed, now=now, currency=currency_at(workspace, now)), parsed, queue)
    if queue and (history := queue_eviction_rate(queue, now)) is not None:  # none: no figure to go by
        quote = with_expected_loss(quote, parsed, *history)
    if parsed.schedule is not None:  # a month of runs at the cron line's pace
        zone = parsed.schedule.time_zone or settings.TIME_ZONE
        quote = with_schedule_month(quote, parsed.schedule.cron, zone, runs_in_month(parsed.schedule.cron, zone, now))
    return parsed, with_duration_source(quote, source)


def has_schedule(spec: str | bytes | Mapping[str, Any]) -> bool:
    """Whether the spec has a `schedule` block (it makes a schedule, not a job)."""
    if isinstance(spec, Mapping):
        return "schedule" in spec
    try:
        value = load_yaml(spec).value
    except SpecError:
        return False
    return isinstance(value, dict) and "schedule" in value


def submit_quoted_job(*, user, workspace, spec: str | bytes | Mapping[str, Any], option: str | None = None,
                      now: datetime | None = None, duration_hours: Decimal | None = None) -> Job:
    """Quote the spec, pick the option (the named one, else the spec's own choice that can start
    now, else the cheapest), and submit the job with that option frozen on it; the job runs for
    the duration it was quoted for."""
    require_submitter(user, workspace)
    if reason := check_budget_allows_submit(workspace):
        raise BudgetBlocked(reason)
    parsed, quote = quote_for_workspace(workspace, spec, now=now, duration_hours=duration_hours)
    if parsed.schedule is not None:
        raise DomainError(gettext("the spec has a schedule block: it makes a schedule, not a job; submit it to "
                                  "/api/v1/schedules/ (gpuctl submit and the Submit page do so by themselves)"),
                          field="spec")
    chosen = choose_option(quote, option or None, parsed)
    not_before = chosen.starts_at if chosen.when == "off-peak" else None
    return submit_job(user=user, workspace=workspace, spec=spec, quote=_frozen(quote, chosen), parsed=parsed,
                      not_before=not_before)


def _frozen(quote: Quote, chosen: QuoteOption) -> dict[str, Any]:
    return {**chosen.to_json(), "currency": quote.currency, "quoted_at": quote.quoted_at.isoformat(),
            "expected_duration_hours": quote.to_json()["expected_duration_hours"]}


def submit_quoted_schedule(*, user, workspace, spec: str | bytes | Mapping[str, Any], option: str | None = None,
                           now: datetime | None = None, duration_hours: Decimal | None = None) -> Schedule:
    """A spec with `schedule:` quoted as one run and stored as a Schedule with the chosen option frozen for its
    runs (each starts at its fire time: the quote offers no off-peak start)."""
    require_submitter(user, workspace)
    if reason := check_budget_allows_submit(workspace):
        raise BudgetBlocked(reason)
    parsed, quote = quote_for_workspace(workspace, spec, now=now, duration_hours=duration_hours)
    if parsed.schedule is None:
        raise DomainError(gettext("the spec has no schedule block: submit it as a job"), field="spec")
    chosen = choose_option(quote, option or None, parsed)  # the quote of a schedule offers no off-peak start
    return schedules.create_schedule(user=user, workspace=workspace, spec=spec, parsed=parsed,
                                     quote=_frozen(quote, chosen))


def fire_schedules() -> schedules.FiringReport:
    """Make the due runs of every schedule; a workspace that spent its budget and blocks at the limit gets none
    (the fire time is recorded as refused, with why)."""
    return schedules.fire_due_schedules(refuse=check_budget_allows_submit)


def service_rates(spec: JobSpec, quote: Quote, rate_rps: float, *, prompt_tokens: int | None = None,
                  completion_tokens: int | None = None) -> dict[str, dict[str, Any]]:
    """Per option of an inference service's quote: the replicas it settles at for a steady `rate_rps`
    (scheduling.serving.latency.replicas_at_rate, on that option's slice) and what they cost per hour,
    peak and off-peak (each replica at the option's per-replica rate). With the tokens of a request
    (`prompt_tokens`, `completion_tokens`) also the expected cost per 1M prompt and completion tokens: the
    replicas' price per hour over the tokens served in an hour, split by the prefill and decode seconds the
    latency model gives a request (a shared slice's lower price is where sharing shows its worth)."""
    if not kinds.kind_of(spec).autoscaled:  # no target to settle at
        return {}
    model = ServerModel(tokens=completion_tokens) if completion_tokens else ServerModel()
    out = {}
    for option in quote.options:
        [role] = option.roles
        if role.sharing not in ("exclusive", "fraction", "mig", "timeslice"):
            continue   # a CPU-only option serves no model
        share = slice_share(role.sharing, role.num_gpus, role.gpu_milli, role.mig_profile or "")
        replicas = replicas_at_rate(rate_rps, share, metric=spec.inference.target_metric,
                                    target=float(spec.inference.target_value), low=role.min_replicas,
                                    high=role.max_replicas, model=model)
        per_hour = replicas * role.price_per_hour
        out[option.id] = {"requests_per_second": rate_rps, "replicas": replicas,
                           "price_per_hour": str(per_hour.quantize(Decimal("0.0001"))),
                           "price_per_hour_offpeak": str((replicas * role.price_per_hour_offpeak)
                                                         .quantize(Decimal("0.0001")))}
        if prompt_tokens is not None and completion_tokens:
            prefill, decode = model.phases_s(share)
            requests = round(rate_rps * 3600)
            costs = per_million_tokens(per_hour, requests * prompt_tokens, requests * completion_tokens,
                                       prefill, decode)
            out[option.id].update({
                "prompt_tokens_per_request": prompt_tokens, "completion_tokens_per_request": completion_tokens,
                "cost_per_million_prompt_tokens": None if costs.prompt is None else str(costs.prompt),
                "cost_per_million_completion_tokens": None if costs.completion is None else str(costs.completion),
                "cost_per_million_tokens": None if not requests else str(
                    (per_hour * 1_000_000 / (requests * (prompt_tokens + completion_tokens))).quantize(
                        Decimal("0.0001")))})
    return out

