"""Reads behind the service pages and API, each scoped to the caller's workspaces: a workspace's inference
services with their replicas, traffic, latency and cost, and a service's figures over time for its
charts. Cost comes from the ledger (its lines' sum); requests and GPU-seconds from the autoscaler's
samples (scheduling.inference), so cost per 1,000 requests is the ledger's cost over the requests
counted over the same life."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from django.db.models import Count, F, QuerySet, Sum, Window
from django.db.models.functions import RowNumber

from billing.api import per_million_tokens
from billing.models import ChargeLine
from portal import job_lists
from portal import selectors as portal_selectors
from scheduling.api import clock, inference, service_revisions, service_usage
from scheduling.models import (
    ACTIVE_STATES,
    Job,
    JobState,
    Replica,
    ServiceSample,
    ServiceScale,
)

MAX_LISTED = 200
SERIES_HOURS = 6          # the charts' default window
MAX_SERIES_POINTS = 2000  # at most this many samples per chart (the newest)
RATE_WINDOW = 3           # samples averaged for the "now" figures


def services_for(user, workspace, *, ended: bool | None = None) -> QuerySet[Job]:
    return portal_selectors.workloads_for(user, workspace, "services", ended=ended)


def get_service_for_user(user, job_id) -> Job:
    """A service by id: 404 unless it is an inference service of one of the user's workspaces."""
    return portal_selectors.get_workload_for_user(user, job_id, "services", "service")


@dataclass(frozen=True)
class TokenFigures:
    """A service's (or one revision's) tokens served and what they cost: the ledger's cost of its held slices
    split by its prefill and decode seconds, per 1M tokens; time to first token and tokens per second."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_per_million_prompt_tokens: Decimal | None = None
    cost_per_million_completion_tokens: Decimal | None = None
    ttft_p50_s: float | None = None
    ttft_p95_s: float | None = None
    tokens_per_second: float | None = None   # completion tokens per second of decoding


@dataclass
class ServiceRow:
    job: Job
    row: job_lists.JobRow          # cost so far (the ledger), timing
    endpoint: str                  # the path on the portal
    min_replicas: int
    max_replicas: int
    desired: int
    running: int
    requests: int                  # answered over its life
    gpu_seconds: float             # held by its replicas over its life
    rps: float | None              # over the last few samples
    p50_ms: float | None
    p95_ms: float | None
    cold_starts: int
    scale_reason: str
    tokens: TokenFigures = field(default_factory=lambda: TokenFigures())

    @property
    def cost_per_1000(self) -> Decimal | None:
        """Cost of 1,000 requests: the ledger's cost so far over the requests answered."""
        if self.row.cost is None or not self.requests:
            return None
        return (self.row.cost * 1000 / self.requests).quantize(Decimal("0.0001"))

    @property
    def gpu_seconds_per_request(self) -> float | None:
        return self.gpu_seconds / self.requests if self.requests else None

    @property
    def can_stop(self) -> bool:
        return self.job.state in (JobState.PENDING, JobState.SCHEDULED, JobState.RUNNING, JobState.PREEMPTED)

    @property
    def can_start(self) -> bool:
        return self.job.state == JobState.STOPPED


def service_rows(jobs, *, now: datetime | None = None) -> list[ServiceRow]:
    now = now or clock.now()
    base = job_lists.job_rows(jobs, now=now)
    ids = [r.job.pk for r in base]
    scales = ServiceScale.objects.in_bulk(ids)
    totals = {row["job_id"]: row for row in ServiceSample.objects.filter(job_id__in=ids).order_by()
              .values("job_id").annotate(requests=Sum("requests"), gpu_seconds=Sum("gpu_seconds"))}
    running = dict(inference_replicas(ids))
    recent = recent_samples(ids)
    rows = []
    for row in base:
        job, scale = row.job, scales.get(row.job.pk)
        sums, last = totals.get(job.pk, {}), recent.get(job.pk, [])
        rows.append(ServiceRow(
            job=job, row=row, endpoint=inference.base_url(job.workspace.slug, job.name),
            min_replicas=scale.min_replicas if scale else 0, max_replicas=scale.max_replicas if scale else 0,
            desired=scale.desired if scale else 0, running=running.get(job.pk, 0),
            requests=int(sums.get("requests") or 0), gpu_seconds=float(sums.get("gpu_seconds") or 0.0),
            rps=_rate(last), p50_ms=next((s.p50_ms for s in last if s.p50_ms is not None), None),
            p95_ms=next((s.p95_ms for s in last if s.p95_ms is not None), None),
            cold_starts=scale.cold_starts if scale else 0, scale_reason=scale.reason if scale else ""))
    _add_token_figures(rows, recent)
    return rows


