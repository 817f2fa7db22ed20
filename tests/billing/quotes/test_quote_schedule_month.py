"""A scheduled spec's quote: each option's total is one run's, its month the runs of the cron line in 30 days
times that total; the runs start at their fire times, so no option waits for off-peak."""

from __future__ import annotations

from decimal import Decimal

from rest_framework.test import APIClient

from billing.services import quote_for_workspace

SPEC = """\
name: hourly
queue: vision-lab
expectedDuration: 30m
roles:
  - name: main
    image: busybox:1.36
    resources: {gpu: 1}
"""


def test_a_month_of_runs_is_the_runs_in_thirty_days_times_each_options_total(cluster, clock):
    plain = quote_for_workspace(cluster.vision, SPEC)[1].to_json()
    assert "schedule" not in plain and any(o["when"] == "off-peak" for o in plain["options"])
    spec = SPEC + 'schedule: {cron: "0 9 * * 1-5", timeZone: Europe/Berlin}\n'
    quoted = quote_for_workspace(cluster.vision, spec)[1].to_json()
    runs = quoted["schedule"]["runs_per_month"]
    assert quoted["schedule"]["cron"] == "0 9 * * 1-5" and 20 <= runs <= 23  # the weekdays of 30 days
    assert quoted["options"] and all(o["when"] == "now" for o in quoted["options"])
    for option in quoted["options"]:
        assert Decimal(option["month_total"]) == (Decimal(option["total"]) * runs).quantize(Decimal("0.01"))


def test_the_quotes_api_says_it_too(cluster, clock):
    api = APIClient()
    api.force_authenticate(cluster.alice)
    spec = SPEC + 'schedule: {cron: "0 * * * *"}\n'
    body = api.post("/api/v1/quotes/", {"workspace": "vision-lab", "spec": spec}, format="json").json()
    assert {k: body["schedule"][k] for k in ("cron", "time_zone", "runs_per_month")} == {
        "cron": "0 * * * *",
        "time_zone": "UTC",
        "runs_per_month": 720,
    }
    assert all(Decimal(o["month_total"]) > Decimal(o["total"]) for o in body["options"])
    assert body["schedule"]["text"].startswith("720 runs in 30 days (0 * * * * in UTC)")
