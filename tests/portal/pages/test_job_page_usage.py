"""The tenant job page: per-replica GPU utilisation and memory from the usage samples (embedded for the
charts and served as JSON), efficiency from the ledger, cost so far and the final cost against the
estimate at submission, 'Clone and edit' for those who may submit; scoped to the caller's workspaces."""

import json
import re
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from tests_job_specs import job_spec

from billing.ledger.jobs import estimate_check, finalize_job_cost
from billing.ledger.posting import post_ledger
from billing.metering.series import job_usage_series
from billing.models import ChargeLine, UsageSample
from billing.services import submit_quoted_job
from portal.models import Role
from scheduling.models import Job, JobState, Node, Replica
from tests.factories import MembershipFactory, UserFactory

START = datetime(2026, 3, 2, 14, 0, tzinfo=UTC)  # a Monday, peak hours


def submit(user, workspace, name, **kwargs):
    return submit_quoted_job(user=user, workspace=workspace, spec=job_spec(name, **kwargs))


def place(job, *, index=0, node="h100-01", gpus=(0,), start=START, end=None, slice_=None, attempt=0):
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, started=start)
    return Replica.objects.create(job=job, role="main", index=index, attempt=attempt,
                                  state=JobState.RUNNING if end is None else JobState.PREEMPTED,
                                  node=Node.objects.get(name=node), gpu_indices=list(gpus),
                                  slice=slice_ or {"kind": "whole", "gpu_milli": 1000}, started=start, ended=end)


def sample(replica, at, *, gpu=0, util=50.0, mem=1024, interval=1800):
    UsageSample.objects.create(id=uuid.uuid4(), node=replica.node, ts=at, gpu_uuid=f"GPU-{gpu}", gpu_index=gpu,
                               replica=replica, gpu_util_pct=util, mem_used_mib=mem, interval_s=interval)


def embedded(html: str) -> dict:
    return json.loads(re.search(r'<script id="job-usage-data" type="application/json">(.*?)</script>', html,
                                re.S).group(1))


def half_hours(n: int):
    return [START + timedelta(minutes=30 * k) for k in range(n)]


@pytest.fixture
def viewer(cluster):
    user = UserFactory(username="dave", password="dave-pass-123")
    MembershipFactory(user=user, workspace=cluster.vision, role=Role.VIEWER)
    return user


# --------------------------------------------------------------------------- charts


def test_per_replica_utilisation_and_memory_over_time(client, cluster):
    job = submit(cluster.alice, cluster.vision, "two-replicas", gpus=2, min=2, max=2)
    first = place(job, gpus=(0, 1))
    second = place(job, index=1, node="h100-02", gpus=(0, 1))
    for at in half_hours(4):
        sample(first, at, gpu=0, util=20, mem=1000)
        sample(first, at, gpu=1, util=60, mem=3000)  # the replica: mean 40 %, 4000 MiB
        sample(second, at, gpu=0, util=90, mem=500)
        sample(second, at, gpu=1, util=90, mem=500)
    client.force_login(cluster.carol)
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    data = embedded(html)
    assert data["has_samples"] and data["bucket_s"] == 1800
    by_label = {p["label"]: p for p in data["placements"]}
    assert set(by_label) == {"main-0", "main-1"}
    assert by_label["main-0"]["util"] == [40.0] * 4 and by_label["main-0"]["mem_mib"] == [4000.0] * 4
    assert by_label["main-1"]["util"] == [90.0] * 4 and by_label["main-1"]["mean_util"] == 90.0
    assert by_label["main-0"]["node"] == "h100-01" and len(by_label["main-0"]["times"]) == 4
    assert 'src="/static/vendor/plotly-4.1.2.min.js"' in html and 'src="/static/portal/job_usage.js"' in html
    assert f'data-src="/jobs/{job.pk}/usage/"' in html
    assert client.get(f"/jobs/{job.pk}/usage/").json() == data  # what the page re-reads while the job runs


