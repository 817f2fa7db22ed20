"""A page never offers an action the role would then be refused: finance sees costs, reports,
statements and budgets, and no Submit anywhere."""

import pytest

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("path", ["/", "/jobs/", "/reports/", "/submit/"])
def test_finance_sees_no_submit(client, cluster, path):
    client.force_login(cluster.finance)
    html = client.get(path).content.decode()
    assert 'id="nav-submit"' not in html and 'href="/submit/"' not in html
    assert 'id="submit-app"' not in html


@pytest.mark.parametrize("path", ["/", "/jobs/"])
def test_a_member_who_may_submit_sees_submit(client, cluster, path):
    client.force_login(cluster.carol)
    assert 'href="/submit/"' in client.get(path).content.decode()


def test_finance_still_sees_the_money(client, cluster):
    client.force_login(cluster.finance)
    html = client.get("/reports/").content.decode()
    assert 'id="totals"' in html and 'id="budgets"' in html


def test_only_a_submitter_is_offered_cancel(client, cluster):
    from billing.services import submit_quoted_job

    spec = "name: x\nroles:\n  - name: main\n    image: busybox\n    resources: {gpu: 1}\n    nodePool: h100\n"
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec)
    client.force_login(cluster.finance)
    assert 'id="cancel-job"' not in client.get(f"/jobs/{job.pk}/").content.decode()
    client.force_login(cluster.carol)
    assert 'id="cancel-job"' in client.get(f"/jobs/{job.pk}/").content.decode()
