"""statuses(): a pod cache fed by a list and then a watch resumed from the last resourceVersion;
410 Gone relists; evict / forget / logs."""

from __future__ import annotations

from tests.scheduling.backends.kubernetes.k8s_launches import launch

NS = "gpu-ws-vision-lab"


def lists(api) -> int:
    """Plain (non-watch) lists of pods."""
    return sum(1 for m, p, q in api.requests if m == "GET" and p == "/api/v1/pods" and q.get("watch") != "true")


def watches(api) -> list[dict]:
    return [q for m, p, q in api.requests if m == "GET" and p == "/api/v1/pods" and q.get("watch") == "true"]


def phases(backend) -> dict:
    return {s.key: s.phase for s in backend.statuses()}


def test_phases_follow_the_pods_through_the_watch(api, backend, gpu_node):
    backend.launch(launch(1))
    backend.launch(launch(2, gpus=(1,)))
    assert phases(backend) == {(1, "worker", 0): "Pending", (2, "worker", 0): "Pending"}
    api.set_pod_phase(NS, "job-1-worker-0", "Running")
    api.set_pod_phase(NS, "job-2-worker-0", "Running")
    api.set_pod_phase(NS, "job-2-worker-0", "Failed", reason="Error", exit_code=137)
    statuses = {s.key: s for s in backend.statuses()}
    assert statuses[(1, "worker", 0)].phase == "Running" and statuses[(1, "worker", 0)].started_at
    assert statuses[(1, "worker", 0)].node == "gpu-1" and statuses[(1, "worker", 0)].finished_at is None
    failed = statuses[(2, "worker", 0)]
    assert failed.phase == "Failed" and "exit code 137" in failed.message and failed.finished_at
    api.set_pod_phase(NS, "job-1-worker-0", "Succeeded")
    done = {s.key: s for s in backend.statuses()}[(1, "worker", 0)]
    assert done.phase == "Succeeded" and done.finished_at >= done.started_at
    assert lists(api) == 1  # one list at the start, then only watches


def test_watch_resumes_from_the_last_resource_version(api, backend, gpu_node):
    backend.statuses()
    list_rv = api.store.rv
    backend.launch(launch(3))
    api.set_pod_phase(NS, "job-3-worker-0", "Running")
    backend.statuses()
    api.set_pod_phase(NS, "job-3-worker-0", "Succeeded")
    backend.statuses()
    resumed = [int(q["resourceVersion"]) for q in watches(api)]
    assert resumed[0] == list_rv  # from the list's version
    assert resumed[1] == api.store.rv - 1  # from the Running event, not from the start
    assert all(q["labelSelector"] == "gpu-platform/managed=true" for q in watches(api))
    assert lists(api) == 1


def test_image_pull_trouble_shows_in_the_message(api, backend, gpu_node):
    backend.launch(launch(4))
    api.set_pod_phase(NS, "job-4-worker-0", "Pending", reason="ImagePullBackOff")
    (status,) = backend.statuses()
    assert status.phase == "Pending" and "ImagePullBackOff" in status.message


def test_other_pods_are_not_seen(api, backend, gpu_node):
    api.create("pods", "default", {"metadata": {"name": "someone-else", "labels": {"app": "web"}},
                                   "spec": {"containers": [{"name": "c"}]}})
    api.create("pods", "default", {"metadata": {"name": "look-alike", "labels": {  # our labels, half of them
        "gpu-platform/managed": "true", "gpu-platform/kind": "replica"}}, "spec": {"containers": [{"name": "c"}]}})
    backend.launch(launch(5))
    assert [s.key for s in backend.statuses()] == [(5, "worker", 0)]


