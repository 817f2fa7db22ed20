"""What a quote option says for the stated duration: the total, the price per GPU-hour, the saving
against exclusive whole GPUs, the expected start from the cluster's nodes, the cheapest and the
earliest flags; and the duration itself (asked, stated by the spec, or the 2 h default). The starts come
from behind the scheduling face and are kept while the cluster stays the same."""

from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from billing.services import quote_spec, submit_quoted_job
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.core.session import Session
from scheduling.models import Job
from scheduling.services import read_spec

FRACTION_JOB = """\
name: notebook
roles:
  - name: main
    image: jupyter/base:latest
    sharing: fraction
    resources: {gpu: 0.5, gpuMemory: 10Gi, cpu: 4, memory: 16Gi}
    gpuModel: A100-80GB
"""
ONE_RTX = """\
name: one-rtx
roles:
  - name: main
    image: busybox
    resources: {gpu: 1}
    nodePool: rtx4090
"""


@pytest.fixture
def alice(cluster, clock):
    """alice's API client; the platform clock stands at noon (peak hours) whatever the hour."""
    api = APIClient()
    api.force_authenticate(cluster.alice)
    return api


def quote(api, spec, **extra):
    return api.post("/api/v1/quotes/", {"workspace": "vision-lab", "spec": spec, **extra}, format="json")


def options(response):
    assert response.status_code == 200, response.json()
    return {o["id"]: o for o in response.json()["options"]}


def test_an_option_tells_total_price_per_gpu_hour_and_saving_for_the_assumed_2_hours(alice):
    """0.5 A100 + 4 CPU + 16 GiB = 1.06/h, spot 60 % off = 0.424/h; on a whole A100 1.96/h -> 0.784/h."""
    response = quote(alice, FRACTION_JOB)
    body = response.json()
    assert (body["duration_hours"], body["duration_source"], body["expected_duration_hours"]) == ("2", "default", "2.00")
    option = options(response)["a100-spot.fraction.now"]
    assert option["duration_hours"] == "2"
    assert option["total"] == option["estimate_low"] == "0.85"  # 0.424 x 2 = 0.848
    assert option["gpus"] == "0.5"
    assert option["price_per_gpu_hour"] == "0.8480"  # 0.848 / (0.5 GPU x 2 h)
    assert option["exclusive_total"] == "1.57"  # 0.784 x 2 = 1.568
    assert option["saving"] == "0.72" and option["saving_percent"] == "45.9"  # 0.72 / 1.568
    assert option["price_per_hour"] == "0.4240"  # the existing fields stay as they were
    whole = options(response)["a100-spot.exclusive.now"]
    assert (whole["saving"], whole["saving_percent"], whole["total"]) == ("0.00", "0.0", "1.57")
    assert option["tradeoff_tags"] == ["shared GPU", "reclaimable"] and len(option["tradeoffs"]) == 2


def test_the_duration_asked_for_the_spec_and_the_default(alice):
    asked = options(quote(alice, FRACTION_JOB, duration_hours="3"))["a100-spot.fraction.now"]
    assert (asked["total"], asked["duration_hours"], asked["price_per_gpu_hour"]) == ("1.27", "3", "0.8480")
    body = quote(alice, FRACTION_JOB, duration_hours="0.5").json()
    assert (body["duration_hours"], body["duration_source"]) == ("0.5", "request")
    stated = quote(alice, FRACTION_JOB + "expectedDuration: 10h\n").json()
    assert (stated["duration_hours"], stated["duration_source"]) == ("10", "spec")
    assert quote(alice, FRACTION_JOB + "expectedDuration: 10h\n", duration_hours=1).json()["duration_hours"] == "1"


@pytest.mark.parametrize("hours", ["0", "-1", "abc", "3000", "NaN", "Infinity", "1e400", "0.001", ""])
def test_a_bad_duration_is_a_400_problem_and_submits_nothing(alice, hours):
    for url in ("/api/v1/quotes/", "/api/v1/jobs/"):
        response = alice.post(url, {"workspace": "vision-lab", "spec": FRACTION_JOB, "duration_hours": hours},
                              format="json")
        assert response.status_code == 400, (url, hours, response.content)
        assert response["Content-Type"].startswith("application/problem+json")
        assert [e["field"] for e in response.json()["errors"]] == ["duration_hours"]
    assert not Job.objects.exists()


