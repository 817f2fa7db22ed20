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
import math
import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import httpx
from django.conf import settings
from django.db import transaction
from django.utils.crypto import salted_hmac

from scheduling import clock, kinds, service_revisions
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
WOKEN_HOLD_S = 120.0       # a wake keeps one replica wanted until one is ready, at most this long
# Once one is ready: requests the portal held this recently are still on their way to it (the portal marks
# the requests it holds every second, by `wake`), and no replica's figures count them yet.
HELD_FRESH_S = 5.0
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
    in_flight_s: float | None      # None: the server keeps no integral (vLLM): its gauges now stand in
    waiting: int
    p50_s: float | None
    p95_s: float | None
    ready: bool
    running: int = 0
    ttft_buckets: tuple[tuple[float, int], ...] = ()    # (upper bound, cumulative count), +inf last
    prefill_s: float = 0.0
    decode_s: float = 0.0

    def counters(self) -> dict:
        """What the next evaluation takes its differences from."""
        return {"uptime_s": self.uptime_s, "requests": self.requests, "in_flight_s": self.in_flight_s or 0.0,
                # JSON has no infinity: the last bucket's bound is written as Prometheus writes it
                "ttft": [["+Inf" if math.isinf(b) else b, n] for b, n in self.ttft_buckets],
                "prefill_s": self.prefill_s, "decode_s": self.decode_s}


def _auth(endpoint: Endpoint) -> dict[str, str]:
    return {"Authorization": f"Bearer {endpoint.token}"} if endpoint.token else {}


def scrape(endpoint: Endpoint) -> ReplicaFigures | None:
    """The replica's figures: the simulated server's JSON, or else a model server's Prometheus text under
    vLLM's names (`prometheus_figures`)."""
    try:
        response = httpx.get(endpoint.url + "metrics", params={"format": "json"}, timeout=SCRAPE_TIMEOUT_S,
                             headers=_auth(endpoint))
        if response.status_code != 200:
            raise ValueError(f"status {response.status_code}")
        if not response.headers.get("content-type", "").startswith("application/json"):
            return prometheus_figures(response.text, time.time())
        body = response.json()
        latency = body.get("latency") or {}
        ttft = body.get("ttft") or {}
        phases = body.get("phases") or {}
        buckets = tuple((float(b), int(n)) for b, n in (ttft.get("buckets") or {}).items())
        return ReplicaFigures(uptime_s=float(body["uptime_s"]), requests=int(body["requests_total"]),
                              in_flight_s=float(body["in_flight_seconds_total"]),
                              waiting=int(body.get("waiting") or 0), p50_s=latency.get("p50_s"),
                              p95_s=latency.get("p95_s"), ready=bool(body.get("ready", True)),
                              running=int(body.get("in_service") or 0),
                              ttft_buckets=(*buckets, (math.inf, int(ttft.get("count") or 0))) if ttft else (),
                              prefill_s=float(phases.get("prefill_seconds_total") or 0.0),
                              decode_s=float(phases.get("decode_seconds_total") or 0.0))
    except (httpx.HTTPError, ValueError, TypeError, KeyError, AttributeError) as error:
        log.info("service replica at %s gave no figures: %s", endpoint.url, error)
        return None


PROMETHEUS_LINE = re.compile(r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)')


def prometheus_figures(text: str, now: float) -> ReplicaFigures:
    """A vLLM server's /metrics (Prometheus text) as figures: vllm:num_requests_running and _waiting,
    vllm:request_success_total, vllm:time_to_first_token_seconds (histogram), vllm:request_prefill_time_seconds
    and vllm:request_decode_time_seconds (their sums), summed over the models it serves; its uptime from
    process_start_time_seconds. Raises ValueError when it is not vLLM's."""
    sums: dict[str, float] = {}
    ttft: dict[float, float] = {}
    for line in text.splitlines():
        found = PROMETHEUS_LINE.match(line)
        if found is None or line.startswith("#"):
            continue
        name, labels, value = found["name"], found["labels"] or "", float(found["value"])
        if name == "vllm:time_to_first_token_seconds_bucket":
            bound = re.search(r'le="([^"]+)"', labels)
            if bound:
                le = math.inf if bound[1] == "+Inf" else float(bound[1])
                ttft[le] = ttft.get(le, 0.0) + value
        else:
            sums[name] = sums.get(name, 0.0) + value
    if "vllm:num_requests_running" not in sums:
        raise ValueError("no vllm:num_requests_running in its metrics")
    started = sums.get("process_start_time_seconds")
    return ReplicaFigures(
        uptime_s=now - started if started else now, requests=int(sums.get("vllm:request_success_total", 0)),
        in_flight_s=None, waiting=int(sums.get("vllm:num_requests_waiting", 0)), p50_s=None, p95_s=None,
        ready=True, running=int(sums["vllm:num_requests_running"]),
        ttft_buckets=tuple((b, int(n)) for b, n in sorted(ttft.items())),
        prefill_s=sums.get("vllm:request_prefill_time_seconds_sum", 0.0),
        decode_s=sums.get("vllm:request_decode_time_seconds_sum", 0.0))


