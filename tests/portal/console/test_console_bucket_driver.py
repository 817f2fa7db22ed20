"""A pool's bucket CSI driver: the console sets one of the two the Kubernetes backend knows, or none, and
refuses any other at the field with nothing changed."""

import pytest

from scheduling.models import NodePool


@pytest.mark.django_db
def test_the_console_sets_a_pools_bucket_driver_and_refuses_an_unknown_one_at_the_field(admin_client, cluster):
    policy = {"placement": "binpack", "sharing": "standard", "timeslice_replicas": "4", "mig_layout": ""}
    form = admin_client.get("/console/pools/h100/").content.decode()
    assert 'id="f-bucket-csi"' in form and "ru.yandex.s3.csi" in form
    refused = admin_client.post("/console/pools/h100/", {**policy, "bucket_csi_driver": "s3fs.example.com"})
    assert refused.status_code == 400 and "s3fs.example.com is not one of the available choices" in \
        refused.content.decode()
    assert NodePool.objects.get(name="h100").bucket_csi_driver == ""
    saved = admin_client.post("/console/pools/h100/", {**policy, "bucket_csi_driver": "ru.yandex.s3.csi"})
    assert saved.status_code == 302 and NodePool.objects.get(name="h100").bucket_csi_driver == "ru.yandex.s3.csi"