def test_a_job_is_submitted_for_the_duration_it_was_quoted_for(alice):
    response = alice.post("/api/v1/jobs/", {"workspace": "vision-lab", "spec": FRACTION_JOB, "duration_hours": "3",
                                            "option": "a100-spot.fraction.now"}, format="json")
    assert response.status_code == 201, response.json()
    job = Job.objects.get()
    assert job.expected_duration_s == 3 * 3600
    assert (job.quote["total"], job.quote["expected_duration_hours"]) == ("1.27", "3.00")
    plain = alice.post("/api/v1/jobs/", {"workspace": "vision-lab", "spec": FRACTION_JOB}, format="json")
    assert Job.objects.get(pk=plain.json()["id"]).expected_duration_s == 2 * 3600  # the default quote's 2 h


def test_one_cheapest_and_one_earliest(alice):
    found = options(quote(alice, FRACTION_JOB))
    cheapest = [o for o in found.values() if o["cheapest"]]
    earliest = [o for o in found.values() if o["earliest"]]
    assert len(cheapest) == 1 and len(earliest) == 1
    assert Decimal(cheapest[0]["total"]) == min(Decimal(o["total"]) for o in found.values())
    # noon: off-peak options start at midnight, the "now" ones now; the earliest is the cheapest that starts now
    assert cheapest[0]["when"] == "off-peak" and cheapest[0]["expected_start"] == cheapest[0]["starts_at"]
    starting_now = [o for o in found.values() if o["expected_start"] == "now"]
    assert earliest[0] == min(starting_now, key=lambda o: Decimal(o["total"]))
    assert all(o["starts_now"] and o["can_start_now"] for o in starting_now)


def _fill(cluster, clock, run, spec):
    submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec)
    run(SimulatedBackend(speedup=1, failure_rate=0, clock=clock), clock)


def test_a_full_pool_queues_and_is_not_the_earliest(alice, cluster, clock, run):
    # every GPU of rtx4090 (4 nodes x 2) taken
    _fill(cluster, clock, run, ONE_RTX.replace("one-rtx", "filler").replace("resources: {gpu: 1}",
                                                                             "resources: {gpu: 2}\n    replicas: {min: 4, max: 4}"))
    found = options(quote(alice, ONE_RTX))
    now = found["rtx4090.exclusive.now"]
    assert (now["starts_now"], now["can_start_now"]) == (False, False)
    assert now["tradeoffs"][0].startswith("may wait for capacity") and "may queue" in now["tradeoff_tags"]
    # the forward simulation: it starts when the filler's quoted 2 h are over, before the off-peak window
    filler_end = clock.now + timedelta(hours=2)  # placed at this instant; it has not started yet
    expected = datetime.fromisoformat(now["expected_start"])
    assert filler_end <= expected <= filler_end + timedelta(seconds=2 * settings.SCHEDULER_INTERVAL_S)
    assert now["earliest"] and not found["rtx4090.exclusive.off-peak"]["earliest"]


def test_a_queued_option_waits_behind_the_jobs_ahead_of_it(alice, cluster, clock, run):
    """The pool full until the filler ends, and a pending job ahead in the same queue that takes the freed
    GPUs for its own 3 h: the quote's job starts after both."""
    _fill(cluster, clock, run, ONE_RTX.replace("one-rtx", "filler").replace(
        "resources: {gpu: 1}", "resources: {gpu: 2}\n    replicas: {min: 4, max: 4}"))
    submit_quoted_job(user=cluster.alice, workspace=cluster.vision, duration_hours=Decimal(3), option="rtx4090.exclusive.now",
                      spec=ONE_RTX.replace("one-rtx", "ahead").replace("resources: {gpu: 1}",
                                                                         "resources: {gpu: 2}\n    replicas: {min: 4, max: 4}"))
    expected = datetime.fromisoformat(options(quote(alice, ONE_RTX))["rtx4090.exclusive.now"]["expected_start"])
    filler_end = clock.now + timedelta(hours=2)  # placed at this instant; it has not started yet
    assert filler_end + timedelta(hours=3) <= expected <= filler_end + timedelta(hours=3, minutes=1)


