"""The audit log exported as CSV: the page's filters, every entry, UTC times; staff only, and a bad
filter refused before anything is sent."""

import csv
import io
import json

import pytest
from django.test import Client

from portal.console import audit

pytestmark = pytest.mark.django_db


def read(response) -> list[dict]:
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    text = b"".join(response.streaming_content).decode("utf-8")
    return list(csv.DictReader(io.StringIO(text)))


def test_the_filtered_log_downloads_whole_with_utc_times(admin_client, operator):
    for n in range(60):  # more than one page of the log
        audit.record(operator, "cordon", target_type_name="scheduling.node", target_id=str(n), target_repr=f"h100-{n}")
    audit.record(operator, "change", target_type_name="scheduling.queue", target_id="2", target_repr="vision-lab",
                 changes={"deserved_gpus": ["4", "6"]}, message="more for vision")
    rows = read(admin_client.get("/console/audit/export.csv", {"target": "scheduling.node"}))
    assert len(rows) == 60 and {r["action"] for r in rows} == {"cordon"}
    assert all(r["time_utc"].endswith("+00:00") for r in rows)
    change = read(admin_client.get("/console/audit/export.csv", {"q": "vision"}))
    assert len(change) == 1 and change[0]["user"] == operator.username
    assert json.loads(change[0]["changes"]) == {"deserved_gpus": ["4", "6"]} and change[0]["message"] == "more for vision"
    assert 'href="/console/audit/export.csv?target=scheduling.node"' in admin_client.get(
        "/console/audit/", {"target": "scheduling.node"}).content.decode()


def test_only_staff_may_export_and_a_bad_filter_is_a_page_not_a_file(admin_client, cluster, operator):
    audit.record(operator, "cordon", target_type_name="scheduling.node", target_id="1", target_repr="h100-01")
    for tenant in (cluster.alice, cluster.bob):
        client = Client()
        client.force_login(tenant)
        assert client.get("/console/audit/export.csv").status_code == 403
    assert Client().get("/console/audit/export.csv").status_code == 302  # to the login page
    refused = admin_client.get("/console/audit/export.csv", {"start": "yesterday"})
    assert refused.status_code == 400 and 'id="domain-error"' in refused.content.decode()