def _add_token_figures(rows: list[ServiceRow], recent: dict[int, list[ServiceSample]]) -> None:
    """Each row's tokens from the endpoint's meter, their cost from the ledger's cost so far; phase seconds
    from the answers when their replicas reported them (the simulated server), else from the servers' metrics
    as the autoscaler sampled them (vLLM); time to first token from the samples' histograms."""
    ids = [r.job.pk for r in rows]
    totals = service_usage.totals_by_service(ids)
    sampled = {row["job_id"]: row for row in ServiceSample.objects.filter(job_id__in=ids).order_by()
               .values("job_id").annotate(prefill=Sum("prefill_seconds"), decode=Sum("decode_seconds"))}
    for row in rows:
        total = totals.get(row.job.pk) or service_usage.TokenTotals()
        phases = sampled.get(row.job.pk, {})
        row.tokens = token_figures(total, row.row.cost, recent.get(row.job.pk, []),
                                   float(phases.get("prefill") or 0.0), float(phases.get("decode") or 0.0))


def token_figures(total: service_usage.TokenTotals, cost: Decimal | None, recent: list[ServiceSample],
                  sampled_prefill_s: float = 0.0, sampled_decode_s: float = 0.0) -> TokenFigures:
    metered = total.prefill_seconds + total.decode_seconds > 0
    prefill, decode = ((total.prefill_seconds, total.decode_seconds) if metered
                       else (sampled_prefill_s, sampled_decode_s))
    costs = per_million_tokens(cost, total.prompt_tokens, total.completion_tokens, prefill, decode)
    with_ttft = next((s for s in recent if s.ttft_p95_ms is not None), None)
    speed = total.tokens_per_second
    if speed is None and decode > 0:
        speed = total.completion_tokens / decode
    return TokenFigures(
        prompt_tokens=total.prompt_tokens, completion_tokens=total.completion_tokens,
        cost_per_million_prompt_tokens=costs.prompt, cost_per_million_completion_tokens=costs.completion,
        ttft_p50_s=None if with_ttft is None or with_ttft.ttft_p50_ms is None else round(with_ttft.ttft_p50_ms / 1000, 4),
        ttft_p95_s=None if with_ttft is None else round(with_ttft.ttft_p95_ms / 1000, 4),
        tokens_per_second=None if speed is None else round(speed, 2))


@dataclass
class RevisionRow:
    """One revision of a service with its own tokens, latency and cost, so a new model, image or cheaper slice
    on part of the traffic can be compared with the one it may replace."""

    number: int
    model: str
    image: str
    created: datetime
    current: bool                  # new replicas launch it
    percent: int                   # of the traffic now
    replicas: int                  # running
    gpu_seconds: float             # held by its placements
    cost: Decimal | None           # its part of the service's ledger cost, by GPU-seconds held
    requests: int
    ttft_mean_s: float | None
    tokens: TokenFigures


