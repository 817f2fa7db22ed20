"""Inference services at run time: what a launch adds for their replicas, where the portal serves
them (`/serve/<workspace>/<name>/`), and the autoscaler that sizes them each cycle.

Each cycle, before the snapshot, every live service is evaluated (`scale_services`): its running
replicas' servers are scraped (`/metrics?format=json`: cumulative requests, in-flight seconds and
GPU use, each over the replica's own uptime, so the figures hold whatever the platform clock says),
the autoscaler (`scheduling.serving.autoscaler`) decides the replicas it wants, and:
- more: the scheduler's roles ask for them (`Job.roles` max_replicas; the core places the elastic
  extras one by one, as for any elastic job);
- fewer: the replicas with the highest indices end now ("scaled-down"), their slices free at once;
- none (min 0, no traffic for a whole scale-down delay): the service is Stopped, and holds nothing
  until a request wakes it (`wake`), which the portal's endpoint holds while a replica starts.
Each evaluation is a ServiceSample: replicas, requests, latency, GPU-seconds, for the service page.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

import httpx
from django.conf import settings
from django.db import transaction
from django.utils.crypto import salted_hmac

from scheduling import clock, kinds
from scheduling import history_catalogue as texts
from scheduling.backends.base import Endpoint
from scheduling.errors import Conflict, DomainError
from scheduling.history_texts import Said, english, said
from scheduling.models import ACTIVE_STATES, Job, JobState, Replica, ServiceSample, ServiceScale
from scheduling.service_scale import create_scale, restarted, with_bounds
from scheduling.services import record_event, require_submitter, resume_workload, stop_workload
from scheduling.serving.autoscaler import Autoscaler, ScaleDecision, ScalePolicy
from scheduling.spec import SpecError, parse_job_spec_obj
from scheduling.spec.workloads import InferenceSpec

log = logging.getLogger(__name__)

SCRAPE_TIMEOUT_S = 2.0
WOKEN_HOLD_S = 120.0       # a wake keeps one replica wanted until one runs, at most this long
MAX_REPLICAS = 64          # the most replicas `set_range` accepts


# The autoscaler's reasons (ScaleDecision.reason_key) as the service's events and its range say them.
SCALE_REASONS = {
    "up": texts.SCALE_UP,
    "down": texts.SCALE_DOWN,
    "stays_delayed": texts.SCALE_STAYS_DELAYED,
    "stays": texts.SCALE_STAYS,
    "woken": texts.SCALE_WOKEN,
}


def scale_said(decision: ScaleDecision) -> Said:
    """The decision's reason as said."""
    template = SCALE_REASONS[decision.reason_key]
    figures = dict(decision.figures)
    return said(template, **figures, load=said(texts.SCALE_LOAD, **figures)) if figures else said(template)


def base_url(workspace: str, name: str) -> str:
    return f"/serve/{workspace}/{name}/"


def api_key(job_id: int) -> str:
    """The key the service's replicas ask for: derived from the platform's secret, never stored, sent
    only by the portal's endpoint (clients use their own API tokens)."""
    return salted_hmac("scheduling.inference.api_key", str(job_id)).hexdigest()


def inference_spec(job: Job) -> InferenceSpec | None:
    try:
        return parse_job_spec_obj(job.spec).inference
    except (SpecError, TypeError, ValueError):
        log.warning("job %s: its stored spec has no readable inference part", job.pk)
        return None




# --------------------------------------------------------------------------- scraping


@dataclass(frozen=True)
class ReplicaFigures:
    """One scrape of one replica's server: cumulative counters since it started, and now."""

    uptime_s: float
    requests: int
    in_flight_s: float
    waiting: int
    p50_s: float | None
    p95_s: float | None
    ready: bool


