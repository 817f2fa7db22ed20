"""GET /metrics for Prometheus (text format), served by `MetricsMiddleware`.

Where figures come from (one design for `make run` and for Kubernetes, no multiprocess directory):
- cluster state (GPUs per pool, queues, pending jobs, agents, ingest lag, budgets): computed from the
  database at scrape time by `PlatformCollector`;
- events in Celery workers (cycle duration and decisions, task failures, export durations): a Redis hash
  (`scheduling.metrics.SHARED`), read at scrape time; the figures are cluster-wide, so every web replica
  serves the same ones (aggregate them with max, not sum);
- events in this web process (HTTP responses, samples ingested, websocket clients): prometheus_client
  metrics in `scheduling.metrics.LOCAL`, per process: Prometheus scrapes each replica.

With `METRICS_TOKEN` set, a request must carry `Authorization: Bearer <token>` and also gets the series
labelled by workspace (budgets, cost); without it, /metrics is open and has none of them.
"""

from __future__ import annotations

import hmac
import logging
import time

from django.conf import settings
from django.http import HttpResponse
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from billing.api import metrics as billing_metrics
from scheduling.api import metrics as shared
from scheduling.models import Node

log = logging.getLogger(__name__)

PATH = "/metrics"

HTTP_RESPONSES = Counter("gpu_platform_http_responses", "HTTP responses of the portal, by status class.",
                         ["status_class"], registry=shared.LOCAL)
WEBSOCKET_CLIENTS = Gauge("gpu_platform_websocket_clients", "Open live-update websockets, by kind.",
                          ["kind"], registry=shared.LOCAL)
for _cls in ("2xx", "3xx", "4xx", "5xx"):
    HTTP_RESPONSES.labels(_cls)  # every class present from the start, so rate() sees the first 5xx


def _gauge(name: str, doc: str, labels: list[str], values: dict) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc, labels=labels)
    for key, value in sorted(values.items()):
        family.add_metric(list(key) if isinstance(key, tuple) else [key], value)
    return family


class PlatformCollector:
    """Everything computed at scrape time: the database and the Redis hash of worker events."""

    def __init__(self, with_workspaces: bool) -> None:
        self.with_workspaces = with_workspaces

    def collect(self):
        yield from self._shared()
        for section in (self._cluster, self._nodes, self._ingest, self._budgets):
            try:
                yield from section()
            except Exception:  # one broken figure must not take down the others
                log.exception("metrics: %s failed", section.__name__)

    def _shared(self):
        recorded = shared.read_shared()
        for name, spec in shared.SHARED.items():
            family = Metric(name, spec.help, spec.kind)
            samples = recorded.get(name, [])
            if spec.kind == "histogram":
                samples = sorted(samples, key=lambda s: (s[0] != name + "_bucket", float(s[1].get("le", 0))))
            for sample, labels, value in samples:
                family.add_sample(sample + ("_total" if spec.kind == "counter" else ""), labels, value)
            if spec.kind == "histogram" and not samples:
                for le in [*map(shared._le, spec.buckets), "+Inf"]:
                    family.add_sample(name + "_bucket", {"le": le}, 0)
                family.add_sample(name + "_sum", {}, 0)
                family.add_sample(name + "_count", {}, 0)
            yield family

    def _cluster(self):
        f = billing_metrics.gpu_figures()
        by_pool = ["pool", "model"]
        yield _gauge("gpu_platform_pool_gpus", "GPUs in the pool.", by_pool, f.gpus)
        yield _gauge("gpu_platform_pool_allocated_gpus", "GPUs held by scheduled or running replicas.", by_pool,
                     f.allocated)
        yield _gauge("gpu_platform_pool_used_gpus", "Allocated GPUs that recent usage samples show busy.", by_pool,
                     f.used)
        yield _gauge("gpu_platform_pool_idle_gpus", "Allocated GPUs that recent usage samples do not show busy.",
                     by_pool, {k: max(0.0, f.allocated[k] - f.used[k]) for k in f.allocated})
        yield _gauge("gpu_platform_pending_jobs", "Pending jobs by queue and the code of what blocks them.",
                     ["queue", "reason"], f.pending)
        yield _gauge("gpu_platform_queue_fair_share_gpus", "The queue's fair share of the cluster's GPUs.",
                     ["queue"], f.fair_share)
        yield _gauge("gpu_platform_queue_allocated_gpus", "GPUs held by the queue's jobs (its subtree's).",
                     ["queue"], f.queue_allocated)
        yield _gauge("gpu_platform_queue_deserved_gpus", "The queue's deserved quota.", ["queue"], f.deserved)
        yield _gauge("gpu_platform_agent_last_seen_timestamp_seconds", "Last heartbeat of the node's agent.",
                     ["node"], f.agent_last_seen)

    def _nodes(self):
        # The cluster's Ready condition only: an agent's silence has its own series and alert.
        yield _gauge("gpu_platform_node_ready", "1 while the cluster says the node is Ready, else 0.", ["node", "pool"],
                     {(name, pool): 1.0 if ready else 0.0
                      for name, pool, ready in Node.objects.values_list("name", "pool__name", "ready")})

    def _ingest(self):
        yield _gauge("gpu_platform_usage_ingest_lag_seconds",
                     "Longest delay from measurement to ingest, samples of the last 5 minutes.", [],
                     {(): billing_metrics.ingest_lag_seconds()})

    def _budgets(self):
        if not self.with_workspaces:
            return
        rows = billing_metrics.budget_figures()
        yield _gauge("gpu_platform_budget_amount", "The workspace's monthly budget.", ["workspace", "currency"],
                     {(slug, cur): amount for slug, cur, amount, _ in rows})
        yield _gauge("gpu_platform_budget_spent", "What the workspace spent this month.", ["workspace", "currency"],
                     {(slug, cur): spent for slug, cur, _, spent in rows})
        yield _gauge("gpu_platform_budget_used_ratio", "Spent this month over the budget (1 = 100 %).",
                     ["workspace"], {slug: spent / amount for slug, _, amount, spent in rows})