def test_410_gone_after_compaction_relists_without_losing_changes(api, backend, gpu_node):
    backend.launch(launch(6))
    backend.launch(launch(7, gpus=(1,)))
    backend.statuses()
    api.set_pod_phase(NS, "job-6-worker-0", "Running")
    api.delete("pods", NS, "job-7-worker-0")  # removed behind our back
    api.compact()  # the events above are gone from the server's history
    assert phases(backend) == {(6, "worker", 0): "Running"}
    assert lists(api) == 2
    api.set_pod_phase(NS, "job-6-worker-0", "Succeeded")  # and the watch goes on from the relist
    assert phases(backend) == {(6, "worker", 0): "Succeeded"}
    assert lists(api) == 2


def test_410_status_on_the_watch_request_relists(api, backend, gpu_node):
    backend.launch(launch(8))
    backend.statuses()
    api.fail("GET", "^/api/v1/pods$", 410, watch=True)
    api.set_pod_phase(NS, "job-8-worker-0", "Running")
    assert phases(backend) == {(8, "worker", 0): "Running"}
    assert lists(api) == 2


def test_fresh_process_relists_and_finds_existing_pods(api, backend, make_backend, gpu_node):
    backend.launch(launch(9))
    api.set_pod_phase(NS, "job-9-worker-0", "Running")
    assert phases(make_backend()) == {(9, "worker", 0): "Running"}


# --- evict, forget, logs ------------------------------------------------------------------------------
def test_evict_deletes_the_pod_and_is_idempotent(api, backend, gpu_node):
    backend.launch(launch(10))
    backend.statuses()
    backend.evict((10, "worker", 0), "preempted by a higher priority job")
    assert api.get("pods", NS, "job-10-worker-0") is None
    assert backend.statuses() == []  # the DELETED event arrives after: nothing comes back
    backend.evict((10, "worker", 0), "again")
    backend.evict((999, "worker", 0), "never existed")
    assert api.count("DELETE", "/pods/") == 1


def test_evict_by_a_fresh_process_and_after_someone_else_deleted(api, backend, make_backend, gpu_node):
    backend.launch(launch(11))
    backend.launch(launch(12, gpus=(1,)))
    make_backend().evict((11, "worker", 0), "from another worker")  # knows the pod only through a list
    assert api.get("pods", NS, "job-11-worker-0") is None
    api.delete("pods", NS, "job-12-worker-0")
    backend.evict((12, "worker", 0), "already gone: 404 is fine")
    assert phases(backend) == {}


def test_evicted_pod_relaunched_under_the_same_name_is_seen(api, backend, gpu_node):
    backend.launch(launch(13))
    backend.statuses()
    backend.evict((13, "worker", 0), "moved")
    backend.launch(launch(13, gpus=(4,)))  # same key, new pod (new uid) before the DELETED event arrived
    statuses = backend.statuses()
    assert [s.key for s in statuses] == [(13, "worker", 0)]
    assert api.get("pods", NS, "job-13-worker-0")["metadata"]["annotations"]["gpu-platform/gpus"] == "4"


def test_forget_drops_finished_pod_and_the_job_objects_with_the_last_one(api, backend, gpu_node):
    for rank in range(2):
        backend.launch(launch(14, "worker", rank, job_type="mpi", gpus=(rank,), world_size=2, rank=rank))
        api.set_pod_phase(NS, f"job-14-worker-{rank}", "Succeeded")
    backend.statuses()
    backend.forget((14, "worker", 0))
    assert api.get("services", NS, "job-14") is not None  # rank 1 is still recorded
    backend.forget((14, "worker", 1))
    assert api.list("pods", NS) == [] and api.get("services", NS, "job-14") is None
    assert api.get("configmaps", NS, "job-14-mpi-hostfile") is None


def test_logs_come_from_the_pod_log_api(api, backend, gpu_node):
    backend.launch(launch(15))
    api.logs[(NS, "job-15-worker-0")] = "".join(f"step {i}\n" for i in range(500))
    assert backend.logs((15, "worker", 0), tail_lines=3) == "step 497\nstep 498\nstep 499\n"
    assert backend.logs((15, "worker", 0)).count("\n") == 200
    assert backend.logs((404, "worker", 0)) == ""
    query = [q for m, p, q in api.requests if p.endswith("/log")][0]
    assert query["tailLines"] == "3"