def histogram_quantile(quantile: float, buckets: list[tuple[float, int]]) -> float | None:
    """The quantile of a Prometheus histogram ((upper bound, cumulative count), +inf last), interpolated
    within its bucket as Prometheus does; None when it counted nothing."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = quantile * buckets[-1][1]
    lower, below = 0.0, 0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return lower
            return lower + (bound - lower) * (rank - below) / max(count - below, 1e-9)
        lower, below = bound, count
    return lower


def replica_endpoint(backend, job: Job, replica: Replica) -> Endpoint | None:
    """Where the replica's server answers, with the key it asks for (a backend that does not know
    the key, Kubernetes, gives only the address)."""
    found = backend.endpoint((job.pk, replica.role, replica.index), workspace=job.workspace.slug,
                             base_url=base_url(job.workspace.slug, job.name))
    if found is None:
        return None
    return Endpoint(url=found.url, token=found.token or api_key(job.pk),
                    replica=f"{replica.role}-{replica.index}-{replica.attempt}", revision=replica.revision)


@dataclass
class Window:
    """What a service's replicas did since the previous evaluation."""

    requests: int = 0
    concurrency: float = 0.0     # mean requests in flight, summed over replicas
    rps: float = 0.0
    waiting: int = 0
    p50_s: float | None = None
    p95_s: float | None = None
    prefill_s: float = 0.0
    decode_s: float = 0.0
    ttft: dict[float, int] = field(default_factory=dict)   # the window's time-to-first-token histogram

    def add(self, previous: dict | None, now: ReplicaFigures) -> None:
        """One replica's counters since `previous` (its last scrape; none, or counters that went back
        when it restarted: since it started)."""
        base = previous if previous and previous["uptime_s"] <= now.uptime_s and \
            previous["requests"] <= now.requests else {"uptime_s": 0.0, "requests": 0, "in_flight_s": 0.0}
        span = now.uptime_s - base["uptime_s"]
        done = now.requests - base["requests"]
        self.requests += done
        self.waiting += now.waiting
        if now.in_flight_s is None:   # no integral kept: what is in flight now
            self.concurrency += now.running + now.waiting
        elif span > 0:
            self.concurrency += max(0.0, now.in_flight_s - base["in_flight_s"]) / span
        if span > 0:
            self.rps += done / span
        if done and now.p95_s is not None:  # the slowest replica that answered in the window
            self.p95_s = max(self.p95_s or 0.0, now.p95_s)
            self.p50_s = max(self.p50_s or 0.0, now.p50_s or 0.0)
        self.prefill_s += max(0.0, now.prefill_s - base.get("prefill_s", 0.0))
        self.decode_s += max(0.0, now.decode_s - base.get("decode_s", 0.0))
        before = {float(b): n for b, n in base.get("ttft") or ()}
        for bound, count in now.ttft_buckets:
            self.ttft[bound] = self.ttft.get(bound, 0) + max(0, count - before.get(bound, 0))

    def ttft_quantile(self, quantile: float) -> float | None:
        return histogram_quantile(quantile, sorted(self.ttft.items()))


# --------------------------------------------------------------------------- the autoscaler


