"""Per-queue allocation history: the beat's sampling task (on the platform clock), its retention, and the
7-day chart data of the console's queue page (operators only)."""

import json
import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.conf import settings
from django.utils import timezone

from portal.console.models import QueueAllocationSample
from portal.tasks import purge_queue_allocation_history, sample_queue_allocation
from scheduling.models import Queue


def samples(queue):
    return list(QueueAllocationSample.objects.filter(queue__name=queue).order_by("time").values_list(
        "time", "allocated_gpus", "deserved_gpus", "fair_share_gpus"))


def chart_data(html: str) -> dict:
    found = re.search(r'<script id="queue-history-data" type="application/json">(.*?)</script>', html, re.S)
    assert found, "no embedded chart data"
    return json.loads(found.group(1))


def add_sample(queue, time, allocated, deserved="16", fair_share="20"):
    return QueueAllocationSample.objects.create(queue=queue, time=time, allocated_gpus=Decimal(allocated),
                                                deserved_gpus=Decimal(deserved), fair_share_gpus=Decimal(fair_share))


@pytest.mark.django_db
def test_the_task_samples_every_queue_on_the_platform_clock(cluster, submit, backend, clock, run):
    from portal.console.selectors import queue_lines

    submit(cluster, "train", gpus=8)
    run(backend, clock)
    assert sample_queue_allocation() == Queue.objects.count() == 4
    shares = {line.name: line.fair_share for line in queue_lines(clock.now)}
    [(time, allocated, deserved, fair_share)] = samples("vision-lab")
    assert (time, allocated, deserved) == (clock.now, Decimal(8), Decimal(16))
    assert fair_share == Decimal(str(round(shares["vision-lab"], 3))) and fair_share >= 8
    assert samples("root")[0][1:3] == (Decimal(8), Decimal(80))  # the parent holds what its subtree holds
    assert samples("nlp-group")[0][1] == 0


@pytest.mark.django_db
def test_one_sample_per_interval_even_when_the_beat_fires_twice(cluster, clock):
    assert settings.QUEUE_HISTORY_INTERVAL_S == 300
    assert sample_queue_allocation() == 4
    assert sample_queue_allocation() == 0              # the same moment again
    clock.advance(100)
    assert sample_queue_allocation() == 0              # under half an interval after the last
    clock.advance(200)
    assert sample_queue_allocation() == 4
    assert [t for t, *_ in samples("root")] == [clock.now - timedelta(seconds=300), clock.now]


@pytest.mark.django_db
def test_the_sample_follows_a_quota_change(cluster, operator, clock):
    from portal.console import services

    sample_queue_allocation()
    vision = Queue.objects.get(name="vision-lab")
    services.save_queue(operator, vision, {"name": "vision-lab", "parent": "root", "deserved_gpus": "30",
                                           "over_quota_weight": "1", "priority": "0"})
    clock.advance(settings.QUEUE_HISTORY_INTERVAL_S)
    sample_queue_allocation()
    assert [d for _, _, d, _ in samples("vision-lab")] == [Decimal(16), Decimal(30)]


@pytest.mark.django_db
def test_samples_past_the_retention_are_purged(cluster, clock):
    assert settings.QUEUE_HISTORY_RETENTION_DAYS == 30
    vision = Queue.objects.get(name="vision-lab")
    old = add_sample(vision, clock.now - timedelta(days=30, seconds=1), "4")
    kept = add_sample(vision, clock.now - timedelta(days=29, hours=23), "5")
    assert purge_queue_allocation_history() == 1
    assert list(QueueAllocationSample.objects.values_list("pk", flat=True)) == [kept.pk]
    assert not QueueAllocationSample.objects.filter(pk=old.pk).exists()


def test_the_beat_runs_both_tasks():
    beat = {entry["task"]: entry["schedule"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert beat["portal.tasks.sample_queue_allocation"] == settings.QUEUE_HISTORY_INTERVAL_S
    assert "portal.tasks.purge_queue_allocation_history" in beat


@pytest.mark.django_db
def test_the_chart_holds_the_last_7_days_only(admin_client, cluster, clock):
    vision, nlp = Queue.objects.get(name="vision-lab"), Queue.objects.get(name="nlp-group")
    add_sample(vision, clock.now - timedelta(days=7, minutes=1), "9")       # too old
    add_sample(vision, clock.now - timedelta(days=6), "3")
    add_sample(vision, clock.now - timedelta(hours=1), "12")
    add_sample(vision, clock.now - timedelta(minutes=55), "20")
    add_sample(vision, clock.now + timedelta(minutes=5), "7")               # after now: not yet
    add_sample(nlp, clock.now - timedelta(hours=1), "40")                   # another queue
    html = admin_client.get("/console/queues/vision-lab/history/").content.decode()
    data = chart_data(html)
    local = [timezone.localtime(clock.now - d).strftime("%Y-%m-%d %H:%M:%S")
             for d in (timedelta(days=6), timedelta(hours=1), timedelta(minutes=55))]
    # a silence longer than two intervals breaks the line
    assert data["times"] == [local[0], None, local[1], local[2]]
    assert data["allocated"] == [3.0, None, 12.0, 20.0]
    assert data["deserved"] == [16.0, None, 16.0, 16.0] and data["fair_share"] == [20.0, None, 20.0, 20.0]
    assert data["start"] == timezone.localtime(clock.now - timedelta(days=7)).strftime("%Y-%m-%d %H:%M:%S")
    assert data["end"] == timezone.localtime(clock.now).strftime("%Y-%m-%d %H:%M:%S")
    assert 'id="queue-history-chart"' in html and "/static/vendor/plotly-4.1.2.min.js" in html
    assert re.search(r'id="history-peak">20.00<', html) and re.search(r'id="history-samples">3<', html)
    assert "<script>" not in html  # no inline script (CSP)


@pytest.mark.django_db
def test_a_queue_without_samples_says_so(admin_client, cluster, clock):
    html = admin_client.get("/console/queues/community/history/").content.decode()
    assert 'id="history-empty"' in html and 'id="queue-history-chart"' not in html
    assert chart_data(html)["times"] == []


@pytest.mark.django_db
def test_the_history_is_for_operators_only(client, cluster, clock):
    add_sample(Queue.objects.get(name="vision-lab"), clock.now - timedelta(hours=1), "12")
    url = "/console/queues/vision-lab/history/"
    assert client.get(url).status_code == 302
    for tenant in (cluster.alice, cluster.bob):  # vision-lab's own owner and the other workspace's
        client.force_login(tenant)
        response = client.get(url)
        assert response.status_code == 403 and b"queue-history-data" not in response.content
    client.force_login(cluster.admin)
    assert client.get(url).status_code == 200
    assert client.get("/console/queues/no-such-queue/history/").status_code == 404