def test_free_share_spread_over_gpus_is_not_room_for_a_whole_gpu(alice, cluster, clock, run):
    """0.6 of each of the 8 RTX GPUs taken leaves 3.2 GPUs free in total, but no whole GPU: the nodes
    say the job waits, where the pool's total alone would have said it starts now."""
    _fill(cluster, clock, run, """\
name: filler
roles:
  - name: main
    image: busybox
    replicas: {min: 8, max: 8}
    sharing: fraction
    resources: {gpu: 0.6, gpuMemory: 4Gi}
    nodePool: rtx4090
""")
    assert sum(len(r.gpu_indices) for r in Job.objects.get(name="filler").replicas.all()) == 8
    by_total = quote_spec(read_spec(cluster.vision, ONE_RTX)).option("rtx4090.exclusive.now")
    assert by_total.can_start_now  # 3.2 GPUs free >= 1
    now = options(quote(alice, ONE_RTX))["rtx4090.exclusive.now"]
    assert (now["starts_now"], now["can_start_now"]) == (False, False) and now["expected_start"] != "now"
    assert "no node of rtx4090 has room for it now" in now["tradeoffs"][0]
    # a share that fits beside the 0.6 still starts now
    small = ONE_RTX.replace("resources: {gpu: 1}", "sharing: fraction\n    resources: {gpu: 0.3, gpuMemory: 4Gi}")
    assert options(quote(alice, small))["rtx4090.fraction.now"]["expected_start"] == "now"


FILLER = ONE_RTX.replace("one-rtx", "filler").replace("resources: {gpu: 1}",
                                                      "resources: {gpu: 2}\n    replicas: {min: 4, max: 4}")


@pytest.fixture
def builds(monkeypatch):
    """The scheduler sessions built from here on (a forward replay builds them too)."""
    built = []
    build = Session.build

    def counted(*args, **kwargs):
        built.append(args)
        return build(*args, **kwargs)

    monkeypatch.setattr(Session, "build", counted)
    return built


def test_a_repeated_quote_and_its_submit_build_no_session(alice, builds):
    first = options(quote(alice, ONE_RTX))["rtx4090.exclusive.now"]
    assert first["starts_now"]  # read from the cluster, or kept from a cluster just like it
    builds.clear()
    assert options(quote(alice, ONE_RTX))["rtx4090.exclusive.now"] == first
    submitted = alice.post("/api/v1/jobs/", {"workspace": "vision-lab", "spec": ONE_RTX,
                                             "option": "rtx4090.exclusive.now"}, format="json")
    assert submitted.status_code == 201, submitted.json()
    assert builds == []
    assert Job.objects.get(pk=submitted.json()["id"]).quote["expected_start"] == "now"


def test_a_waiting_options_forecast_is_kept_too(alice, cluster, clock, run, builds):
    _fill(cluster, clock, run, FILLER)
    first = options(quote(alice, ONE_RTX))["rtx4090.exclusive.now"]
    assert not first["starts_now"] and first["expected_start"] is not None  # replayed forward
    builds.clear()
    assert options(quote(alice, ONE_RTX))["rtx4090.exclusive.now"] == first
    assert builds == []


def test_a_change_to_the_cluster_is_seen_by_the_next_quote(alice, cluster, clock, run, builds):
    assert options(quote(alice, ONE_RTX))["rtx4090.exclusive.now"]["starts_now"]
    _fill(cluster, clock, run, FILLER)
    builds.clear()
    assert not options(quote(alice, ONE_RTX))["rtx4090.exclusive.now"]["starts_now"]
    assert builds  # the cluster changed: read again
