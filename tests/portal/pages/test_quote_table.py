"""The Submit page's quote table as a reader checks it: the price per hour is the total over the hours it
assumes, with its currency; an option priced off-peak says so even when "now" is already off-peak; a service
that scales to zero is not shown as costing nothing, and its job page says the same."""

from __future__ import annotations

import re
from decimal import Decimal

from billing.services import submit_quoted_job

SPEC = ("name: train\nqueue: vision-lab\nroles:\n  - name: main\n    image: busybox\n    nodePool: a100-spot\n"
        "    resources: {gpu: 0.5, gpuMemory: 20Gi, cpu: 4, memory: 16Gi}\n")
SERVICE = ("kind: inference\nname: chat\nqueue: vision-lab\nnodePool: a100-spot\nmodel: {path: /models/chat}\n"
           "resources: {gpu: 0.5, gpuMemory: 20Gi, cpu: 4, memory: 16Gi}\nreplicas: {min: 0, max: 3}\n")


def rows(html: str) -> dict[str, str]:
    return dict(re.findall(r'<tr data-option="([^"]+)"[^>]*>(.*?)</tr>', html, re.S))


def cell(row: str, name: str) -> str:
    return re.sub(r"<[^>]+>", " ", re.search(rf'class="[^"]*\b{name}\b[^"]*">(.*?)</td>', row, re.S).group(1)).strip()


def amount(text: str) -> Decimal:
    return Decimal(re.match(r"\$([\d,.]+)", text).group(1).replace(",", ""))


def test_the_per_hour_column_is_the_total_over_the_hours_with_its_currency(client, cluster, clock):
    client.force_login(cluster.alice)
    html = client.post("/submit/", {"workspace": "vision-lab", "spec": SPEC, "duration_hours": "3"}).content.decode()
    assert "Per GPU-hour" not in html and ">Per hour<" in html
    table = rows(html)
    assert table
    for option, row in table.items():
        per_hour, total = cell(row, "per-hour"), cell(row, "total").split()[0]
        assert per_hour.startswith("$") and total.startswith("$"), (option, per_hour, total)
        assert (amount(per_hour) * 3).quantize(Decimal("0.01")) == amount(total), (option, per_hour, total)
    # 0.5 A100 + 4 CPUs + 16 GiB = 1.06/h, spot 60 % off: 0.424/h, 1.272 for 3 h, shown 1.27
    assert cell(table["a100-spot.fraction.now"], "per-hour") == "$0.4233"


def test_now_inside_an_off_peak_window_is_labelled_off_peak(client, cluster, clock):
    client.force_login(cluster.alice)
    noon = client.post("/submit/", {"workspace": "vision-lab", "spec": SPEC}).content.decode()
    assert "badge offpeak" not in rows(noon)["a100-spot.fraction.now"]  # noon: peak
    assert "badge offpeak" in rows(noon)["a100-spot.fraction.off-peak"]
    clock.now = clock.now.replace(hour=2)  # inside the table's 00:00-08:00 window
    night = client.post("/submit/", {"workspace": "vision-lab", "spec": SPEC}).content.decode()
    table = rows(night)
    assert "a100-spot.fraction.off-peak" not in table  # already off-peak: "now" is the off-peak start
    assert '<span class="badge offpeak">off-peak</span>' in table["a100-spot.fraction.now"]


def test_the_quote_api_says_which_options_start_at_the_off_peak_rate(cluster, clock):
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(cluster.alice)
    def starts_offpeak():
        body = api.post("/api/v1/quotes/", {"workspace": "vision-lab", "spec": SPEC}, format="json").json()
        return {o["id"]: o["starts_offpeak"] for o in body["options"]}

    assert starts_offpeak()["a100-spot.fraction.now"] is False
    assert starts_offpeak()["a100-spot.fraction.off-peak"] is True
    clock.now = clock.now.replace(hour=2)
    assert starts_offpeak()["a100-spot.fraction.now"] is True


def test_a_service_that_scales_to_zero_shows_one_replica_and_the_hours_on_its_job_page(client, cluster, clock):
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=SERVICE)
    client.force_login(cluster.alice)
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    section = re.search(r'<section class="card" id="job-quote">(.*?)</section>', html, re.S).group(1)
    assert "$0.00/h" not in section and "0.00/h" not in section
    rates = re.search(r'id="job-quote-rates">(.*?)</p>', section, re.S).group(1)
    assert rates.startswith("$0.00 per hour at 0 replicas, $0.424 at 1 replica, $1.272 at 3; for ")
    assert "$0.85 at 1 replica" in rates  # two hours of one replica


def test_the_quote_api_says_what_the_stated_request_rate_costs_for_the_hours(cluster, clock):
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(cluster.alice)
    body = api.post("/api/v1/quotes/", {"workspace": "vision-lab", "spec": SERVICE, "requests_per_second": 1},
                    format="json").json()
    option = next(o for o in body["options"] if o["id"] == "a100-spot.fraction.now")
    replicas = option["at_rate"]["replicas"]
    assert replicas >= 1
    per_hour = Decimal(option["at_rate"]["price_per_hour"])
    assert f"per hour; about ${per_hour * 2:.2f} for 2 h" in option["at_rate_text"]


def test_a_default_notebook_slice_reads_its_share_without_a_zero_memory(client, cluster, clock):
    """A notebook that asks half a GPU and no GPU memory holds "0.5 GPU", not "0.5 GPU + 0 GiB"."""
    from datetime import timedelta

    from django.test import TestCase

    from scheduling.backends.simulated.backend import SimulatedBackend
    from scheduling.cycle.run import run_scheduling_cycle

    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision,
                            spec="kind: notebook\nname: lab\nqueue: vision-lab\nnodePool: h100\nresources: {gpu: 0.5}\n")
    backend = SimulatedBackend(speedup=1, failure_rate=0, clock=lambda: clock.now)
    for step in (0, 5):
        clock.now += timedelta(seconds=step)
        with TestCase.captureOnCommitCallbacks(execute=True):
            run_scheduling_cycle(backend, now=clock.now)
    replica = job.replicas.get()
    assert replica.slice.get("kind") == "fraction" and not replica.slice.get("gpu_mem_mib")
    client.force_login(cluster.alice)
    html = client.get("/notebooks/?workspace=vision-lab").content.decode()
    held = re.search(r'data-field="slice">([^<]*)', html).group(1).strip()
    assert held == "0.5 GPU"
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "0.5 GPU" in page and "+ 0 GiB" not in page
