"""Leader election between worker replicas on a coordination.k8s.io/v1 Lease in the emulated cluster: two
backends with different identities (two workers) against one API server, time from an injected clock."""

from __future__ import annotations

import time

import pytest

from scheduling.backends.kubernetes.backend import LostLeadership
from tests.scheduling.backends.kubernetes.k8s_emulator import MICRO_TIME
from tests.scheduling.backends.kubernetes.k8s_launches import launch

NS = "gpu-platform"
LEASE = ("leases", NS, "gpu-platform-scheduler")


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def workers(api, make_backend, clock):
    api.create("configmaps", NS, {"metadata": {"name": "make-the-namespace"}})

    def make(identity: str):
        backend = make_backend(lease_namespace=NS, lease_duration_s=10.0)
        backend.identity, backend._clock = identity, clock  # before the Lease is first made
        return backend

    return make("worker-a_1"), make("worker-b_1")


def holder(api) -> str | None:
    return (api.get(*LEASE) or {}).get("spec", {}).get("holderIdentity")


def test_only_one_worker_leads_and_the_other_takes_over_once_the_leader_stops_renewing(api, workers, clock):
    a, b = workers
    assert a.leader.acquire()
    lease = api.get(*LEASE)
    assert lease["spec"]["holderIdentity"] == "worker-a_1" and lease["spec"]["leaseDurationSeconds"] == 10
    assert lease["spec"]["leaseTransitions"] == 0 and MICRO_TIME.fullmatch(lease["spec"]["acquireTime"])
    assert not b.leader.acquire()
    clock.now += 6
    assert a.leader.acquire()  # renewed: B's wait starts again from this record
    assert api.get(*LEASE)["spec"]["renewTime"] != lease["spec"]["renewTime"]
    clock.now += 6
    assert not b.leader.acquire()  # 12 s since A took it, but only 6 s since B saw the renewal
    assert a.leader.held() and not b.leader.held()
    clock.now += 10.5  # A stopped renewing (a dead pod) for longer than the lease
    assert not a.leader.held()
    assert b.leader.acquire()
    lease = api.get(*LEASE)
    assert lease["spec"]["holderIdentity"] == "worker-b_1" and lease["spec"]["leaseTransitions"] == 1
    assert not a.leader.acquire()  # it comes back: B holds a fresh lease
    assert b.leader.held() and not a.leader.held()


def test_a_stale_update_loses_to_the_worker_that_wrote_first(api, workers, clock):
    a, b = workers
    assert a.leader.acquire()
    assert not b.leader.acquire()
    clock.now += 11  # expired for B, which goes to take it over ...

    def a_renews_in_between():  # ... but A renews between B's read and B's write
        api.update(*LEASE, lambda lease: lease["spec"].update(renewTime="2023-11-14T22:13:31.000000Z"))

    api.before("PUT", "/leases/", a_renews_in_between)
    assert not b.leader.acquire()  # the emulator answered 409 to B's write with the old resourceVersion
    assert holder(api) == "worker-a_1"
    assert api.count("PUT", "/apis/coordination.k8s.io/v1/namespaces/gpu-platform/leases/") == 1


def test_two_workers_racing_to_create_the_lease_have_one_winner(api, workers):
    a, b = workers
    api.before("POST", "/leases$", lambda: api.create("leases", NS, {
        "metadata": {"name": "gpu-platform-scheduler"}, "spec": {"holderIdentity": "worker-b_1"}}))
    assert not a.leader.acquire()  # 409 AlreadyExists on its create
    assert holder(api) == "worker-b_1"


def test_a_released_lease_is_taken_at_once_and_leading_renews_while_the_cycle_runs(api, workers, clock):
    a, b = workers
    with a.leader.leading(every=0.01) as leads:
        assert leads
        with b.leader.leading() as b_leads:
            assert not b_leads
        renewed = api.count("PUT", "/leases/")
        for _ in range(500):  # the renewal thread writes on its own
            if api.count("PUT", "/leases/") > renewed:
                break
            time.sleep(0.02)
        assert api.count("PUT", "/leases/") > renewed, "the lease was never renewed"
    assert holder(api) is None  # released at the end
    with b.leader.leading() as b_leads:
        assert b_leads  # no need to wait out the duration
        assert holder(api) == "worker-b_1"


def test_a_leader_that_lost_the_lease_changes_nothing(api, workers, clock, gpu_node):
    a, b = workers
    replica = launch()
    assert a.leader.acquire()
    assert not b.leader.acquire()
    clock.now += 11  # its renewals failed: the lease ran out under it
    assert b.leader.acquire()
    with pytest.raises(LostLeadership):
        a.launch(replica)
    with pytest.raises(LostLeadership):
        a.sync_workspace("vision-lab", 8000)
    assert api.list("pods") == [] and api.count("POST", "/pods$") == 0
    b.launch(replica)  # the new leader does
    assert len(api.list("pods")) == 1
