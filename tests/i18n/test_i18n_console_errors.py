"""The console's refusals read in the reader's language beside their fields: the queue tree's rules
(scheduling.queue_tree, pure, worded through `say`), a pool's MIG layout and a price table's rates."""

import pytest

from tests.portal.console.test_console_forms import PRICE
from tests.portal.console.test_queue_and_price_validation import console_queue_data, field_errors


@pytest.fixture
def operator_client(client, cluster):
    client.force_login(cluster.admin)
    return client


@pytest.mark.parametrize(("language", "expected"), [
    ("zh-hans", "“vision-lab”是“root”本身或其子队列之一：树会形成环"),
    ("en", "'vision-lab' is 'root' itself or one of its sub-queues: the tree would loop"),
])
def test_a_queue_loop_is_refused_in_the_readers_language(operator_client, language, expected):
    from scheduling.models import Queue

    root = Queue.objects.get(name="root")
    response = operator_client.post("/console/queues/root/", console_queue_data(root, parent="vision-lab"),
                                    HTTP_ACCEPT_LANGUAGE=language)
    assert response.status_code == 400
    errors = [m.replace("&#x27;", "'").replace("&ldquo;", "“") for m in field_errors(response.content.decode(), "parent")]
    assert expected in errors
    assert Queue.objects.get(name="root").parent is None


@pytest.mark.parametrize(("language", "expected"), [
    ("zh-hans", "必须大于等于 0 个 GPU"),
    ("en", "must be 0 or more GPUs"),
])
def test_a_negative_quota_is_refused_in_the_readers_language(operator_client, language, expected):
    from scheduling.models import Queue

    team = Queue.objects.get(name="vision-lab")
    response = operator_client.post("/console/queues/vision-lab/", console_queue_data(team, deserved_gpus="-1"),
                                    HTTP_ACCEPT_LANGUAGE=language)
    assert response.status_code == 400
    assert expected in field_errors(response.content.decode(), "deserved_gpus")


def test_a_bad_rate_line_and_a_mig_layout_are_refused_in_chinese(operator_client):
    response = operator_client.post("/console/prices/", {**PRICE, "gpu_rates": "nvidia H100-80GB lots"},
                                    HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert response.status_code == 400
    assert "第 1 行：价格 &#x27;lots&#x27; 不是数字" in field_errors(response.content.decode(), "gpu_rates")

    response = operator_client.post("/console/pools/h100-mig/", {
        "placement": "default", "sharing": "mig", "timeslice_replicas": "1", "mig_layout": "9g.99gb"},
        HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert response.status_code == 400
    assert any(m.startswith("未知的 MIG 规格 9g.99gb") for m in field_errors(response.content.decode(), "mig_layout"))
