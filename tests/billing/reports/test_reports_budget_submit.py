"""A workspace whose owner blocks at the budget limit cannot submit once it is spent."""

from decimal import Decimal

from rest_framework.test import APIClient
from tests_reports_helpers import charge

from billing.reports.services import set_budget
from billing.services import submit_quoted_job
from scheduling.models import Job
from scheduling.spec.examples import CLEAN_YAML


def test_submissions_are_blocked_at_the_limit_when_the_owner_chose_so(cluster):
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=CLEAN_YAML)
    set_budget(user=cluster.alice, workspace=cluster.vision, amount=Decimal("10"), block_at_limit=True)
    charge(job, "9.99")  # under the limit: still allowed
    api = APIClient()
    api.force_authenticate(cluster.alice)
    allowed = api.post("/api/v1/jobs/", {"workspace": "vision-lab", "spec": CLEAN_YAML}, format="json")
    assert allowed.status_code == 201, allowed.content
    charge(job, "0.01")  # exactly 10.00 of 10.00 this month: spent
    response = api.post("/api/v1/jobs/", {"workspace": "vision-lab", "spec": CLEAN_YAML}, format="json")
    assert response.status_code == 403
    assert response.json()["errors"][0]["field"] == "budget" and "budget" in response.json()["errors"][0]["message"]
    assert Job.objects.count() == 2  # the first job and the one allowed before the limit
    bob = APIClient()
    bob.force_authenticate(cluster.bob)  # another workspace is not affected
    assert bob.post("/api/v1/jobs/", {"workspace": "nlp-group", "spec": CLEAN_YAML.replace("queue: vision-lab", "queue: nlp-group")},
                    format="json").status_code == 201
