"""The queue editor sets a queue's default and maximum runtime, written as the task YAML writes durations."""

from scheduling.models import Queue


def test_the_console_queue_editor_sets_the_runtime_limits(admin_client, cluster):
    form = {
        "name": "vision-lab",
        "parent": "root",
        "deserved_gpus": "16",
        "over_quota_weight": "1",
        "priority": "0",
        "default_max_runtime_s": "12h",
        "max_runtime_s": "2d",
    }
    response = admin_client.post("/console/queues/vision-lab/", form)
    assert response.status_code == 302, response.content.decode()[:3000]
    queue = Queue.objects.get(name="vision-lab")
    assert (queue.default_max_runtime_s, queue.max_runtime_s) == (12 * 3600, 2 * 86400)
    page = admin_client.get("/console/queues/vision-lab/").content.decode()
    assert 'id="f-default-max-runtime"' in page and 'value="12h"' in page and 'value="2d"' in page
    refused = admin_client.post("/console/queues/vision-lab/", {**form, "default_max_runtime_s": "3d"})
    assert "3d is more than the max runtime, 2d" in refused.content.decode()
    assert Queue.objects.get(name="vision-lab").default_max_runtime_s == 12 * 3600
    bad = admin_client.post("/console/queues/vision-lab/", {**form, "max_runtime_s": "soon"})
    assert "soon is not a duration" in bad.content.decode()