def scrape(endpoint: Endpoint) -> ReplicaFigures | None:
    try:
        response = httpx.get(endpoint.url + "metrics", params={"format": "json"}, timeout=SCRAPE_TIMEOUT_S,
                             headers={"Authorization": f"Bearer {endpoint.token}"} if endpoint.token else {})
        body = response.json() if response.status_code == 200 else None
        latency = body.get("latency") or {}
        return ReplicaFigures(uptime_s=float(body["uptime_s"]), requests=int(body["requests_total"]),
                              in_flight_s=float(body["in_flight_seconds_total"]),
                              waiting=int(body.get("waiting") or 0), p50_s=latency.get("p50_s"),
                              p95_s=latency.get("p95_s"), ready=bool(body.get("ready", True)))
    except (httpx.HTTPError, ValueError, TypeError, KeyError, AttributeError) as error:
        log.info("service replica at %s gave no figures: %s", endpoint.url, error)
        return None


def replica_endpoint(backend, job: Job, replica: Replica) -> Endpoint | None:
    """Where the replica's server answers, with the key it asks for (a backend that does not know
    the key, Kubernetes, gives only the address)."""
    found = backend.endpoint((job.pk, replica.role, replica.index), workspace=job.workspace.slug,
                             base_url=base_url(job.workspace.slug, job.name))
    return None if found is None else Endpoint(url=found.url, token=found.token or api_key(job.pk))


@dataclass
class Window:
    """What a service's replicas did since the previous evaluation."""

    requests: int = 0
    concurrency: float = 0.0     # mean requests in flight, summed over replicas
    rps: float = 0.0
    waiting: int = 0
    p50_s: float | None = None
    p95_s: float | None = None

    def add(self, previous: dict | None, now: ReplicaFigures) -> None:
        """One replica's counters since `previous` (its last scrape; none, or counters that went back
        when it restarted: since it started)."""
        base = previous if previous and previous["uptime_s"] <= now.uptime_s and \
            previous["requests"] <= now.requests else {"uptime_s": 0.0, "requests": 0, "in_flight_s": 0.0}
        span = now.uptime_s - base["uptime_s"]
        done = now.requests - base["requests"]
        self.requests += done
        self.waiting += now.waiting
        if span > 0:
            self.concurrency += max(0.0, now.in_flight_s - base["in_flight_s"]) / span
            self.rps += done / span
        if done and now.p95_s is not None:  # the slowest replica that answered in the window
            self.p95_s = max(self.p95_s or 0.0, now.p95_s)
            self.p50_s = max(self.p50_s or 0.0, now.p50_s or 0.0)


# --------------------------------------------------------------------------- the autoscaler


def live_services():
    return (Job.objects.filter(kind__in=kinds.names_where(autoscaled=True))
            .filter(state__in=(JobState.PENDING, JobState.SCHEDULED, JobState.RUNNING))
            .select_related("workspace", "service_scale"))


def scale_services(backend, now: datetime | None = None) -> list[ServiceSample]:
    """Evaluate every live service that was not evaluated within SERVICE_SCALE_INTERVAL_S."""
    now = now or clock.now()
    due = now - timedelta(seconds=settings.SERVICE_SCALE_INTERVAL_S)
    samples = []
    for job in live_services():
        # a service submitted before services kept a range gets one now
        scale = getattr(job, "service_scale", None) or create_scale(job)
        if scale is None or (scale.scraped_at is not None and scale.scraped_at > due):
            continue
        try:
            samples.append(evaluate(job, backend, now))
        except Exception:   # one service's failure must not stop the cycle or the others
            log.exception("service %s: autoscaler evaluation failed", job.pk)
    return samples


def _policy(scale: ServiceScale, spec: InferenceSpec | None) -> ScalePolicy:
    if spec is None:
        return ScalePolicy(scale.min_replicas, max(1, scale.max_replicas))
    return ScalePolicy.of_service(scale.min_replicas, max(1, scale.max_replicas), spec)


