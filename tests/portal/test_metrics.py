"""GET /metrics: what it exports, its token, and figures from the database, Redis and this process."""

from datetime import timedelta
from decimal import Decimal

import pytest
from prometheus_client.parser import text_string_to_metric_families

from billing.metering.ingest import ingest
from billing.models import Budget, UsageSample
from billing.services import submit_quoted_job
from scheduling import metrics as shared
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.cycle.run import CycleReport
from scheduling.models import Job, JobState, Node, Replica
from tests.scheduling.cycle.test_cycle import spec

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_shared(redis_server):
    shared.reset_shared()
    yield
    shared.reset_shared()


@pytest.fixture
def backend(clock):
    return SimulatedBackend(speedup=60, failure_rate=0, clock=clock)


def scrape(client, **headers) -> dict[tuple[str, tuple], float]:
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(response.content.decode())
            for s in family.samples}


def value(samples, name, **labels):
    return samples[(name, tuple(sorted(labels.items())))]


def test_pool_gpus_allocation_and_pending_reasons_come_from_the_database(client, cluster, backend, clock, run):
    for n in range(3):  # 16 H100s: two 8-GPU jobs run, the third waits
        submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec(f"big-{n}", gpus=8))
    run(backend, clock)
    samples = scrape(client)
    assert value(samples, "gpu_platform_pool_gpus", pool="h100", model="H100-80GB") == 16
    assert value(samples, "gpu_platform_pool_allocated_gpus", pool="h100", model="H100-80GB") == 16
    assert value(samples, "gpu_platform_pool_allocated_gpus", pool="rtx4090", model="RTX-4090-24GB") == 0
    pending = {labels: v for (name, labels), v in samples.items() if name == "gpu_platform_pending_jobs"}
    assert sum(pending.values()) == 1
    (labels,) = pending
    reason = dict(labels)["reason"]
    assert dict(labels)["queue"] == "vision-lab" and reason and " " not in reason  # a code, not the text
    assert value(samples, "gpu_platform_queue_allocated_gpus", queue="vision-lab") == 16
    assert value(samples, "gpu_platform_queue_allocated_gpus", queue="root") == 16
    assert value(samples, "gpu_platform_queue_fair_share_gpus", queue="vision-lab") > 0
    assert value(samples, "gpu_platform_queue_deserved_gpus", queue="vision-lab") == 16


def test_used_and_idle_gpus_follow_recent_usage_samples(client, cluster, backend, clock, run):
    submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec("two", gpus=2))
    run(backend, clock)
    replica = Replica.objects.get()
    busy, quiet = replica.gpu_indices
    node = replica.node
    for index, util in ((busy, 80.0), (quiet, 0.0)):
        UsageSample.objects.create(id=f"00000000-0000-0000-0000-00000000000{index}", node=node, ts=clock.now,
                                   gpu_uuid=f"GPU-{node.name}-{index}", gpu_index=index, gpu_util_pct=util,
                                   mem_used_mib=100, interval_s=10)
    samples = scrape(client)
    pool = {"pool": "h100", "model": "H100-80GB"}
    assert value(samples, "gpu_platform_pool_allocated_gpus", **pool) == 2
    assert value(samples, "gpu_platform_pool_used_gpus", **pool) == 1
    assert value(samples, "gpu_platform_pool_idle_gpus", **pool) == 1
    clock.advance(600)  # the samples are old now: nothing counts as used
    assert value(scrape(client), "gpu_platform_pool_used_gpus", **pool) == 0


def test_a_cycle_recorded_in_the_worker_is_served_by_the_web_process(client, db):
    shared.record_cycle(CycleReport(binds=3, evicts=1, seconds=0.3))
    shared.record_cycle(CycleReport(binds=2, seconds=2.0))
    samples = scrape(client)
    assert value(samples, "gpu_platform_scheduler_cycle_seconds_count") == 2
    assert value(samples, "gpu_platform_scheduler_cycle_seconds_bucket", le="0.5") == 1
    assert value(samples, "gpu_platform_scheduler_cycle_seconds_bucket", le="+Inf") == 2
    assert value(samples, "gpu_platform_scheduler_cycle_seconds_sum") == pytest.approx(2.3)
    assert value(samples, "gpu_platform_scheduler_decisions_total", kind="binds") == 5
    assert value(samples, "gpu_platform_scheduler_last_cycle_decisions", kind="binds") == 2
    assert value(samples, "gpu_platform_scheduler_last_cycle_timestamp_seconds") > 0


