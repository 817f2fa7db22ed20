"""API errors: 409, 410, 429 with Retry-After, 500, timeouts and failures that outlast the retries.
Every one is answered by the emulated server over HTTP; the client itself is never patched."""

from __future__ import annotations

import pytest

from scheduling.backends.kubernetes.retry import KubernetesApiError, RetryPolicy
from tests.scheduling.backends.kubernetes.k8s_launches import launch

NS = "gpu-ws-vision-lab"


def test_backoff_doubles_and_is_capped_retry_after_honoured():
    policy = RetryPolicy(attempts=6, base_s=0.5, cap_s=3.0)
    assert [policy.delay(i) for i in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert policy.delay(0, retry_after=2) == 2.0 and policy.delay(0, retry_after=60) == 3.0
    assert policy.delay(2, retry_after=1) == 2.0  # our own backoff when longer
    with pytest.raises(ValueError, match="attempts >= 1"):
        RetryPolicy(attempts=0)


def test_429_waits_for_retry_after_then_succeeds(api, backend, gpu_node):
    fault = api.fail("POST", "/pods$", 429, times=2, retry_after=1)
    backend.launch(launch(1))
    assert fault.hits == 2 and backend.sleeps == [1.0, 1.0]
    assert api.get("pods", NS, "job-1-worker-0") is not None


def test_500s_are_retried_with_growing_waits(api, backend, gpu_node):
    api.fail("GET", "^/api/v1/nodes$", 500, times=3)
    assert [n.name for n in backend.inventory()] == ["gpu-1"]
    assert backend.sleeps == [0.05, 0.1, 0.2]


def test_timeout_after_the_server_acted_is_not_a_duplicate(api, make_backend, gpu_node):
    # the server creates the pod but answers too late: the retry gets 409 and reads the pod back
    backend = make_backend(real_sleep=True, retry=RetryPolicy(attempts=3, base_s=1.0, cap_s=1.0))
    api.fail("POST", "/pods$", 0, delay_s=1.2)
    backend.launch(launch(2))
    assert api.count("POST", "/pods$") == 2 and len(api.list("pods", NS)) == 1
    assert api.count("GET", f"/namespaces/{NS}/pods/job-2-worker-0$") == 1  # the read-back after 409
    assert [s.key for s in backend.statuses()] == [(2, "worker", 0)]


def test_409_on_every_create_is_success(api, backend, make_backend, gpu_node):
    backend.sync_workspace("vision-lab", 2000)
    backend.launch(launch(3, job_type="pytorch", world_size=1))
    other_process = make_backend()
    other_process.sync_workspace("vision-lab", 3000)  # namespace and quota exist: quota patched
    other_process._namespaces.clear()
    other_process.launch(launch(3, job_type="pytorch", world_size=1))  # namespace, service, pod exist
    assert api.get("resourcequotas", NS, "gpu-quota")["spec"]["hard"]["requests.nvidia.com/gpu"] == "3"
    assert len(api.list("pods", NS)) == 1 and len(api.list("services", NS)) == 1


def test_failure_that_outlasts_retries_names_the_call_and_keeps_state(api, backend, gpu_node):
    backend.launch(launch(4))
    api.set_pod_phase(NS, "job-4-worker-0", "Running")
    assert [s.phase for s in backend.statuses()] == ["Running"]
    api.fail("GET", "^/api/v1/pods$", 503, times=4, watch=True)
    api.set_pod_phase(NS, "job-4-worker-0", "Succeeded")
    with pytest.raises(KubernetesApiError, match=r"watch pods failed \(HTTP 503\)"):
        backend.statuses()
    assert [s.phase for s in backend.statuses()] == ["Succeeded"]  # resumed from where it was, no event lost


def test_watch_request_throttled_then_resumes(api, backend, gpu_node):
    backend.launch(launch(5))
    backend.statuses()
    api.fail("GET", "^/api/v1/pods$", 429, retry_after=3, watch=True)
    api.set_pod_phase(NS, "job-5-worker-0", "Running")
    assert [s.phase for s in backend.statuses()] == ["Running"]
    assert backend.sleeps == [1.0]  # Retry-After 3 s, capped at the policy's 1 s


def test_watch_stream_timeout_is_resumed(api, backend, gpu_node):
    backend.launch(launch(6))
    backend.statuses()
    api.fail("GET", "^/api/v1/pods$", 500, delay_s=1.5, watch=True)  # slower than the 1 s request timeout
    api.set_pod_phase(NS, "job-6-worker-0", "Running")
    assert [s.phase for s in backend.statuses()] == ["Running"]
    assert len(backend.sleeps) == 1


def test_client_errors_are_not_retried(api, backend, gpu_node):
    api.fail("POST", "/pods$", 403)
    with pytest.raises(KubernetesApiError, match=r"create pod gpu-ws-vision-lab/job-7-worker-0 failed \(HTTP 403\)"):
        backend.launch(launch(7))
    assert api.count("POST", "/pods$") == 1 and backend.sleeps == []
    backend.launch(launch(7))  # the next cycle simply tries again
    assert api.get("pods", NS, "job-7-worker-0") is not None


def test_delete_errors_retry_and_404_is_fine(api, backend, gpu_node):
    backend.launch(launch(8))
    api.fail("DELETE", "/pods/job-8-worker-0$", 500)
    backend.evict((8, "worker", 0), "preempted")
    assert api.get("pods", NS, "job-8-worker-0") is None and backend.sleeps == [0.05]


def test_unreachable_server_is_a_clear_error(make_backend, api, gpu_node):
    backend = make_backend(retry=RetryPolicy(attempts=2, base_s=0.0, cap_s=0.0))
    api.stop()
    with pytest.raises(KubernetesApiError, match=r"list nodes failed \(HTTP no answer\)"):
        backend.inventory()
