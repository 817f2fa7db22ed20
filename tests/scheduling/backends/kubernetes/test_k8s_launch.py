"""launch() and sync_workspace(): namespaces, quotas, pods bound with nodeName, the extended resource of
each sharing mode, reservation pods for fractions, and the objects of distributed jobs."""

from __future__ import annotations

import json

import pytest

from tests.scheduling.backends.kubernetes.k8s_launches import H100_UUIDS, launch

NS = "gpu-ws-vision-lab"
RES_NS = "gpu-platform-reservation"


def container(pod: dict) -> dict:
    return pod["spec"]["containers"][0]


def env_of(pod: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container(pod).get("env", [])}


def limits(pod: dict) -> dict[str, str]:
    return container(pod)["resources"].get("limits", {})


def reservations(api) -> list[dict]:
    return api.list("pods", RES_NS)


# --- namespaces and quotas -------------------------------------------------------------------------------
def test_sync_workspace_makes_namespace_and_quota_then_updates_it(api, backend):
    backend.sync_workspace("vision-lab", 1500)
    ns = api.get("namespaces", "", NS)
    assert ns["metadata"]["labels"]["gpu-platform/workspace"] == "vision-lab"
    quota = api.get("resourcequotas", NS, "gpu-quota")
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "2"  # 1.5 GPUs rounded up: never stricter
    assert quota["metadata"]["annotations"]["gpu-platform/gpu-quota-milli"] == "1500"

    backend.sync_workspace("vision-lab", 4000)
    quota = api.get("resourcequotas", NS, "gpu-quota")
    assert quota["spec"]["hard"] == {"requests.nvidia.com/gpu": "4", "requests.amd.com/gpu": "4"}
    assert api.count("POST", "/namespaces$") == 2 and api.count("PATCH", "/resourcequotas/gpu-quota") == 1

    backend.sync_workspace("vision-lab", None)  # no quota: nothing to mirror
    assert api.get("resourcequotas", NS, "gpu-quota") is None
    backend.sync_workspace("vision-lab", None)  # and again: 404 on delete is fine


def test_namespace_prefix_is_configurable_and_validated(api, make_backend):
    make_backend(namespace_prefix="team-").sync_workspace("nlp-group", 0)
    assert api.get("namespaces", "", "team-nlp-group") is not None
    assert api.get("resourcequotas", "team-nlp-group", "gpu-quota")["spec"]["hard"]["requests.nvidia.com/gpu"] == "0"
    with pytest.raises(ValueError, match="K8S_NAMESPACE_PREFIX"):
        make_backend(namespace_prefix="Team_")


def test_negative_quota_is_refused_before_any_change(api, backend):
    with pytest.raises(ValueError, match="gpu_quota_milli must be >= 0"):
        backend.sync_workspace("vision-lab", -1)
    assert api.get("resourcequotas", NS, "gpu-quota") is None


# --- binding and resources per sharing mode ------------------------------------------------------------------
def test_whole_gpus_bound_with_node_name_and_labelled(api, backend, gpu_node):
    backend.launch(launch(7, "worker", 1, gpus=(2, 3)))
    pod = api.get("pods", NS, "job-7-worker-1")
    assert pod["spec"]["nodeName"] == "gpu-1" and pod["spec"]["restartPolicy"] == "Never"
    labels = pod["metadata"]["labels"]
    assert {k: labels[k] for k in ("gpu-platform/workspace", "gpu-platform/job-id", "gpu-platform/job",
                                   "gpu-platform/role", "gpu-platform/replica")} == {
        "gpu-platform/workspace": "vision-lab", "gpu-platform/job-id": "7", "gpu-platform/job": "train-7",
        "gpu-platform/role": "worker", "gpu-platform/replica": "1"}
    assert limits(pod) == {"nvidia.com/gpu": "2", "memory": "16384Mi"}
    assert container(pod)["resources"]["requests"]["cpu"] == "4000m"
    assert container(pod)["command"] == ["python", "train.py"] and env_of(pod)["EPOCHS"] == "3"
    assert "NVIDIA_VISIBLE_DEVICES" not in env_of(pod)  # the device plugin hands whole GPUs out
    assert pod["metadata"]["annotations"]["gpu-platform/gpus"] == "2,3"
    assert pod["status"]["phase"] == "Pending"  # admitted by the node: it has 8 GPUs
    assert reservations(api) == []