def evaluate(job: Job, backend, now: datetime) -> ServiceSample:
    """Scrape, decide and apply for one service; returns the sample it recorded."""
    active = list(job.replicas.filter(state__in=ACTIVE_STATES).order_by("index"))
    scraped: dict[str, dict] = {}
    window = Window()
    with_figures = []
    for replica in active:
        endpoint = replica_endpoint(backend, job, replica) if replica.state == JobState.RUNNING else None
        figures = scrape(endpoint) if endpoint is not None else None
        if figures is not None:
            with_figures.append((replica, figures))
    with transaction.atomic():
        job = Job.objects.select_for_update().select_related("workspace").get(pk=job.pk)
        scale = ServiceScale.objects.select_for_update().get(job=job)
        live = job.state in (JobState.PENDING, JobState.SCHEDULED, JobState.RUNNING)
        for replica, figures in with_figures:
            key = f"{replica.role}-{replica.index}-{replica.attempt}"
            window.add(scale.counters.get(key), figures)
            scraped[key] = {"uptime_s": figures.uptime_s, "requests": figures.requests,
                            "in_flight_s": figures.in_flight_s}
        spec = inference_spec(job)
        policy = _policy(scale, spec)
        autoscaler = Autoscaler(policy)
        autoscaler.restore([(t, n) for t, n in scale.recommendations])
        observed = window.rps if policy.metric == "rps" else window.concurrency
        running = sum(1 for r in active if r.state == JobState.RUNNING)
        if running:
            scale.woken_at = None   # the requests that woke it reach a replica now: the figures count them
        woken = scale.woken_at is not None and (now - scale.woken_at).total_seconds() < WOKEN_HOLD_S
        decision = autoscaler.decide(now.timestamp(), observed, len(active),
                                     waiting=window.waiting + (1 if woken else 0))
        seconds = (now - scale.scraped_at).total_seconds() if scale.scraped_at else 0.0
        sample = ServiceSample.objects.create(
            job=job, at=now, seconds=seconds, replicas=running,
            desired=decision.desired, requests=window.requests, concurrency=window.concurrency,
            p50_ms=None if window.p50_s is None else window.p50_s * 1000,
            p95_ms=None if window.p95_s is None else window.p95_s * 1000,
            gpu_seconds=seconds * sum(held_share(r) for r in active if r.started is not None))
        scale.counters, scale.scraped_at = scraped, now
        scale.recommendations = [list(r) for r in autoscaler.recent()]
        if live:   # not stopped, cancelled or deleted since it was read
            _apply(job, scale, decision.desired, decision, active, now)
        scale.save()
    return sample


def held_share(replica: Replica) -> float:
    """The GPUs a replica's slice holds (0.5 for half a GPU), as queue accounting counts them."""
    return int((replica.slice or {}).get("gpu_milli") or 1000) * len(replica.gpu_indices or ()) / 1000


def _apply(job: Job, scale: ServiceScale, desired: int, decision: ScaleDecision, active: list[Replica],
           now: datetime) -> None:
    changed = desired != scale.desired
    scale.desired, scale.reason = desired, english(scale_said(decision))[:200]
    reason = scale_said(decision)
    if desired == 0:
        if active or job.state != JobState.STOPPED:
            stop_workload(None, job, said(texts.SCALED_TO_ZERO, reason=reason))
        return
    roles = with_bounds(job.roles, scale, desired)
    if roles != job.roles:
        job.roles = roles
        job.save(update_fields=["roles"])
    gone = [r for r in active if r.index >= desired]
    for replica in gone:
        replica.state, replica.ended, replica.end_reason = JobState.STOPPED, now, "scaled-down"
    Replica.objects.bulk_update(gone, ["state", "ended", "end_reason"])
    if changed or gone:
        record_event(job, "scaled", reason=reason, data={"desired": desired, "stopped": len(gone)})


# --------------------------------------------------------------------------- changes from outside


@transaction.atomic
def wake(job: Job, now: datetime | None = None) -> bool:
    """A request reached a service with no replica: start it (Stopped: back in its queue) and keep one
    replica wanted while requests wait. Returns whether this call started it."""
    now = now or clock.now()
    job = Job.objects.select_for_update().select_related("workspace").get(pk=job.pk)
    scale = ServiceScale.objects.select_for_update().get(job=job) if kinds.kind_of(job).autoscaled else None
    if scale is None or job.is_final:
        return False
    scale.woken_at = now
    started = job.state == JobState.STOPPED
    if started:
        autoscaler = Autoscaler(_policy(scale, inference_spec(job)))
        autoscaler.restore([(t, n) for t, n in scale.recommendations])
        decision = autoscaler.wake(now.timestamp())
        scale.desired, scale.reason = decision.desired, english(scale_said(decision))
        scale.recommendations = [list(r) for r in autoscaler.recent()]
        job.roles = with_bounds(job.roles, scale, decision.desired)
        job.save(update_fields=["roles"])
        resume_workload(job, scale_said(decision))
        scale.cold_starts += 1
    scale.save()
    if started:
        record_event(job, "woken", reason=said(texts.WOKEN))
    return started


