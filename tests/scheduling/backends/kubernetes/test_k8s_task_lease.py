"""The Celery cycle task holds the Lease when SCHEDULER_BACKEND=kubernetes, and skips while another worker
holds it. Needs Django settings (pytest-django)."""

from __future__ import annotations

import pytest

pytest.importorskip("django")


def test_the_cycle_task_leads_only_with_the_lease(api, make_backend, settings):
    from scheduling.tasks import leading

    api.create("configmaps", "gpu-platform", {"metadata": {"name": "make-the-namespace"}})
    a, b = (make_backend(lease_namespace="gpu-platform") for _ in range(2))
    a.identity, b.identity = "worker-a_1", "worker-b_1"
    settings.SCHEDULER_BACKEND = "kubernetes"
    with leading(a) as a_leads:
        with leading(b) as b_leads:
            assert a_leads and not b_leads
        assert api.get("leases", "gpu-platform", "gpu-platform-scheduler")["spec"]["holderIdentity"] == "worker-a_1"
    with leading(b) as b_leads:
        assert b_leads
    settings.SCHEDULER_BACKEND = "simulated"
    before = len(api.requests)
    with leading(a) as a_leads:
        assert a_leads and len(api.requests) == before  # the Redis lock alone