def token_ok(request) -> bool | None:
    """None: no token configured; else whether the request carries it."""
    token = getattr(settings, "METRICS_TOKEN", "")
    if not token:
        return None
    given = request.headers.get("Authorization", "")
    return given.startswith("Bearer ") and hmac.compare_digest(given[7:].encode(), token.encode())


def metrics_response(request) -> HttpResponse:
    if request.method not in ("GET", "HEAD"):
        return HttpResponse(status=405, headers={"Allow": "GET, HEAD"})
    allowed = token_ok(request)
    if allowed is False:
        return HttpResponse("metrics need the bearer token\n", status=401, content_type="text/plain",
                            headers={"WWW-Authenticate": 'Bearer realm="metrics"'})
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PlatformCollector(with_workspaces=bool(allowed)))
    body = generate_latest(shared.LOCAL) + generate_latest(registry)
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)


class MetricsMiddleware:
    """Outermost: counts every response by status class and answers /metrics before host checks, the SSL
    redirect and sessions, so Prometheus can scrape a pod by its IP over plain HTTP."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path == PATH:
            return metrics_response(request)
        response = self.get_response(request)
        HTTP_RESPONSES.labels(f"{min(max(response.status_code // 100, 1), 5)}xx").inc()
        return response


def _kind(consumer) -> str:
    return type(consumer).__name__.removesuffix("Consumer").lower()


def websocket_opened(consumer) -> None:
    WEBSOCKET_CLIENTS.labels(_kind(consumer)).inc()
    consumer.metrics_counted = True


def websocket_closed(consumer) -> None:
    if getattr(consumer, "metrics_counted", False):
        consumer.metrics_counted = False
        WEBSOCKET_CLIENTS.labels(_kind(consumer)).dec()


_task_started: dict[str, float] = {}


def _task_prerun(task_id=None, **_):
    _task_started[task_id] = time.monotonic()


def _task_postrun(task_id=None, sender=None, **_):
    started = _task_started.pop(task_id, None)
    if started is not None and getattr(sender, "name", "").endswith(".build_excel_export"):
        shared.observe("gpu_platform_report_export_seconds", time.monotonic() - started)


def _task_failure(sender=None, **_):
    shared.inc("gpu_platform_celery_task_failures", task=getattr(sender, "name", "unknown"))


def connect_celery_signals() -> None:
    from celery import signals

    signals.task_prerun.connect(_task_prerun, dispatch_uid="metrics-prerun", weak=False)
    signals.task_postrun.connect(_task_postrun, dispatch_uid="metrics-postrun", weak=False)
    signals.task_failure.connect(_task_failure, dispatch_uid="metrics-failure", weak=False)
