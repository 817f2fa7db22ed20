"""Every error of the costs API names the parameter it is about in `field`, so a client can show it there."""

import pytest
from rest_framework.test import APIClient

from tests.billing.reports.tests_reports_helpers import make_usage

pytestmark = pytest.mark.django_db

BAD = [
    ({"start": "2026-13-01"}, "start", 400),
    ({"end": "yesterday"}, "end", 400),
    ({"start": "1900-01-01"}, "start", 400),
    ({"start": "2026-03-10", "end": "2026-03-01"}, "end", 422),
    ({"start": "1971-01-01", "end": "2026-03-01"}, "start", 422),
    ({"sharing": "halves"}, "sharing", 400),
    ({"job": "seven"}, "job", 400),
    ({"job": "0"}, "job", 400),
    ({"group_by": "colour"}, "group_by", 400),
    ({"currency": "XYZ"}, "currency", 400),
    ({"queue": "q" * 5000}, "queue", 400),
    ({"gpu_model": "A\x00100"}, "gpu_model", 400),
    ({"page": "-1"}, "page", 400),
    ({"colour": "red"}, "colour", 400),
    ({"workspace": "nlp-group"}, "workspace", 404),  # another tenant's
]


@pytest.mark.parametrize(("params", "field", "status"), BAD, ids=[b[1] + str(i) for i, b in enumerate(BAD)])
def test_each_costs_error_names_its_field(cluster, params, field, status):
    make_usage(cluster)
    api = APIClient()
    api.force_authenticate(cluster.alice)
    response = api.get("/api/v1/costs/", params)
    assert response.status_code == status, response.content
    body = response.json()
    assert body["errors"], body
    assert [e["field"] for e in body["errors"]] == [field], body
    assert all(e["message"] for e in body["errors"])