def test_a_silent_agent_is_a_gap_and_long_jobs_are_averaged(cluster):
    job = submit(cluster.alice, cluster.vision, "gappy")
    replica = place(job)
    times = half_hours(6)
    for at in times[:2] + times[4:]:  # nothing for an hour
        sample(replica, at, util=80)
    (series,) = job_usage_series(job).placements
    assert series.util == [80.0, 80.0, None, None, 80.0, 80.0]
    averaged = job_usage_series(job, max_points=3)
    assert averaged.bucket_s == 4500 and averaged.placements[0].util == [80.0, 80.0, 80.0]


def test_a_job_without_samples_says_so(client, cluster):
    job = submit(cluster.alice, cluster.vision, "quiet")
    client.force_login(cluster.alice)
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    assert embedded(html)["has_samples"] is False
    assert re.search(r'<p class="empty" id="no-samples" >No usage samples yet: the job has not started', html)


def test_the_usage_data_is_the_callers_only(client, cluster, viewer):
    job = submit(cluster.alice, cluster.vision, "private")
    sample(place(job), START)
    client.force_login(viewer)
    assert client.get(f"/jobs/{job.pk}/usage/").status_code == 200  # viewers see
    client.force_login(cluster.bob)
    for url in (f"/jobs/{job.pk}/usage/", f"/jobs/{job.pk}/", f"/jobs/{job.pk}/?partial=cost"):
        response = client.get(url)
        assert response.status_code == 404 and b"private" not in response.content
    client.logout()
    assert client.get(f"/jobs/{job.pk}/usage/").status_code == 302  # to the login page


# --------------------------------------------------------------------------- efficiency and cost


def test_efficiency_is_used_over_held_gpu_hours_from_the_ledger(client, cluster):
    job = submit(cluster.alice, cluster.vision, "half-busy")
    replica = place(job, end=START + timedelta(hours=2))
    for at in half_hours(4):
        sample(replica, at, util=50)  # 4 x 0.5 h at 50 %: 1 GPU-hour used of 2 held
    post_ledger(now=START + timedelta(hours=3))
    lines = ChargeLine.objects.filter(job=job)
    assert sum(line.allocated_gpu_hours for line in lines) == 2 and sum(line.used_gpu_hours for line in lines) == 1
    client.force_login(cluster.alice)
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    assert '<strong id="job-efficiency">50.0 %</strong>: 1.00 of the 2.00 GPU-hours held were used' in html
    assert "held time without samples counts as unused" in html


def test_efficiency_counts_against_the_slice_held(client, cluster):
    spec = ("name: half\nroles:\n  - name: main\n    image: busybox\n"
            "    resources: {gpu: 0.5, gpuMemory: 10Gi}\n    nodePool: a100-spot\n")
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec)
    replica = place(job, node="a100-spot-01", end=START + timedelta(hours=1),
                    slice_={"kind": "fraction", "gpu_milli": 500, "gpu_mem_mib": 10240})
    for at in half_hours(2):
        sample(replica, at, util=40)  # 40 % of the device is 80 % of half a GPU
    post_ledger(now=START + timedelta(hours=2))
    client.force_login(cluster.alice)
    assert '<strong id="job-efficiency">80.0 %</strong>' in client.get(f"/jobs/{job.pk}/").content.decode()


def test_efficiency_of_a_job_that_reports_no_utilisation(client, cluster):
    job = submit(cluster.alice, cluster.vision, "mig-like")
    place(job, end=START + timedelta(hours=1))
    post_ledger(now=START + timedelta(hours=2))
    client.force_login(cluster.alice)
    assert '<strong id="job-efficiency">not measured</strong>' in client.get(f"/jobs/{job.pk}/").content.decode()