def live_services():
    return (Job.objects.filter(kind__in=kinds.autoscaled())
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
            scraped[key] = figures.counters()
        spec = inference_spec(job)
        policy = _policy(scale, spec)
        autoscaler = Autoscaler(policy)
        autoscaler.restore([(t, n) for t, n in scale.recommendations])
        ttft_p50, ttft_p95 = window.ttft_quantile(0.5), window.ttft_quantile(0.95)
        observed = {"rps": window.rps, "queueDepth": window.waiting / max(1, len(with_figures)),
                    "ttftP95": ttft_p95 or 0.0}.get(policy.metric, window.concurrency)
        running = sum(1 for r in active if r.state == JobState.RUNNING)
        ready = {replica.pk for replica, figures in with_figures if figures.ready}
        # Requests held in the portal are in no replica's figures: a replica that runs but still loads its
        # model cannot take them, so they keep one wanted until one is ready and they have reached it.
        held_for = HELD_FRESH_S if ready else WOKEN_HOLD_S
        woken = scale.woken_at is not None and (now - scale.woken_at).total_seconds() < held_for
        decision = autoscaler.decide(now.timestamp(), observed, len(active),
                                     waiting=window.waiting + (1 if woken else 0),
                                     busy=window.requests > 0 or window.concurrency > 0)
        seconds = (now - scale.scraped_at).total_seconds() if scale.scraped_at else 0.0
        sample = ServiceSample.objects.create(
            job=job, at=now, seconds=seconds, replicas=running,
            desired=decision.desired, requests=window.requests, concurrency=window.concurrency,
            p50_ms=None if window.p50_s is None else window.p50_s * 1000,
            p95_ms=None if window.p95_s is None else window.p95_s * 1000,
            gpu_seconds=seconds * sum(billed_share(r) for r in active if r.started is not None),
            waiting=window.waiting, ttft_p50_ms=None if ttft_p50 is None else ttft_p50 * 1000,
            ttft_p95_ms=None if ttft_p95 is None else ttft_p95 * 1000, prefill_seconds=window.prefill_s,
            decode_seconds=window.decode_s)
        scale.counters, scale.scraped_at = scraped, now
        scale.recommendations = [list(r) for r in autoscaler.recent()]
        if live:   # not stopped, cancelled or deleted since it was read
            _apply(job, scale, decision.desired, decision, active, now,
                   service_revisions.rollout(scale, active, ready))
        scale.save()
    return sample


def held_share(replica: Replica) -> float:
    """The GPUs a replica's slice holds (0.5 for half a GPU), as queue accounting counts them."""
    return int((replica.slice or {}).get("gpu_milli") or 1000) * len(replica.gpu_indices or ()) / 1000


def billed_share(replica: Replica) -> float:
    """The GPU-seconds a replica holds per second of the platform's clock, on the clock the ledger bills: a
    simulated cluster's replica runs `clock_scale` seconds for each one that passes."""
    return held_share(replica) * (replica.clock_scale or 1.0)


def _apply(job: Job, scale: ServiceScale, desired: int, decision: ScaleDecision, active: list[Replica],
           now: datetime, rollout: service_revisions.Rollout | None = None) -> None:
    changed = desired != scale.desired
    scale.desired, scale.reason = desired, english(scale_said(decision))[:200]
    reason = scale_said(decision)
    if desired == 0:
        if active or job.state != JobState.STOPPED:
            stop_workload(None, job, said(texts.SCALED_TO_ZERO, reason=reason))
        return
    rollout = rollout or service_revisions.Rollout(0)
    placed = max(desired, rollout.at_least)   # a new revision's replicas keep their index while old ones go
    roles = with_bounds(job.roles, scale, placed, surge=max(0, placed - scale.max_replicas))
    if roles != job.roles:
        job.roles = roles
        job.save(update_fields=["roles"])
    gone = [r for r in active if r.index >= placed and r not in rollout.replaced]
    for replica in gone:
        replica.state, replica.ended, replica.end_reason = JobState.STOPPED, now, "scaled-down"
    Replica.objects.bulk_update(gone, ["state", "ended", "end_reason"])
    service_revisions.replace(job, rollout.replaced, now, scale.revision)
    if changed or gone:
        record_event(job, "scaled", reason=reason, data={"desired": desired, "stopped": len(gone)})


# --------------------------------------------------------------------------- changes from outside


@transaction.atomic
def wake(job: Job, now: datetime | None = None) -> bool:
    """A request reached a service with no ready replica: start it (Stopped: back in its queue) and keep one
    replica wanted while requests wait (the portal calls it again while it holds them, see HELD_FRESH_S).
    Returns whether this call started it."""
    now = now or clock.now()
    job = Job.objects.select_for_update().select_related("workspace").get(pk=job.pk)
    if job.is_final or job.kind not in kinds.autoscaled():
        return False   # only a live service is woken
    scale = ServiceScale.objects.select_for_update().filter(job=job).first()
    if scale is None:   # a service submitted before scales were kept gets its range now
        scale = create_scale(job)
        if scale is None:
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


def still_held(job: Job, now: datetime | None = None) -> None:
    """The portal still holds requests for the service (see HELD_FRESH_S): one quick write, or a wake when
    the service was stopped meanwhile."""
    now = now or clock.now()
    marked = ServiceScale.objects.filter(job_id=job.pk, job__state__in=(
        JobState.PENDING, JobState.SCHEDULED, JobState.RUNNING)).update(woken_at=now)
    if not marked:
        wake(job, now)


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
    kinds.kind_of(job).check_scaled(job)
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
