"""Simulated collector, assignment parsing and sample ids."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from statistics import mean

import pytest

from nodeagent.portal import PortalClient
from nodeagent.samples import Reading, UsageSample
from nodeagent.simulated import Assignment, LastKnownAssignments, SimulatedCollector, parse_assignments

T0 = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
PODS = [Assignment("train-0", 0, 1000, 60000), Assignment("nb-1", 1, 250, 10000), Assignment("nb-2", 1, 500, 20000)]


def test_same_seed_gives_the_same_readings_another_seed_does_not():
    def utils(seed):
        collector = SimulatedCollector(lambda: PODS, node="n1", gpus=2, seed=seed)
        return [r.gpu_util_pct for t in range(20) for r in collector.sample(T0 + timedelta(seconds=10 * t))]

    assert utils(3) == utils(3)
    assert utils(3) != utils(4)


def test_utilisation_is_believable_for_each_pods_share():
    collector = SimulatedCollector(lambda: PODS, node="n1", gpus=2, memory_mib=81920, seed=1)
    ticks = [collector.sample(T0 + timedelta(seconds=10 * t)) for t in range(300)]

    for pod in PODS:
        series = [r for tick in ticks for r in tick if r.pod_uid == pod.pod_uid]
        share = pod.milli / 10
        assert len(series) == 300
        assert all(0 <= r.gpu_util_pct <= share for r in series)
        assert 0.2 * share < mean(r.gpu_util_pct for r in series) < 0.95 * share
        assert len({r.gpu_util_pct for r in series}) > 100  # it moves
        assert all(0 < r.mem_used_mib <= pod.memory_mib for r in series)
    for tick in ticks:
        device = {r.gpu_index: r for r in tick if r.pod_uid is None}
        for index in (0, 1):
            pods = [r for r in tick if r.pod_uid and r.gpu_index == index]
            assert device[index].gpu_util_pct == pytest.approx(min(100.0, sum(p.gpu_util_pct for p in pods)))
            assert device[index].mem_used_mib == sum(p.mem_used_mib for p in pods)


def test_gpus_without_pods_report_idle_and_unknown_gpu_index_is_ignored():
    collector = SimulatedCollector(lambda: [Assignment("p", 7, 1000, 100)], node="n1", gpus=1)
    (reading,) = collector.sample(T0)
    assert reading == Reading(collector.gpu_uuid(0), 0, None, 0.0, 0)
    assert collector.gpu_uuid(0) != SimulatedCollector(lambda: [], node="n2").gpu_uuid(0)


def test_assignments_come_from_the_portal_and_survive_its_outage(portal):
    portal.assignments = [{"pod_uid": "p1", "gpu_index": 0, "milli": 500, "memory_mib": 8000},
                          {"replica_id": "job-3-r0", "gpu_index": 1, "milli": 1000}]
    client = PortalClient(portal.url, portal.token)
    source = LastKnownAssignments(lambda: client.get_assignments("n1"))

    first = source()
    portal.stop()
    during_outage = source()

    assert first == [Assignment("p1", 0, 500, 8000), Assignment("job-3-r0", 1, 1000, 0)]
    assert during_outage == first


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ([], "an \"assignments\" list"),
        ({"assignments": [{"gpu_index": 0, "milli": 5}]}, r"assignments\[0\] has no pod_uid"),
        ({"assignments": [{"pod_uid": "p", "gpu_index": "x", "milli": 5}]}, r"assignments\[0\] is malformed"),
        ({"assignments": [{"pod_uid": "p", "gpu_index": 0}]}, "milli"),
    ],
)
def test_bad_assignments_are_refused_with_the_field_named(payload, message):
    with pytest.raises(ValueError, match=message):
        parse_assignments(payload)


def test_sample_id_is_stable_for_the_same_measurement_and_differs_otherwise():
    reading = Reading("GPU-1", 0, "pod-a", 41.234, 1000)

    one = UsageSample.from_reading("n1", T0, 10, reading)
    again = UsageSample.from_reading("n1", T0, 10, reading)
    others = {
        UsageSample.from_reading("n2", T0, 10, reading).id,
        UsageSample.from_reading("n1", T0 + timedelta(milliseconds=1), 10, reading).id,
        UsageSample.from_reading("n1", T0, 10, Reading("GPU-1", 0, None, 41.2, 1000)).id,
        UsageSample.from_reading("n1", T0, 10, Reading("GPU-2", 1, "pod-a", 41.2, 1000)).id,
    }

    assert one == again
    assert one.id not in others and len(others) == 4
    assert one.to_json() == {
        "id": one.id, "node": "n1", "ts": "2026-11-21T09:00:00.000+00:00", "gpu_uuid": "GPU-1", "gpu_index": 0,
        "pod_uid": "pod-a", "gpu_util_pct": 41.23, "mem_used_mib": 1000, "interval_s": 10.0,
    }


def test_naive_timestamps_are_refused():
    with pytest.raises(ValueError, match="no timezone"):
        UsageSample.from_reading("n1", datetime(2026, 1, 1), 10, Reading("GPU-1", 0, None, 1.0, 1))