def test_cost_so_far_is_the_ledgers_sum_and_its_part_is_reread(client, cluster, clock):
    job = submit(cluster.alice, cluster.vision, "running")
    place(job, start=clock.now - timedelta(hours=3))
    post_ledger(now=clock.now)
    total = sum(ChargeLine.objects.filter(job=job).values_list("cost", flat=True))
    assert total > 0
    client.force_login(cluster.alice)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert f'<strong id="cost-so-far">${total}</strong>' in page
    assert f'data-src="/jobs/{job.pk}/?partial=cost"' in page
    part = client.get(f"/jobs/{job.pk}/", {"partial": "cost"}).content.decode()
    assert part.startswith('<section class="card" id="job-cost">') and "<html" not in part
    assert f'<strong id="cost-so-far">${total}</strong>' in part
    clock.advance(3600)
    post_ledger(now=clock.now)
    later = sum(ChargeLine.objects.filter(job=job).values_list("cost", flat=True))
    assert later > total
    assert f'<strong id="cost-so-far">${later}</strong>' in client.get(f"/jobs/{job.pk}/?partial=cost").content.decode()


def test_an_ended_job_shows_its_final_cost_against_the_estimate(client, cluster):
    job = submit(cluster.alice, cluster.vision, "ended", hours=1)
    place(job, end=START + timedelta(hours=4))  # ran 4 h on a 1 h estimate
    post_ledger(now=START + timedelta(hours=5))
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED, finished=START + timedelta(hours=4))
    job = finalize_job_cost(job.pk)
    final = sum(ChargeLine.objects.filter(job=job).values_list("cost", flat=True))
    high = Decimal(job.quote["estimate_high"])
    assert job.final_cost == final > high
    check = estimate_check(job)
    assert check.verdict == "above" and check.difference == final - high
    client.force_login(cluster.alice)
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    assert f'<strong id="final-cost">${final:.2f}</strong>' in html
    text = re.sub(r"\s+", " ", re.search(r'<p id="estimate-vs-final"[^>]*>(.*?)</p>', html, re.S).group(1))
    percent = (final - high) / high * 100
    assert (f"Estimated at submission ${job.quote['estimate_low']}–${job.quote['estimate_high']}; final ${final}: "
            f"<strong>${final - high} ({percent:.1f} %) above the high estimate</strong>.") == text
    assert embedded(html)["final"] is True and 'data-active="0"' in html


def test_a_final_cost_within_the_estimate(cluster):
    job = submit(cluster.alice, cluster.vision, "on-budget")
    low, high = Decimal(job.quote["estimate_low"]), Decimal(job.quote["estimate_high"])
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED, final_cost=(low + high) / 2, currency="USD")
    job.refresh_from_db()
    check = estimate_check(job)
    assert (check.verdict, check.difference, check.percent) == ("within", 0, None)
    Job.objects.filter(pk=job.pk).update(final_cost=low - Decimal("0.50"))
    job.refresh_from_db()
    assert (estimate_check(job).verdict, estimate_check(job).difference) == ("below", Decimal("0.50"))


# --------------------------------------------------------------------------- who may act


@pytest.mark.parametrize(("who", "acts"), [("alice", True), ("carol", True), ("finance", False), ("viewer", False)])
def test_clone_and_cancel_only_for_those_who_may_submit(client, cluster, viewer, who, acts):
    job = submit(cluster.alice, cluster.vision, "cloneable")
    client.force_login(viewer if who == "viewer" else getattr(cluster, who))
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    assert (f'href="/submit/?from={job.pk}" id="clone-job"' in html) is acts
    assert ('id="cancel-job"' in html) is acts
    assert 'id="events"' in html and 'id="job-log"' in html  # events and logs stay for everyone
    Job.objects.filter(pk=job.pk).update(state=JobState.FAILED)
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    assert (f'href="/submit/?from={job.pk}"' in html) is acts  # an ended job can be cloned too
    assert 'id="cancel-job"' not in html


def test_the_header_says_who_submitted_and_what_it_asks(client, cluster, clock):
    job = submit(cluster.carol, cluster.vision, "header", gpus=2)
    clock.advance(600)
    client.force_login(cluster.alice)
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    assert '<strong id="job-submitter">carol</strong>' in html
    assert re.search(r'<span id="job-gpus">2 GPUs · exclusive on H100-80GB</span>', html)
    assert re.search(r'<span id="job-timing" data-src="[^"]*\?partial=timing">waiting 10 min</span>', html)