def revision_rows(job: Job, cost: Decimal | None, *, now: datetime | None = None) -> list[RevisionRow]:
    """The service's revisions, newest first. The ledger bills a service, not its revisions: each revision's
    cost is the service's cost shared by the GPU-seconds its placements held."""
    now = now or clock.now()
    revisions = service_revisions.revisions_of(job)
    split = dict(service_revisions.traffic_split(job))
    current = service_revisions.current_revision(job.pk)
    held: dict[int, float] = {}
    running: dict[int, int] = {}
    placements = job.replicas.exclude(started=None).select_related(None)
    for replica in placements.only("revision", "started", "ended", "state", "slice", "gpu_indices", "clock_scale"):
        number = replica.revision or 1
        seconds = max(0.0, ((replica.ended or now) - replica.started).total_seconds())
        held[number] = held.get(number, 0.0) + seconds * inference.billed_share(replica)
        running[number] = running.get(number, 0) + (replica.state == JobState.RUNNING)
    all_held = sum(held.values())
    usage = service_usage.totals_by_revision(job)
    rows = []
    for revision in reversed(revisions):
        n = revision.number
        total = usage.get(n) or service_usage.TokenTotals()
        if n == 1 and None in usage:   # answers metered before the service had revisions were revision 1's
            older = usage[None]
            total = service_usage.TokenTotals(*(getattr(total, f) + getattr(older, f) for f in service_usage.SUMMED))
        share = (cost * Decimal(repr(held.get(n, 0.0))) / Decimal(repr(all_held))).quantize(Decimal("0.0001")) \
            if cost is not None and all_held > 0 else None
        rows.append(RevisionRow(
            number=n, model=revision.model, image=revision.image, created=revision.created, current=n == current,
            percent=split.get(n, 0), replicas=running.get(n, 0), gpu_seconds=round(held.get(n, 0.0), 1),
            cost=share, requests=total.requests, ttft_mean_s=total.ttft_mean_s,
            tokens=token_figures(total, share, [])))
    return rows


def recent_samples(job_ids) -> dict[int, list[ServiceSample]]:
    """Per job, its last RATE_WINDOW samples, newest first (one query for a page of services)."""
    ranked = (ServiceSample.objects.filter(job_id__in=job_ids)
              .annotate(rank=Window(RowNumber(), partition_by=F("job_id"), order_by=F("at").desc()))
              .filter(rank__lte=RATE_WINDOW).order_by("job_id", "-at"))
    out: dict[int, list[ServiceSample]] = {}
    for sample in ranked:
        out.setdefault(sample.job_id, []).append(sample)
    return out


def inference_replicas(job_ids) -> QuerySet:
    return (Replica.objects.filter(job_id__in=job_ids, state=JobState.RUNNING).order_by()
            .values_list("job_id").annotate(n=Count("pk")))


def _rate(samples: list[ServiceSample]) -> float | None:
    seconds = sum(s.seconds for s in samples)
    return sum(s.requests for s in samples) / seconds if seconds > 0 else None


def service_series(job: Job, *, since: datetime | None = None, now: datetime | None = None) -> dict:
    """The charts' data: per sample its time (ISO), replicas running and wanted, request rate, p50 and
    p95 latency and GPUs held; and the cost so far over time, from the ledger's lines."""
    now = now or clock.now()
    since = since or now - timedelta(hours=SERIES_HOURS)
    samples = list(reversed(ServiceSample.objects.filter(job=job, at__gte=since).order_by("-at")[:MAX_SERIES_POINTS]))
    times, replicas, desired, rps, p50, p95 = [], [], [], [], [], []
    for s in samples:
        times.append(s.at.isoformat())
        replicas.append(s.replicas)
        desired.append(s.desired)
        rps.append(round(s.requests / s.seconds, 3) if s.seconds > 0 else None)
        p50.append(None if s.p50_ms is None else round(s.p50_ms, 1))
        p95.append(None if s.p95_ms is None else round(s.p95_ms, 1))
    cost_times, cost = [], []
    total = Decimal(0)
    for end, line_cost in (ChargeLine.objects.filter(job=job).order_by("charge_end", "pk")
                           .values_list("charge_end", "cost")):
        total += line_cost
        cost_times.append(end.isoformat())
        cost.append(str(total))
    return {"start": since.isoformat(), "end": now.isoformat(), "times": times, "replicas": replicas,
            "desired": desired, "rps": rps, "p50_ms": p50, "p95_ms": p95, "cost_times": cost_times, "cost": cost,
            "currency": job.currency or (ChargeLine.objects.filter(job=job).values_list("currency", flat=True)
                                         .first() or ""),
            "active": job.replicas.filter(state__in=ACTIVE_STATES).count()}
