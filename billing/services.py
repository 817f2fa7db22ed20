"""Quotes for a workspace's spec, priced with the table in force now."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
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
    SubmitItem,
    SubmitReads,
    clock,
    cluster_snapshot_now,
    load_yaml,
    queue_eviction_rate,
    read_spec,
    replicas_at_rate,
    require_submitter,
    runs_in_month,
    schedules,
    slice_share,
    submit_job,
    submit_jobs,
)
from scheduling.models import Job, Schedule


class BudgetBlocked(Forbidden, PermissionDenied):
    """The workspace spent its budget and its owner blocks new submissions at the limit."""

    field = "budget"


def quote_spec(spec: JobSpec, *, now: datetime | None = None, currency: str | None = None,
               priced: tuple[list, list] | None = None) -> Quote:
    """The spec priced on `currency`'s timeline (default: the platform's billing currency); `priced`: the pools'
    offers and that timeline's tables, read once for a batch."""
    offers, tables = priced or (selectors.pool_offers(), selectors.price_tables(currency))
    return quote_at(spec, offers, tables, now=now or clock.now(), tz=platform_tz())


@dataclass
class QuoteReads:
    """What quoting and submitting a batch of a workspace's specs shares, read once at `now`: the submit
    checks' reads, the currency and prices, the budget's verdict, the cluster for the expected starts and
    each queue's eviction history."""

    workspace: Any
    now: datetime
    submit: SubmitReads = field(init=False)
    currency: str = field(init=False)
    priced: tuple[list, list] = field(init=False)
    budget_refusal: str | None = field(init=False)
    snapshot: Any = field(init=False)
    evictions: dict[str, Any] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.submit = SubmitReads(self.workspace)
        self.currency = currency_at(self.workspace, self.now)
        self.priced = (selectors.pool_offers(), selectors.price_tables(self.currency))
        self.budget_refusal = check_budget_allows_submit(self.workspace)
        try:
            self.snapshot = cluster_snapshot_now(self.now)
        except Exception:  # noqa: BLE001 (each quote reads the cluster again, and keeps its own starts if it cannot)
            self.snapshot = None

    def eviction_rate(self, queue: str):
        if queue not in self.evictions:
            self.evictions[queue] = queue_eviction_rate(queue, self.now)
        return self.evictions[queue]


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
                        duration_hours: Decimal | None = None, reads: QuoteReads | None = None
                        ) -> tuple[JobSpec, Quote]:
    """Parse (SpecError) and quote (QuoteError) a spec as the workspace would submit it, in the currency
    it is billed in, for the duration `with_duration` decides, each option's expected start read from
    the cluster now (`reads`: what a batch read once; one quote reads the same, once)."""
    reads = reads or QuoteReads(workspace, now or clock.now())
    now = reads.now
    parsed, source = with_duration(read_spec(workspace, spec, reads=reads.submit), spec, duration_hours)
    queue = parsed.queue or getattr(reads.submit.queue(None), "name", None)
    quote = with_cluster_starts(quote_spec(parsed, now=now, currency=reads.currency, priced=reads.priced),
                                parsed, queue, budget_blocks=reads.budget_refusal is not None, snapshot=reads.snapshot)
    history = reads.eviction_rate(queue) if queue else None
    if history is not None:  # none: no figure to go by
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
    item = _quoted(workspace, spec, option, duration_hours, now=now)
    return submit_job(user=user, workspace=workspace, spec=item.spec, quote=item.quote, parsed=item.parsed,
                      not_before=item.not_before)


@dataclass(frozen=True)
class BatchSpec:
    """One spec of a batch submit, with the option and duration a single submit takes beside it."""

    spec: str | bytes | Mapping[str, Any]
    option: str | None = None
    duration_hours: Decimal | None = None


def submit_quoted_jobs(*, user, workspace, items: Sequence[BatchSpec], now: datetime | None = None
                       ) -> list[Job | DomainError]:
    """`submit_quoted_job` for each item, the shared reads (queues, pools, prices, the budget, the cluster's
    state for the starts) made once and the good jobs stored together (scheduling's `submit_jobs`). Returns,
    in the items' order, each stored Job or the DomainError that refused it (a spent budget refuses every
    item); one bad item never keeps the others out. Raises NotSubmitter for the whole batch."""
    require_submitter(user, workspace)
    reads = QuoteReads(workspace, now or clock.now())
    out: list[Job | DomainError | SubmitItem] = []
    for item in items:
        try:
            if reads.budget_refusal:
                raise BudgetBlocked(reads.budget_refusal)
            out.append(_quoted(workspace, item.spec, item.option, item.duration_hours, reads=reads))
        except DomainError as error:
            out.append(error)
    stored = iter(submit_jobs(user=user, workspace=workspace, reads=reads.submit,
                              items=[item for item in out if isinstance(item, SubmitItem)]))
    return [next(stored) if isinstance(item, SubmitItem) else item for item in out]


def _quoted(workspace, spec: str | bytes | Mapping[str, Any], option: str | None, duration_hours: Decimal | None,
            *, now: datetime | None = None, reads: QuoteReads | None = None) -> SubmitItem:
    """The spec quoted and its option chosen: what submit_job stores (a DomainError: refused)."""
    parsed, quote = quote_for_workspace(workspace, spec, now=now, duration_hours=duration_hours, reads=reads)
    if parsed.schedule is not None:
        raise DomainError(gettext("the spec has a schedule block: it makes a schedule, not a job; submit it to "
                                  "/api/v1/schedules/ (gpuctl submit and the Submit page do so by themselves)"),
                          field="spec")
    chosen = choose_option(quote, option or None, parsed)
    not_before = chosen.starts_at if chosen.when == "off-peak" else None
    if chosen.as_preemptible:   # the variant the quote offered: the same job, evictable, starting now
        parsed = replace(parsed, preemptible=True)
    return SubmitItem(spec, _frozen(quote, chosen), parsed, not_before)


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
                  completion_tokens: int | None = None) -> dict[str, dict[str, Any]] | None:
    """Per option of an inference service's quote: the replicas it settles at for a steady `rate_rps`
    (scheduling.serving.latency.replicas_at_rate, on that option's slice) and what they cost per hour,
    peak and off-peak (each replica at the option's per-replica rate). With the tokens of a request
    (`prompt_tokens`, `completion_tokens`) also the expected cost per 1M prompt and completion tokens: the
    replicas' price per hour over the tokens served in an hour, split by the prefill and decode seconds the
    latency model gives a request (a shared slice's lower price is where sharing shows its worth). None for
    a kind the autoscaler does not size: it has no target to settle at."""
    target = kinds.kind_of(spec).scale_target(spec)
    if target is None:
        return None
    metric, value = target
    model = ServerModel(tokens=completion_tokens) if completion_tokens else ServerModel()
    out = {}
    for option in quote.options:
        [role] = option.roles
        if role.sharing not in ("exclusive", "fraction", "mig", "timeslice"):
            continue   # a CPU-only option serves no model
        share = slice_share(role.sharing, role.num_gpus, role.gpu_milli, role.mig_profile or "")
        replicas = replicas_at_rate(rate_rps, share, metric=metric,
                                    target=value, low=role.min_replicas,
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

