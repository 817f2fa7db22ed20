"""A service on a simulated cluster that runs four times faster than the wall clock: its GPU-seconds are
counted on the clock the ledger bills, so they agree with the GPU-hours it is billed for (and the cost per
GPU-second a page derives from them is the price, not four times it)."""

from __future__ import annotations

import pytest
from django.db.models import Sum

from billing.models import ChargeLine
from portal import serving
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.models import ServiceSample
from tests.portal.test_service_pages import called  # noqa: F401 (the fixture: a service called for an hour)

SPEEDUP = 4


@pytest.fixture
def backend(clock):
    return SimulatedBackend(speedup=SPEEDUP, failure_rate=0, clock=clock, server_startup_s=0)


@pytest.mark.django_db
def test_a_services_gpu_seconds_are_on_the_billed_clock(cluster, called):  # noqa: F811
    billed_hours = ChargeLine.objects.filter(job=called).aggregate(h=Sum("allocated_gpu_hours"))["h"]
    assert float(billed_hours) == pytest.approx(SPEEDUP, rel=0.02)   # one GPU, an hour of wall time
    sampled = sum(s.gpu_seconds for s in ServiceSample.objects.filter(job=called))
    assert sampled == pytest.approx(float(billed_hours) * 3600, rel=0.02)
    [revision] = serving.revision_rows(called, cost=None)
    assert revision.gpu_seconds == pytest.approx(float(billed_hours) * 3600, rel=0.02)