def test_amd_whole_gpus_ask_for_amd_resource(api, backend):
    api.add_node("amd-1", capacity={"amd.com/gpu": 4})
    backend.launch(launch(8, node="amd-1", gpus=(0, 1, 2, 3)))
    assert limits(api.get("pods", NS, "job-8-worker-0"))["amd.com/gpu"] == "4"


def test_mig_and_timeslice_ask_for_their_resources(api, backend):
    api.add_node("mig-1", capacity={"nvidia.com/mig-3g.40gb": 2})
    api.add_node("ts-1", capacity={"nvidia.com/gpu.shared": 8}, labels={"nvidia.com/gpu.replicas": "4"})
    backend.launch(launch(9, node="mig-1", kind="mig", slice={"mig_profile": "3g.40gb", "mig_instance": 1}))
    backend.launch(launch(10, node="ts-1", kind="timeslice", gpus=(1,), slice={"timeslice_slot": 2}))
    mig = api.get("pods", NS, "job-9-worker-0")
    assert limits(mig) == {"nvidia.com/mig-3g.40gb": "1", "memory": "16384Mi"}
    assert limits(api.get("pods", NS, "job-10-worker-0"))["nvidia.com/gpu.shared"] == "1"
    assert json.loads(mig["metadata"]["annotations"]["gpu-platform/slice"])["mig_instance"] == 1


def test_bad_slice_is_refused_before_anything_is_created(api, backend, gpu_node):
    with pytest.raises(ValueError, match="slice kind 'half'"):
        backend.launch(launch(11, kind="half"))
    with pytest.raises(ValueError, match="MIG slice needs a profile"):
        backend.launch(launch(11, kind="mig"))
    assert api.list("pods") == [] and api.list("namespaces") == []


def test_launch_is_idempotent_in_one_process_and_across_processes(api, backend, make_backend, gpu_node):
    backend.launch(launch(12))
    backend.launch(launch(12))
    assert api.count("POST", "/pods$") == 1
    other = make_backend()  # a fresh worker that knows nothing: 409 AlreadyExists is success
    other.launch(launch(12))
    assert api.count("POST", "/pods$") == 2 and len(api.list("pods", NS)) == 1
    assert [s.key for s in other.statuses()] == [(12, "worker", 0)]


def test_pod_that_does_not_fit_its_node_is_reported_failed(api, backend):
    api.add_node("small", capacity={"nvidia.com/gpu": 1})
    backend.launch(launch(13, node="small", gpus=(0, 1)))
    (status,) = backend.statuses()
    assert status.phase == "Failed" and "OutOfnvidia.com/gpu" in status.message


# --- fractions and reservation pods ----------------------------------------------------------------------
def fraction(job_id: int, gpu: int, milli: int = 250, mem: int = 20000):
    return launch(job_id, gpus=(gpu,), kind="fraction", slice={"gpu_milli": milli, "gpu_mem_mib": mem})


def test_fraction_is_pinned_to_its_gpu_by_environment(api, backend, gpu_node):
    backend.launch(fraction(20, gpu=3, milli=250, mem=20000))
    pod = api.get("pods", NS, "job-20-worker-0")
    env = env_of(pod)
    assert env["NVIDIA_VISIBLE_DEVICES"] == H100_UUIDS[3]
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "25"
    assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=20000M"
    assert not any(k.startswith(("nvidia.com/", "amd.com/")) for k in limits(pod))


def test_fraction_without_known_uuid_is_pinned_by_index(api, backend):
    api.add_node("plain", capacity={"nvidia.com/gpu": 4})
    backend.launch(launch(21, node="plain", gpus=(2,), kind="fraction", slice={"gpu_milli": 500}))
    env = env_of(api.get("pods", NS, "job-21-worker-0"))
    assert env["NVIDIA_VISIBLE_DEVICES"] == "2" and "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT" not in env


