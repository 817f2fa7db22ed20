"""An inference service on Kubernetes: one pod per replica bound like any replica (same GPU reservations), its
server's arguments, probes and models volume, and one ClusterIP Service made with the first replica, kept while
any replica lives and deleted with the last, all through the emulated API server; every object valid for
Kubernetes 1.30."""

from __future__ import annotations

from dataclasses import replace

import kubernetes_validate
import pytest

from scheduling.backends.base import MODEL_SERVER
from scheduling.backends.kubernetes import manifests as m
from scheduling.backends.kubernetes.config import KubernetesConfig
from tests.scheduling.backends.kubernetes.k8s_launches import launch

K8S_VERSION = "1.30.0"
NS, OTHER_NS = "gpu-ws-vision-lab", "gpu-ws-nlp-group"
RES_NS = "gpu-platform-reservation"
BASE = "/serve/vision-lab/chat/"


def service_launch(index: int = 0, *, node: str = "gpu-1", gpus=(0,), workspace: str = "vision-lab",
                   job_id: int = 9, **fields):
    """A replica of an inference service as the inference kind's launch_fields fills it (`kind` of the helper
    is the slice's)."""
    slice_kind = fields.pop("slice_kind", "whole")
    replica = launch(job_id=job_id, role="server", index=index, kind=slice_kind, gpus=gpus, node=node,
                     workspace=workspace, job_name="chat", command=(), image="vllm/vllm-openai:v0.5.4",
                     slice=fields.pop("slice", {}))
    serving = dict(kind="inference", shape=MODEL_SERVER, server="vllm", port=8000, health_path="/health", token="k3y",
                   base_url=f"/serve/{workspace}/chat/", model_path="/models/llama-3-8b", model_name="llama-3-8b")
    serving.update(fields)
    return replace(replica, **serving)


def container(pod: dict) -> dict:
    (only,) = pod["spec"]["containers"]
    return only


def env_of(pod: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container(pod)["env"]}


def valid(*objects: dict) -> None:
    for obj in objects:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