def record_cold_start(job: Job, seconds: float) -> None:
    """The portal held a request this long while a replica started."""
    record_event(job, "cold-start", reason=said(texts.COLD_START, seconds=f"{seconds:.1f}"),
                 data={"seconds": round(seconds, 3)})


def ready_endpoints(job: Job, backend) -> list[Endpoint]:
    """Where the service's running replicas answer now."""
    out = []
    for replica in job.replicas.filter(state=JobState.RUNNING).order_by("index"):
        endpoint = replica_endpoint(backend, job, replica)
        if endpoint is not None:
            out.append(endpoint)
    return out


@transaction.atomic
def set_range(user, job: Job, min_replicas: int, max_replicas: int) -> ServiceScale:
    """A member who may submit changes the service's replica range; the next evaluation applies it."""
    require_submitter(user, job.workspace)
    job = Job.objects.select_for_update().select_related("workspace").get(pk=job.pk)
    if not kinds.kind_of(job).autoscaled:
        raise Conflict(f"job {job.pk} is not an inference service", field="kind")
    if job.is_final:
        raise Conflict(f"service {job.pk} is already {job.state}", field="state")
    if not (0 <= min_replicas <= max_replicas and 1 <= max_replicas <= MAX_REPLICAS):
        raise DomainError(f"need 0 <= min <= max and 1 <= max <= {MAX_REPLICAS}, got min {min_replicas} "
                          f"and max {max_replicas}", field="replicas")
    scale = ServiceScale.objects.select_for_update().get(job=job)
    scale.min_replicas, scale.max_replicas = min_replicas, max_replicas
    scale.desired = max(min_replicas, min(scale.desired, max_replicas))
    scale.recommendations = [[t, max(min_replicas, min(n, max_replicas))] for t, n in scale.recommendations]
    scale.scraped_at = None   # evaluated again at the next cycle
    scale.save()
    job.roles = with_bounds(job.roles, scale, scale.desired)
    job.save(update_fields=["roles"])
    record_event(job, "rescaled", reason=said(texts.RESCALED, min=min_replicas, max=max_replicas, user=user.username),
                 data={"min": min_replicas, "max": max_replicas})
    if job.state == JobState.STOPPED and min_replicas >= 1:   # a minimum means replicas that always run
        restarted(job)
        resume_workload(job, said(texts.MINIMUM_SET, min=min_replicas,
                                  user=user.username))
    return scale


@transaction.atomic
def set_limits(user, job: Job, requests_per_minute: int | None, tokens_per_minute: int | None) -> ServiceScale:
    """A member who may submit changes the service's limits over all its callers (None: no limit); the
    endpoint applies them from its next request."""
    require_submitter(user, job.workspace)
    scale = ServiceScale.objects.select_for_update().filter(job=job).first()
    if scale is None or job.is_final:
        raise Conflict(f"service {job.pk} is not a live inference service", field="state")
    before = (scale.requests_per_minute, scale.tokens_per_minute)
    scale.requests_per_minute, scale.tokens_per_minute = requests_per_minute, tokens_per_minute
    scale.save(update_fields=["requests_per_minute", "tokens_per_minute"])
    if before != (requests_per_minute, tokens_per_minute):
        record_event(job, "limits", reason=said(texts.LIMITS_SET, requests=requests_per_minute or "-",
                                                tokens=tokens_per_minute or "-", user=user.username),
                     data={"requests_per_minute": requests_per_minute, "tokens_per_minute": tokens_per_minute})
    return scale
