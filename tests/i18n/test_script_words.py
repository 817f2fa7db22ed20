"""Words the pages' scripts write (chart series and titles, the usage note) come from the page in the
reader's language, with the %(name)s parts the script fills in."""

import re

import pytest

from tests.i18n.test_i18n_pages import _a_service


def attribute(html: str, name: str) -> str:
    found = re.search(rf'{name}="([^"]*)"', html)
    assert found, name
    return found.group(1)


@pytest.mark.django_db
def test_the_job_usage_note_and_the_service_charts_in_chinese(client, cluster, clock):
    from tests.factories import JobFactory, QueueFactory

    client.force_login(cluster.alice)
    job = JobFactory(name="job-0", workspace=cluster.vision, submitted_by=cluster.alice, queue=QueueFactory())
    page = client.get(f"/jobs/{job.pk}/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert attribute(page, "data-bucket-text") == "每个点为 %(seconds)s 秒的平均值。"
    assert attribute(page, "data-on-text") == "%(replica)s 位于 %(node)s"
    page = client.get(f"/jobs/{job.pk}/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert attribute(page, "data-bucket-text") == "Each point averages %(seconds)s s."
    assert attribute(page, "data-on-text") == "%(replica)s on %(node)s"

    service = _a_service(cluster)
    page = client.get(f"/services/{service.pk}/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    words = {key: attribute(page, f"data-{key}-text") for key in
             ("replicas", "running", "wanted", "rps", "requests", "latency", "cost-so-far", "cost")}
    assert words == {"replicas": "副本", "running": "运行中", "wanted": "期望", "rps": "请求速率",
                     "requests": "请求/秒", "latency": "延迟", "cost-so-far": "目前费用", "cost": "费用"}