# --- manifests ---------------------------------------------------------------------------------------------
def test_a_vllm_replica_on_a_model_path_serves_it_from_the_models_volume():
    replica = service_launch()
    pod = m.replica_pod(replica, NS, "nvidia", KubernetesConfig())
    service = m.inference_service(replica, NS)
    valid(pod, service)
    c = container(pod)
    assert "command" not in c  # the image's entrypoint: vLLM's OpenAI server
    assert c["args"] == ["--model", "/models/llama-3-8b", "--served-model-name", "llama-3-8b", "--port", "8000",
                         "--gpu-memory-utilization", "0.90"]
    assert "k3y" not in c["args"] and env_of(pod)["VLLM_API_KEY"] == "k3y"  # the key stays off the command line
    assert c["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]
    assert c["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    startup = c["startupProbe"]
    assert startup["httpGet"] == {"path": "/health", "port": "http"}
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 1800  # half an hour to load a model
    assert c["volumeMounts"] == [{"name": "models", "mountPath": "/models", "readOnly": True}]
    assert pod["spec"]["volumes"] == [{"name": "models",
                                       "persistentVolumeClaim": {"claimName": "models", "readOnly": True}}]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "1" and pod["spec"]["nodeName"] == "gpu-1"
    labels = pod["metadata"]["labels"]
    assert labels[m.INFERENCE_NAME] == "chat" and labels[m.JOB_ID] == "9" and labels[m.REPLICA] == "0"
    assert pod["metadata"]["annotations"][m.P + "base-url"] == BASE
    assert service["metadata"]["name"] == "inf-9" and service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["selector"] == {m.MANAGED: "true", m.KIND: m.REPLICA_KIND, m.JOB_ID: "9"}
    assert service["spec"]["ports"] == [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}]
    assert "publishNotReadyAddresses" not in service["spec"]  # only ready replicas get traffic


def test_a_vllm_replica_on_a_registry_reference_downloads_it_and_mounts_nothing():
    replica = service_launch(model_path="", model_registry="hf.co/meta-llama/Meta-Llama-3-8B", model_name="")
    pod = m.replica_pod(replica, NS, "nvidia", KubernetesConfig())
    valid(pod)
    c = container(pod)
    assert c["args"] == ["--model", "meta-llama/Meta-Llama-3-8B", "--served-model-name", "chat", "--port", "8000",
                         "--gpu-memory-utilization", "0.90"]
    assert "volumes" not in pod["spec"] and "volumeMounts" not in c
    assert env_of(pod)["INFERENCE_MODEL"] == "meta-llama/Meta-Llama-3-8B"


def test_a_triton_replica_runs_tritonserver_on_its_model_repository():
    config = KubernetesConfig(models_claim="team-models", models_mount="/mnt/models")
    replica = service_launch(server="triton", image="nvcr.io/nvidia/tritonserver:24.07-py3", port=8100,
                             health_path="/v2/health/ready", model_path="/repository")
    pod = m.replica_pod(replica, NS, "nvidia", config)
    valid(pod)
    c = container(pod)
    # a path outside the mount is read as relative to the volume
    assert c["command"] == ["tritonserver"]
    assert c["args"] == ["--model-repository=/mnt/models/repository", "--http-port=8100"]
    assert c["readinessProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": "http"}
    assert c["ports"][0]["containerPort"] == 8100
    assert pod["spec"]["volumes"][0]["persistentVolumeClaim"] == {"claimName": "team-models", "readOnly": True}
    assert c["volumeMounts"][0]["mountPath"] == "/mnt/models"
    assert "VLLM_API_KEY" not in env_of(pod) and env_of(pod)["INFERENCE_API_KEY"] == "k3y"


def test_a_custom_server_runs_its_own_command_and_reads_the_inference_variables():
    replica = service_launch(server="custom", image="ghcr.io/acme/ranker:1.2", command=("python", "serve.py"),
                             port=9000, health_path="/ready", model_path="", model_name="")
    pod = m.replica_pod(replica, NS, "nvidia", KubernetesConfig())
    valid(pod)
    c = container(pod)
    assert c["command"] == ["python", "serve.py"] and "args" not in c and "volumes" not in pod["spec"]
    env = env_of(pod)
    assert env["INFERENCE_PORT"] == "9000" and env["INFERENCE_BASE_URL"] == BASE
    assert env["INFERENCE_API_KEY"] == "k3y" and env["INFERENCE_MODEL_NAME"] == "chat"
    assert "INFERENCE_MODEL" not in env
    assert c["readinessProbe"]["httpGet"]["path"] == "/ready"


def test_a_fraction_holds_its_request_and_is_capped_at_its_burstable_limit():
    replica = service_launch(slice_kind="fraction", slice={"gpu_milli": 500, "gpu_mem_mib": 20480},
                             gpu_mem_limit_mib=30720)
    pod = m.replica_pod(replica, NS, "nvidia", KubernetesConfig())
    valid(pod)
    env, annotations = env_of(pod), pod["metadata"]["annotations"]
    assert env["NVIDIA_VISIBLE_DEVICES"] == "GPU-h100-0000"  # pinned as any fraction
    assert '"gpu_mem_mib": 20480' in annotations[m.SLICE]  # the request, as every fraction's
    assert annotations[m.GPU_MEM_LIMIT] == "30720"
    assert env["GPU_MEM_REQUEST_MIB"] == "20480" and env["GPU_MEM_LIMIT_MIB"] == "30720"
    assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=30720M"  # MPS enforces the limit, not the request
    plain = m.replica_pod(service_launch(slice_kind="fraction", slice={"gpu_milli": 500, "gpu_mem_mib": 20480}),
                          NS, "nvidia", KubernetesConfig())
    assert env_of(plain)["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=20480M"
    assert m.GPU_MEM_LIMIT not in plain["metadata"]["annotations"] and "GPU_MEM_LIMIT_MIB" not in env_of(plain)
    whole = m.replica_pod(service_launch(gpu_mem_limit_mib=30720), NS, "nvidia", KubernetesConfig())
    assert m.GPU_MEM_LIMIT not in whole["metadata"]["annotations"]  # a limit applies to fractions only


def args_of(pod: dict) -> dict[str, str]:
    args = container(pod)["args"]
    return dict(zip(args[::2], args[1::2], strict=True))


@pytest.mark.parametrize(("slice_kind", "slice_", "utilization"), [
    ("whole", {}, "0.90"),
    ("fraction", {"gpu_milli": 500, "gpu_mem_mib": 20480}, "0.45"),   # half a GPU: never 90 % of the card
    ("fraction", {"gpu_milli": 250, "gpu_mem_mib": 10240}, "0.22"),
    ("timeslice", {"gpu_milli": 250, "timeslice_slot": 1}, "0.22"),   # one of four slots
    ("mig", {"mig_profile": "3g.40gb", "gpu_milli": 1000}, "0.90"),   # an instance's memory is its own
])
def test_vllm_takes_the_memory_of_its_slice(slice_kind, slice_, utilization):
    pod = m.replica_pod(service_launch(slice_kind=slice_kind, slice=slice_), NS, "nvidia", KubernetesConfig())
    valid(pod)
    assert args_of(pod)["--gpu-memory-utilization"] == utilization
    assert args_of(pod)["--served-model-name"] == "llama-3-8b"


def test_a_model_on_a_workspace_dataset_is_read_from_its_mount_with_a_readiness_probe():
    from scheduling.storage import Mount

    dataset = Mount(kind="dataset", workspace="vision-lab", name="llama", version=3, mount_path="/data/llama",
                    read_only=True)
    pod = m.replica_pod(service_launch(model_path="/data/llama/8b", mounts=(dataset,)), NS, "nvidia",
                        KubernetesConfig())
    valid(pod)
    c = container(pod)
    assert args_of(pod)["--model"] == "/data/llama/8b" and env_of(pod)["INFERENCE_MODEL"] == "/data/llama/8b"
    assert c["volumeMounts"] == [{"name": "mount-0", "mountPath": "/data/llama", "readOnly": True}]  # no models PVC
    [volume] = pod["spec"]["volumes"]
    assert volume["persistentVolumeClaim"] == {"claimName": "ds-vision-lab-llama-v3", "readOnly": True}
    assert c["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}


@pytest.mark.parametrize("fields, message", [
    ({"server": "tgi"}, "server 'tgi'"),
    ({"port": 0}, "port 0"),
    ({"health_path": "health"}, "health path"),
    ({"model_path": "", "model_registry": ""}, "needs a model"),
    ({"model_path": "/models/../etc"}, "must not contain"),
])
def test_bad_inference_fields_are_refused(fields, message):
    with pytest.raises(ValueError, match=message):
        m.replica_pod(service_launch(**fields), NS, "nvidia", KubernetesConfig())


def test_the_models_claim_and_mount_come_from_the_environment():
    config = KubernetesConfig.from_env({"K8S_MODELS_CLAIM": "shared-models", "K8S_MODELS_MOUNT": "/data/models"})
    assert (config.models_claim, config.models_mount) == ("shared-models", "/data/models")
    assert (KubernetesConfig().models_claim, KubernetesConfig().models_mount) == ("models", "/models")
    with pytest.raises(ValueError, match="K8S_MODELS_CLAIM"):
        KubernetesConfig(models_claim="Models_")
    with pytest.raises(ValueError, match="K8S_MODELS_MOUNT"):
        KubernetesConfig(models_mount="models")


# --- through the API server ----------------------------------------------------------------------------------
@pytest.fixture
def two_nodes(api, gpu_node):
    api.add_node("gpu-2", capacity={"nvidia.com/gpu": 8},
                 labels={"gpu-platform/pool": "h100", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                         "nvidia.com/gpu.memory": "81559", "nvidia.com/gpu.count": "8"})


def test_two_replicas_share_one_service_kept_until_the_last_replica_goes(api, backend, two_nodes):
    backend.inventory()
    first, second = service_launch(0, node="gpu-1", gpus=(3,)), service_launch(1, node="gpu-2", gpus=(5,))
    backend.launch(first)
    backend.launch(second)
    pods = {p["metadata"]["name"]: p for p in api.list("pods", NS)}
    assert {n: p["spec"]["nodeName"] for n, p in pods.items()} == {"job-9-server-0": "gpu-1",
                                                                  "job-9-server-1": "gpu-2"}
    assert pods["job-9-server-1"]["metadata"]["annotations"][m.GPUS] == "5"
    (service,) = api.list("services", NS)
    assert service["metadata"]["name"] == "inf-9"
    assert backend.endpoint(first.key, workspace="vision-lab", base_url=BASE).url == f"http://inf-9.{NS}.svc:80/"

    backend.launch(service_launch(2, node="gpu-1", gpus=(4,)))  # scale up: one more pod, the same Service
    assert len(api.list("pods", NS)) == 3
    assert [s["metadata"]["uid"] for s in api.list("services", NS)] == [service["metadata"]["uid"]]

    backend.evict(second.key, "scaled down")  # scale down: only that pod goes
    assert sorted(p["metadata"]["name"] for p in api.list("pods", NS)) == ["job-9-server-0", "job-9-server-2"]
    backend.forget((9, "server", 2))
    assert [s["metadata"]["uid"] for s in api.list("services", NS)] == [service["metadata"]["uid"]]

    backend.evict(first.key, "stopped")  # the last replica: the Service goes with it
    assert api.list("pods", NS) == [] and api.list("services", NS) == []
    backend.evict(first.key, "stopped")  # idempotent

    backend.launch(first)  # started again: a Service again
    assert [s["metadata"]["name"] for s in api.list("services", NS)] == ["inf-9"]


def test_fraction_replicas_are_held_by_reservations_as_any_fraction(api, backend, gpu_node):
    backend.inventory()
    fraction = {"slice_kind": "fraction", "slice": {"gpu_milli": 500, "gpu_mem_mib": 20480},
                "gpu_mem_limit_mib": 30720}
    backend.launch(service_launch(0, gpus=(2,), **fraction))
    backend.launch(service_launch(1, gpus=(2,), **fraction))
    (reservation,) = api.list("pods", RES_NS)
    assert reservation["spec"]["nodeName"] == "gpu-1" and reservation["metadata"]["labels"][m.GPU] == "2"
    # two halves of one card: each vLLM takes its half of the memory, not 90 % of the card
    assert [args_of(pod)["--gpu-memory-utilization"] for pod in api.list("pods", NS)] == ["0.45", "0.45"]
    backend.evict((9, "server", 0), "scaled down")
    assert len(api.list("pods", RES_NS)) == 1 and len(api.list("services", NS)) == 1
    backend.evict((9, "server", 1), "stopped")
    assert api.list("pods", RES_NS) == [] and api.list("services", NS) == []


def test_a_process_that_launched_one_replica_sees_the_others_before_deleting_the_service(api, make_backend,
                                                                                       two_nodes):
    one, other = make_backend(), make_backend()  # e.g. a worker restarted between two cycles
    one.launch(service_launch(0, node="gpu-1"))
    other.launch(service_launch(1, node="gpu-2"))
    one.evict((9, "server", 0), "scaled down")
    assert [p["metadata"]["name"] for p in api.list("pods", NS)] == ["job-9-server-1"]
    assert len(api.list("services", NS)) == 1  # replica 1 still serves through it
    one.evict((9, "server", 1), "stopped")
    assert api.list("services", NS) == []


def test_a_second_workspace_has_its_own_service_in_its_own_namespace(api, backend, two_nodes):
    backend.inventory()
    mine = service_launch(0, node="gpu-1")
    theirs = service_launch(0, node="gpu-2", workspace="nlp-group", job_id=12)
    backend.launch(mine)
    backend.launch(theirs)
    (their_service,) = api.list("services", OTHER_NS)
    assert their_service["metadata"]["name"] == "inf-12"
    assert [s["metadata"]["name"] for s in api.list("services", NS)] == ["inf-9"]
    (their_pod,) = api.list("pods", OTHER_NS)
    assert their_pod["metadata"]["annotations"][m.P + "base-url"] == "/serve/nlp-group/chat/"
    assert backend.endpoint(theirs.key, workspace="nlp-group", base_url="/serve/nlp-group/chat/").url == \
        f"http://inf-12.{OTHER_NS}.svc:80/"

    backend.evict(mine.key, "stopped")  # one workspace's service going leaves the other's alone
    assert api.list("services", NS) == [] and len(api.list("services", OTHER_NS)) == 1
    assert len(api.list("pods", OTHER_NS)) == 1


def test_a_bad_replica_changes_nothing_in_the_cluster(api, backend, gpu_node):
    backend.inventory()
    with pytest.raises(ValueError, match="server"):
        backend.launch(service_launch(server="tgi"))
    assert api.list("pods") == [] and api.list("services") == [] and api.list("namespaces") == []


def test_notebook_endpoints_are_unchanged(backend):
    assert backend.endpoint((7, "notebook", 0), workspace="vision-lab", base_url="/nb/vision-lab/lab/").url == \
        f"http://nb-7.{NS}.svc:8888/nb/vision-lab/lab/"
