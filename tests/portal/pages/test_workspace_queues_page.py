"""The workspace page: each queue's deserved quota, limit, use and fair share with a 7-day chart, and
the workspace's waiting jobs with their place in the queue, reason and expected start in the viewer's
time zone. An outsider gets a 404 and nothing of it."""

import html as html_text
import json
import re
from datetime import datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest

from billing.services import submit_quoted_job
from portal.console.models import QueueAllocationSample
from portal.services import set_time_zone
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.forecast import forecast_starts
from scheduling.models import Queue

SPEC = """name: {name}
queue: vision-lab
priority: 0
preemptible: false
expectedDuration: 1h
roles:
  - name: main
    image: busybox
    resources: {{gpu: 8}}
    nodePool: h100
"""


@pytest.fixture
def waiting(cluster, clock, run):
    """Two 8-GPU jobs run on the h100 pool; a third waits for one of them."""
    backend = SimulatedBackend(speedup=60, failure_rate=0, clock=clock)
    for n in range(2):
        submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=SPEC.format(name=f"run{n}"))
    run(backend, clock)
    clock.advance(2)
    job = submit_quoted_job(user=cluster.carol, workspace=cluster.vision, spec=SPEC.format(name="waits"))
    run(backend, clock)
    job.refresh_from_db()
    return job


def row(html, selector_attr, value):
    found = re.search(rf'<tr {selector_attr}="{re.escape(str(value))}">(.*?)</tr>', html, re.S)
    assert found, f"no row {selector_attr}={value}"
    return found.group(1)


def field(row_html, name):
    found = re.search(rf'<td data-field="{name}">(.*?)</td>', row_html, re.S)
    assert found, f"no field {name}"
    return html_text.unescape(found.group(1).strip())


def test_each_queue_shows_its_figures(cluster, waiting, client):
    client.force_login(cluster.carol)
    html = client.get("/w/vision-lab/").content.decode()
    vision = row(html, "data-queue", "vision-lab")
    assert [field(vision, f) for f in ("deserved", "limit", "allocated", "pending")] == ["16", "none", "16", "1"]
    assert float(field(vision, "fair_share")) > 0
    community = row(html, "data-queue", "community")
    assert [field(community, f) for f in ("deserved", "allocated", "pending")] == ["0", "0", "0"]
    assert 'data-queue="nlp-group"' not in html


def test_the_waiting_job_shows_position_reason_and_start_in_the_viewers_zone(cluster, waiting, client, clock):
    set_time_zone(cluster.carol, "Asia/Tokyo")
    client.force_login(cluster.carol)
    html = client.get("/w/vision-lab/").content.decode()
    line = row(html, "data-job", waiting.pk)
    assert field(line, "position") == "1"
    assert field(line, "reason") == waiting.pending_reason and waiting.pending_reason
    window = forecast_starts(clock.now)[waiting.pk]
    tokyo = ZoneInfo("Asia/Tokyo")
    shown = re.findall(r"<time datetime=\"([^\"]+)\">([^<]+)</time>", field(line, "expected-start"))
    earliest, latest = window.earliest.astimezone(tokyo), window.latest.astimezone(tokyo)
    # the running jobs end 59 s from now: both ends of the range fall in one minute, shown once
    assert earliest.strftime("%H:%M") == latest.strftime("%H:%M")
    assert shown == [(earliest.isoformat(), earliest.strftime("%Y-%m-%d %H:%M"))]
    assert window.earliest > clock.now


def test_the_chart_embeds_the_queues_samples_of_the_last_7_days(cluster, waiting, client, clock):
    vision = Queue.objects.get(name="vision-lab")
    QueueAllocationSample.objects.bulk_create(
        QueueAllocationSample(queue=vision, time=clock.now - timedelta(minutes=5 * h), allocated_gpus=Decimal(h),
                              deserved_gpus=Decimal(16), fair_share_gpus=Decimal(20))
        for h in (1, 2, 3, 12 * 24 * 8))   # the last one is older than 7 days
    client.force_login(cluster.alice)
    html = client.get("/w/vision-lab/").content.decode()
    data = re.search(r'<script id="workspace-queue-history" type="application/json">(.*?)</script>', html, re.S)
    charts = json.loads(data.group(1))
    assert set(charts) == {"community", "vision-lab"}
    assert charts["vision-lab"]["allocated"] == [3.0, 2.0, 1.0]
    assert charts["vision-lab"]["deserved"] == [16.0] * 3 and charts["community"]["times"] == []
    assert 'data-queue-history="vision-lab"' in html and 'data-queue-history="community"' not in html
    assert "/static/console/queue_history.js" in html and "/static/vendor/plotly-4.1.2.min.js" in html
    assert "<script>" not in html   # no inline script under the CSP


def test_an_outsider_gets_a_404_and_none_of_the_figures(cluster, waiting, client):
    client.force_login(cluster.bob)
    response = client.get("/w/vision-lab/")
    assert response.status_code == 404
    assert "waits" not in response.content.decode() and "queue-figures" not in response.content.decode()
    own = client.get("/w/nlp-group/").content.decode()
    assert 'id="no-waiting-jobs"' in own and f'data-job="{waiting.pk}"' not in own
    assert 'data-queue="nlp-group"' in own and 'data-queue="vision-lab"' not in own


def test_a_range_shows_both_ends_and_an_open_end_says_it_depends_on_jobs_ending(cluster, waiting):
    from django.template.loader import render_to_string
    from django.utils import timezone

    from portal.workspace_queues import WaitingJob
    from scheduling.forecast import StartWindow

    start = datetime(2026, 3, 1, 23, 50, tzinfo=ZoneInfo("UTC"))
    rows = [WaitingJob(waiting, 1, StartWindow(start, start + timedelta(minutes=20))),
            WaitingJob(waiting, 2, StartWindow(start, start + timedelta(days=2))),
            WaitingJob(waiting, 3, StartWindow(start, None)), WaitingJob(waiting, 4, None)]
    with timezone.override("Asia/Tokyo"):   # 08:50 on 2 March there
        html = render_to_string("portal/_workspace_queues.html", {"queues": [], "waiting": rows})
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r'<td data-field="expected-start">(.*?)</td>', html)]
    assert cells == ["2026-03-02 08:50 – 09:10", "2026-03-02 08:50 – 2026-03-04 08:50",
                     "not before 2026-03-02 08:50; depends on jobs ending", "unknown"]