def test_the_celery_task_and_the_cycle_record_into_redis(cluster, clock, settings):
    from scheduling.tasks import scheduling_cycle

    settings.SCHEDULER_BACKEND = "simulated"
    scheduling_cycle()
    counts = [v for sample, _, v in shared.read_shared()["gpu_platform_scheduler_cycle_seconds"]
              if sample.endswith("_count")]
    assert counts == [1]


def test_celery_failures_and_export_durations(client, db):
    from portal import metrics

    class Task:
        name = "billing.reports.tasks.build_excel_export"

    metrics._task_failure(sender=Task)
    metrics._task_prerun(task_id="t1")
    metrics._task_postrun(task_id="t1", sender=Task)
    samples = scrape(client)
    assert value(samples, "gpu_platform_celery_task_failures_total", task=Task.name) == 1
    assert value(samples, "gpu_platform_report_export_seconds_count") == 1


def test_ingest_counts_stored_and_refused_samples(client, cluster, clock):
    before = scrape(client)
    node = Node.objects.get(name="h100-01")
    good = {"id": "11111111-1111-1111-1111-111111111111", "ts": clock.now.isoformat(), "gpu_uuid": "GPU-h100-01-0",
            "gpu_index": 0, "gpu_util_pct": 50, "mem_used_mib": 10, "interval_s": 10}
    result = ingest(node, {"samples": [good, {"id": "bad"}]})
    assert len(result.accepted) == 1 and len(result.rejected) == 1
    after = scrape(client)
    for name in ("gpu_platform_usage_samples_ingested_total", "gpu_platform_usage_samples_refused_total"):
        assert value(after, name) - value(before, name) == 1
    assert value(after, "gpu_platform_usage_ingest_lag_seconds") >= 0


def test_responses_are_counted_by_status_class(client, db):
    before = scrape(client)
    client.get("/no-such-page/")
    after = scrape(client)
    assert value(after, "gpu_platform_http_responses_total", status_class="4xx") > value(
        before, "gpu_platform_http_responses_total", status_class="4xx")


def test_no_workspace_series_without_a_token(client, cluster):
    Budget.objects.create(workspace=cluster.vision, amount=Decimal("100.00"))
    body = client.get("/metrics").content.decode()
    assert "workspace=" not in body and "gpu_platform_budget" not in body
    assert 'job=' not in body


def test_with_a_token_it_is_required_and_workspace_series_appear(client, cluster, settings, clock):
    settings.METRICS_TOKEN = "s3cret"
    Budget.objects.create(workspace=cluster.vision, amount=Decimal("100.00"))
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    samples = scrape(client, HTTP_AUTHORIZATION="Bearer s3cret")
    assert value(samples, "gpu_platform_budget_amount", workspace="vision-lab", currency="USD") == 100
    assert value(samples, "gpu_platform_budget_used_ratio", workspace="vision-lab") == 0


def test_metrics_answer_any_host_header_and_plain_http(client, db, settings):
    settings.ALLOWED_HOSTS = ["portal.example"]
    settings.SECURE_SSL_REDIRECT = True
    assert client.get("/metrics", HTTP_HOST="10.1.2.3:8000").status_code == 200


def test_pending_jobs_counted_by_state(client, cluster, backend, clock, run):
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec("x", gpus=1))
    Job.objects.filter(pk=job.pk).update(state=JobState.CANCELLED, finished=clock.now - timedelta(seconds=1))
    samples = scrape(client)
    assert not any(name == "gpu_platform_pending_jobs" for name, _ in samples)


def test_node_readiness_is_exported_per_node(client, cluster):
    Node.objects.filter(name="h100-02").update(ready=False)
    samples = scrape(client)
    assert value(samples, "gpu_platform_node_ready", node="h100-01", pool="h100") == 1
    assert value(samples, "gpu_platform_node_ready", node="h100-02", pool="h100") == 0


def test_a_real_celery_task_that_raises_is_counted_by_the_signal(client, db):
    from portal.celery import app

    @app.task(name="tests.metrics.always_fails", bind=False)
    def always_fails():
        raise RuntimeError("boom")

    always_fails.apply()   # runs the task through Celery's tracer, which sends task_failure
    always_fails.apply()
    samples = scrape(client)
    assert value(samples, "gpu_platform_celery_task_failures_total", task="tests.metrics.always_fails") == 2