# --- reservations kept true by statuses() -----------------------------------------------------------------
def test_orphan_reservation_is_removed_and_missing_one_recreated(api, make_backend, gpu_node):
    backend = make_backend()
    backend.launch(launch(16, gpus=(2,), kind="fraction", slice={"gpu_milli": 500}))
    api.delete("pods", "gpu-platform-reservation", "gpu-reservation-gpu-1-2")  # lost
    api.create("pods", "gpu-platform-reservation", {  # left behind by a crash between two deletes
        "metadata": {"name": "gpu-reservation-gpu-1-6", "labels": {
            "gpu-platform/managed": "true", "gpu-platform/kind": "reservation", "gpu-platform/gpu": "6"},
            "annotations": {"gpu-platform/node-name": "gpu-1"}},
        "spec": {"nodeName": "gpu-1", "containers": [{"name": "reserve"}]}})
    patient = make_backend(orphan_grace_s=3600)
    patient.statuses()
    names = sorted(p["metadata"]["name"] for p in api.list("pods", "gpu-platform-reservation"))
    assert names == ["gpu-reservation-gpu-1-2", "gpu-reservation-gpu-1-6"]  # recreated; orphan too young
    recreated = api.get("pods", "gpu-platform-reservation", "gpu-reservation-gpu-1-2")
    assert recreated["metadata"]["annotations"]["gpu-platform/gpu-uuid"] == "GPU-h100-0002"
    backend.statuses()
    names = sorted(p["metadata"]["name"] for p in api.list("pods", "gpu-platform-reservation"))
    assert names == ["gpu-reservation-gpu-1-2"]


# --- the cache itself ------------------------------------------------------------------------------------
def pod(name: str, uid: str, rv: int, phase: str = "Running") -> dict:
    return {"metadata": {"namespace": NS, "name": name, "uid": uid, "resourceVersion": str(rv)},
            "status": {"phase": phase}}


def test_cache_ignores_late_events_of_a_pod_it_deleted():
    from scheduling.backends.kubernetes.backend import PodCache

    cache = PodCache()
    cache.replace([pod("a", "uid-1", 10)], "10")
    cache.drop((NS, "a"))  # evicted by us
    cache.apply("MODIFIED", pod("a", "uid-1", 11))  # sent before the delete, read after it
    assert cache.live() == [] and cache.resource_version == "11"
    cache.put(pod("a", "uid-2", 12, "Pending"))  # relaunched under the same name
    cache.apply("DELETED", pod("a", "uid-1", 13))  # the old pod's end does not touch the new one
    assert [p["metadata"]["uid"] for p in cache.live()] == ["uid-2"] and cache.deleted_uids == set()
    cache.apply("BOOKMARK", {"metadata": {"resourceVersion": "20"}})
    assert cache.resource_version == "20" and len(cache.pods) == 1


def test_graceful_deletion_terminating_pod_is_gone_for_the_scheduler(api, backend, gpu_node):
    api.graceful_pods = True
    backend.launch(launch(21))
    api.set_pod_phase(NS, "job-21-worker-0", "Running")
    backend.statuses()
    backend.evict((21, "worker", 0), "preempted")
    assert api.get("pods", NS, "job-21-worker-0")["metadata"]["deletionTimestamp"]  # still stopping
    assert backend.statuses() == []
    backend.launch(launch(21, gpus=(1,)))  # too early: the old pod holds the name; the next cycle retries
    assert backend.statuses() == []
    api.finish_terminating()
    backend.launch(launch(21, gpus=(1,)))
    assert [(s.key, s.phase) for s in backend.statuses()] == [((21, "worker", 0), "Pending")]
    assert api.get("pods", NS, "job-21-worker-0")["metadata"]["annotations"]["gpu-platform/gpus"] == "1"