def test_reservation_pod_per_shared_gpu_created_with_first_deleted_with_last(api, backend, gpu_node):
    backend.launch(fraction(30, gpu=0))
    (res,) = reservations(api)
    assert res["metadata"]["name"] == "gpu-reservation-gpu-1-0" and res["spec"]["nodeName"] == "gpu-1"
    assert limits(res)["nvidia.com/gpu"] == "1" and res["metadata"]["annotations"]["gpu-platform/gpu-uuid"] == H100_UUIDS[0]

    backend.launch(fraction(31, gpu=0))  # same GPU: the reservation is shared
    backend.launch(fraction(32, gpu=5))  # another GPU: its own reservation
    assert sorted(r["metadata"]["name"] for r in reservations(api)) == [
        "gpu-reservation-gpu-1-0", "gpu-reservation-gpu-1-5"]
    assert api.count("POST", f"/namespaces/{RES_NS}/pods$") == 2

    backend.evict((30, "worker", 0), "preempted")
    assert len(reservations(api)) == 2  # job 31 still shares GPU 0
    backend.evict((31, "worker", 0), "preempted")
    assert [r["metadata"]["name"] for r in reservations(api)] == ["gpu-reservation-gpu-1-5"]
    backend.forget((32, "worker", 0))
    assert reservations(api) == []


def test_reservation_holds_the_gpu_against_other_schedulers(api, backend):
    api.add_node("one-gpu", capacity={"nvidia.com/gpu": 1})
    backend.launch(launch(40, node="one-gpu", gpus=(0,), kind="fraction", slice={"gpu_milli": 300}))
    # someone else's whole-GPU pod on the same node: the node has no GPU left for it
    intruder = api.create("pods", "other", {"metadata": {"name": "intruder"}, "spec": {
        "nodeName": "one-gpu", "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}})
    assert intruder["status"]["phase"] == "Failed" and intruder["status"]["reason"] == "OutOfnvidia.com/gpu"


# --- distributed jobs ------------------------------------------------------------------------------------
def test_pytorch_job_gets_headless_service_and_rank_environment(api, backend, gpu_node):
    for rank in range(3):
        backend.launch(launch(50, "worker", rank, job_type="pytorch", gpus=(rank,), world_size=3, rank=rank))
    svc = api.get("services", NS, "job-50")
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["selector"]["gpu-platform/job-id"] == "50"
    assert api.count("POST", "/services$") == 3 and len(api.list("services")) == 1
    pod = api.get("pods", NS, "job-50-worker-2")
    assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == ("rank-2", "job-50")
    env = env_of(pod)
    assert env["MASTER_ADDR"] == f"rank-0.job-50.{NS}.svc"
    assert (env["MASTER_PORT"], env["WORLD_SIZE"], env["RANK"]) == ("29500", "3", "2")
    assert api.list("configmaps") == []  # PyTorch needs no hostfile


def test_mpi_job_gets_hostfile_that_follows_world_size(api, backend, gpu_node):
    backend.launch(launch(60, "worker", 0, job_type="mpi", gpus=(0, 1), world_size=2, rank=0))
    hostfile = api.get("configmaps", NS, "job-60-mpi-hostfile")["data"]["hostfile"]
    assert hostfile == f"rank-0.job-60.{NS}.svc slots=2\nrank-1.job-60.{NS}.svc slots=2\n"
    pod = api.get("pods", NS, "job-60-worker-0")
    assert env_of(pod)["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
    assert pod["spec"]["volumes"][0]["configMap"]["name"] == "job-60-mpi-hostfile"
    assert container(pod)["volumeMounts"][0]["mountPath"] == "/etc/mpi"
    backend.launch(launch(60, "worker", 2, job_type="mpi", gpus=(2, 3), world_size=3, rank=2))  # elastic growth
    assert api.get("configmaps", NS, "job-60-mpi-hostfile")["data"]["hostfile"].count("slots=2") == 3
